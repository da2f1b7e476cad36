"""The continual methods by name: ``--method`` of ``mltk train-continual`` picks one of ``METHODS``; every method
trains the token-embedding table (with or without TEIR) and adds its own mechanism through the hooks of
``mltk.cll_clip.base.ContinualMethod``. Its options are the ``Options`` dataclass of ``mltk.cll_clip.options``,
their values the recipe's (``mltk.settings.methods``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mltk.cll_clip.adapters import LanguageAdapters
from mltk.cll_clip.base import ContinualMethod
from mltk.cll_clip.ewc import OnlineEWC
from mltk.cll_clip.lora import LoraMethod
from mltk.cll_clip.options import options_from_mapping
from mltk.cll_clip.prompts import CodaPrompt, DualPrompt, PTuning
from mltk.cll_clip.replay import DarkExperienceReplay, ExperienceReplay
from mltk.core.errors import ConfigError
from mltk.models.towers import clip_text_tower

METHODS: dict[str, type[ContinualMethod]] = {
    cls.name: cls
    for cls in (
        ContinualMethod,
        OnlineEWC,
        ExperienceReplay,
        DarkExperienceReplay,
        LanguageAdapters,
        LoraMethod,
        PTuning,
        DualPrompt,
        CodaPrompt,
    )
}


def method_class(name: str) -> type[ContinualMethod]:
    if name not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}, got {name!r}")
    return METHODS[name]


def method_options(name: str, options: Any) -> Any:
    """The options dataclass of method ``name``: a mapping naming every option (a checkpoint's recorded options,
    or the recipe's ``methods`` entry) or already the dataclass (checked to be the method's)."""
    options_class = method_class(name).Options
    if isinstance(options, options_class):
        return options
    if isinstance(options, Mapping):
        return options_from_mapping(name, options)
    raise ConfigError(f"method {name} takes {options_class.__name__}, got {type(options).__name__}")


def make_method(name: str, options: Any, base, seed: int = 0) -> ContinualMethod:
    """A fresh method for a text tower (a ``TextTower``) or for the text tower of ``base``, a loaded CLIP
    (``ClipBundle``); ``options`` as ``method_options``."""
    options = method_options(name, options)
    tower = base if hasattr(base, "num_blocks") else clip_text_tower(base)
    method = METHODS[name](options, tower.width, tower.num_blocks, tower.output_dim, seed)
    return method.to(tower.token_embedding.weight.device)
