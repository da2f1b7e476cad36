"""Bilingual lexicon induction accuracy (``mltk evaluate --metric bli``), as MUSE reports it (Conneau et al. 2018,
"Word Translation Without Parallel Data"): precision at 1 of word translation retrieved with CSLS.

CSLS (cross-domain similarity local scaling) between a mapped source word x and a target word y::

    CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)
    r_T(x) = 1/k sum_{y' in N_T(x)} cos(x, y')      (the k target words nearest x)
    r_S(y) = 1/k sum_{x' in N_S(y)} cos(x', y)      (the k source words nearest y)

with k = 10. Each distinct source word of the lexicon is a query; its prediction is the target word of highest
CSLS; it is correct when the lexicon lists that word among its translations (MUSE counts a query right if any of
its translations is retrieved). P@1 is the percentage of correct queries.

Vocabularies: MUSE searches the 200k most frequent target words; here the candidates are the lexicon's own
distinct target words (and the hubness term r_S runs over its distinct source words), so the number depends on the
lexicon's size and is comparable between models on the same lexicon only. Word vectors: ``mltk.ame.words`` (the
checkpoint's trainable table for the source language, the frozen English table for the target).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from mltk.ame.lexicon import lexicon_languages, lexicon_pairs, load_lexicon
from mltk.ame.words import WordTables
from mltk.core.errors import ConfigError

CSLS_K = 10


def csls_scores(x: torch.Tensor, y: torch.Tensor, k: int = CSLS_K) -> torch.Tensor:
    """x [n, D] sources, y [m, D] targets (normalised here) -> CSLS [n, m] (k cut to the candidates' number)."""
    cos = F.normalize(x.float(), dim=-1) @ F.normalize(y.float(), dim=-1).T  # [n, m]
    r_target = cos.topk(min(k, cos.shape[1]), dim=1).values.mean(1)  # [n]
    r_source = cos.topk(min(k, cos.shape[0]), dim=0).values.mean(0)  # [m]
    return 2 * cos - r_target.unsqueeze(1) - r_source.unsqueeze(0)


def precision_at_1(scores: torch.Tensor, gold: list[set[int]]) -> float:
    """Percentage of rows whose highest-scoring column is one of its gold columns (ties: the lowest index)."""
    if scores.shape[0] != len(gold) or not gold:
        raise ValueError(f"{scores.shape[0]} score rows but {len(gold)} gold sets")
    best = scores.argmax(dim=1).tolist()
    return 100.0 * sum(b in g for b, g in zip(best, gold)) / len(gold)


def bli_accuracy(tables: WordTables, pairs: list[tuple[str, str]], k: int = CSLS_K) -> dict:
    """P@1 (CSLS) and P@1 (plain cosine nearest neighbour) over the lexicon ``pairs``, with their counts."""
    sources, targets = list(dict.fromkeys(s for s, _ in pairs)), list(dict.fromkeys(t for _, t in pairs))
    source_ids, target_ids = tables.source_ids(sources), tables.english_ids(targets)
    kept_s = [w for w, keep in zip(sources, source_ids.kept.tolist()) if keep]
    kept_t = [w for w, keep in zip(targets, target_ids.kept.tolist()) if keep]
    column = {w: j for j, w in enumerate(kept_t)}
    gold_of: dict[str, set[int]] = {}
    for s, t in pairs:
        if t in column:
            gold_of.setdefault(s, set()).add(column[t])
    rows = [i for i, w in enumerate(kept_s) if w in gold_of]
    if not rows:
        raise ConfigError("no lexicon pair has both words in the model's vocabularies")
    with torch.no_grad():
        x, y = tables.source_vectors(source_ids), tables.english_vectors(target_ids)
        csls = csls_scores(x, y, k)[rows]
        cosine = (F.normalize(x, dim=-1) @ F.normalize(y, dim=-1).T)[rows]
    gold = [gold_of[kept_s[i]] for i in rows]
    return {"P@1": precision_at_1(csls, gold), "P@1_cosine": precision_at_1(cosine, gold), "queries": len(rows),
            "candidates": len(kept_t), "k": k, "dropped_source_words": len(sources) - len(rows)}


def evaluate_bli(encoder, lexicon_path: str | Path, k: int = CSLS_K) -> dict:
    """The ``bli`` section of ``metrics.json`` for a loaded model and a lexicon artifact."""
    lexicon = load_lexicon(lexicon_path)
    src_lang, tgt_lang = lexicon_languages(lexicon)
    if tgt_lang != getattr(encoder, "native_lang", "en"):
        raise ConfigError(f"BLI compares against the frozen English table: the lexicon must translate into en, not "
                          f"{tgt_lang}", lexicon_path)
    result = bli_accuracy(WordTables(encoder, src_lang), lexicon_pairs(lexicon), k)
    return {"src_lang": src_lang, "tgt_lang": tgt_lang, "lexicon": str(Path(lexicon_path).resolve()), **result,
            "convention": "MUSE's P@1 with CSLS (k nearest neighbours); candidates are the lexicon's distinct "
                          "target words; percentages"}
