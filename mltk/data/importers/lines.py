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
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk import artifacts
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.runtime import log
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang, read_lines_array, require_aligned
from mltk.data.importers.image_ids import image_list_ids

_NUMBERED = re.compile(r"\.(\d+)\.[A-Za-z_-]{2,8}(\.gz)?$|\.(\d+)(\.gz)?$")


def import_lines(files: list[Path], request: ImportRequest) -> Imported:
    """Every file's lines in columns (Arrow compute, no Python per line): a corpus of millions of lines costs
    seconds."""
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
    names = read_lines_array(request.image_list)
    if len(names) == 0:
        raise ArtifactError("is empty (expected one image name per line)", request.image_list)
    ids, namespace = image_list_ids(names)
    if namespace:
        log(f"import-data (lines): the image names are Flickr photo ids; image ids are {ids[0].as_py()}, ...")
    images = _ImageCodes(ids)
    parent = _ParentCaptions(request, split, images) if request.parent is not None else None
    imported = Imported(image_table=images.table(split, request.images.paths(names)))
    line_numbers = pc.cast(pa.array(np.arange(len(names))), pa.string())
    for number, (k, path) in enumerate(_numbered(files)):
        lines = read_lines_array(path)
        require_aligned(lines, len(names), path, request.image_list)
        if parent is None:
            caption_ids = pc.binary_join_element_wise(f"{split}-", line_numbers, f"-{lang}-{k}", "")
        else:
            caption_ids = parent.caption_ids(images.occurrences(number), path, request)
        imported.add_columns(ids, lang, lines, caption_ids, split)
    return imported


class _ImageCodes:
    """The image of each line as a number (its first appearance in the list), and how often each is listed."""

    def __init__(self, ids: pa.Array):
        self.ids = ids
        encoded = pc.dictionary_encode(ids)
        self.codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)  # [lines]
        self.distinct = encoded.dictionary  # [images], in order of first appearance
        self.counts = np.bincount(self.codes, minlength=len(self.distinct))  # [images]
        order = np.argsort(self.codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        self.rank = np.empty(len(self.codes), dtype=np.int64)  # [lines]: earlier lines of the same image
        self.rank[order] = np.arange(len(self.codes)) - starts[self.codes[order]]

    def occurrences(self, file_number: int) -> np.ndarray:
        """[lines]: which caption of its image each line of the ``file_number``-th file is (0-based): every
        earlier file held each image's lines once, then the earlier lines of this file."""
        return file_number * self.counts[self.codes] + self.rank

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


class _ParentCaptions:
    """The caption_ids of the parent's captions in the translated language, by (image, occurrence)."""

    def __init__(self, request: ImportRequest, split: str, images: _ImageCodes):
        table = artifacts.load_captions(request.parent).select(["image_id", "lang", "caption_id", "split"])
        source_lang = normalize_lang(request.translation_of)
        rows = table.filter(pc.equal(table.column("lang"), source_lang))
        if rows.num_rows == 0:
            raise ConfigError(f"has no captions in {source_lang} (--translation-of)", request.parent)
        in_split = pc.equal(rows.column("split"), split)
        if pc.any(in_split).as_py():
            rows = rows.filter(in_split)
        code = pc.index_in(rows.column("image_id"), value_set=images.distinct.cast(pa.string()))
        known = rows.filter(pc.is_valid(code))  # captions of images the list does not name are never asked for
        codes = pc.drop_null(code).to_numpy().astype(np.int64)
        order = np.argsort(codes, kind="stable")
        self.per_image = np.bincount(codes, minlength=len(images.distinct))  # [images]
        starts = np.concatenate([[0], np.cumsum(self.per_image)[:-1]])
        self.starts, self.images = starts, images
        self.caption_id = known.column("caption_id").combine_chunks().take(pa.array(order))  # by (image, occurrence)

    def caption_ids(self, occurrence: np.ndarray, path: Path, request: ImportRequest) -> pa.Array:
        """caption_id of line i: the ``occurrence[i]``-th caption of its image; a line past the parent's captions of
        its image is refused, naming the first."""
        codes = self.images.codes
        have = self.per_image[codes]
        beyond = np.flatnonzero(occurrence >= have)
        if len(beyond):
            line = int(beyond[0])
            raise SchemaError(
                f"line {line + 1} (image {self.images.ids[line].as_py()}) translates caption "
                f"{occurrence[line] + 1} of that image in {request.translation_of}, but "
                f"{request.parent} has {have[line]} for it",
                path,
            )
        return self.caption_id.take(pa.array(self.starts[codes] + occurrence))


def _numbered(files: list[Path]) -> list[tuple[int, Path]]:
    """(caption number, file): the number in each name when every name has one, else the order given."""
    numbers = []
    for path in files:
        match = _NUMBERED.search(path.name)
        numbers.append(int(match.group(1) or match.group(3)) if match else None)
    if None in numbers or len(set(numbers)) != len(numbers):
        return list(enumerate(files))
    return sorted(zip(numbers, files))
