"""Captions artifacts written and read a batch of rows at a time, so that memory follows a batch, not the table.

``write_captions_stream`` is ``write_captions`` for rows that arrive in pieces (import-data, merge-captions): the
same checks and the same file. Each piece is checked as it comes (columns, types, language names, control
characters replaced), rows are written a row group (``mltk.artifacts.table_stream.ROW_GROUP_ROWS``) at a time,
and the one rule that spans rows (a caption_id names one image) is checked on 64-bit hashes of the ids
(``mltk.artifacts.key_hashes``; counted by ``DistinctCounter``, which moves them to disk past a bound, so memory
stays flat whatever the row count); a hashed conflict is confirmed on the written strings, which also gives the
message ``write_captions`` gives. A row group is one Arrow chunk when written, so a file of up to a row group has
the same bytes as ``write_captions`` of the whole table as one chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk.artifacts import key_hashes, schema, table_stream
from mltk.artifacts.caption_rules import CONTROL_CHARACTERS, refuse_caption_ids_on_several_images
from mltk.artifacts.manifest import PathLike, jsonable, read_manifest
from mltk.artifacts.tables import as_string_columns, read_table, require_columns
from mltk.artifacts.writer import ArtifactWriter
from mltk.core.errors import ArtifactError, SchemaError
from mltk.core.names import check_names
from mltk.core.runtime import log

READ_BATCH_ROWS = 1 << 16


def write_captions_stream(
    out_dir: PathLike,
    pieces: Iterable[pa.Table | pa.RecordBatch],
    *,
    stage: str = "captions",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    check_caption_ids: bool = True,
    combine_chunks: bool = True,
    checks: SinkChecks | None = None,
    fields: Callable[[CaptionSink], dict] | None = None,
) -> Path:
    """Write a captions artifact from pieces of one schema, in order. ``check_caption_ids=False`` only for a caller
    that has refused a caption_id on two images itself (merge-captions checks that before writing);
    ``combine_chunks=False`` writes each row group with the pieces as its Arrow chunks (Parquet's pages follow the
    chunks: merge-captions keeps each input's rows a chunk, as the whole-table merge did); ``checks``: what an
    importer refuses besides (``SinkChecks``); ``fields`` gives the manifest fields beyond ``rows`` and
    ``languages`` once every row is written (from the sink's counts)."""
    with ArtifactWriter(out_dir, "captions", stage=stage, config=config, inputs=inputs) as writer:
        sink = CaptionSink(
            writer.dir / schema.CAPTIONS_FILE,
            out_dir,
            check_caption_ids=check_caption_ids,
            combine_chunks=combine_chunks,
            checks=checks,
        )
        for piece in pieces:
            sink.add(piece)
        sink.close()
        writer.manifest["rows"] = sink.rows
        writer.manifest["languages"] = sorted(sink.langs)
        writer.manifest.update(jsonable(fields(sink) if fields else {}))
    return writer.path


@dataclass(frozen=True)
class SinkChecks:
    """An importer's refusals, in its order, on the whole output: ``rows`` (called with the sink once every row is
    in: refuse an empty import), then ``unique_keys`` (called with the written ``caption_id`` and ``lang`` columns
    when their hashed pairs repeat: refuse naming the first repeat), and a caption_id on two images refused naming
    ``source`` instead of the output."""

    rows: Callable[[CaptionSink], None] | None = None
    unique_keys: Callable[[pa.Table], None] | None = None
    source: PathLike | None = None


class CaptionSink:
    """Caption rows checked as ``validate_captions`` checks them and written to ``path`` a row group at a time.

    ``langs`` and ``splits`` count the rows per value, in order of first appearance."""

    def __init__(
        self,
        path: Path,
        name: PathLike,
        *,
        check_caption_ids: bool = True,
        combine_chunks: bool = True,
        checks: SinkChecks | None = None,
    ):
        self.path, self.name, self.check_caption_ids = Path(path), name, check_caption_ids
        self.checks = checks or SinkChecks()
        self._file = table_stream.RowGroupWriter(path, combine_chunks=combine_chunks)
        self.tmp = self._file.tmp
        self.rows = 0
        self.langs: dict[str, int] = {}
        self.splits: dict[str, int] = {}
        self.replaced = 0  # captions whose control characters were replaced
        self._nulls: dict[str, int] = {}
        self._schema: pa.Schema | None = None
        self._caption_hashes = key_hashes.DistinctCounter()  # caption_id, and (caption_id, image_id)
        self._pair_hashes = key_hashes.DistinctCounter()
        self._key_hashes = key_hashes.DistinctCounter()  # (caption_id, lang), when ``unique_keys`` is set

    def add(self, piece: pa.Table | pa.RecordBatch) -> None:
        table = pa.Table.from_batches([piece]) if isinstance(piece, pa.RecordBatch) else piece
        table = self._checked(table)
        if self._nulls:  # refused in ``close``, with the count over every piece
            return
        if self._schema is None:
            self._schema = table.schema
        elif table.schema != self._schema:
            raise ArtifactError(
                f"rows arrive with columns {table.schema.names}, expected {self._schema.names}", self.name
            )
        if self.check_caption_ids and table.num_rows:
            caption = key_hashes.string_hashes(table.column("caption_id"))
            self._caption_hashes.add(caption)
            self._pair_hashes.add(key_hashes.combine(caption, key_hashes.string_hashes(table.column("image_id"))))
            if self.checks.unique_keys is not None:
                self._key_hashes.add(key_hashes.combine(caption, key_hashes.few_string_hashes(table.column("lang"))))
        self.rows += table.num_rows
        self._file.add(table)

    def _checked(self, table: pa.Table) -> pa.Table:
        """``validate_captions`` on one piece; null counts add up across pieces (refused in ``close``)."""
        require_columns(table, schema.CAPTION_COLUMNS, self.name)
        for name in schema.CAPTION_COLUMNS:
            nulls = table.column(name).null_count
            if nulls:
                self._nulls[name] = self._nulls.get(name, 0) + nulls
        if self._nulls:
            return table
        table = as_string_columns(table, schema.CAPTION_COLUMNS, self.name)
        _count(table.column("lang"), self.langs)
        _count(table.column("split"), self.splits)
        captions = table.column("caption")
        found = pc.sum(pc.match_substring_regex(captions, CONTROL_CHARACTERS)).as_py() or 0
        if found:
            self.replaced += found
            cleaned = pc.replace_substring_regex(captions, CONTROL_CHARACTERS, " ")
            table = table.set_column(table.schema.get_field_index("caption"), "caption", cleaned)
        extra = [c for c in table.column_names if c not in schema.CAPTION_COLUMNS]
        return table.select(list(schema.CAPTION_COLUMNS) + extra)

    def close(self) -> None:
        """Write the last rows, refuse what spans pieces (nulls, language names, the importer's checks, a
        caption_id on two images) and put the file in place."""
        for name in schema.CAPTION_COLUMNS:
            if self._nulls.get(name):
                raise SchemaError(f"column {name} has {self._nulls[name]} null value(s)", self.name)
        if self._schema is None:
            raise ArtifactError("no caption rows to write", self.name)
        self._file.finish()
        if self.checks.rows is not None:
            self.checks.rows(self)
        if self._key_hashes.total and not self._key_hashes.all_distinct():
            self.checks.unique_keys(read_table(self.tmp, ["caption_id", "lang"]))
        if self.check_caption_ids and not self._one_image_per_caption_id():
            refuse_caption_ids_on_several_images(
                read_table(self.tmp, ["caption_id", "image_id"]), self.checks.source or self.name
            )
        check_names(list(self.langs), "caption lang", self.name)
        if self.replaced:
            log(f"{self.name}: NUL or other control characters replaced with a space in {self.replaced} caption(s)")
        self._file.commit()

    def _one_image_per_caption_id(self) -> bool:
        """As many distinct (caption_id, image_id) hashes as caption_id hashes (False may be a hash collision)."""
        return self._pair_hashes.distinct() == self._caption_hashes.distinct()


def _count(column: pa.ChunkedArray, counts: dict[str, int]) -> None:
    for item in pc.value_counts(column).to_pylist():
        counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]


def captions_file(path: PathLike) -> Path:
    """The Parquet file of a captions artifact (its manifest checked), or ``path`` itself when it is one."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return path
    read_manifest(path, "captions")
    return path / schema.CAPTIONS_FILE


def iter_caption_batches(
    path: PathLike, columns: list[str] | None = None, batch_rows: int | None = None
) -> Iterator[pa.Table]:
    """The rows of a captions artifact (or Parquet file), ``batch_rows`` at a time, as UTF-8-checked tables of the
    file's own types. What ``load_captions`` checks across rows is the caller's to check."""
    file = captions_file(path)
    try:
        reader = pq.ParquetFile(file, pre_buffer=False)  # pre-buffering reads every row group: memory of the file
        for batch in reader.iter_batches(batch_size=batch_rows or READ_BATCH_ROWS, columns=columns):
            batch.validate(full=True)  # string columns must be valid UTF-8 (Parquet does not promise it)
            yield pa.Table.from_batches([batch])
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"cannot read Parquet ({str(exc).splitlines()[0]})", file)


def caption_rows(path: PathLike) -> int:
    """The number of rows of a captions artifact's Parquet file (from its footer)."""
    file = captions_file(path)
    try:
        return pq.ParquetFile(file).metadata.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"cannot read Parquet ({str(exc).splitlines()[0]})", file)
