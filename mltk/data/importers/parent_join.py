"""The caption_ids a translation takes from its parent (``import-data lines --translation-of L --parent CAPS``),
joined on disk, so that memory follows a partition, not the parent nor the lines.

Line i of caption file k takes the caption_id of the parent's ``occurrence``-th caption in L of its image (the
parent's rows of that image in their order; only those of the split when the parent has some there). The join is
hash-partitioned: the parent's rows (image_id, caption_id) and the lines' (position, image_id, occurrence) go to
``K`` Arrow stream files each, by a 64-bit hash of the image id (``mltk.artifacts.key_hashes``), so that the rows
of an image meet in one partition; ``K`` is the larger row count over ``PARTITION_ROWS`` (at most
``MAX_PARTITIONS`` files open at once). Each partition is joined on its own, exactly on the strings (the hash
only chooses the partition), and its caption_ids are written to one Arrow file as a batch per range of
``PARTITION_ROWS`` line positions; the lines' text and image ids wait in a stream file of their blocks, and are
given back a block at a time, in their order, with the caption_ids of their range (its batch of every
partition). Every file lives in a private folder under ``$TMPDIR`` (``tempfile``, mode 0700), the partitions
removed once joined, the folder at ``close``.
"""

from __future__ import annotations

import bisect
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk.artifacts import key_hashes, schema
from mltk.artifacts.caption_stream import captions_file, iter_caption_batches
from mltk.artifacts.tables import as_string_columns, require_columns
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.names import check_names
from mltk.data.importers.common import ImportRequest, normalize_lang

PARTITION_ROWS = 1 << 18  # rows of the parent (and of the lines) a partition aims at; lines of a position range
MAX_PARTITIONS = 256  # partition files written at once; past MAX_PARTITIONS * PARTITION_ROWS rows a partition grows

_PARENT = pa.schema([("image_id", pa.string()), ("caption_id", pa.string()), ("in_split", pa.bool_())])
_LINES = pa.schema([("position", pa.int64()), ("image_id", pa.string()), ("occurrence", pa.int64())])
_JOINED = pa.schema([("position", pa.int64()), ("caption_id", pa.string())])
_BLOCKS = pa.schema([("image_id", pa.string()), ("caption", pa.string())])


class _Partitions:
    """``count`` Arrow stream files under ``folder``: each row goes to the file its hash names (hash modulo
    ``count``), in the order the rows come. Rows are held up to ``PARTITION_ROWS`` and partitioned together, so
    that a file's pieces are not a few rows each (Arrow pads every buffer) however small the pieces added."""

    def __init__(self, folder: Path, name: str, schema_: pa.Schema, count: int):
        self.folder, self.name, self.count = folder, name, count
        self._held: list[tuple[pa.Table, np.ndarray]] = []
        self._held_rows = 0
        self._writers: list = []
        for k in range(count):
            self._writers.append(pa.ipc.new_stream(self.file(k), schema_))

    def file(self, k: int) -> str:
        return os.path.join(self.folder, f"{self.name}-{k:04d}.arrows")

    def add(self, table: pa.Table, hashes: np.ndarray) -> None:
        if self.count == 1:
            self._writers[0].write_table(table)
            return
        self._held.append((table, hashes))
        self._held_rows += table.num_rows
        if self._held_rows >= PARTITION_ROWS:
            self._write_held()

    def _write_held(self) -> None:
        if not self._held:
            return
        count = self.count
        table, hashes = pa.concat_tables([t for t, _ in self._held]), np.concatenate([h for _, h in self._held])
        self._held, self._held_rows = [], 0
        part = (hashes % np.uint64(count)).astype(np.int64)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(count + 1))
        ordered = table.take(pa.array(order))
        del table
        for k in np.flatnonzero(np.diff(bounds)):
            self._writers[k].write_table(ordered.slice(bounds[k], bounds[k + 1] - bounds[k]))

    def finish(self) -> None:
        """Write the rows held and close the files."""
        self._write_held()
        self.close()

    def close(self) -> None:
        self._held, self._held_rows = [], 0
        for writer in self._writers:
            writer.close()
        self._writers = []

    def take(self, k: int) -> pa.Table:
        """The rows of partition ``k`` (its file removed)."""
        with pa.OSFile(self.file(k)) as source:
            table = pa.ipc.open_stream(source).read_all()
        os.unlink(self.file(k))
        return table


