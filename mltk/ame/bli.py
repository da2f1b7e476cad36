"""Bilingual lexicon induction accuracy (``mltk evaluate --metric bli``), as AME reports its alignment
(Mohammadshahi, Lebret and Aberer 2019, the authors' ``model.py``: ``compute_nn_accuracy``), with MUSE's CSLS
figure beside it (Conneau et al. 2018).

**Headline, AME's score** (``P@1``, ``P@1_reverse``): plain cosine nearest neighbour. Each distinct source word of
the lexicon is a query; the candidates are *all* the model's target words (its vocabulary, below), not only the
lexicon's; a query is right when its nearest candidate is one of the lexicon's translations of it. The
denominator is every distinct source word of the lexicon: a source word the model does not know (not in its
vocabulary, or without a token) is a miss, as AME divides by the dictionary's source-word count. ``P@1_reverse``
is the same from the target language back to the source (AME reports both directions).

**MUSE's convention** (``P@1_csls``): CSLS with k = 10 neighbours (``csls_scores``)::

    CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)
    r_T(x) = 1/k sum_{y' in N_T(x)} cos(x, y')      (the k candidates nearest x)
    r_S(y) = 1/k sum_{x' in N_S(y)} cos(x', y)      (the k vocabulary source words nearest y)

over the same candidates; like MUSE, it scores only the queries the model knows (``queries``), so it is the easier
number. AME defines CSLS in its code but never calls it.

**The model's vocabulary** (``vocabulary``): AME's words are those of its training captions. mltk takes the words
(its language's tokenizer, lower-cased: ``mltk.ame.segment``) of the ``train`` split of the captions the model was
trained on, found through the checkpoint's manifests, or of ``--bli-vocab CAPTIONS`` when given; a model whose
training captions cannot be found falls back to the lexicon's own words (said in ``vocabulary.source``; nothing is
then out of vocabulary). Word vectors: ``mltk.ame.words`` (the trainable table for the source language, the
frozen English table for the target).

**Memory**: nothing the size of queries x candidates is held. Scores are computed in blocks of at most
``chunk`` x ``chunk`` (default 4,096: 64 MiB of float32), keeping a running best; a MUSE-scale dictionary against
a 200k vocabulary needs the block and the vectors only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from mltk.ame.lexicon import lexicon_languages, lexicon_pairs, load_lexicon
from mltk.ame.vocabulary import vocabulary_words
from mltk.ame.words import WordTables
from mltk.core.errors import ConfigError

CSLS_K = 10
BLI_CHUNK = 4096  # rows and columns of one score block


def csls_scores(x: torch.Tensor, y: torch.Tensor, k: int = CSLS_K) -> torch.Tensor:
    """x [n, D] sources, y [m, D] targets (normalised here) -> CSLS [n, m] (k cut to the candidates' number).
    The whole matrix: for small sets and tests; ``nearest`` computes the same in blocks."""
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


def mean_top_k(queries: torch.Tensor, candidates: torch.Tensor, k: int, chunk: int = BLI_CHUNK) -> torch.Tensor:
    """queries [n, D], candidates [m, D] (unit rows) -> [n]: the mean cosine of each query's k nearest candidates
    (k cut to m), from blocks of at most chunk x chunk scores (a running top k)."""
    k = min(k, candidates.shape[0])
    out = torch.empty(queries.shape[0])
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk]
        best = torch.full((block.shape[0], 0), float("-inf"))
        for c_start in range(0, candidates.shape[0], chunk):
            scores = block @ candidates[c_start : c_start + chunk].T  # [c, c']
            best = torch.cat([best, scores], dim=1).topk(min(k, best.shape[1] + scores.shape[1]), dim=1).values
        out[start : start + chunk] = best.mean(1)
    return out


def nearest(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    chunk: int = BLI_CHUNK,
    query_bias: torch.Tensor | None = None,
    candidate_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Index of each query's best candidate [n] by ``scale * cos - query_bias - candidate_bias`` (cosine when no
    bias is given; CSLS with ``2 cos - r_T - r_S``), from blocks of at most chunk x chunk scores. Ties go to the
    lowest index, as one ``argmax`` over the whole row would."""
    scale = 1.0 if candidate_bias is None else 2.0
    best_index = torch.zeros(queries.shape[0], dtype=torch.long)
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk]
        best = torch.full((block.shape[0],), float("-inf"))
        index = torch.zeros(block.shape[0], dtype=torch.long)
        for c_start in range(0, candidates.shape[0], chunk):
            scores = scale * (block @ candidates[c_start : c_start + chunk].T)  # [c, c']
            if candidate_bias is not None:
                scores = (
                    scores - query_bias[start : start + chunk, None] - candidate_bias[None, c_start : c_start + chunk]
                )
            value, arg = scores.max(dim=1).values, scores.argmax(dim=1)
            better = value > best  # strict: an earlier block keeps a tie
            best, index = torch.where(better, value, best), torch.where(better, arg + c_start, index)
        best_index[start : start + chunk] = index
    return best_index


