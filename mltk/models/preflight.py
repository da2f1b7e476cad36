"""Checks of a stage's inputs against each other, made before any model is loaded or any step is taken: a stage
that would fail (or silently mean nothing) after an hour of training fails in its first second instead.

- a trainable stage needs a base CLIP with weights: ``--model mltk-tiny`` without ``--pretrained`` is random
  weights (only ``mltk pretrain`` starts from those), and the checkpoint could not name its base anyway;
- image embeddings must come from the same CLIP as the text side: the embeddings manifest records the model and
  pretrained weights that ``encode-images`` used (with a fingerprint of every file among them).
"""

from __future__ import annotations

from pathlib import Path

from mltk import artifacts
from mltk.core.errors import ConfigError

WEIGHTED_SCHEMES = ("hf-hub:", "local-dir:")  # open_clip names whose weights come with the name


def base_of(model: str | None, pretrained: str | None, init: Path | None) -> tuple[str | None, str | None]:
    """The frozen base CLIP a stage works with: the one an ``init`` checkpoint (or a checkpoint ``model``) names,
    else ``model`` with ``pretrained``. A whole-CLIP checkpoint (``mltk pretrain``) is its own base."""
    for candidate in (init, model):
        if (
            candidate is not None
            and artifacts.is_artifact(candidate)
            and artifacts.read_manifest(candidate).get("kind") == "checkpoint"
        ):
            base = artifacts.read_checkpoint_config(candidate).get("base")
            if isinstance(base, dict) and base.get("model"):
                return str(base["model"]), base.get("pretrained")
            return str(candidate), pretrained if candidate == model else None
    return model, pretrained


def require_model(model: str | None, init: Path | None, stage: str, init_takes: str = "") -> None:
    """A training stage starts from a base model with weights or from a trained checkpoint: there is no default
    model (a random-weight architecture would be refused anyway), so leaving both out fails in one line."""
    if model is None and init is None:
        start = f" or --init CHECKPOINT ({init_takes})" if init_takes else ""
        raise ConfigError(
            f"{stage} needs --model BASE (a checkpoint from `mltk pretrain`, an open_clip name with "
            f"--pretrained, or a transformers / sentence-transformers folder){start}"
        )


def require_weights(model: str | None, pretrained: str | None, init: Path | None, stage: str) -> None:
    """Refuse a random-weight base CLIP in a training stage before any work (``pretrain`` is the stage for it). A
    transformers / sentence-transformers folder holds its weights."""
    from mltk.models.clip import is_hf_model_folder

    if (
        model is None
        or init is not None
        or pretrained
        or artifacts.is_artifact(model)
        or str(model).startswith(WEIGHTED_SCHEMES)
        or is_hf_model_folder(model)
    ):
        return
    raise ConfigError(
        f"--model {model} without --pretrained is a random-weight architecture; {stage} needs a base "
        "CLIP with weights: pass --pretrained TAG_OR_FILE, or a checkpoint from `mltk pretrain`"
    )


def check_image_embeddings(
    images: Path | None, model: str | None, pretrained: str | None, init: Path | None = None
) -> None:
    """Refuse image embeddings that ``encode-images`` made with another CLIP than the stage's base. Embeddings
    from elsewhere (no ``encode-images`` record) are taken as they are."""
    if images is None or (model is None and init is None):
        return
    manifest = artifacts.read_manifest(images, "embeddings")
    created = manifest.get("created_by") or {}
    recorded = created.get("config") if created.get("stage") == "encode-images" else None
    if not isinstance(recorded, dict) or not recorded.get("model"):
        return
    base_model, base_pretrained = base_of(model, pretrained, init)
    inputs = manifest.get("inputs") or []
    if _same(recorded.get("model"), base_model, inputs) and _same(recorded.get("pretrained"), base_pretrained, inputs):
        return
    made_by = recorded["model"] + (f" ({recorded['pretrained']})" if recorded.get("pretrained") else "")
    here = str(base_model) + (f" ({base_pretrained})" if base_pretrained else "")
    raise ConfigError(
        f"image embeddings were made by {made_by}, not by this stage's base CLIP {here}; encode the "
        "images with the same model",
        images,
    )


def _same(recorded: str | None, current: str | None, inputs: list[dict]) -> bool:
    """The same model or weights: equal names, or the same file or artifact (by resolved path, else by
    fingerprint: a relative path recorded from another folder still matches)."""
    if not recorded or not current:
        return not recorded and not current
    if not Path(current).exists():
        return recorded == current
    resolved = str(Path(current).resolve())
    paths = {entry.get("path") for entry in inputs}
    if resolved in paths or (Path(recorded).exists() and str(Path(recorded).resolve()) == resolved):
        return True
    fingerprints = {entry.get("fingerprint") for entry in inputs}
    return artifacts.fingerprint(current) in fingerprints
