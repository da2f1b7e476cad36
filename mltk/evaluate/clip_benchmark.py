"""``mltk evaluate --format clip-benchmark``: CLIP_benchmark's result JSON, one file per language, in a
``clip_benchmark/`` folder of the metrics artifact that holds nothing else, so that CLIP_benchmark's own reader
(``clip_benchmark build ARTIFACT/clip_benchmark``, which loads every ``.json`` of a folder and reads ``metrics``,
``model`` and ``pretrained`` of each) turns them into its CSV. The artifact's own ``manifest.json`` and
``metrics.json`` stay outside that folder: the reader would fail on them (``KeyError: 'metrics'``).

``model`` and ``pretrained`` are always strings (the reader joins them with a space): the model is ``--model``,
else the model recorded in the text embeddings, else the image encoder's; ``pretrained`` is the open_clip tag or
weights file when there is one, else ``""`` (an mltk checkpoint is named by its path in ``model``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.evaluate.guards import text_embeddings_model
from mltk.present import report

FOLDER = "clip_benchmark"
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def clip_benchmark_files(result: dict, config: Any, image_manifest: dict) -> dict[str, bytes]:
    """``{"clip_benchmark/LANG.json": bytes}`` for every evaluated language."""
    names = clip_benchmark_names(config, image_manifest)
    files = {}
    for lang, record in report.clip_benchmark_records(result, **names).items():
        if not SAFE_NAME.fullmatch(lang):
            raise ConfigError(
                f"language {lang!r} cannot name a file of --format clip-benchmark (letters, digits, '_', '-', '.')",
                config.captions or config.texts,
            )
        files[f"{FOLDER}/{lang}.json"] = report.dumps(record)
    return files


def clip_benchmark_names(config: Any, image_manifest: dict) -> dict[str, str]:
    """``dataset``, ``model`` and ``pretrained`` as CLIP_benchmark writes them (all strings): the dataset from
    ``--dataset`` (or the folder of the captions/texts), the model and weights as the module docstring says."""
    spec = image_manifest.get("model") or {}
    spec = spec if isinstance(spec, dict) else {"name": str(spec)}
    source = Path(config.captions or config.texts)
    dataset = config.dataset or (source.parent.name if source.name in ("captions", "texts") else source.name)
    model, pretrained = config.model, config.pretrained
    if model is None and config.texts is not None:
        model, pretrained = text_embeddings_model(config.texts)
    if model is None:
        model, pretrained = spec.get("name") or spec.get("model"), spec.get("pretrained")
    return {"dataset": str(dataset), "model": str(model or "unknown"), "pretrained": str(pretrained or "")}
