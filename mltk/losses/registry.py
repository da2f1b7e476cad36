"""The losses a training command can choose by name (``train-ccrk --loss``), as a registry: each entry names its
class and the settings it reads, so a new loss is one entry here (as ``mltk.cll_clip.METHODS`` is for the
continual methods) and no stage holds an if-chain over loss names.

``build_loss(name, settings)`` takes the settings as a mapping (a stage's config fields: ``temperature``,
``beta``, ...; their values come from the recipe) and passes each entry only the ones it declares, under its
constructor's own argument names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from mltk.core.errors import ConfigError
from mltk.losses.contrastive import OneToKLoss, OneToOneLoss
from mltk.losses.distill import EnglishBridgeLoss
from mltk.losses.ranking import MLMMELoss, PairwiseRankingLoss


@dataclass(frozen=True)
class LossEntry:
    """A loss class and its settings: ``arguments`` maps each constructor argument to the setting it takes."""

    cls: type[nn.Module]
    arguments: Mapping[str, str]
    description: str
    contrastive: bool = False  # holds a (learnable) temperature
    needs_english: bool = False  # aligns every language with English


CONTRASTIVE_ARGUMENTS = {
    "init_temperature": "temperature",
    "learnable": "learn_temperature",
    "temperature_range": "temperature_range",
}
LOSSES: dict[str, LossEntry] = {
    "one-to-k": LossEntry(
        OneToKLoss, {**CONTRASTIVE_ARGUMENTS, "weighting": "weighting"}, "1-to-K contrastive (CCR_k)", contrastive=True
    ),
    "one-to-one": LossEntry(
        OneToOneLoss, CONTRASTIVE_ARGUMENTS, "1-to-1 contrastive, one sampled language per image", contrastive=True
    ),
    "english-bridge": LossEntry(
        EnglishBridgeLoss, {"english_index": "english_index"}, "MSE of each language to English", needs_english=True
    ),
    "hinge": LossEntry(
        PairwiseRankingLoss,
        {"margin": "margin", "similarity": "similarity", "max_violation": "max_violation"},
        "bidirectional pairwise ranking hinge",
    ),
    "mlmme": LossEntry(
        MLMMELoss,
        {
            "margin": "margin",
            "beta": "beta",
            "english_index": "english_index",
            "form": "mlmme_form",
            "max_violation": "max_violation",
        },
        "MLMME: image-sentence and sentence-sentence ranking",
        needs_english=True,
    ),
}


def build_loss(name: str, settings: Mapping[str, Any]) -> nn.Module:
    """The loss ``name`` built from ``settings`` (the ones its entry declares)."""
    if name not in LOSSES:
        raise ConfigError(f"--loss must be one of {', '.join(LOSSES)}, got {name!r}")
    entry = LOSSES[name]
    return entry.cls(**{argument: settings[setting] for argument, setting in entry.arguments.items()})
