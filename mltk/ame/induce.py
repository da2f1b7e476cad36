"""A bilingual lexicon induced from parallel captions, for caption sets that ship none (``mltk induce-lexicon``).

Method (word co-occurrence across translation pairs; Dice 1945, as used for word alignment by Smadja et al. 1996):

1. Translation pairs are the captions of the source and target language sharing a ``caption_id`` (in ``split``
   when given). Each caption becomes its set of words (its language's tokenizer, lower-cased, punctuation dropped:
   ``mltk.ame.segment``), so a word counts once per caption.
2. ``c(s)``, ``c(t)``: pairs whose source (target) caption holds word s (t); ``c(s, t)``: pairs holding both.
3. ``Dice(s, t) = 2 c(s, t) / (c(s) + c(t))``.
4. A pair (s, t) is kept when ``c(s, t) >= min_count`` and it is a mutual best match: t has the highest Dice of
   every target word for s, and s the highest of every source word for t (ties broken by the word, so the result
   is deterministic).

It finds content words that translate one-to-one (colours, nouns) and misses words whose translation is spread
over several forms (a German adjective's endings compete for one English word: only the most frequent form wins).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from mltk import artifacts
from mltk.ame.lexicon import check_pair_languages, lexicon_table, write_lexicon
from mltk.ame.segment import require_tokenizer, tokenizer_name
from mltk.ame.vocabulary import caption_words
from mltk.core.errors import ConfigError


def parallel_pairs(captions: pa.Table, src_lang: str, tgt_lang: str, split: str | None) -> list[tuple[str, str]]:
    """(source caption, target caption) for every caption_id both languages have (in ``split``)."""
    by_lang: dict[str, dict[str, str]] = {src_lang: {}, tgt_lang: {}}
    splits = captions.column("split").to_pylist()
    columns = [captions.column(name).to_pylist() for name in ("lang", "caption_id", "caption")]
    for lang, cid, text, row_split in zip(*columns, splits):
        if lang in by_lang and (split is None or row_split == split):
            by_lang[lang].setdefault(cid, text)
    return [(text, by_lang[tgt_lang][cid]) for cid, text in by_lang[src_lang].items() if cid in by_lang[tgt_lang]]


def dice_lexicon(
    pairs: list[tuple[str, str]], src_lang: str, tgt_lang: str, min_count: int = 3
) -> list[tuple[str, str, float, int]]:
    """(s, t, Dice, c(s, t)) of every mutual best match with ``c(s, t) >= min_count`` (see the module docstring);
    ``pairs`` are (``src_lang`` caption, ``tgt_lang`` caption)."""
    count_s, count_t, joint = Counter(), Counter(), Counter()
    for source, target in pairs:
        words_s, words_t = caption_words(source, src_lang), caption_words(target, tgt_lang)
        count_s.update(words_s)
        count_t.update(words_t)
        joint.update((s, t) for s in words_s for t in words_t)
    best_t: dict[str, tuple[float, str]] = {}  # s -> (Dice, t) of its best target word
    best_s: dict[str, tuple[float, str]] = {}  # t -> (Dice, s) of its best source word
    for (s, t), c in joint.items():
        dice = 2.0 * c / (count_s[s] + count_t[t])
        if _better(dice, t, best_t.get(s)):
            best_t[s] = (dice, t)
        if _better(dice, s, best_s.get(t)):
            best_s[t] = (dice, s)
    kept = [
        (s, t, dice, joint[(s, t)])
        for s, (dice, t) in best_t.items()
        if best_s[t][1] == s and joint[(s, t)] >= min_count
    ]
    return sorted(kept, key=lambda row: (-row[2], row[0], row[1]))


def _better(dice: float, word: str, best: tuple[float, str] | None) -> bool:
    """A higher Dice wins; on a tie the smaller word (deterministic)."""
    return best is None or dice > best[0] or (dice == best[0] and word < best[1])


def induce_lexicon(
    captions_path: str | Path,
    out_dir: str | Path,
    src_lang: str | None,
    tgt_lang: str | None,
    split: str | None = "train",
    min_count: int = 3,
) -> Path:
    """``mltk induce-lexicon CAPS --src de --tgt en``: write the induced lexicon artifact; returns its path."""
    src_lang, tgt_lang = check_pair_languages(src_lang, tgt_lang)
    if min_count < 1:
        raise ConfigError(f"--min-count must be at least 1, got {min_count}")
    captions_path = Path(captions_path)
    for lang in (src_lang, tgt_lang):
        require_tokenizer(lang)
    config = {
        "method": "dice-mutual-best",
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "split": split,
        "min_count": min_count,
        "words": {lang: tokenizer_name(lang) for lang in (src_lang, tgt_lang)},
    }
    reused = artifacts.reusable(out_dir, "lexicon", stage="induce-lexicon", config=config, inputs=[captions_path])
    if reused is not None:
        return reused
    pairs = parallel_pairs(artifacts.load_captions(captions_path), src_lang, tgt_lang, split)
    if not pairs:
        raise ConfigError(
            f"no {src_lang}-{tgt_lang} captions share a caption_id" + (f" in split {split}" if split else ""),
            captions_path,
        )
    rows = dice_lexicon(pairs, src_lang, tgt_lang, min_count)
    table = lexicon_table(((s, t) for s, t, _, _ in rows), src_lang, tgt_lang)
    return write_lexicon(
        out_dir,
        table,
        stage="induce-lexicon",
        config=config,
        inputs=[captions_path],
        translation_pairs=len(pairs),
        method="Dice coefficient, mutual best match",
    )
