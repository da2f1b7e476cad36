"""The scorer travels with the model: which similarity ``mltk evaluate`` ranks image-text pairs with.

AME validates and tests a model with the similarity it trained (the authors' ``evaluation.py``,
``measure=opt.measure``); cosine and order violation do not rank alike. A checkpoint written by
``train-ccrk --similarity order`` records it in its config (``train_ccrk.similarity``); ``evaluate`` then ranks by
order similarity unless ``--similarity`` says otherwise. The checkpoint is ``--model`` itself, or the one that
encoded a ``--texts`` artifact (its manifest's checkpoint input). Every other model ranks by cosine.

Every command that ranks follows the same rule: ``mltk classify`` ranks the classes by the similarity its model
trained with, and ``mltk index query`` (a FAISS inner-product index: cosine only) refuses a model, query
embeddings or an index whose vectors come from an order-trained checkpoint, rather than rank them by cosine.
"""

from __future__ import annotations

from pathlib import Path

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.scorers import SIMILARITIES

DEFAULT_SIMILARITY = "cosine"


def trained_similarity(checkpoint: str | Path | None) -> str | None:
    """``train_ccrk.similarity`` of a checkpoint artifact's config; None when it records none."""
    if checkpoint is None or artifacts.checkpoint_format(checkpoint) is None:
        return None
    recorded = artifacts.read_checkpoint_config(checkpoint, resolve=False).get("train_ccrk") or {}
    return recorded.get("similarity")


def encoding_checkpoint(texts: str | Path | None) -> Path | None:
    """The checkpoint among the inputs of a text embeddings artifact's manifest (None when there is none)."""
    if texts is None or not artifacts.is_artifact(texts):
        return None
    for entry in artifacts.read_manifest(texts).get("inputs", []):
        source = Path(entry.get("path", ""))
        if entry.get("kind") == "checkpoint" and source.exists():
            return source
    return None


def evaluation_similarity(requested: str | None, model: str | Path | None, texts: str | Path | None) -> str:
    """``requested`` when given, else the similarity the evaluated model trained with, else cosine."""
    if requested is not None:
        if requested not in SIMILARITIES:
            raise ConfigError(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {requested!r}")
        return requested
    checkpoint = model if model is not None and Path(model).exists() else encoding_checkpoint(texts)
    return trained_similarity(checkpoint) or DEFAULT_SIMILARITY


def checkpoints_behind(artifact: str | Path | None, depth: int = 3) -> list[Path]:
    """The checkpoints an artifact was made from, following its manifest's inputs (an index to its embeddings to
    the checkpoint that encoded them) up to ``depth`` steps; the artifact itself when it is a checkpoint."""
    if artifact is None or not Path(artifact).exists():
        return []
    if artifacts.checkpoint_format(artifact) is not None:
        return [Path(artifact)]
    if depth == 0 or not artifacts.is_artifact(artifact):
        return []
    found = []
    for entry in artifacts.read_manifest(artifact).get("inputs", []):
        found += checkpoints_behind(entry.get("path"), depth - 1) if isinstance(entry, dict) else []
    return found


def model_similarity(model: str | Path | None) -> str:
    """The similarity ``model`` (a checkpoint path, or an open_clip name) ranks by: what it trained with, else
    cosine."""
    return trained_similarity(model if model is not None and Path(model).exists() else None) or DEFAULT_SIMILARITY


def refuse_unless_cosine(command: str, sources: list[str | Path | None]) -> None:
    """Refuse a command that can rank only by cosine when one of ``sources`` (a model, embeddings, an index) is, or
    comes from, a checkpoint that trained with another similarity: its ranking would be silently wrong."""
    for source in sources:
        for checkpoint in checkpoints_behind(source):
            similarity = trained_similarity(checkpoint)
            if similarity not in (None, DEFAULT_SIMILARITY):
                shown = "" if Path(source).resolve() == checkpoint.resolve() else f" (from {source})"
                raise ConfigError(
                    f"trained with {similarity} similarity{shown}, and {command} ranks only by cosine; "
                    f"rank it with mltk evaluate (--similarity {similarity})",
                    checkpoint,
                )
