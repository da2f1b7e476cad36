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
from collections import Counter, defaultdict
from pathlib import Path

from mltk import artifacts
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.runtime import log
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang, read_lines, require_aligned
from mltk.data.importers.image_ids import FLICKR30K, canonical_image_id, looks_like_flickr30k

_NUMBERED = re.compile(r"\.(\d+)\.[A-Za-z_-]{2,8}(\.gz)?$|\.(\d+)(\.gz)?$")


def import_lines(files: list[Path], request: ImportRequest) -> Imported:
    if not request.lang:
        raise ConfigError("import-data lines needs --lang (the language of the caption files)")
    if request.image_list is None:
        raise ConfigError("import-data lines needs --image-list (one image name per line, aligned with the files)")
    if (request.translation_of is None) != (request.parent is None):
        raise ConfigError("--translation-of and --parent go together (the language translated from and the "
                          "captions artifact that holds it)")
    lang = normalize_lang(request.lang)
    split = request.splits[0] if request.splits else "test"
    if len(request.splits) > 1:
        raise ConfigError(f"import-data lines writes one split, got --split {', '.join(request.splits)}")
    names = read_lines(request.image_list)
    if not names:
        raise ArtifactError("is empty (expected one image name per line)", request.image_list)
    namespace = FLICKR30K if looks_like_flickr30k(names) else None
    ids = [canonical_image_id(name, namespace) for name in names]
    if namespace:
        log(f"import-data (lines): the image names are Flickr photo ids; image ids are {ids[0]}, ...")
    parent_ids = _parent_caption_ids(request, split) if request.parent is not None else None
    imported = Imported()
    for image_id, name in zip(ids, names):
        imported.add_image(image_id, split, request.images.path(name))
    used: Counter = Counter()
    for k, path in _numbered(files):
        lines = read_lines(path)
        require_aligned(lines, len(names), path, request.image_list)
        for i, (image_id, caption) in enumerate(zip(ids, lines)):
            if parent_ids is None:
                caption_id = f"{split}-{i}-{lang}-{k}"
            else:
                caption_id = _parent_id(parent_ids, image_id, used[image_id], path, i, request)
                used[image_id] += 1
            imported.add(image_id, lang, caption, caption_id, split)
    return imported


def _numbered(files: list[Path]) -> list[tuple[int, Path]]:
    """(caption number, file): the number in each name when every name has one, else the order given."""
    numbers = []
    for path in files:
        match = _NUMBERED.search(path.name)
        numbers.append(int(match.group(1) or match.group(3)) if match else None)
    if None in numbers or len(set(numbers)) != len(numbers):
        return list(enumerate(files))
    return sorted(zip(numbers, files))


def _parent_caption_ids(request: ImportRequest, split: str) -> dict[str, list[str]]:
    """image_id -> caption_ids of the parent's captions in the translated language, in row order."""
    table = artifacts.load_captions(request.parent)
    source_lang = normalize_lang(request.translation_of)
    rows = [r for r in table.select(["image_id", "lang", "caption_id", "split"]).to_pylist()
            if r["lang"] == source_lang]
    if not rows:
        raise ConfigError(f"has no captions in {source_lang} (--translation-of)", request.parent)
    if any(r["split"] == split for r in rows):
        rows = [r for r in rows if r["split"] == split]
    by_image: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_image[row["image_id"]].append(row["caption_id"])
    return by_image


def _parent_id(parent_ids: dict[str, list[str]], image_id: str, occurrence: int, path: Path, line: int,
               request: ImportRequest) -> str:
    captions = parent_ids.get(image_id, [])
    if occurrence >= len(captions):
        raise SchemaError(f"line {line + 1} (image {image_id}) translates caption {occurrence + 1} of that image "
                          f"in {request.translation_of}, but {request.parent} has {len(captions)} for it", path)
    return captions[occurrence]
