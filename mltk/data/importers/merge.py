"""``mltk merge-captions A B ... --out C``: the union of captions artifacts.

Refused with one line naming both inputs: the same (caption_id, lang) in two places (a duplicate row, e.g. the
same set merged twice), one caption_id naming different images (conflicting ids), and one image in different
splits (a test image that would also train). Columns beyond the schema are kept; rows of an input that lacks
one hold null there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts import schema
from mltk.artifacts.columns import first_rows, key_codes, value_counts
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.runtime import log


def merge_captions(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> Path:
    """``mltk merge-captions``: the union of several captions artifacts (a row in two of them is refused). The
    checks run on whole columns (Arrow and numpy), so merging tens of millions of rows costs seconds."""
    if len(paths) < 2:
        raise ConfigError("merge-captions needs at least two captions artifacts")
    tables = [(Path(p), artifacts.load_captions(p)) for p in paths]
    merged = pa.concat_tables([_with_columns(table, _all_columns(tables)) for _, table in tables])
    source = np.repeat(np.arange(len(tables)), [table.num_rows for _, table in tables])  # [rows] input of each row
    _refuse_first_conflict(merged, source, [path for path, _ in tables])
    langs = value_counts(merged.column("lang"))
    log(
        f"merge-captions: {merged.num_rows} captions from {len(tables)} artifacts "
        f"({', '.join(f'{lang} {n}' for lang, n in sorted(langs.items()))})"
    )
    return artifacts.write_captions(
        out_dir,
        merged,
        stage="merge-captions",
        config={"inputs": [str(p) for p, _ in tables]},
        inputs=[p for p, _ in tables],
    )


def _refuse_first_conflict(merged: pa.Table, source: np.ndarray, paths: list[Path]) -> None:
    """Refuse the first row, in input order, that repeats an earlier (caption_id, lang), gives an earlier
    caption_id another image, or puts an earlier image in another split (checked in that order on one row)."""
    column = merged.column
    checks = []  # (row, order of the check, message, input named)
    first = first_rows(column("caption_id"), column("lang"))
    row = _first_mismatch(first, np.arange(len(first)))
    if row is not None:
        earlier = paths[source[first[row]]]
        where = "twice in it" if earlier == paths[source[row]] else f"also in {earlier}"
        checks.append(
            (
                row,
                0,
                f"caption_id {column('caption_id')[row].as_py()!r} in {column('lang')[row].as_py()} "
                f"is {where} (duplicate row)",
            )
        )

    def value(name: str, row: int) -> str:
        return column(name)[row].as_py()

    changed = (  # (order of the check, column whose value must not change, key column, message)
        (
            1,
            "image_id",
            "caption_id",
            lambda row, earlier: (
                f"caption_id {value('caption_id', row)!r} names image {value('image_id', row)!r} here but "
                f"{value('image_id', earlier)!r} in {paths[source[earlier]]} (conflicting ids)"
            ),
        ),
        (
            2,
            "split",
            "image_id",
            lambda row, earlier: (
                f"image {value('image_id', row)!r} is in split {value('split', row)!r} here but "
                f"{value('split', earlier)!r} in {paths[source[earlier]]}"
            ),
        ),
    )
    for order, name, key, message in changed:
        found = _first_changed(column(name), column(key))
        if found is not None:
            checks.append((found[0], order, message(*found)))
    if checks:
        row, _, message = min(checks)
        raise SchemaError(message, paths[source[row]])


def _first_changed(values: pa.ChunkedArray, keys: pa.ChunkedArray) -> tuple[int, int] | None:
    """(row, first row of its key) of the first row whose value differs from that of its key's first row."""
    codes, first = key_codes(values), first_rows(keys)
    row = _first_mismatch(codes[first], codes)
    return None if row is None else (row, int(first[row]))


def _first_mismatch(expected: np.ndarray, actual: np.ndarray) -> int | None:
    """The first index where the two [rows] arrays differ, or None."""
    rows = np.flatnonzero(expected != actual)
    return int(rows[0]) if len(rows) else None


def _all_columns(tables: list[tuple[Path, pa.Table]]) -> list[str]:
    names = list(schema.CAPTION_COLUMNS)
    for _, table in tables:
        names += [name for name in table.column_names if name not in names]
    return names


def _with_columns(table: pa.Table, names: list[str]) -> pa.Table:
    return pa.table(
        {
            name: table.column(name).cast(pa.string())
            if name in table.column_names
            else pa.nulls(table.num_rows, pa.string())
            for name in names
        }
    )