def bli_scores(
    source: dict[str, torch.Tensor],
    target: dict[str, torch.Tensor],
    pairs: Sequence[tuple[str, str]],
    k: int = CSLS_K,
    chunk: int = BLI_CHUNK,
) -> dict:
    """The ``bli`` numbers from word vectors: ``source`` / ``target`` map every word of the model's vocabulary in
    each language to its vector [D]; ``pairs`` the lexicon (see the module docstring for the conventions)."""
    if not pairs:
        raise ConfigError("the lexicon has no pair")
    if not source or not target:
        raise ConfigError("the model's vocabulary has no word in one of the lexicon's languages")
    src_words, tgt_words = list(source), list(target)
    src_vec = F.normalize(torch.stack([source[w] for w in src_words]).float(), dim=-1)  # [S, D]
    tgt_vec = F.normalize(torch.stack([target[w] for w in tgt_words]).float(), dim=-1)  # [T, D]
    forward = _direction(pairs, src_words, tgt_words, src_vec, tgt_vec, chunk)
    backward = _direction([(t, s) for s, t in pairs], tgt_words, src_words, tgt_vec, src_vec, chunk)
    csls = _csls_direction(pairs, src_words, tgt_words, src_vec, tgt_vec, k, chunk)
    return {
        "P@1": forward["P@1"],
        "P@1_reverse": backward["P@1"],
        "P@1_csls": csls,
        "source_words": forward["words"],
        "out_of_vocabulary": forward["missing"],
        "queries": forward["known"],
        "target_words": backward["words"],
        "out_of_vocabulary_reverse": backward["missing"],
        "candidates": len(tgt_words),
        "candidates_reverse": len(src_words),
        "k": k,
    }


def _gold(pairs: Sequence[tuple[str, str]], candidates: list[str]) -> dict[str, set[int]]:
    """query word -> the candidate indices of its translations (an empty set when none is a candidate)."""
    column = {w: j for j, w in enumerate(candidates)}
    gold: dict[str, set[int]] = {}
    for s, t in pairs:
        gold.setdefault(s, set())
        if t in column:
            gold[s].add(column[t])
    return gold


def _direction(
    pairs,
    query_words: list[str],
    candidate_words: list[str],
    query_vec: torch.Tensor,
    candidate_vec: torch.Tensor,
    chunk: int,
) -> dict:
    """AME's P@1 of one direction: every distinct lexicon query word counts; an unknown one is a miss."""
    gold = _gold(pairs, candidate_words)
    row = {w: i for i, w in enumerate(query_words)}
    known = [w for w in gold if w in row]
    hits = 0
    if known:
        best = nearest(query_vec[[row[w] for w in known]], candidate_vec, chunk).tolist()
        hits = sum(b in gold[w] for w, b in zip(known, best))
    return {"P@1": 100.0 * hits / len(gold), "words": len(gold), "known": len(known), "missing": len(gold) - len(known)}


