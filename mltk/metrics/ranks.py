"""Retrieval metrics: ranks by counting, Recall@K, median/mean rank and MRV (the continual-learning
metrics are ``mltk.metrics.continual``).

Conventions (stated again in every metrics artifact, see ``SETTINGS``):

- **Similarity** is the float32 dot product of the vectors as given (cosine for L2-normalised embeddings).
- **Rank** of a ground truth (0-based) = the number of other gallery items whose score is *greater than or equal
  to* the ground truth's score. Tie rule, *pessimistic*: items that tie with the ground truth count against it
  (they are placed above it), so degenerate embeddings (all zero, all equal) rank every ground truth last
  instead of first; the ground truths that tie with another candidate are counted (``tied``) and reported.
  1-based rank = 0-based rank + 1.
- **Image-to-text** has several ground truths per image (its captions in the language evaluated): the rank is
  that of the best-ranked caption, i.e. the count of the other images' captions scoring at or above the image's
  best caption score, so a hit at K means *any* of its captions is in the top K (its own captions never push
  each other down). **Text-to-image** ranks each caption's one image.
- Ranks are never obtained by sorting rows. Scores are computed in chunks of query rows (``chunk_mb`` bounds the
  chunk), and both directions are counted from the same chunk of the one similarity matrix, so the full N x M
  matrix is never held and each score is computed once. Every comparison uses scores produced by the same
  matrix product as the ground truth's own score, so the ground truth never outranks itself through rounding.

Public functions: ``bidirectional_ranks`` (``rank_both_directions`` also gives the ties) and
``ranks_from_scores`` (rank helpers), ``recall_at_k``,
``rank_summary``, ``average_recall``, ``mean_rank_variance`` and ``align_instance_ranks`` (MRV);
``grouped_ranks`` (several positives per query, as in caption-to-caption retrieval by
image); ``as_float32_tensor`` prepares vectors for them once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mltk.core.runtime import track
from mltk.metrics.arrays import NumpyOps, TorchOps, array_ops, is_torch_tensor
from mltk.metrics.continual import AVERAGE_RECALL_FORMULA, FORGETTING_FORMULA, continual_metrics  # noqa: F401 (API)

DEFAULT_KS = (1, 5, 10)
Scorer = Callable[[Any, Any], Any]  # (left [c, d], right [m, d]) torch tensors -> scores [c, m]
MRV_VARIANTS = ("paper", "code")

TIE_RULE = (
    "pessimistic: gallery items (other than the query's own ground truths) whose score ties with the ground "
    "truth's count against it (ranked above it); ties.* counts the ground truths that tie"
)
RANK_BASE = (
    "median_rank and mean_rank are 1-based (a ground truth at the top has rank 1); MRV uses 0-based "
    "ranks (variance and standard deviation do not depend on the base)"
)


# ----------------------------------------------------------------------------------------------------------------
# Ranks by counting
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankResult:
    """0-based ranks of the ground truths in both directions (pessimistic tie rule) and, for each, whether its
    score ties with another candidate's (such a candidate is counted above it)."""

    left: np.ndarray  # [N] int64, -1 for a left item that owns no right item
    right: np.ndarray  # [M] int64
    left_tied: np.ndarray  # [N] bool
    right_tied: np.ndarray  # [M] bool


