"""Continual-learning metrics over a sequence of tasks: average recall AR_j and forgetting F_j from the matrix
a_{j,i} (the recall on task i after training task j)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

AVERAGE_RECALL_FORMULA = "AR_j = mean_{i<=j} a[j][i]"
FORGETTING_FORMULA = "F_j = mean_{i<j} max_{i<=k<j} (a[k][i] - a[j][i]); F_0 undefined (null)"


def continual_metrics(matrix: Sequence[Sequence[float | None]] | np.ndarray) -> dict:
    """Average recall and forgetting after each task of a continual run (CLL-CLIP, Yang et al. 2024).

    ``matrix[j][i]`` = a_{j,i}, the recall on task i after training task j (None/NaN where not evaluated; only
    i <= j is used: a_{k,i} with k < i is a zero-shot value on a language not yet learnt and is ignored).

    - AR_j = mean_{i <= j} a_{j,i}
    - F_j  = mean_{i < j} max_{i <= k < j} (a_{k,i} - a_{j,i}); the paper defines a_{k,i} for k >= i only, so the
      max runs over the evaluated k in [i, j-1] (NaN entries are skipped) and is not clipped at 0, so improved
      tasks lower F. F_0 is undefined: None.

    Returns ``{"matrix": [[...]], "AR": [AR_0, ...], "F": [None, F_1, ...]}`` (None for undefined values, so the
    result is valid JSON).
    """
    a = (
        np.array([[math.nan if v is None else v for v in row] for row in matrix], dtype=np.float64)
        if not isinstance(matrix, np.ndarray)
        else matrix.astype(np.float64)
    )
    if a.ndim != 2 or a.shape[0] > a.shape[1]:
        raise ValueError(f"continual matrix must be [tasks_trained, tasks] with tasks_trained <= tasks, got {a.shape}")
    average, forgetting = [], []
    for j in range(a.shape[0]):
        seen = a[j, : j + 1]
        average.append(_nan_to_none(np.nanmean(seen)) if not np.isnan(seen).all() else None)
        if j == 0:
            forgetting.append(None)
            continue
        drops = []
        for i in range(j):
            earlier = a[i:j, i] - a[j, i]  # k in [i, j-1]: after task i was learnt
            if not np.isnan(earlier).all():
                drops.append(np.nanmax(earlier))
        forgetting.append(_nan_to_none(float(np.mean(drops)) if drops else math.nan))
    return {"matrix": [[_nan_to_none(v) for v in row] for row in a.tolist()], "AR": average, "F": forgetting}


def _nan_to_none(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
