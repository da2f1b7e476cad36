"""The image list of ``import-data lines`` read a block of lines at a time, so that an import holds a block of it,
never the list.

``ImageList.scan`` reads the list once: each block's canonical ids (``mltk.data.importers.image_ids``) and paths
go to a temporary Arrow stream file, and the ids' 64-bit hashes to a ``DistinctCounter`` (which moves them to disk
past a bound). The namespace is decided as the blocks come: a list is Flickr30K's while every name so far is a
Flickr photo id, and the scan starts again without it at a later block with another name (at most once; a first
block with another name just goes on without it). When
no image is listed twice (all hashes distinct, which proves it), the caption files take their ids from that file
block by block (``IdCursor``) and the images table is that file with the split (``image_pieces``): each line is
its own image. A list that repeats an image (or whose hashes collide) is left to the importer's whole-list code,
which numbers the repeats.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mltk.artifacts import key_hashes
from mltk.data.importers.common import ImageRoots, iter_line_blocks
from mltk.data.importers.image_ids import FLICKR30K, PLAIN_NAME, all_flickr30k, canonical_from_stems, plain_stems

_SCHEMA = pa.schema([("image_id", pa.string()), ("path", pa.string())])


class ImageList:
    """An image list scanned into ``folder/ids.arrows`` (image_id and path per line, in order)."""

    def __init__(self, path: Path, roots: ImageRoots):
        self.path, self.roots = path, roots
        self._folder = tempfile.TemporaryDirectory(prefix="mltk-image-list-")
        self.file = Path(self._folder.name) / "ids.arrows"
        self.lines = 0
        self.namespace: str | None = FLICKR30K
        self.first_id: str | None = None
        self.unique = False

    def scan(self) -> ImageList:
        missing = self.roots.missing
        if not self._scan_once():  # a name that is no Flickr photo id: the ids are those of no namespace
            self.namespace, self.roots.missing = None, missing
            self._scan_once()
        return self

    def _scan_once(self) -> bool:
        """One pass over the list under ``namespace``; False when a Flickr30K pass meets another name."""
        distinct, self.lines = key_hashes.DistinctCounter(), 0
        with pa.ipc.new_stream(str(self.file), _SCHEMA) as out:
            for names in iter_line_blocks(self.path):
                if not len(names):
                    continue
                plain = pc.fill_null(pc.match_substring_regex(names, PLAIN_NAME), False)
                stems = plain_stems(names)
                if self.namespace == FLICKR30K and not all_flickr30k(names, plain, stems):
                    if self.lines:
                        distinct.discard()
                        return False
                    self.namespace = None  # the first block decides it: no pass to start again
                ids = canonical_from_stems(names, plain, stems, self.namespace)
                if self.first_id is None:
                    self.first_id = ids[0].as_py()
                distinct.add(key_hashes.string_hashes(ids))
                out.write_batch(pa.record_batch([ids, self.roots.paths(names)], schema=_SCHEMA))
                self.lines += len(names)
        if not self.lines:
            self.namespace = None
        self.unique = distinct.all_distinct()
        return True

    def batches(self) -> Iterator[pa.RecordBatch]:
        with pa.OSFile(str(self.file)) as source:
            yield from pa.ipc.open_stream(source)

    def image_pieces(self, split: str) -> Iterator[pa.Table]:
        """The images table of a list without repeats, a block at a time: each line's image, split and path."""
        for batch in self.batches():
            yield pa.table(
                {
                    "image_id": batch.column("image_id"),
                    "split": pa.nulls(batch.num_rows, pa.string()).fill_null(split),
                    "path": batch.column("path"),
                }
            )

    def close(self) -> None:
        self._folder.cleanup()


class IdCursor:
    """The image ids of consecutive line ranges of a scanned list (one pass, one block held)."""

    def __init__(self, images: ImageList):
        self._batches = images.batches()
        self._held = pa.array([], pa.string())

    def take(self, count: int) -> pa.Array:
        """The ids of the next ``count`` lines (fewer at the end of the list)."""
        parts, need = [], count
        while need:
            if not len(self._held):
                batch = next(self._batches, None)
                if batch is None:
                    break
                self._held = batch.column("image_id")
            part = self._held.slice(0, need)
            parts.append(part)
            self._held, need = self._held.slice(len(part)), need - len(part)
        return pa.concat_arrays(parts) if parts else pa.array([], pa.string())
