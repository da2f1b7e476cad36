"""Plain caption files, one caption per line aligned with an image list (``mltk import-data lines``).

For a language no importer knows (Dutch Multi30K descriptions, Portuguese Multi30K, a translation of your own):
line i of every FILE describes the image on line i of ``--image-list``. Several files are several captions per
image; a number in the file name (``test.1.nl`` or ``test.0.nl``, either base) orders them, else the order given.
Every file must have as many lines as the image list.

Without ``--translation-of`` each caption gets its own caption_id (``SPLIT-LINE-LANG-K``): independent
descriptions. With ``--translation-of L --parent CAPS`` line i of file k translates a caption in language L of
the captions artifact CAPS and takes its caption_id: the captions of the same image are matched in order (the
parent's rows of that image in L, the lines of that image across the files), by image id, never by row number
in the parent.

Image ids are canonical: COCO file names become ``coco:N``; a list whose names are all Flickr photo ids
(digits, no leading zero, as in Multi30K's image lists) gives ``flickr30k:N``; other names keep their stem.

Memory follows a block of lines, not the corpus: the caption files are read a block at a time, and so is an image
list that names each image once (``mltk.data.importers.image_list``); one that repeats an image is held whole
(its repeats are numbered across the list). With ``--parent`` the match is a join on disk
(``mltk.data.importers.parent_join``): the parent and the lines are partitioned by image under ``$TMPDIR``, and
a partition is held at a time, not the parent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk.core.errors import ArtifactError, ConfigError, MltkError
from mltk.core.runtime import log
from mltk.data.importers.common import (
    Imported,
    ImportRequest,
    iter_line_blocks,
    normalize_lang,
    read_lines_array,
    require_aligned,
)
from mltk.data.importers.image_ids import image_list_ids
from mltk.data.importers.image_list import IdCursor, ImageList
from mltk.data.importers.parent_join import ParentJoin

_NUMBERED = re.compile(r"\.(\d+)\.[A-Za-z_-]{2,8}(\.gz)?$|\.(\d+)(\.gz)?$")


def import_lines(files: list[Path], request: ImportRequest) -> Imported:
    """Every file's lines in columns (Arrow compute, no Python per line): a corpus of millions of lines costs
    seconds, in memory for a block of lines."""
    if not request.lang:
        raise ConfigError("import-data lines needs --lang (the language of the caption files)")
    if request.image_list is None:
        raise ConfigError("import-data lines needs --image-list (one image name per line, aligned with the files)")
    if (request.translation_of is None) != (request.parent is None):
        raise ConfigError(
            "--translation-of and --parent go together (the language translated from and the "
            "captions artifact that holds it)"
        )
    lang = normalize_lang(request.lang)
    split = request.splits[0] if request.splits else "test"
    if len(request.splits) > 1:
        raise ConfigError(f"import-data lines writes one split, got --split {', '.join(request.splits)}")
    if not request.image_list.is_file():  # a pipe is read once, by the whole-list code
        return _import_whole_list(files, request, lang, split)
    listed = ImageList(request.image_list, request.images)
    try:
        if not listed.scan().unique:
            listed.close()
            return _import_whole_list(files, request, lang, split)
        if listed.lines == 0:
            raise ArtifactError("is empty (expected one image name per line)", request.image_list)
        if listed.namespace:
            log(f"import-data (lines): the image names are Flickr photo ids; image ids are {listed.first_id}, ...")
        parent = ParentJoin(request, split, listed.lines * len(files)) if request.parent is not None else None
    except BaseException:
        listed.close()
        raise

    def cleanup() -> None:
        listed.close()
        if parent is not None:
            parent.close()

    imported = Imported(image_pieces=lambda: listed.image_pieces(split), image_rows=listed.lines, cleanup=cleanup)
    pieces = _caption_pieces(_numbered(files), request, _StreamedLines(listed), parent, lang, split, imported)
    imported.caption_pieces = pieces
    return imported


def _import_whole_list(files: list[Path], request: ImportRequest, lang: str, split: str) -> Imported:
    """``import_lines`` for a list that names an image twice: the list held whole, each line's image numbered by
    its first appearance and its repeats counted (which caption of the image a line is)."""
    names = read_lines_array(request.image_list)
    if len(names) == 0:
        raise ArtifactError("is empty (expected one image name per line)", request.image_list)
    ids, namespace = image_list_ids(names)
    if namespace:
        log(f"import-data (lines): the image names are Flickr photo ids; image ids are {ids[0].as_py()}, ...")
    images = _ImageCodes(ids)
    parent = ParentJoin(request, split, len(names) * len(files)) if request.parent is not None else None
    imported = Imported(
        image_table=images.table(split, request.images.paths(names)), cleanup=parent.close if parent else None
    )
    imported.caption_pieces = _caption_pieces(_numbered(files), request, images, parent, lang, split, imported)
    return imported


def _caption_pieces(
    numbered: list[tuple[int, Path]],
    request: ImportRequest,
    images: _ImageCodes | _StreamedLines,
    parent: ParentJoin | None,
    lang: str,
    split: str,
    imported: Imported,
) -> Iterator[pa.Table]:
    """The caption rows of every file, a block of lines at a time (``iter_line_blocks``): what the import holds
    is a block of text and the image ids of its lines (with ``parent``, what its join holds)."""
    if parent is not None:
        yield from _translated_pieces(numbered, request, images, parent, lang, split, imported)
        return
    for k, path in numbered:
        for start, stop, image_ids, lines in _file_blocks(path, images, request):
            line_numbers = pc.cast(pa.array(np.arange(start, stop)), pa.string())
            caption_ids = pc.binary_join_element_wise(f"{split}-", line_numbers, f"-{lang}-{k}", "")
            yield imported.column_rows(image_ids, lang, lines, caption_ids, split)


def _translated_pieces(
    numbered: list[tuple[int, Path]],
    request: ImportRequest,
    images: _ImageCodes | _StreamedLines,
    parent: ParentJoin,
    lang: str,
    split: str,
    imported: Imported,
) -> Iterator[pa.Table]:
    """``_caption_pieces`` with ``--parent``: every line to the join first, then the rows in their order. A file
    refused (its line count, its bytes) is refused unless an earlier file has a line past its parent's captions,
    as when the files were matched one after the other."""
    refused = None
    try:
        for number, (_, path) in enumerate(numbered):
            parent.start_file(path)
            for start, stop, image_ids, lines in _file_blocks(path, images, request):
                parent.add(image_ids, images.occurrences(number, slice(start, stop)), lines)
    except MltkError as exc:
        refused = exc
    parent.join(before_file=refused is not None)
    if refused is not None:
        raise refused
    for image_ids, lines, caption_ids in parent.rows():
        yield imported.column_rows(image_ids, lang, lines, caption_ids, split)


def _file_blocks(
    path: Path, images: _ImageCodes | _StreamedLines, request: ImportRequest
) -> Iterator[tuple[int, int, pa.Array, pa.Array]]:
    """(first line, line after, image ids, text) of each block of ``path``; a file of another line count than
    the image list is refused (at the first block past the list's end, or at the end)."""
    count = images.lines
    blocks, start = iter_line_blocks(path), 0
    ids = images.ids_of_lines()
    for lines in blocks:
        stop = start + len(lines)
        if stop > count:
            require_aligned(range(stop + sum(len(rest) for rest in blocks)), count, path, request.image_list)
        yield start, stop, ids.take(stop - start), lines
        start = stop
    require_aligned(range(start), count, path, request.image_list)


class _StreamedLines:
    """The lines of a scanned list without repeats: line i is image i, listed once."""

    def __init__(self, listed: ImageList):
        self.listed, self.lines = listed, listed.lines

    def ids_of_lines(self) -> IdCursor:
        return IdCursor(self.listed)

    def occurrences(self, file_number: int, rows: slice) -> np.ndarray:
        """Each image is listed once: the ``file_number``-th file holds its caption number ``file_number``."""
        return np.full(rows.stop - rows.start, file_number, dtype=np.int64)


class _ImageCodes:
    """The image of each line as a number (its first appearance in the list), and how often each is listed."""

    def __init__(self, ids: pa.Array):
        self.ids, self.lines = ids, len(ids)
        encoded = pc.dictionary_encode(ids)
        self.codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)  # [lines]
        self.distinct = encoded.dictionary  # [images], in order of first appearance
        self.counts = np.bincount(self.codes, minlength=len(self.distinct))  # [images]
        order = np.argsort(self.codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        self.rank = np.empty(len(self.codes), dtype=np.int64)  # [lines]: earlier lines of the same image
        self.rank[order] = np.arange(len(self.codes)) - starts[self.codes[order]]

    def ids_of_lines(self) -> _Slices:
        return _Slices(self.ids)

    def occurrences(self, file_number: int, rows: slice) -> np.ndarray:
        """[lines of ``rows``]: which caption of its image each line of the ``file_number``-th file is (0-based):
        every earlier file held each image's lines once, then the earlier lines of this file."""
        return file_number * self.counts[self.codes[rows]] + self.rank[rows]

    def table(self, split: str, paths: pa.Array) -> pa.Table:
        """The images table: each image once, at its first line, with that line's path."""
        _, first = np.unique(self.codes, return_index=True)
        return pa.table(
            {
                "image_id": self.distinct.cast(pa.string()),
                "split": pa.nulls(len(first), pa.string()).fill_null(split),
                "path": paths.take(pa.array(first)),
            }
        )


class _Slices:
    """Consecutive slices of an array held whole (``IdCursor``'s interface)."""

    def __init__(self, ids: pa.Array):
        self.ids, self.start = ids, 0

    def take(self, count: int) -> pa.Array:
        part = self.ids.slice(self.start, count)
        self.start += len(part)
        return part


def _numbered(files: list[Path]) -> list[tuple[int, Path]]:
    """(caption number, file): the number in each name when every name has one, else the order given."""
    numbers = []
    for path in files:
        match = _NUMBERED.search(path.name)
        numbers.append(int(match.group(1) or match.group(3)) if match else None)
    if None in numbers or len(set(numbers)) != len(numbers):
        return list(enumerate(files))
    return sorted(zip(numbers, files))
