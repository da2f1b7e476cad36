"""IGLUE xFlickr&CO (Bugliarello et al. 2022): ``annotations/LANG/SPLIT.jsonl`` with ``sentences``, ``id`` (an
int for COCO images, a string for Flickr30K ones) and ``img_path``; 1,000 Flickr30K and 1,000 COCO val2014 test
images, one caption per image and language, written per language (own caption_ids).

``annotations_machine-translate/LANG/...`` holds the English machine translation of each language's captions:
those rows are labelled ``en`` with the language they were translated from in ``source_lang``, and share the
caption_id of the caption they translate (``SPLIT-IMAGE-SOURCE-K``), so importing both folders (and
``mltk merge-captions``) pairs each caption with its translation. A single file outside a language folder needs
``--lang``. Image ids are canonical (``coco:...``, ``flickr30k:...``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.data.importers.common import Imported, ImportRequest, is_language_code, normalize_lang, read_json_lines
from mltk.data.importers.image_ids import COCO, FLICKR30K, canonical_image_id, coco_id


def is_machine_translated(path: Path) -> bool:
    return any(re.search(r"machine[-_]?transl", part, re.IGNORECASE) for part in path.parts)


def image_id_of(record: dict) -> str:
    """COCO images by numeric COCO id (``id`` is an int for them, and ``img_path`` a COCO file name), Flickr30K
    images by photo id."""
    by_path = canonical_image_id(str(record.get("img_path") or ""), None)
    if by_path.startswith(f"{COCO}:"):
        return by_path
    if isinstance(record["id"], int):
        return coco_id(record["id"])
    return canonical_image_id(str(record["id"]), FLICKR30K)


def _wanted(stem: str, split: str, machine_translated: bool) -> bool:
    """Human files are named exactly ``SPLIT.jsonl``; machine-translated ones may carry a suffix (``test-gmt``)."""
    return stem == split or (machine_translated and re.match(rf"{re.escape(split)}[-_.][a-z]", stem) is not None)


def import_xflickrco(src: Path, request: ImportRequest) -> Imported:
    """SRC is an annotations folder (``LANG/SPLIT.jsonl``; ``--split`` picks the files, default ``test``; the
    few-shot files are ``train_100`` and so on) or one such file."""
    wanted = list(request.splits) or ["test"]
    if src.is_file():
        files = [(_file_language(src, request.lang), src.stem, src)]
    else:
        files = [
            (_file_language(p, request.lang), split, p)
            for p in sorted(src.glob("*/*.jsonl"))
            for split in wanted
            if _wanted(p.stem, split, is_machine_translated(p))
        ]
        if not files:
            raise ArtifactError(
                f"no LANG/{{{','.join(wanted)}}}.jsonl files (expected the xFlickr&CO annotations folder)", src
            )
    imported = Imported()
    for lang, split, path in files:
        machine_translated = is_machine_translated(path)
        seen: Counter = Counter()
        for number, record in read_json_lines(path):
            if "id" not in record or "sentences" not in record:
                raise SchemaError(f"line {number} lacks 'id' or 'sentences'", path)
            image_id = image_id_of(record)
            imported.add_image(image_id, split, request.images.path(record.get("img_path") or f"{record['id']}.jpg"))
            sentences = record["sentences"] if isinstance(record["sentences"], list) else [record["sentences"]]
            for caption in sentences:
                k = seen[image_id]
                seen[image_id] += 1
                caption_id = f"{split}-{image_id}-{lang}-{k}"
                if machine_translated:
                    imported.add(image_id, "en", caption, caption_id, split, source_lang=lang)
                else:
                    imported.add(image_id, lang, caption, caption_id, split)
    return imported


def _file_language(path: Path, given: str | None) -> str:
    """The language of a file's captions (for a machine-translated file, the language translated from)."""
    if given:
        return normalize_lang(given)
    lang = normalize_lang(path.parent.name)
    if not is_language_code(lang):
        raise ConfigError(
            f"cannot tell the language from the folder name {path.parent.name!r} (expected "
            f"LANG/SPLIT.jsonl); give it with --lang",
            path,
        )
    return lang