def _in_order(batches: list[pa.RecordBatch]) -> pa.Array:
    """The caption_ids of a position range (one batch of each partition), in position order."""
    joined = pa.Table.from_batches(batches, schema=_JOINED)
    position = joined.column("position").to_numpy()
    order = np.empty(len(position), np.int64)
    order[position - position.min()] = np.arange(len(position))
    return joined.column("caption_id").take(pa.array(order)).combine_chunks()


class ParentJoin:
    """The parent's captions in the translated language, partitioned on disk when made (refusals of the parent
    first); the lines come with ``add`` (each file announced by ``start_file``), ``join`` matches them (refusing
    the first line past its image's captions) and ``rows`` gives them back with their caption_ids."""

    def __init__(self, request: ImportRequest, split: str, lines: int):
        self.request, self.split = request, split
        self._folder = tempfile.TemporaryDirectory(prefix="mltk-translation-")
        self.folder = Path(self._folder.name)
        self.positions = 0  # lines added
        self._files: list[tuple[int, Path]] = []  # (first position, path) of each caption file
        try:
            self._partition_parent(lines)
            self._lines = _Partitions(self.folder, "lines", _LINES, self._parent.count)
            self._blocks = pa.ipc.new_stream(str(self.folder / "blocks.arrows"), _BLOCKS)
        except BaseException:
            self.close()
            raise

    def _partition_parent(self, lines: int) -> None:
        """The parent's image_id and caption_id in the translated language, read a batch at a time with its column
        checks, to the partition of each image; counts the rows in the split."""
        request, source_lang = self.request, normalize_lang(self.request.translation_of)
        columns = ["image_id", "lang", "caption_id", "split"]
        try:
            with pq.ParquetFile(captions_file(request.parent)) as file:
                names, rows = file.schema_arrow.names, file.metadata.num_rows
        except (pa.ArrowInvalid, OSError):
            names, rows = columns, 0  # the read below names the file and the problem
        require_columns(
            pa.schema([(name, pa.null()) for name in names]).empty_table(), schema.CAPTION_COLUMNS, request.parent
        )
        count = min(max(1, -(-max(rows, lines) // PARTITION_ROWS)), MAX_PARTITIONS)
        self._parent = _Partitions(self.folder, "parent", _PARENT, count)
        self.lang_rows = self.split_rows = 0
        for batch in iter_caption_batches(request.parent, columns):
            batch = as_string_columns(batch, columns, request.parent)
            check_names(pc.unique(batch.column("lang")).to_pylist(), "caption lang", request.parent)
            rows = batch.filter(pc.equal(batch.column("lang"), source_lang))
            in_split = pc.equal(rows.column("split"), self.split)
            self.lang_rows += rows.num_rows
            self.split_rows += pc.sum(in_split).as_py() or 0
            table = pa.table([rows.column("image_id"), rows.column("caption_id"), in_split], schema=_PARENT)
            self._parent.add(table, key_hashes.string_hashes(table.column("image_id")))
        self._parent.finish()
        if not self.lang_rows:
            raise ConfigError(f"has no captions in {source_lang} (--translation-of)", request.parent)

    def start_file(self, path: Path) -> None:
        self._files.append((self.positions, path))

    def add(self, image_ids: pa.Array, occurrence: np.ndarray, captions: pa.Array) -> None:
        """A block of lines of the current file: their image ids, which caption of its image each is (0-based),
        and their text (kept for ``rows``)."""
        position = np.arange(self.positions, self.positions + len(image_ids), dtype=np.int64)
        keys = pa.table([pa.array(position), image_ids, pa.array(occurrence, pa.int64())], schema=_LINES)
        self._lines.add(keys, key_hashes.string_hashes(image_ids))
        self._blocks.write_batch(pa.record_batch([image_ids, captions], schema=_BLOCKS))
        self.positions += len(image_ids)

    def join(self, before_file: bool = False) -> None:
        """Match every line to its parent caption, a partition at a time. Refuses the first line (in reading
        order) past the parent's captions of its image; with ``before_file`` (the current file was refused for
        something else), only lines of the earlier files are looked at, and none is kept."""
        self._lines.finish()
        self._close_blocks()
        limit = self._files[-1][0] if before_file and self._files else self.positions
        first = None  # (position, image id, occurrence, captions the parent has)
        with pa.ipc.new_file(str(self.folder / "joined.arrow"), _JOINED) as out:
            for k in range(self._parent.count):
                beyond = self._join_partition(k, limit, out if first is None and not before_file else None)
                if beyond is not None and (first is None or beyond[0] < first[0]):
                    first = beyond
        if first is not None:
            self._refuse(*first)

    def _join_partition(self, k: int, limit: int, out: pa.ipc.RecordBatchFileWriter | None) -> tuple | None:
        """Join partition ``k``: the first of its lines before ``limit`` past its image's captions, else None
        (and, given ``out``, its caption_ids written there by position range)."""
        parent, lines = self._parent.take(k), self._lines.take(k)
        if self.split_rows:
            parent = parent.filter(parent.column("in_split"))
        # one dictionary for both sides, the parent's first: its images are the codes below its distinct count
        both = pa.chunked_array(parent.column("image_id").chunks + lines.column("image_id").chunks, pa.string())
        encoded = pc.dictionary_encode(both.combine_chunks()).indices.to_numpy(zero_copy_only=False)
        codes, group = encoded[: parent.num_rows].astype(np.int64), encoded[parent.num_rows :].astype(np.int64)
        counts = np.bincount(codes)  # [the parent's images]
        group[group >= len(counts)] = -1  # an image the parent does not have
        have = np.append(counts, 0)[group]  # group -1: the 0 appended
        occurrence, position = lines.column("occurrence").to_numpy(), lines.column("position").to_numpy()
        beyond = np.flatnonzero((occurrence >= have) & (position < limit))
        if len(beyond):
            row = int(beyond[np.argmin(position[beyond])])
            return int(position[row]), lines.column("image_id")[row].as_py(), int(occurrence[row]), int(have[row])
        if out is not None:
            order = np.argsort(codes, kind="stable")  # each image's rows together, in the parent's order
            rows = order[(np.cumsum(counts) - counts)[group] + occurrence]
            caption_ids = parent.column("caption_id").take(pa.array(rows)).combine_chunks()
            joined = pa.record_batch([pa.array(position), caption_ids], schema=_JOINED)
            edges = np.arange(self._range_count() + 1, dtype=np.int64) * PARTITION_ROWS
            bounds = np.searchsorted(position, edges)  # the lines came in order: by position
            for start, stop in zip(bounds[:-1], bounds[1:]):  # batch k * ranges + r: range r of partition k
                out.write_batch(joined.slice(start, stop - start))
        return None

    def _range_count(self) -> int:
        return -(-self.positions // PARTITION_ROWS)

    def _refuse(self, position: int, image_id: str, occurrence: int, have: int) -> None:
        index = bisect.bisect_right([first for first, _ in self._files], position) - 1
        first, path = self._files[index]
        raise SchemaError(
            f"line {position - first + 1} (image {image_id}) translates caption {occurrence + 1} of that image in "
            f"{self.request.translation_of}, but {self.request.parent} has {have} for it",
            path,
        )

    def rows(self) -> Iterator[tuple[pa.Array, pa.Array, pa.Array]]:
        """(image ids, text, caption_ids) of each block of lines, in the order they were added."""
        count, ranges = self._parent.count, self._range_count()
        with (
            pa.OSFile(str(self.folder / "joined.arrow")) as joined,
            pa.OSFile(str(self.folder / "blocks.arrows")) as text,
        ):
            batches = pa.ipc.open_file(joined)
            held, start, empty, number = pa.array([], pa.string()), 0, pa.array([], pa.string()), 0
            for block in pa.ipc.open_stream(text):
                parts, need = [], block.num_rows
                while need:
                    if start >= len(held):  # the caption_ids of the next range, from position start
                        held = _in_order([batches.get_batch(k * ranges + number) for k in range(count)])
                        start, number = 0, number + 1
                    parts.append(held.slice(start, need))
                    start += len(parts[-1])
                    need -= len(parts[-1])
                yield block.column("image_id"), block.column("caption"), pa.concat_arrays(parts) if parts else empty

    def close(self) -> None:
        for files in (getattr(self, "_parent", None), getattr(self, "_lines", None)):
            if files is not None:
                files.close()
        self._close_blocks()
        self._folder.cleanup()

    def _close_blocks(self) -> None:
        if getattr(self, "_blocks", None) is not None:
            self._blocks.close()
            self._blocks = None
