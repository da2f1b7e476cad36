"""Continual language learning (CLL-CLIP) pieces: the expandable-table text encoder and the baselines.

``--method`` of ``mltk train-continual`` picks one of ``METHODS``; every method trains the token-embedding table
(with or without TEIR) and adds its own mechanism through the hooks of ``mltk.continual.base.ContinualMethod``.
"""

from __future__ import annotations

from mltk.continual.adapters import LanguageAdapters
from mltk.continual.base import ContinualMethod, MethodOptions
from mltk.continual.ewc import OnlineEWC
from mltk.continual.lora import LoraMethod
from mltk.continual.prompts import CodaPrompt, DualPrompt, PTuning
from mltk.continual.replay import DarkExperienceReplay, ExperienceReplay
from mltk.errors import ConfigError
from mltk.models.towers import clip_text_tower

METHODS: dict[str, type[ContinualMethod]] = {
    cls.name: cls for cls in (ContinualMethod, OnlineEWC, ExperienceReplay, DarkExperienceReplay, LanguageAdapters,
                              LoraMethod, PTuning, DualPrompt, CodaPrompt)
}


def make_method(name: str, options: MethodOptions, clip, seed: int = 0) -> ContinualMethod:
    """A fresh method for the text tower of ``clip`` (a ``ClipBundle``)."""
    if name not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}, got {name!r}")
    tower = clip_text_tower(clip)
    method = METHODS[name](options, tower.width, tower.num_blocks, tower.output_dim, seed)
    return method.to(clip.model.positional_embedding.device)


__all__ = ["METHODS", "ContinualMethod", "MethodOptions", "make_method"]
