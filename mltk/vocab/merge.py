"""Merging a task's learned vocabulary V̂_t into the previous one, V_t = V_{t-1} ∪ V̂_t, and the per-token task
counts TEIR needs.

Rules: old ids never change; tokens of V̂_t missing from V_{t-1} are appended in V̂_t's order; old merges keep
priority and learned merges already in the parent are dropped; the start and end tokens keep their ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.vocab.bpe_trainer import train_bpe, word_frequencies
from mltk.vocab.tokenizer import SPECIAL_TOKENS, ClipBpeTokenizer, base_symbols, clip_tokenizer
from mltk.vocab.vocabulary import MergeSizes, Vocabulary
from mltk.vocab.wordpiece import WORDPIECE, train_wordpiece_vocabulary


def merge_vocabularies(
    parent_tokens: Sequence[str], parent_merges: Sequence[tuple[str, str]], new_merges: Sequence[tuple[str, str]]
) -> tuple[list[str], list[tuple[str, str]], MergeSizes]:
    """V_t and its merges from the parent's and the new vocabulary's merges (rules in the module docstring)."""
    parent_ids = {token: index for index, token in enumerate(parent_tokens)}
    new_vocab_order = list(dict.fromkeys(base_symbols() + ["".join(m) for m in new_merges] + list(SPECIAL_TOKENS)))
    appended = [token for token in new_vocab_order if token not in parent_ids]
    parent_merge_set = set(map(tuple, parent_merges))
    kept = [tuple(m) for m in dict.fromkeys(map(tuple, new_merges)) if tuple(m) not in parent_merge_set]
    tokens = list(parent_tokens) + appended
    merges = [tuple(m) for m in parent_merges] + kept
    sizes = MergeSizes(
        old=len(parent_tokens),
        new_vocab=len(new_vocab_order),
        overlap=len(new_vocab_order) - len(appended),
        new=len(appended),
        total=len(tokens),
        merges_parent=len(parent_merges),
        merges_learned=len(new_merges),
        merges_duplicate=len(new_merges) - len(kept),
        merges_total=len(merges),
    )
    return tokens, merges, sizes


def drop_merges_changing(
    parent: ClipBpeTokenizer, new_merges: Sequence[tuple[str, str]], protected_pieces: Iterable[str]
) -> list[tuple[str, str]]:
    """The learned merges that leave the parent's tokenization of every protected word unchanged.

    Why this is exact: with the parent's merges ranked first, a word always reaches its parent segmentation S
    before any new merge can fire, and a new merge then fires only if its pair sits side by side in S. So dropping
    the new merges that are adjacent pairs of some protected word's S keeps those words' ids, and nothing else.
    Merges whose operand can no longer be formed (it came from a dropped merge) are dropped with it.
    """
    touching: set[tuple[str, str]] = set()
    for piece in protected_pieces:
        symbols = parent.bpe(piece)
        touching.update(zip(symbols, symbols[1:]))
    available = set(parent.tokens)
    kept = []
    for merge in map(tuple, new_merges):
        if merge in parent.bpe_ranks:
            kept.append(merge)  # a duplicate; merge_vocabularies drops it and counts it
        elif merge not in touching and merge[0] in available and merge[1] in available:
            kept.append(merge)
            available.add(merge[0] + merge[1])
    return kept


def clip_vocabulary() -> Vocabulary:
    """The root of every chain: CLIP's vocabulary, counted as one task for all of its tokens, and no task yet."""
    tokenizer = clip_tokenizer()
    size = tokenizer.vocab_size
    # After the root "task" every CLIP token has been seen once; there is no current task text.
    return Vocabulary(
        tokenizer,
        np.zeros(size, np.int64),
        np.ones(size, np.int64),
        prior_vocab_counts=np.zeros(size, np.int64),
        task_vocab_member=np.ones(size, np.int64),
    )


def minimum_vocabulary_size() -> int:
    """A trained vocabulary holds at least the byte-level base symbols and the special tokens."""
    return len(base_symbols()) + len(SPECIAL_TOKENS)


def vocabulary_size_problem(size: int, option: str) -> str | None:
    """The one-line complaint about a too small vocabulary size given as ``option``, or None when it is fine."""
    if size < minimum_vocabulary_size():
        return (
            f"{option} must be at least {minimum_vocabulary_size()} (the byte-level base symbols and the special "
            f"tokens), got {size}"
        )
    return None


