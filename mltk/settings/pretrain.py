"""``PretrainConfig``: the options of ``mltk pretrain`` (``mltk.train.pretrain``), kept apart from the stage so that
``mltk --help`` can generate its options from the fields without importing torch. ``FROM_RECIPE`` fields and
``loop`` come from ``recipe`` (default clip-pretrain, ``mltk.recipes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mltk.recipes import FROM_RECIPE
from mltk.settings.fields import BATCH_SIZE
from mltk.settings.loop import LoopConfig


@dataclass(frozen=True)
class PretrainConfig:
    images: Path  # images artifact (the synthetic world's images)
    captions: Path  # captions artifact; only ``lang == "en"`` rows are used
    out: Path
    model: str = "mltk-tiny"
    batch_size: int = field(default=FROM_RECIPE, metadata=BATCH_SIZE)
    device: str = "auto"
    precision: str = "auto"
    loop: LoopConfig | dict | None = None  # None, or a dict of the LoopConfig fields given: the recipe's
    recipe: str | None = None  # the recipe's name or file (None: clip-pretrain)
