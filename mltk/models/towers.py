"""Where a text tower is built from a ``--model`` string: one registry, one function.

``load_text_tower(model, pretrained, device)`` asks each loader of ``TEXT_TOWER_LOADERS`` in turn; a loader
returns a ``TextTower`` for a model it reads and ``None`` for one it does not, so loaders of different tower
families (open_clip's CLIP here; Hugging Face encoders register theirs) never need to know about each other.
A new kind of tower is one class implementing ``mltk.models.text.TextTower`` plus one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from mltk import artifacts
from mltk.errors import ConfigError
from mltk.models.clip import ClipBundle, load_clip
from mltk.models.text import OpenClipTextTower, TextTower

TowerLoader = Callable[[str, "str | None", torch.device], "TextTower | None"]


def clip_text_tower(clip: ClipBundle, end_token_id: int | None = None) -> OpenClipTextTower:
    """The text tower of a loaded CLIP (sharing its parameters), with CLIP's tokenizer. ``end_token_id``: the id
    rows end at when the vocabulary differs from the CLIP tokenizer's (CLL-CLIP's grown vocabulary keeps it)."""
    return OpenClipTextTower(clip.model, clip.end_token_id if end_token_id is None else end_token_id, clip.tokenizer)


def _open_clip_tower(model: str, pretrained: str | None, device: torch.device) -> TextTower | None:
    """open_clip architectures (with a pretrained tag or weights file) and mltk ``open_clip`` checkpoints."""
    import open_clip

    is_clip_artifact = artifacts.checkpoint_format(Path(model)) == "open_clip"
    if not is_clip_artifact and model not in open_clip.list_models():
        return None
    return clip_text_tower(load_clip(model, pretrained, device=device))


# name -> loader(model, pretrained, device) -> TextTower, or None when the model is not of that family
TEXT_TOWER_LOADERS: dict[str, TowerLoader] = {
    "open_clip": _open_clip_tower,
}


def load_text_tower(model: str, pretrained: str | None = None, device: str | torch.device = "cpu") -> TextTower:
    """The text tower ``model`` names, from the first loader of ``TEXT_TOWER_LOADERS`` that reads it."""
    for loader in TEXT_TOWER_LOADERS.values():
        tower = loader(str(model), pretrained, torch.device(device))
        if tower is not None:
            return tower
    raise ConfigError(f"no text tower reads model {model!r} (tower families: {', '.join(TEXT_TOWER_LOADERS)})")