def token_frequencies(tokenizer: ClipBpeTokenizer, texts: Sequence[str] | dict[str, int]) -> np.ndarray:
    """Occurrences [V] (int64) of each token in ``texts`` tokenised by ``tokenizer`` (or in pre-computed word
    counts ``{piece: count}``)."""
    if hasattr(tokenizer, "token_frequencies"):  # a WordPiece tokenizer counts its own tokens
        return tokenizer.token_frequencies(texts)
    counts = texts if isinstance(texts, dict) else word_frequencies(texts)
    freq = np.zeros(tokenizer.vocab_size, np.int64)
    for piece, count in counts.items():
        np.add.at(freq, np.fromiter(tokenizer.encode_piece(piece), np.int64), count)
    return freq


def train_vocabulary(
    texts: Sequence[str],
    lang: str,
    parent: Vocabulary | None,
    size: int,
    min_frequency: int,
    protected_texts: Sequence[str] = (),
    wordpiece_growth: str = "keep",
) -> Vocabulary:
    """Train V̂_t on ``texts`` (one language's training captions), merge it into ``parent`` (CLIP's vocabulary
    when None), and count the tokens of the texts tokenised with the merged vocabulary. A WordPiece ``parent`` (a
    Hugging Face tower's, ``mltk.vocab.wordpiece``) grows the same way with a WordPiece V̂_t.

    ``protected_texts`` (e.g. the English captions): learned merges that would change the parent's ids for any of
    their words are dropped (``drop_merges_changing``), so those texts keep exactly the parent's ids. Off by
    default, as in the paper, where later vocabularies may re-merge rare words of earlier languages.
    A WordPiece parent keeps every earlier task's word segmentation by default (``wordpiece_growth``, see
    ``mltk.vocab.wordpiece_protect``) and keeps ``protected_texts``' segmentation the same way.
    """
    if not texts:
        raise ConfigError(f"no captions to train a vocabulary for language {lang!r}")
    parent = parent if parent is not None else clip_vocabulary()
    if getattr(parent.tokenizer, "kind", None) == WORDPIECE:
        return train_wordpiece_vocabulary(texts, lang, parent, size, min_frequency, protected_texts, wordpiece_growth)
    if problem := vocabulary_size_problem(size, "--size"):
        raise ConfigError(problem)
    counts = word_frequencies(texts)
    learned = train_bpe(counts, size, min_frequency)
    new_merges = learned
    if protected_texts:
        new_merges = drop_merges_changing(parent.tokenizer, learned, word_frequencies(protected_texts))
    tokens, merges, sizes = merge_vocabularies(parent.tokenizer.tokens, parent.tokenizer.merges, new_merges)
    sizes = replace(sizes, merges_learned=len(learned), merges_protected=len(learned) - len(new_merges))
    tokenizer = ClipBpeTokenizer(tokens, merges, parent.tokenizer.context_length)
    freq = token_frequencies(tokenizer, counts)
    prior = np.zeros(len(tokens), np.int64)
    prior[: sizes.old] = parent.counts_after_task()
    new_vocabulary = set(base_symbols()) | {"".join(m) for m in new_merges} | set(SPECIAL_TOKENS)  # V̂_t
    member = np.fromiter((token in new_vocabulary for token in tokens), np.int64, len(tokens))
    parent_vocab_counts = parent.vocab_counts_after_task()
    prior_vocab = None
    if parent_vocab_counts is not None:
        prior_vocab = np.zeros(len(tokens), np.int64)
        prior_vocab[: sizes.old] = parent_vocab_counts
    produced = int(np.count_nonzero(freq[sizes.old :]))
    task = {
        "lang": lang,
        "captions": len(texts),
        "new_vocab_size": sizes.new_vocab,
        "new_tokens": sizes.new,
        "new_tokens_produced": produced,
        "first_new_id": sizes.old,
        "merges_added": sizes.merges_total - sizes.merges_parent,
        "merges_protected": sizes.merges_protected,
        "min_frequency": min_frequency,
    }
    log(
        f"vocab {lang}: {len(texts)} captions, {len(counts)} distinct words; V̂ {sizes.new_vocab} tokens "
        f"({sizes.overlap} already known, {sizes.new} new, {produced} of them produced on the task text); "
        f"vocabulary {sizes.old} -> {sizes.total}"
    )
    return Vocabulary(
        tokenizer,
        prior,
        freq,
        list(parent.tasks) + [task],
        sizes,
        prior_vocab_counts=prior_vocab,
        task_vocab_member=member if prior_vocab is not None else None,
    )
