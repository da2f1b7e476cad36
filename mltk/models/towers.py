"""Where a text tower is built from a ``--model`` string: one registry, one function.

``load_text_base(model, pretrained, device)`` asks each loader of ``TEXT_TOWER_LOADERS`` in turn; a loader returns
a ``TextBase`` (the frozen tower, how to rebuild it, and the CLIP around it when there is one) for a model it reads
and ``None`` for one it does not, so loaders of different tower families never need to know about each other:

- ``hf_folder``: a local transformers / sentence-transformers folder (all-MiniLM-L6-v2): a text-only tower, with no
  image tower beside it;
- ``open_clip``: open_clip architectures, ``hf-hub:`` / ``local-dir:`` names and mltk ``open_clip`` checkpoints;
  the text tower is open_clip's own (``OpenClipTextTower``) or, for ``xlm-roberta-base-ViT-B-32``-style models, a
  Hugging Face encoder (``HFTextTower``).

A new kind of tower is one class implementing ``mltk.models.text.TextTower`` plus one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mltk import artifacts
from mltk.core.download import require_existing_if_local
from mltk.core.errors import ConfigError
from mltk.models.clip import HUB_PREFIXES, ClipBundle, has_hf_text_tower, is_hf_model_folder, load_clip
from mltk.models.text import OpenClipTextTower, TextTower


@dataclass
class TextBase:
    """A frozen text tower with what stages need beside it.

    ``spec`` ({"model", "pretrained"}) rebuilds it through ``load_text_base``; ``clip`` is the whole CLIP when the
    tower belongs to one (None for a text-only tower: no image tower, no learned temperature)."""

    tower: TextTower
    spec: dict = field(default_factory=dict)
    clip: ClipBundle | None = None

    @property
    def hugging_face(self) -> bool:
        """Whether the tower is a transformers encoder (a text-only folder, or an HF-tower CLIP): its own subword
        tokenizer is then the natural non-native tokenizer."""
        return self.clip is None or has_hf_text_tower(self.clip.model)

    def require_image_tower(self, stage: str) -> ClipBundle:
        """The CLIP, or a one-line refusal for stages that align text with images."""
        if self.clip is None:
            raise ConfigError(
                f"{stage} aligns text with images, but {self.spec.get('model')!r} is a text-only tower "
                f"(no image tower); use a CLIP"
            )
        return self.clip


def clip_text_tower(clip: ClipBundle, end_token_id: int | None = None) -> OpenClipTextTower:
    """The text tower of a loaded CLIP (sharing its parameters), with CLIP's tokenizer. ``end_token_id``: the id
    rows end at when the vocabulary differs from the CLIP tokenizer's (CLL-CLIP's grown vocabulary keeps it)."""
    return OpenClipTextTower(clip.model, clip.end_token_id if end_token_id is None else end_token_id, clip.tokenizer)


def base_from_clip(clip: ClipBundle) -> TextBase:
    """A loaded CLIP's text tower of either family (open_clip's own, or a Hugging Face encoder), sharing its
    parameters."""
    if has_hf_text_tower(clip.model):
        from mltk.models.hf_text import tower_from_open_clip

        tower = tower_from_open_clip(clip.model, clip.tokenizer)
    else:
        tower = clip_text_tower(clip)
    return TextBase(tower, dict(clip.spec), clip)


def _hf_folder(model: str, pretrained: str | None, device: torch.device) -> TextBase | None:
    """A local transformers / sentence-transformers folder: a text-only tower."""
    if not is_hf_model_folder(model):
        return None
    from mltk.models.hf_text import load_hf_text_tower

    if pretrained:
        raise ConfigError(f"--pretrained {pretrained!r} does not apply to a model folder (it holds its weights)", model)
    from mltk.models.hub import repo_id_of

    name = model if repo_id_of(model) else str(Path(model).resolve())  # a hub id is kept as the user gave it
    return TextBase(load_hf_text_tower(model, device), {"model": name, "pretrained": None})


def _open_clip(model: str, pretrained: str | None, device: torch.device) -> TextBase | None:
    """open_clip architectures (with a pretrained tag or weights file), hf-hub:/local-dir: names and mltk
    ``open_clip`` checkpoints."""
    import open_clip

    is_clip_artifact = artifacts.checkpoint_format(Path(model)) == "open_clip"
    if not (is_clip_artifact or model in open_clip.list_models() or model.startswith(HUB_PREFIXES)):
        return None
    return base_from_clip(load_clip(model, pretrained, device=device))


# name -> loader(model, pretrained, device) -> TextBase, or None when the model is not of that family
TowerLoader = Callable[[str, "str | None", torch.device], "TextBase | None"]
TEXT_TOWER_LOADERS: dict[str, TowerLoader] = {
    "hf_folder": _hf_folder,
    "open_clip": _open_clip,
}


def names_hf_tower(model: str) -> bool:
    """Whether ``model`` names a Hugging Face text tower, known without loading it: a transformers folder, or an
    open_clip architecture (or mltk CLIP checkpoint of one) whose text config names a transformers model.
    ``hf-hub:`` names are only known once downloaded: False."""
    import open_clip

    if is_hf_model_folder(model):
        return True
    architecture = model
    if artifacts.checkpoint_format(Path(model)) == "open_clip":
        architecture = artifacts.read_checkpoint_config(Path(model)).get("model", "")
    config = open_clip.get_model_config(architecture) or {}
    return bool(config.get("text_cfg", {}).get("hf_model_name"))


def load_text_base(model: str, pretrained: str | None = None, device: str | torch.device = "cpu") -> TextBase:
    """The frozen text tower ``model`` names (with its CLIP, if any), from the first loader that reads it."""
    require_existing_if_local(model, "model")
    for loader in TEXT_TOWER_LOADERS.values():
        base = loader(str(model), pretrained, torch.device(device))
        if base is not None:
            base.tower.requires_grad_(False)
            return base
    raise ConfigError(
        f"no text tower reads model {model!r}: not a transformers / sentence-transformers folder, an "
        f"open_clip architecture, an hf-hub:/local-dir: name nor an mltk CLIP checkpoint"
    )


def load_text_tower(model: str, pretrained: str | None = None, device: str | torch.device = "cpu") -> TextTower:
    """The text tower ``model`` names (see ``load_text_base``)."""
    return load_text_base(model, pretrained, device).tower
