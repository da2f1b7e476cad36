"""What every loss shares: ``LossOutput`` (the loss with its named terms), ``LogitScale`` (a temperature stored as
open_clip stores it), ``Temperature`` (one trained as T itself, clamped) and the shape checks of the [B, D] /
[B, K, D] / [B, K] conventions (``mltk.losses``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import torch
import torch.nn as nn

from mltk.core.errors import ConfigError

Scalar = float | torch.Tensor

MAX_LOGIT_SCALE = 100.0  # open_clip clamps exp(logit_scale) at 100 (temperature >= 0.01)


class LossOutput(NamedTuple):
    """What a loss's ``forward`` returns: the loss to back-propagate (a scalar) and its named, unweighted terms.

    The terms are the columns a training stage logs to its ``steps.csv`` (``mltk.train.step_log``); being a
    ``(loss, terms)`` pair it is also what a ``TrainTask.loss`` may return as it is.
    """

    loss: torch.Tensor
    terms: dict[str, torch.Tensor]

    def prefixed(self, prefix: str) -> LossOutput:
        """The same loss with every term renamed ``prefix + name`` (``nlt_mse``, ``replay_infonce``, ...)."""
        return LossOutput(self.loss, {f"{prefix}{name}": value for name, value in self.terms.items()})


class LogitScale(nn.Module):
    """A logit scale ``s = 1/T`` stored as ``log(1/T)`` (open_clip's parametrisation), clamped at ``s <= 100``.

    ``learnable=False`` keeps it as a buffer (MLA LE: T = 0.01, s = 100, never trained). The clamp is applied in
    ``forward`` (open_clip clamps the parameter in place after each step; both keep s <= 100, and here the
    gradient is simply zero beyond the bound). ``temperature_range=(low, high)`` clamps T to [low, high] instead
    (CCR_k's code: [0.001, 0.5], i.e. s in [2, 1000]).
    """

    def __init__(
        self,
        init_temperature: float,
        learnable: bool = True,
        max_scale: float = MAX_LOGIT_SCALE,
        temperature_range: tuple[float, float] | None = None,
    ):
        super().__init__()
        if not init_temperature > 0:
            raise ConfigError(f"temperature must be positive, got {init_temperature}")
        log_scale = torch.tensor(math.log(1.0 / init_temperature), dtype=torch.float32)
        if learnable:
            self.log_scale = nn.Parameter(log_scale)
        else:
            self.register_buffer("log_scale", log_scale)
        self.min_scale = 0.0
        self.max_scale = max_scale
        if temperature_range is not None:
            low, high = temperature_range
            if not 0 < low < high:
                raise ConfigError(f"a temperature range needs 0 < low < high, got {temperature_range}")
            self.min_scale, self.max_scale = 1.0 / high, 1.0 / low

    def forward(self) -> torch.Tensor:
        return self.log_scale.exp().clamp(min=self.min_scale, max=self.max_scale)  # 0-dim tensor

    @property
    def temperature(self) -> float:
        return 1.0 / float(self().detach())

    @property
    def parameter(self) -> torch.Tensor:
        """The tensor an optimizer trains (log 1/T)."""
        return self.log_scale

    def log_scale_value(self) -> torch.Tensor:
        """log(1/T) as a checkpoint stores it (0-dim, detached)."""
        return self.log_scale.detach()

    @torch.no_grad()
    def load_log_scale(self, value: torch.Tensor) -> None:
        self.log_scale.copy_(value)


class Temperature(nn.Module):
    """A learnable temperature trained as T itself (``logits / T``), clamped in place to ``[low, high]`` each time
    it is read, as CLL-CLIP's and CCR_k's authors write it (``nn.Parameter(0.07)``, ``clamp(0.001, 0.5)``): the
    clamp moves the parameter back onto the bound, so the optimizer starts the next step from there. Reading it
    returns the logit scale ``s = 1/T`` (0-dim), the same interface as ``LogitScale``.

    Why not log(1/T): a step of AdamW moves the parameter by about lr whatever its form, so training T directly
    changes the sharpness by lr/T per step (about 0.07% at lr 5e-5 and T 0.07) where log(1/T) changes it by lr;
    near the lower bound T moves much faster in relative terms. ``reset()`` returns T to its initial value (the
    authors rebuild the loss, and with it T, for every task).
    """

    def __init__(self, init_temperature: float, temperature_range: tuple[float, float]):
        super().__init__()
        low, high = temperature_range
        if not 0 < low < high:
            raise ConfigError(f"a temperature range needs 0 < low < high, got {temperature_range}")
        if not low <= init_temperature <= high:
            raise ConfigError(f"the initial temperature {init_temperature} lies outside its range [{low}, {high}]")
        self.init_temperature, self.low, self.high = float(init_temperature), float(low), float(high)
        self.value = nn.Parameter(torch.tensor(self.init_temperature, dtype=torch.float32))

    def forward(self) -> torch.Tensor:
        with torch.no_grad():
            self.value.clamp_(self.low, self.high)
        return 1.0 / self.value  # 0-dim logit scale

    @property
    def temperature(self) -> float:
        return float(self.value.detach().clamp(self.low, self.high))

    @property
    def parameter(self) -> torch.Tensor:
        """The tensor an optimizer trains (T)."""
        return self.value

    @torch.no_grad()
    def reset(self) -> None:
        self.value.fill_(self.init_temperature)

    def log_scale_value(self) -> torch.Tensor:
        """log(1/T) as a checkpoint stores it (0-dim, detached; the same key whatever the form)."""
        return -self.value.detach().clamp(self.low, self.high).log()

    @torch.no_grad()
    def load_log_scale(self, value: torch.Tensor) -> None:
        self.value.copy_((-value.to(self.value)).exp())


TEMPERATURE_FORMS = ("temperature", "log")  # T itself, clamped to a range (the authors'); log(1/T), s <= 100


def make_temperature(
    form: str, init_temperature: float, temperature_range: tuple[float, float]
) -> LogitScale | Temperature:
    """A learnable temperature in ``form``: ``temperature`` (``Temperature``: T clamped to ``temperature_range``)
    or ``log`` (``LogitScale``: log(1/T), T >= 0.01; the range is not used)."""
    if form not in TEMPERATURE_FORMS:
        raise ConfigError(f"the temperature form must be one of {', '.join(TEMPERATURE_FORMS)}, got {form!r}")
    return Temperature(init_temperature, temperature_range) if form == "temperature" else LogitScale(init_temperature)


def check_pair(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    """Raise unless ``a`` and ``b`` are both [B, D] of the same shape."""
    if a.dim() != 2 or a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must both be [B, D], got {tuple(a.shape)} and {tuple(b.shape)}")


def check_multilingual(image: torch.Tensor | None, text: torch.Tensor, text_mask: torch.Tensor | None) -> torch.Tensor:
    """Validate [B, D] / [B, K, D] / [B, K] shapes and return the mask (all True when None)."""
    if text.dim() != 3:
        raise ValueError(f"text features must be [B, K, D], got {tuple(text.shape)}")
    batch, slots, dim = text.shape
    if image is not None and (image.dim() != 2 or image.shape != (batch, dim)):
        raise ValueError(f"image features must be [B, D] = [{batch}, {dim}], got {tuple(image.shape)}")
    if text_mask is None:
        return torch.ones(batch, slots, dtype=torch.bool, device=text.device)
    if text_mask.shape != (batch, slots):
        raise ValueError(f"text_mask must be [B, K] = [{batch}, {slots}], got {tuple(text_mask.shape)}")
    return text_mask.to(device=text.device, dtype=torch.bool)


def zero_masked(text: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Replace masked slots of ``text [B, K, D]`` by zeros so that garbage (even NaN) can never leak, forward or
    backward (``torch.where`` passes zero gradient to the unselected branch)."""
    return torch.where(mask.unsqueeze(-1), text, torch.zeros((), dtype=text.dtype, device=text.device))


def zero_with_graph(tensor: torch.Tensor) -> torch.Tensor:
    """A 0 that keeps ``tensor``'s graph (a batch with nothing to compare still back-propagates)."""
    return (tensor * 0).sum()


def split_loss(result) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A task's ``loss(step)`` result as ``(loss, terms)``: a bare tensor, or ``(loss, {name: tensor})``."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping):
        return result[0], dict(result[1])
    return result, {}
