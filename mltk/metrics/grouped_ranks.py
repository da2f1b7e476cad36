"""Ranks with several positives on both sides: caption-to-caption retrieval by image (AME) or by caption_id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mltk.metrics.arrays import array_ops


def grouped_ranks(
    queries,
    gallery,
    query_groups: Sequence[int] | np.ndarray,
    gallery_groups: Sequence[int] | np.ndarray,
    *,
    chunk_mb: float = 256,
    device: Any = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """0-based rank of each query's best-ranked positive, where the positives of query q are the gallery items of
    its group (``gallery_groups[g] == query_groups[q]``): any number of them, and groups shared by many queries;
    and whether that positive ties with a gallery item outside the group.

    ``queries`` [Q, d], ``gallery`` [G, d] (numpy arrays or torch tensors); groups are integer codes (the image of
    a caption, for AME's caption-to-caption retrieval; or the caption_id, for translation retrieval). Same
    counting and tie rule as ``bidirectional_ranks``: rank = #{g not a positive : S[q, g] >= best positive
    score}, every score of a row from one product. -1 for a query without positives. Returns ``(ranks [Q]
    int64, tied [Q] bool)``. numpy on the CPU, torch elsewhere (``mltk.metrics.arrays``).
    """
    ops = array_ops(device, queries, gallery)
    query_t, gallery_t = ops.float32(queries), ops.float32(gallery)
    query_codes, gallery_codes = ops.int64(query_groups), ops.int64(gallery_groups)  # [Q], [G]
    if query_t.ndim != 2 or gallery_t.ndim != 2 or query_t.shape[1] != gallery_t.shape[1]:
        raise ValueError(f"queries {tuple(query_t.shape)} and gallery {tuple(gallery_t.shape)} must be [Q, d], [G, d]")
    if tuple(query_codes.shape) != (query_t.shape[0],) or tuple(gallery_codes.shape) != (gallery_t.shape[0],):
        raise ValueError("one group code per query and per gallery item is needed")
    ranks = np.full(query_t.shape[0], -1, dtype=np.int64)
    tied = np.zeros(query_t.shape[0], dtype=bool)
    rows = max(1, int(chunk_mb * 2**20) // (max(gallery_t.shape[0], 1) * 7))  # float32 score + three bool masks
    for start in range(0, query_t.shape[0], rows):
        stop = min(start + rows, query_t.shape[0])
        scores = ops.mm(query_t[start:stop], gallery_t.T)  # [c, G]
        positive = query_codes[start:stop, None] == gallery_codes[None, :]  # [c, G]
        best = ops.row_max_where(scores, positive)  # [c, 1]
        counted = ops.count_rows((scores >= best) & ~positive)
        above = ops.count_rows(scores > best)
        has_positive = ops.count_rows(positive) > 0
        ranks[start:stop] = np.where(has_positive, counted, -1)
        tied[start:stop] = has_positive & (counted > above)
    return ranks, tied
