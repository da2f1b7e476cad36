"""COCO's 5-fold 1K test protocol: the gallery cut into consecutive folds, each evaluated alone, then averaged.

Karpathy's COCO test split holds 5,000 images; papers report "COCO 1K" as the mean over its five folds of 1,000
images, each fold searched with its own images' captions only (so ranks run over 1,000 images and ~5,000
captions, not 5,000 and ~25,000). ``evaluate_folds`` keeps the gallery's row order (the image embeddings
artifact's, which follows the split file), takes the images that the evaluated captions describe, cuts them into
``folds`` consecutive parts (``np.array_split``: equal when the count divides) and averages every number of the
per-fold results (recalls, ranks, AR, MRV, c2c); the tie counts (``ties``) are summed. The per-fold results stay
in ``folds`` of the output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk.core.errors import ConfigError
from mltk.metrics.retrieval import evaluate_retrieval
from mltk.metrics.retrieval_rows import as_table


def fold_image_ids(
    image_table: pa.Table,
    text_table: pa.Table,
    folds: int,
    split: str | None = None,
    languages: Sequence[str] | None = None,
) -> list[np.ndarray]:
    """The image ids of each fold: gallery rows (in order) described by an evaluated caption, cut into ``folds``."""
    texts = text_table
    if split is not None and "split" in texts.column_names:
        texts = texts.filter(pc.equal(texts.column("split"), split))
    if languages:
        texts = texts.filter(pc.is_in(texts.column("lang"), pa.array(list(languages))))
    described = set(texts.column("image_id").to_pylist())
    ids = np.array([i for i in image_table.column("id").to_pylist() if i in described], dtype=object)
    if folds < 1 or folds > len(ids):
        raise ConfigError(f"--folds must lie between 1 and the {len(ids)} images evaluated, got {folds}")
    return np.array_split(ids, folds)


def _mean(values: list[Any]) -> Any:
    """Element-wise mean of equally shaped results: numbers averaged, dicts recursed, anything else kept."""
    first = values[0]
    if isinstance(first, bool) or first is None or isinstance(first, str):
        return first
    if isinstance(first, (int, float)):
        return float(np.mean([float(v) for v in values]))
    if isinstance(first, Mapping):
        return {k: _mean([v[k] for v in values if k in v]) for k in first}
    return first


def _sum(values: list[Any]) -> Any:
    """Element-wise sum of equally shaped counts (dicts recursed; strings kept)."""
    first = values[0]
    if isinstance(first, Mapping):
        return {k: _sum([v[k] for v in values if k in v]) for k in first}
    return int(sum(values)) if isinstance(first, int) and not isinstance(first, bool) else first


def evaluate_folds(
    image_table: pa.Table | Mapping,
    image_vectors: np.ndarray | Any,
    text_table: pa.Table | Mapping,
    text_vectors: np.ndarray | Any,
    folds: int = 5,
    **kwargs: Any,
) -> dict:
    """``evaluate_retrieval`` on each of ``folds`` consecutive parts of the gallery, averaged (see module doc)."""
    image_table, text_table = as_table(image_table), as_table(text_table)
    parts = fold_image_ids(image_table, text_table, folds, kwargs.get("split"), kwargs.get("languages"))
    image_ids = np.array(image_table.column("id").to_pylist(), dtype=object)
    text_images = np.array(text_table.column("image_id").to_pylist(), dtype=object)
    results = []
    for part in parts:
        members = set(part.tolist())
        image_rows = np.flatnonzero([i in members for i in image_ids])
        text_rows = np.flatnonzero([i in members for i in text_images])
        results.append(
            evaluate_retrieval(
                image_table.take(image_rows),
                image_vectors[image_rows],
                text_table.take(text_rows),
                text_vectors[text_rows],
                **kwargs,
            )
        )
    averaged = {k: _mean([r[k] for r in results]) for k in results[0] if k not in ("settings", "ties")}
    averaged["ties"] = _sum([r["ties"] for r in results])  # a count over the whole gallery, not a mean
    settings = dict(results[0]["settings"])
    settings["folds"] = {
        "count": folds,
        "images": [len(p) for p in parts],
        "first_image": [str(p[0]) for p in parts],
        "averaged": "mean over folds of every number (COCO 1K: 5 folds of 1,000 images)",
    }
    return {
        **averaged,
        "settings": settings,
        "folds": [{k: v for k, v in r.items() if k not in ("settings", "ties")} for r in results],
    }
