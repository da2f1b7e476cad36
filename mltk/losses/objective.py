"""train-ccrk's objective: the loss its recipe chooses (``config.loss``, one of ``CCRK_LOSSES``), built by the
registry from that loss's options (the recipe's ``losses`` section), on ``image [B, D]``, ``text [B, K, D]`` (both
L2-normalised) and ``text_mask [B, K]``. It holds the loss's learnable temperature, names its tensors for the
training state (``loss.logit_scale.value``, or ``loss.logit_scale.log_scale`` in the log form) and says the
optimizer group they train in.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.losses.base import LossOutput
from mltk.losses.options import CCRK_LOSSES
from mltk.losses.registry import LOSSES, build_loss, loss_options

LOSS_PREFIX = "loss."


class MultilingualObjective(nn.Module):
    """The loss ``name`` with its ``options`` over the K language slots ``languages``."""

    def __init__(self, name: str, options: Any, languages: list[str]):
        super().__init__()
        if name not in CCRK_LOSSES:
            raise ConfigError(f"--loss must be one of {', '.join(CCRK_LOSSES)}, got {name!r}")
        self.entry, self.options = LOSSES[name], loss_options(name, options)
        if self.entry.needs_english(self.options) and NATIVE_LANG not in languages:
            raise ConfigError(f"--loss {name} aligns every language with English: include {NATIVE_LANG} in --lang")
        self.name = name
        self.english = languages.index(NATIVE_LANG) if NATIVE_LANG in languages else None
        self.criterion = build_loss(name, self.options, english_index=self.english)

    def forward(
        self, image: torch.Tensor, text: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor | None = None
    ) -> LossOutput:
        """``teacher`` [B, D]: the frozen CLIP's English features, given when English trains (the English bridge
        then targets them); the other losses do not use it."""
        if not self.entry.images:
            return self.criterion(text, mask, teacher)
        return self.criterion(image, text, mask)

    @property
    def similarity(self) -> str:
        """The similarity the loss trains (and validation ranks) with: the hinge's, else cosine."""
        return getattr(self.options, "similarity", "cosine")

    def trainable(self) -> dict[str, nn.Parameter]:
        return {f"{LOSS_PREFIX}{name}": p for name, p in self.criterion.named_parameters() if p.requires_grad}

    def optimizer_group(self, lr: float, weight_decay: float) -> dict[str, float]:
        """The learning rate and decay of the loss's own tensors (a learnt temperature: ``temperature_lr_scale``
        x the lr with ``temperature_weight_decay``, as CCR_k's ``create_optimizer``)."""
        scale = getattr(self.options, "temperature_lr_scale", 1.0)
        return {"lr": lr * scale, "weight_decay": getattr(self.options, "temperature_weight_decay", weight_decay)}

    def temperature(self) -> float | None:
        scale = getattr(self.criterion, "logit_scale", None)
        return scale.temperature if scale is not None else None

    def load_trained(self, tensors: dict[str, torch.Tensor]) -> None:
        own = self.trainable()
        with torch.no_grad():
            for key, value in tensors.items():
                if key in own:
                    own[key].copy_(value)
