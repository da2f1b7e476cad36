"""Conceptual Captions TSV (Sharma et al. 2018), ``caption<TAB>url`` per line without a header, and files in the
same layout whose second column is a local path (CC-style translations of COCO, for instance).

The split comes from the file name (``*train*`` -> train, ``*valid*``/``*val*`` -> val), train otherwise. The
image id is canonical when the path names a COCO or Flickr30K file (so such a training set can be checked for
overlap with XTD10), else the 0-based row number. Every row is checked: the first column must read as text and
the second as a path or URL; a file with its columns the other way round is refused, not imported as ids.
"""

from __future__ import annotations

import re
from pathlib import Path

from mltk.core.errors import SchemaError
from mltk.core.user_files import require_file
from mltk.data.importers.common import Imported, ImportRequest, read_lines
from mltk.data.importers.image_ids import canonical_image_id

IMAGE_SUFFIX = re.compile(r"\.(jpe?g|png|gif|bmp|webp|tiff?)$", re.IGNORECASE)


def looks_like_location(value: str) -> bool:
    """A URL, or a path with a folder or an image file extension."""
    value = value.strip()
    return (
        bool(value)
        and " " not in value
        and ("://" in value or "/" in value or "\\" in value or IMAGE_SUFFIX.search(value.split("?")[0]) is not None)
    )


def looks_like_caption(value: str) -> bool:
    """Some letters, and not a single token that reads as a URL or path."""
    value = value.strip()
    return any(ch.isalpha() for ch in value) and not looks_like_location(value)


def import_cc(src: Path, request: ImportRequest) -> Imported:
    require_file(src, "a Conceptual Captions TSV, caption<TAB>url per line")
    name = src.name.lower()
    split = "val" if "valid" in name or re.search(r"(^|[^a-z])val([^a-z]|$)", name) else "train"
    imported = Imported()
    if not request.wants(split):
        return imported
    for row, line in enumerate(read_lines(src)):
        fields = line.split("\t")
        if len(fields) < 2:
            raise SchemaError(f"line {row + 1} has no tab (expected caption<TAB>url)", src)
        caption, location = fields[0], fields[1].strip()
        _check_row(caption, location, row + 1, src)
        image_id = canonical_image_id(location.split("?")[0])
        if ":" not in image_id:  # a URL or a custom file, not a COCO picture: the row is the image
            image_id = str(row)
        if caption.strip():  # an image whose only caption is empty is of no use; the caption is counted below
            imported.add_image(image_id, split, request.images.path(location))
        imported.add(image_id, "en", caption, f"cc-{row}", split)
    return imported


def _check_row(caption: str, location: str, line: int, src: Path) -> None:
    if not looks_like_location(location):
        swapped = looks_like_location(caption) and looks_like_caption(location)
        hint = "the columns look swapped (url<TAB>caption)" if swapped else "it does not look like a path or URL"
        raise SchemaError(
            f"line {line}: second column {location[:60]!r} should be the image path or URL, but "
            f"{hint}; expected caption<TAB>url",
            src,
        )
    if caption.strip() and not looks_like_caption(caption):
        raise SchemaError(
            f"line {line}: first column {caption[:60]!r} should be a caption but does not read as "
            f"text; expected caption<TAB>url",
            src,
        )