def bidirectional_ranks(
    left, right, right_to_left: Sequence[int] | np.ndarray, **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(left_ranks [N], right_ranks [M])`` of ``rank_both_directions`` (same options: ``chunk_mb``, ``device``,
    ``progress``), without the ties."""
    result = rank_both_directions(left, right, right_to_left, **options)
    return result.left, result.right


def rank_both_directions(
    left,
    right,
    right_to_left: Sequence[int] | np.ndarray,
    *,
    chunk_mb: float = 256,
    device: Any = "cpu",
    progress: str | None = None,
    scorer: Scorer | None = None,
) -> RankResult:
    """0-based ranks of the ground truths in both retrieval directions, from one chunked pass.

    ``left`` [N, d] are e.g. images, ``right`` [M, d] e.g. captions (numpy arrays or torch tensors);
    ``right_to_left[j]`` is the index of the one left item that right item j belongs to (a left item may own
    zero, one or many right items). With S = left @ right.T and the pessimistic tie rule:

    - ``left[i]`` = #{j not owned by i : S[i, j] >= max_{j' owned by i} S[i, j']}: the rank of i's best-ranked
      own right item among all M right items (image-to-text); -1 when i owns none.
    - ``right[j]`` = #{i != owner(j) : S[i, j] >= S[owner(j), j]}: the rank of j's owner among all N left items
      (text-to-image).
    - ``*_tied``: some counted candidate scores exactly the ground truth's score.

    S is computed ``chunk`` rows at a time (at most ``chunk_mb`` MiB); ``progress`` names a progress bar.
    ``scorer(left_rows [c, d], right_rows [m, d]) -> [c, m]`` replaces the dot product when given (an asymmetric
    similarity such as order violation, on torch tensors; it must bound its own working memory). On the CPU
    without a scorer the pass runs in numpy (``mltk.metrics.arrays``), elsewhere in torch on ``device``.

    How the right direction stays exact in one pass: a right item's threshold S[owner(j), j] is needed before
    the chunks that precede its owner's chunk are counted. A cheap pre-pass computes those thresholds with small
    products of the owners against their own right items (about 128 * M * d multiply-adds in all); the main pass
    then checks each threshold against the value the big product gives. Any right item whose two values differ
    in the last bit (a BLAS that picks a different kernel for the small shape) is re-ranked by a pass over its
    own row, so the result never depends on that.
    """
    ops = array_ops(device, left, right, torch_scorer=scorer is not None)
    left_t, right_t = ops.float32(left), ops.float32(right)  # [N, d], [M, d]
    owner = ops.int64(right_to_left)  # [M]
    n_left, n_right = left_t.shape[0], right_t.shape[0]
    _check_rank_inputs(left_t, right_t, owner)
    if n_left == 0 or n_right == 0:
        empty = np.full(n_left, -1, dtype=np.int64)
        return RankResult(empty, np.zeros(n_right, np.int64), np.zeros(n_left, bool), np.zeros(n_right, bool))
    by_owner = ops.stable_argsort(owner)  # right items grouped by owner
    owner_start = ops.searchsorted(owner[by_owner], ops.arange(n_left + 1))  # [N + 1]
    thresholds = _owner_scores(ops, left_t, right_t, owner, by_owner, owner_start, scorer=scorer)  # [M]
    left_ranks, left_above, right_above, right_at_or_above, mismatched = _counting_pass(
        ops, left_t, right_t, owner, by_owner, owner_start.tolist(), thresholds, chunk_mb, progress, scorer
    )
    right_ranks = right_at_or_above - 1  # the owner's own score is not counted
    has_own = ops.numpy(owner_start[1:] > owner_start[:-1])
    left_ranks[~has_own] = -1
    if bool(mismatched.any()):
        redo = ops.flatnonzero(mismatched)
        redo_np = ops.numpy(redo)
        right_ranks[redo_np], right_above[redo_np] = _single_owner_ranks(
            ops, right_t[redo], left_t, owner[redo], chunk_mb, scorer
        )
    return RankResult(left_ranks, right_ranks, has_own & (left_ranks > left_above), right_ranks > right_above)


def _counting_pass(
    ops: NumpyOps | TorchOps,
    left_t,
    right_t,
    owner,
    by_owner,
    bounds: list[int],
    thresholds,
    chunk_mb: float,
    progress: str | None,
    scorer: Scorer | None = None,
):
    """The main pass of ``rank_both_directions``: S = left @ right.T a chunk of rows at a time. Returns the left
    ranks and strict counts [N], the right strict and at-or-above counts [M], and the right items whose threshold
    differs from the big product's [M] bool. ``bounds[i]:bounds[i + 1]`` are left item i's right items in
    ``by_owner`` order."""
    n_left, n_right = left_t.shape[0], right_t.shape[0]
    left_ranks, left_above = np.full(n_left, -1, dtype=np.int64), np.full(n_left, -1, dtype=np.int64)
    right_at_or_above, right_above = np.zeros(n_right, dtype=np.int64), np.zeros(n_right, dtype=np.int64)
    mismatched = ops.zeros(n_right, "bool")
    rows = _rows_per_chunk(n_right, chunk_mb)
    scores_buffer = ops.empty((min(rows, n_left), n_right))
    block = _rows_per_count_block(n_right) if ops.is_cpu else rows
    mask_buffer = np.empty((block, n_right), dtype=bool) if ops.is_cpu else None  # reused by every block
    right_t_transposed = right_t.T
    starts = range(0, n_left, rows)
    for start in track(starts, progress) if progress else starts:
        stop = min(start + rows, n_left)
        if scorer is None:
            scores = ops.mm(left_t[start:stop], right_t_transposed, out=scores_buffer[: stop - start])  # [c, M]
        else:
            scores = scorer(left_t[start:stop], right_t)  # [c, M]
        own = by_owner[bounds[start] : bounds[stop]]  # right items owned by this chunk
        own_rows = owner[own] - start
        own_scores = scores[own_rows, own]
        mismatched[own] = own_scores != thresholds[own]
        best, own_at_best = _best_own_scores(ops, scores, own_rows, own_scores)  # [c], [c]
        for first in range(0, stop - start, block):  # the four counts of a block while it is in the cache
            last = min(first + block, stop - start)
            part = scores[first:last]  # [b, M]
            above, at_or_above = _count_above(ops, part, best[first:last, None], dim=1, mask=mask_buffer)
            left_ranks[start + first : start + last] = at_or_above - own_at_best[first:last]
            left_above[start + first : start + last] = above
            above, at_or_above = _count_above(ops, part, thresholds[None, :], dim=0, mask=mask_buffer)
            right_above += above
            right_at_or_above += at_or_above
    return left_ranks, left_above, right_above, right_at_or_above, mismatched


def _best_own_scores(ops: NumpyOps | TorchOps, scores, own_rows, own_scores) -> tuple[Any, np.ndarray]:
    """For each row of a score chunk [c, M]: its best own item's score, and how many of its own items reach it
    (they do not count against it: the pessimistic rank is the count at or above, less these)."""
    best = ops.full(scores.shape[0], -math.inf)  # best own score per row [c]
    ops.scatter_max(best, own_rows, own_scores)
    return best, ops.bincount(own_rows, own_scores == best[own_rows], scores.shape[0])


def _rows_per_count_block(n_columns: int) -> int:
    """Rows of a score chunk compared and counted at a time on the CPU: about 4 MiB of scores (at most 255 rows),
    so that the four passes over a block (both directions, strictly above and at or above) read it from the
    cache, not memory."""
    return min(255, max(8, 2**20 // max(n_columns, 1)))  # at most 255: _count_true sums columns as bytes


def ranks_from_scores(scores, positives: Sequence[Iterable[int]]) -> np.ndarray:
    """0-based rank of the best-ranked positive in each row of a small, fully computed score matrix.

    ``scores`` [Q, G]; ``positives[q]`` the gallery indices that are correct for query q. Same counting and tie
    rule as ``bidirectional_ranks``: the count of the other gallery items scoring at or above the best positive
    (-1 for a query without positives). Meant for small matrices and tests.
    """
    scores = np.asarray(scores.cpu() if is_torch_tensor(scores) else scores, dtype=np.float32)
    ranks = np.full(scores.shape[0], -1, dtype=np.int64)
    for query, cols in enumerate(positives):
        cols = list(cols)
        if cols:
            others = np.ones(scores.shape[1], dtype=bool)
            others[cols] = False
            ranks[query] = int(np.count_nonzero(scores[query, others] >= scores[query, cols].max()))
    return ranks


def as_float32_tensor(values, device: Any):
    """A float32 torch tensor on ``device`` (a read-only array, such as a memory-mapped artifact, is copied
    first)."""
    return TorchOps(device).float32(values)


def _check_rank_inputs(left, right, owner) -> None:
    if left.ndim != 2 or right.ndim != 2 or left.shape[1] != right.shape[1]:
        raise ValueError(f"left {tuple(left.shape)} and right {tuple(right.shape)} must be [N, d] and [M, d]")
    if tuple(owner.shape) != (right.shape[0],):
        raise ValueError(f"right_to_left has shape {tuple(owner.shape)}, expected ({right.shape[0]},)")
    if len(owner) and (int(owner.min()) < 0 or int(owner.max()) >= left.shape[0]):
        raise ValueError("right_to_left holds an index outside the left items")


def _rows_per_chunk(n_columns: int, chunk_mb: float) -> int:
    """Rows of a score chunk (float32 scores plus one comparison byte per score) that fit in ``chunk_mb``."""
    bytes_per_row = max(n_columns, 1) * 5
    return max(8, int(chunk_mb * 2**20) // bytes_per_row)


def _owner_scores(
    ops: NumpyOps | TorchOps, left, right, owner, by_owner, owner_start, block: int = 128, scorer: Scorer | None = None
):
    """S[owner(j), j] for every right item j, from products of ``block`` left rows with the right items they own
    (about block / N of the full product's work; blocks of >= 8 rows use the same BLAS kernel as the big product).

    On the CPU under torch these many small products run on one thread: each multi-threaded BLAS call waits at a
    barrier for all its threads, and on a machine whose cores are also busy with other work that wait dominated
    (5,000 images x 25,000 captions on 2 loaded cores: 0.94 s with 2 threads, 0.05 s with 1; same values bit for
    bit).
    """
    thresholds = ops.empty(right.shape[0])  # [M]
    bounds = owner_start.tolist()
    with ops.one_thread():
        for start in range(0, left.shape[0], block):
            stop = min(start + block, left.shape[0])
            own = by_owner[bounds[start] : bounds[stop]]
            if len(own):
                small = (
                    ops.mm(left[start:stop], right[own].T) if scorer is None else scorer(left[start:stop], right[own])
                )  # [block, own]
                thresholds[own] = small[owner[own] - start, ops.arange(len(own))]
    return thresholds


def _single_owner_ranks(
    ops: NumpyOps | TorchOps, queries, gallery, targets, chunk_mb: float, scorer: Scorer | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rank of ``gallery[targets[q]]`` for each query row (pessimistic ties) and the count of items strictly
    above it, each row scored by one product (self-consistent)."""
    ranks, above = np.empty(len(queries), dtype=np.int64), np.empty(len(queries), dtype=np.int64)
    rows = _rows_per_chunk(gallery.shape[0], chunk_mb)
    for start in range(0, len(queries), rows):
        stop = min(start + rows, len(queries))
        scores = (
            ops.mm(queries[start:stop], gallery.T) if scorer is None else scorer(gallery, queries[start:stop]).T
        )  # [c, N]
        own = scores[ops.arange(stop - start), targets[start:stop]]
        above[start:stop], at_or_above = _count_above(ops, scores, own[:, None], dim=1)
        ranks[start:stop] = at_or_above - 1  # the target itself
    return ranks, above


def _count_above(
    ops: NumpyOps | TorchOps, scores, thresholds, dim: int, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of ``scores > thresholds`` and of ``scores >= thresholds`` along ``dim``. On the CPU the comparisons
    go through numpy, whose count_nonzero is several times faster than a torch bool sum, into ``mask`` when given
    (a buffer of at least the chunk's rows, reused so each chunk does not fault in fresh pages); on CUDA the torch
    reductions are fast."""
    if not ops.is_cpu:
        return ((scores > thresholds).sum(dim=dim).cpu().numpy(), (scores >= thresholds).sum(dim=dim).cpu().numpy())
    values, limits = ops.numpy(scores), ops.numpy(thresholds)
    out = mask[: values.shape[0]] if mask is not None and mask.shape[1:] == values.shape[1:] else None
    above = _count_true(np.greater(values, limits, out=out), dim)
    at_or_above = _count_true(np.greater_equal(values, limits, out=out), dim)
    return above, at_or_above


def _count_true(mask: np.ndarray, dim: int) -> np.ndarray:
    """The count of True along ``dim`` of a 2-d bool array, as int64. ``np.count_nonzero(axis=...)`` converts
    to integers first; a column sum of at most 255 rows as bytes and a row-by-row ``count_nonzero`` (which counts
    a contiguous row's bytes directly) are 6-12x faster."""
    if dim == 0 and mask.shape[0] <= 255:
        return np.add.reduce(mask.view(np.uint8), axis=0, dtype=np.uint8).astype(np.int64)
    if dim == 1:
        return np.fromiter((np.count_nonzero(row) for row in mask), dtype=np.int64, count=mask.shape[0])
    return np.count_nonzero(mask, axis=dim).astype(np.int64)


# ----------------------------------------------------------------------------------------------------------------
# Recall@K, median and mean rank
# ----------------------------------------------------------------------------------------------------------------


def recall_at_k(ranks: Sequence[int] | np.ndarray, k: int | Sequence[int] = DEFAULT_KS) -> float | dict:
    """Recall@K in percent from 0-based ranks: 100 * fraction of queries whose ground truth has rank < K.

    ``k`` an int gives one float; a sequence gives ``{"R@k": value}``. Queries with rank -1 (no ground truth)
    must be removed first. Empty input gives NaN.
    """
    ranks = np.asarray(ranks)
    if not isinstance(k, (int, np.integer)):
        return {f"R@{int(one)}": recall_at_k(ranks, int(one)) for one in k}
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    if ranks.size == 0:
        return math.nan
    return float(100.0 * np.count_nonzero(ranks < k) / ranks.size)


def rank_summary(ranks: Sequence[int] | np.ndarray, ks: Sequence[int] = DEFAULT_KS) -> dict:
    """``{"R@1", "R@5", "R@10", "median_rank", "mean_rank"}`` from 0-based ranks; the median and mean rank are
    1-based (``np.median``: the mean of the two middle values for an even count)."""
    ranks = np.asarray(ranks)
    summary = recall_at_k(ranks, tuple(ks))
    one_based = ranks + 1
    summary["median_rank"] = float(np.median(one_based)) if ranks.size else math.nan
    summary["mean_rank"] = float(one_based.mean()) if ranks.size else math.nan
    return summary


def average_recall(i2t: Mapping[str, float], t2i: Mapping[str, float], ks: Sequence[int] = DEFAULT_KS) -> float:
    """AR: the mean of R@K over ``ks`` in both directions (six numbers for K = 1, 5, 10)."""
    values = [i2t[f"R@{k}"] for k in ks] + [t2i[f"R@{k}"] for k in ks]
    return float(np.mean(values))


# ----------------------------------------------------------------------------------------------------------------
# MRV: mean rank variance across languages
# ----------------------------------------------------------------------------------------------------------------


def mean_rank_variance(ranks: Sequence[Sequence[float]] | np.ndarray, variant: str = "paper") -> float:
    """Mean Rank Variance of instances ranked in K languages (Nie et al. 2024, "Improving the Consistency in
    Cross-Lingual Cross-Modal Retrieval with 1-to-K Contrastive Learning", eq. 7).

    ``ranks`` [N, K]: row j holds Rank_jk, the rank of instance j's ground truth in each of the K languages.

    - ``variant="paper"`` (default): MRV_K = 1/(N K) * sum_j sum_k (Rank_jk - mean_k Rank_jk)^2, i.e. the
      population variance of each instance's ranks, averaged over instances.
    - ``variant="code"``: the authors' released code, the mean over instances of the population *standard
      deviation* of the ranks.

    Both are shift-invariant, so 0- or 1-based ranks give the same value. Rows holding NaN (an instance missing
    in some language) are left out; use ``align_instance_ranks`` to build the matrix and count them.
    Worked example, 0-based ranks [[0, 2], [1, 1], [0, 4]]: paper 1.6667, code 1.0.
    """
    if variant not in MRV_VARIANTS:
        raise ValueError(f"MRV variant must be one of {MRV_VARIANTS}, got {variant!r}")
    matrix = np.asarray(ranks, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"ranks must be [instances, languages], got shape {matrix.shape}")
    matrix = matrix[~np.isnan(matrix).any(axis=1)]
    if matrix.shape[0] == 0 or matrix.shape[1] < 2:
        return math.nan
    per_instance = matrix.var(axis=1) if variant == "paper" else matrix.std(axis=1)
    return float(per_instance.mean())


def align_instance_ranks(
    ranks_by_language: Mapping[str, tuple[Sequence[Hashable], Sequence[int] | np.ndarray]],
) -> tuple[np.ndarray, list, int]:
    """Match instances by id across languages for MRV.

    ``ranks_by_language[lang] = (instance_ids, ranks)`` (ids unique within a language). Returns
    ``(matrix [N, K], ids, excluded)``: one row per instance present in *every* language (sorted by id, columns in
    the mapping's language order) and the number of instances left out because some language lacked them.
    """
    languages = list(ranks_by_language)
    lookups = []
    for lang in languages:
        ids, values = ranks_by_language[lang]
        lookups.append(dict(zip(ids, np.asarray(values).tolist())))
    all_ids = set().union(*(lookup.keys() for lookup in lookups)) if lookups else set()
    common = sorted(set.intersection(*(set(lookup) for lookup in lookups))) if lookups else []
    matrix = np.array([[lookup[i] for lookup in lookups] for i in common], dtype=np.float64).reshape(
        len(common), len(languages)
    )
    return matrix, common, len(all_ids) - len(common)
