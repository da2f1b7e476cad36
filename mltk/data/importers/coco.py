"""COCO with Karpathy and Fei-Fei's splits (2015): ``dataset_coco.json`` (or ``dataset_flickr30k.json``), whose
``images[]`` hold ``filename``, optional ``filepath``, ``split``, ``cocoid`` and ``sentences[]`` with ``raw`` and
``sentid``. ``restval`` joins ``train``. Image ids are canonical (``coco:000000391895`` from ``cocoid`` or the
file name; ``flickr30k:N`` for the Flickr30K json), so the same picture matches XTD10 and xFlickr&CO."""

from __future__ import annotations

import json
from pathlib import Path

from mltk.core.errors import ArtifactError, SchemaError
from mltk.data.importers.common import Imported, ImportRequest, read_text
from mltk.data.importers.image_ids import COCO, FLICKR30K, canonical_image_id, coco_id

KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "val", "test": "test"}


def import_coco_karpathy(src: Path, request: ImportRequest) -> Imported:
    path = src / "dataset_coco.json" if src.is_dir() else src
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"is not valid JSON ({exc.msg} at line {exc.lineno})", path)
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise SchemaError("has no 'images' list (expected Karpathy's dataset_coco.json)", path)
    namespace = FLICKR30K if str(data.get("dataset", "")).startswith("flickr30k") else COCO
    imported = Imported()
    for number, image in enumerate(data["images"]):
        if "filename" not in image or "split" not in image:
            raise SchemaError(f"images[{number}] lacks 'filename' or 'split'", path)
        split = KARPATHY_SPLITS.get(image["split"], image["split"])
        if not request.wants(split):
            continue
        image_id = coco_id(image["cocoid"]) if "cocoid" in image else canonical_image_id(image["filename"], namespace)
        relative = "/".join(p for p in (image.get("filepath", ""), image["filename"]) if p)
        imported.add_image(image_id, split, request.images.path(relative))
        sentids = image.get("sentids", [])
        for k, sentence in enumerate(image.get("sentences", [])):
            sentid = sentence.get("sentid", sentids[k] if k < len(sentids) else f"{image_id}-{k}")
            imported.add(image_id, "en", sentence.get("raw"), str(sentid), split)
    return imported
