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
(its repeats are numbered across the list). With ``--parent`` the parent's caption_ids of the translated language
are held (read a batch at a time, about 60 bytes per caption), since any line may ask for any of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk.artifacts import key_hashes, schema
from mltk.artifacts.caption_stream import captions_file, iter_caption_batches
from mltk.artifacts.tables import as_string_columns, require_columns
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.names import check_names
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
        parent = _ParentCaptions(request, split) if request.parent is not None else None
    except BaseException:
        listed.close()
        raise
    imported = Imported(image_pieces=lambda: listed.image_pieces(split), image_rows=listed.lines, cleanup=listed.close)
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
    parent = _ParentCaptions(request, split) if request.parent is not None else None
    imported = Imported(image_table=images.table(split, request.images.paths(names)))
    imported.caption_pieces = _caption_pieces(_numbered(files), request, images, parent, lang, split, imported)
    return imported


def _caption_pieces(
    numbered: list[tuple[int, Path]],
    request: ImportRequest,
    images: _ImageCodes | _StreamedLines,
    parent: _ParentCaptions | None,
    lang: str,
    split: str,
    imported: Imported,
) -> Iterator[pa.Table]:
    """The caption rows of every file, a block of lines at a time (``iter_line_blocks``): what the import holds
    is a block of text and the image ids of its lines."""
    count = images.lines
    for number, (k, path) in enumerate(numbered):
        blocks, start = iter_line_blocks(path), 0
        ids = images.ids_of_lines()
        for lines in blocks:
            stop = start + len(lines)
            if stop > count:
                require_aligned(range(stop + sum(len(rest) for rest in blocks)), count, path, request.image_list)
            image_ids = ids.take(stop - start)
            if parent is None:
                line_numbers = pc.cast(pa.array(np.arange(start, stop)), pa.string())
                caption_ids = pc.binary_join_element_wise(f"{split}-", line_numbers, f"-{lang}-{k}", "")
            else:
                try:
                    occurrence = images.occurrences(number, slice(start, stop))
                    caption_ids = parent.caption_ids(image_ids, occurrence, start, path, request)
                except SchemaError:  # a file that is also too short is refused for that first, as before
                    require_aligned(range(stop + sum(len(rest) for rest in blocks)), count, path, request.image_list)
                    raise
            yield imported.column_rows(image_ids, lang, lines, caption_ids, split)
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


class _ParentCaptions:
    """The caption_ids of the parent's captions in the translated language, by (image, occurrence): the parent's
    rows grouped by image (on 64-bit hashes of the ids, a match confirmed on the strings; by Arrow's exact lookup
    when two of the parent's ids share a hash), each image's rows in the parent's order."""

    def __init__(self, request: ImportRequest, split: str):
        rows = _parent_rows(request, split)
        image_ids = rows.column("image_id").combine_chunks()
        hashes = key_hashes.string_hashes(image_ids)
        order = np.argsort(hashes, kind="stable")  # the rows by image, each image's rows in the parent's order
        ordered = hashes[order]
        self.starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))  # [images]
        self.keys = ordered[self.starts]  # [images], sorted
        self.distinct = None  # the parent's ids when their hashes collide (then looked up exactly)
        if _hashes_collide(image_ids.take(pa.array(order)), self.starts):
            self.distinct = pc.unique(image_ids)
            group = pc.index_in(image_ids, value_set=self.distinct).to_numpy().astype(np.int64)
            order = np.argsort(group, kind="stable")
            self.starts = np.flatnonzero(np.concatenate([[True], np.diff(group[order]) != 0]))
        self.per_image = np.diff(np.append(self.starts, len(order)))  # [images]
        self.image_id = image_ids.take(pa.array(order[self.starts]))  # [images]: the id of each group
        self.caption_id = rows.column("caption_id").combine_chunks().take(pa.array(order))  # by (image, occurrence)

    def _groups(self, ids: pa.Array) -> np.ndarray:
        """[lines]: the parent's image of each id (-1 where the parent has none)."""
        if self.distinct is not None:
            return pc.fill_null(pc.index_in(ids, value_set=self.distinct), -1).to_numpy().astype(np.int64)
        hashes = key_hashes.string_hashes(ids)
        group = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        same = (self.keys[group] == hashes) & pc.equal(self.image_id.take(pa.array(group)), ids).to_numpy(
            zero_copy_only=False
        )
        return np.where(same, group, -1)

    def caption_ids(
        self, ids: pa.Array, occurrence: np.ndarray, first_line: int, path: Path, request: ImportRequest
    ) -> pa.Array:
        """caption_id of each line (image ``ids``, from line ``first_line``): the ``occurrence``-th caption of its
        image; a line past the parent's captions of its image is refused, naming the first."""
        group = self._groups(ids)
        have = np.where(group >= 0, self.per_image[np.maximum(group, 0)], 0)
        beyond = np.flatnonzero(occurrence >= have)
        if len(beyond):
            line = int(beyond[0])
            raise SchemaError(
                f"line {first_line + line + 1} (image {ids[line].as_py()}) translates caption "
                f"{occurrence[line] + 1} of that image in {request.translation_of}, but "
                f"{request.parent} has {have[line]} for it",
                path,
            )
        return self.caption_id.take(pa.array(self.starts[group] + occurrence))


