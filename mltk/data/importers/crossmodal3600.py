"""Crossmodal-3600 (Thapliyal et al. 2022): ``captions.jsonl``, one object per image with ``image/key`` and
per-language ``{"caption": [...]}``. Every image is a test image, its file ``KEY.jpg``; captions of different
languages are independent (their own caption_ids)."""

from __future__ import annotations

from pathlib import Path

from mltk.core.errors import SchemaError
from mltk.core.user_files import require_file
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang, read_json_lines


def import_crossmodal3600(src: Path, request: ImportRequest) -> Imported:
    path = src / "captions.jsonl" if src.is_dir() else src
    require_file(path, "Crossmodal-3600 captions.jsonl")
    imported = Imported()
    if not request.wants("test"):
        return imported
    for number, record in read_json_lines(path):
        key = record.get("image/key")
        if key is None:
            raise SchemaError(f"line {number} has no 'image/key'", path)
        image_id = str(key)
        imported.add_image(image_id, "test", request.images.path(f"{image_id}.jpg"))
        for code, value in record.items():
            if not isinstance(value, dict) or "caption" not in value:
                continue
            lang = normalize_lang(code)
            captions = value["caption"] if isinstance(value["caption"], list) else [value["caption"]]
            for k, caption in enumerate(captions):
                imported.add(image_id, lang, caption, f"{image_id}-{lang}-{k}", "test")
    return imported
