"""Parquet files written a row group at a time, so that a writer holds one row group, never the table.

``ROW_GROUP_ROWS`` is 131,072 rows (``1 << 17``), not pyarrow's default of 1,048,576: below the default pyarrow
writes a whole table as one row group, so the default would make a writer hold every row of any set below a
million rows. The bound is at or above the row counts of Multi30K-sized artifacts (29,000 training images; 29,000
captions per language and task 1 split, 116,000 for its four languages merged; the 87,000-row merge of the byte
tests), which therefore keep one row group and the very bytes the whole-table writer gave them. A larger table
gets row groups of 131,072 rows where it had 1,048,576-row ones (readers see the same rows). Each row group is
written as one Arrow chunk per column (``combine_chunks``), the form ``pyarrow.parquet.write_table`` of a whole
table gives, since Parquet's pages follow the chunks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mltk.artifacts import schema
from mltk.artifacts.files import validate_images
from mltk.artifacts.manifest import PathLike, jsonable
from mltk.artifacts.writer import ArtifactWriter

ROW_GROUP_ROWS = 1 << 17  # rows per Parquet row group: what a streamed writer holds at most (see above)


class RowGroupWriter:
    """Tables of one schema, in order, written to ``path`` (through ``path.tmp``, put in place by ``close``) a row
    group of ``ROW_GROUP_ROWS`` rows at a time. ``combine_chunks=False`` keeps the pieces as the row group's
    chunks."""

    def __init__(self, path: PathLike, *, combine_chunks: bool = True):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.combine_chunks = combine_chunks
        self.rows = 0
        self.schema: pa.Schema | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None

    def add(self, table: pa.Table) -> None:
        if self.schema is None:
            self.schema = table.schema
        self.rows += table.num_rows
        self._pending.append(table)
        self._pending_rows += table.num_rows
        while self._pending_rows >= ROW_GROUP_ROWS:
            self._write_row_group(ROW_GROUP_ROWS)

    def _write_row_group(self, rows: int) -> None:
        table = pa.concat_tables(self._pending)
        group, rest = table.slice(0, rows), table.slice(rows)
        if self.combine_chunks:
            group = group.combine_chunks()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.tmp, self.schema)
        self._writer.write_table(group, row_group_size=max(rows, 1))
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def finish(self) -> None:
        """Write the last rows and close the file (still at ``tmp``)."""
        if self.schema is None:
            raise ValueError("no rows to write")
        if self._pending_rows or self._writer is None:
            self._write_row_group(self._pending_rows)
        self._writer.close()

    def commit(self) -> None:
        os.replace(self.tmp, self.path)


def write_images_stream(
    out_dir: PathLike,
    pieces: Iterable[pa.Table],
    *,
    stage: str = "images",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    **manifest_fields: Any,
) -> Path:
    """``write_images`` for rows that arrive in pieces (checked as ``validate_images`` checks them, piece by
    piece): the same file, a row group at a time."""
    with ArtifactWriter(out_dir, "images", stage=stage, config=config, inputs=inputs) as writer:
        rows = RowGroupWriter(writer.dir / schema.IMAGES_FILE)
        for piece in pieces:
            rows.add(validate_images(piece, out_dir))
        rows.finish()
        rows.commit()
        writer.manifest["rows"] = rows.rows
        writer.manifest.update(jsonable(manifest_fields))
    return writer.path