def _hashes_collide(ordered: pa.Array, starts: np.ndarray) -> bool:
    """Whether two rows of one hash group (``ordered``: the ids by hash, ``starts``: where each group begins) hold
    different ids."""
    if len(ordered) < 2:
        return False
    same = pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1)).to_numpy(zero_copy_only=False)
    inside = np.ones(len(ordered) - 1, dtype=bool)
    inside[starts[1:] - 1] = False  # a row that starts a group may differ from the one before
    return bool((~same & inside).any())


def _parent_rows(request: ImportRequest, split: str) -> pa.Table:
    """image_id and caption_id of the parent's captions in the translated language (those of ``split`` when it
    has some there), read a batch at a time with the parent's column checks."""
    source_lang = normalize_lang(request.translation_of)
    in_lang, in_split = [], []
    columns = ["image_id", "lang", "caption_id", "split"]
    try:
        names = pq.ParquetFile(captions_file(request.parent)).schema_arrow.names
    except (pa.ArrowInvalid, OSError):
        names = columns  # the read below names the file and the problem
    require_columns(
        pa.schema([(name, pa.null()) for name in names]).empty_table(), schema.CAPTION_COLUMNS, request.parent
    )
    for batch in iter_caption_batches(request.parent, columns):
        batch = as_string_columns(batch, columns, request.parent)
        check_names(pc.unique(batch.column("lang")).to_pylist(), "caption lang", request.parent)
        rows = batch.filter(pc.equal(batch.column("lang"), source_lang)).select(["image_id", "caption_id", "split"])
        chosen = pc.equal(rows.column("split"), split)
        in_split.append(rows.filter(chosen).select(["image_id", "caption_id"]))
        if not any(part.num_rows for part in in_split):
            in_lang.append(rows.select(["image_id", "caption_id"]))
    if not any(part.num_rows for part in in_lang + in_split):
        raise ConfigError(f"has no captions in {source_lang} (--translation-of)", request.parent)
    chosen = in_split if any(part.num_rows for part in in_split) else in_lang
    schema_ = pa.schema([("image_id", pa.string()), ("caption_id", pa.string())])
    return pa.concat_tables([part.cast(schema_) for part in chosen]) if chosen else schema_.empty_table()


def _numbered(files: list[Path]) -> list[tuple[int, Path]]:
    """(caption number, file): the number in each name when every name has one, else the order given."""
    numbers = []
    for path in files:
        match = _NUMBERED.search(path.name)
        numbers.append(int(match.group(1) or match.group(3)) if match else None)
    if None in numbers or len(set(numbers)) != len(numbers):
        return list(enumerate(files))
    return sorted(zip(numbers, files))