def _csls_direction(
    pairs, src_words: list[str], tgt_words: list[str], src_vec: torch.Tensor, tgt_vec: torch.Tensor, k: int, chunk: int
) -> float | None:
    """MUSE's P@1 with CSLS over the known queries (None when none is known)."""
    gold = _gold(pairs, tgt_words)
    row = {w: i for i, w in enumerate(src_words)}
    known = [w for w in gold if w in row]
    if not known:
        return None
    queries = src_vec[[row[w] for w in known]]  # [q, D]
    r_target = mean_top_k(queries, tgt_vec, k, chunk)  # [q]
    r_source = mean_top_k(tgt_vec, src_vec, k, chunk)  # [T]
    best = nearest(queries, tgt_vec, chunk, r_target, r_source).tolist()
    return 100.0 * sum(b in gold[w] for w, b in zip(known, best)) / len(known)


def word_vectors(words: list[str], ids_of, vectors_of, batch: int = 4096) -> dict[str, torch.Tensor]:
    """word -> its vector [D] (CPU) for the words that have a token (``mltk.ame.words``), in batches."""
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for start in range(0, len(words), batch):
            part = words[start : start + batch]
            ids = ids_of(part)
            kept = [w for w, keep in zip(part, ids.kept.tolist()) if keep]
            if kept:
                out.update(zip(kept, vectors_of(ids).cpu()))
    return out


def model_vocabulary(
    model_path: str | Path | None,
    vocab_from: Path | None,
    src_lang: str,
    tgt_lang: str,
    pairs: Sequence[tuple[str, str]],
) -> tuple[dict[str, list[str]], dict]:
    """The words of each language the model knows, and where they came from (see the module docstring)."""
    from mltk.data.overlap import training_data_of

    if vocab_from is not None:
        paths = [vocab_from]
    else:
        paths = training_data_of([model_path]) if model_path is not None else []
    if paths:
        words = {lang: vocabulary_words(paths, lang) for lang in (src_lang, tgt_lang)}
        if all(words.values()):
            return words, {
                "source": "--bli-vocab" if vocab_from is not None else "training captions",
                "captions": [str(Path(p).resolve()) for p in paths],
            }
        if vocab_from is not None:
            raise ConfigError(f"--bli-vocab has no train captions in {src_lang} and {tgt_lang}", vocab_from)
    words = {src_lang: sorted({s for s, _ in pairs}), tgt_lang: sorted({t for _, t in pairs})}
    return words, {"source": "lexicon (the model's training captions were not found; nothing is out of vocabulary)"}


def evaluate_bli(
    encoder,
    lexicon_path: str | Path,
    k: int = CSLS_K,
    model_path: str | Path | None = None,
    vocab_from: Path | None = None,
    chunk: int = BLI_CHUNK,
) -> dict:
    """The ``bli`` section of ``metrics.json`` for a loaded model and a lexicon artifact."""
    lexicon = load_lexicon(lexicon_path)
    src_lang, tgt_lang = lexicon_languages(lexicon)
    if tgt_lang != getattr(encoder, "native_lang", "en"):
        raise ConfigError(
            f"BLI compares against the frozen English table: the lexicon must translate into en, not {tgt_lang}",
            lexicon_path,
        )
    pairs = lexicon_pairs(lexicon)
    tables = WordTables(encoder, src_lang)
    words, vocabulary = model_vocabulary(model_path, vocab_from, src_lang, tgt_lang, pairs)
    source = word_vectors(words[src_lang], tables.source_ids, tables.source_vectors)
    target = word_vectors(words[tgt_lang], tables.english_ids, tables.english_vectors)
    result = bli_scores(source, target, pairs, k, chunk)
    vocabulary.update({src_lang: len(source), tgt_lang: len(target)})
    return {
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "lexicon": str(Path(lexicon_path).resolve()),
        **result,
        "vocabulary": vocabulary,
        "convention": "P@1 and P@1_reverse: AME's score, cosine nearest neighbour over all the model's words "
        "of the other language, every distinct lexicon word a query, out-of-vocabulary words "
        "counted as misses; P@1_csls: MUSE's convention, CSLS with k neighbours over the same "
        "candidates, known queries only; percentages",
    }
