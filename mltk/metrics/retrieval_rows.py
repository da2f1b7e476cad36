"""The rows a retrieval ranks: the image and text tables checked against their vectors (``image_rows``,
``text_rows``), and the rows kept by ``--split`` (``select_split``) and by the first-caption protocol
(``first_caption_rows``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts.caption_rules import refuse_caption_ids_on_several_images
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.metrics.arrays import is_torch_tensor
from mltk.metrics.text_rows import TextRows

TEXT_COLUMNS = ("id", "image_id", "lang", "caption_id")


@dataclass(frozen=True)
class ImageRows:
    ids: np.ndarray  # [N] str
    vectors: np.ndarray  # [N, d]
    split: np.ndarray | None


def as_table(table: pa.Table | Mapping[str, Sequence]) -> pa.Table:
    return table if isinstance(table, pa.Table) else pa.table(dict(table))


def column_strings(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).cast(pa.string()).to_pylist(), dtype=object)


def _check_rows(table: pa.Table, vectors: np.ndarray | Any, columns: Sequence[str], source: str) -> None:
    artifacts.require_columns(table, columns, source)
    for name in columns:
        if table.column(name).null_count:
            raise SchemaError(f"column {name} has {table.column(name).null_count} null value(s)", source)
    if len(vectors) != table.num_rows or np.ndim(vectors) != 2:
        raise ArtifactError(f"{table.num_rows} rows but vectors of shape {tuple(np.shape(vectors))}", source)


def image_rows(table: pa.Table, vectors, source: str) -> ImageRows:
    _check_rows(table, vectors, ["id"], source)
    ids = column_strings(table, "id")
    if len(set(ids)) != len(ids):
        raise SchemaError("image ids (column id) are not unique", source)
    return ImageRows(ids, _to_numpy(vectors), split_column(table))


def text_rows(table: pa.Table, vectors, source: str) -> TextRows:
    _check_rows(table, vectors, TEXT_COLUMNS, source)
    refuse_caption_ids_on_several_images(
        table.select(["caption_id", "image_id"]).cast(
            pa.schema([("caption_id", pa.string()), ("image_id", pa.string())])
        ),
        source,
    )
    return TextRows(
        column_strings(table, "image_id"),
        column_strings(table, "lang"),
        column_strings(table, "caption_id"),
        _to_numpy(vectors),
        split_column(table),
        source,
    )


def split_column(table: pa.Table) -> np.ndarray | None:
    """The ``split`` column, or None when there is none or it is all empty (images encoded from a folder)."""
    if "split" not in table.column_names:
        return None
    split = column_strings(table, "split")
    return split if any(split) else None


def _to_numpy(vectors: np.ndarray | Any) -> np.ndarray:
    return vectors.detach().cpu().numpy() if is_torch_tensor(vectors) else vectors


def in_splits(column: np.ndarray, split: str) -> np.ndarray:
    """Rows of ``column`` in ``split``, one split name or a comma list (``test,val``)."""
    return np.isin(column, [name.strip() for name in split.split(",") if name.strip()])


def select_split(images: ImageRows | None, texts: TextRows, split: str | None) -> tuple[ImageRows | None, TextRows]:
    """Keep rows of ``split`` (a name or a comma list). A table without a ``split`` column (or with only empty
    values) follows the other one: images are kept when a kept caption refers to them, captions when their image is
    kept. Neither table having the column is an error."""
    if split is None:
        return images, texts
    if images is None:
        if texts.split is None:
            raise ConfigError(f"--split {split}: the text embeddings have no split column")
        texts = take_texts(texts, in_splits(texts.split, split))
        if len(texts.lang) == 0:
            raise ConfigError(f"--split {split} leaves 0 captions")
        return None, texts
    if images.split is None and texts.split is None:
        raise ConfigError(f"--split {split}: neither the image nor the text embeddings have a split column")
    if images.split is not None:
        images = _take_images(images, in_splits(images.split, split))
    if texts.split is not None:
        texts = take_texts(texts, in_splits(texts.split, split))
    if images.split is None:
        images = _take_images(images, np.isin(images.ids, np.unique(texts.image_ids)))
    if texts.split is None:
        texts = take_texts(texts, np.isin(texts.image_ids, images.ids))
    if len(images.ids) == 0 or len(texts.lang) == 0:
        raise ConfigError(f"--split {split} leaves {len(images.ids)} image(s) and {len(texts.lang)} caption(s)")
    return images, texts


def _take_images(images: ImageRows, keep: np.ndarray) -> ImageRows:
    split = images.split[keep] if images.split is not None else None
    return ImageRows(images.ids[keep], images.vectors[np.flatnonzero(keep)], split)


def take_texts(texts: TextRows, keep: np.ndarray) -> TextRows:
    split = texts.split[keep] if texts.split is not None else None
    return TextRows(
        texts.image_ids[keep],
        texts.lang[keep],
        texts.caption_ids[keep],
        texts.vectors[np.flatnonzero(keep)],
        split,
        texts.source,
    )


def first_caption_rows(texts: TextRows) -> np.ndarray:
    """The first caption (in table order) of each image and language: CLIP_benchmark's protocol on XM3600-style
    sets, where an image has several captions per language."""
    keep = np.zeros(len(texts.lang), dtype=bool)
    seen: set[tuple[str, str]] = set()
    for row, key in enumerate(zip(texts.image_ids.tolist(), texts.lang.tolist())):
        if key not in seen:
            seen.add(key)
            keep[row] = True
    return keep
