"""Device, precision, seeding and stderr logging, handled in one place for every stage."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mltk.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

# All human-facing output goes to stderr; stdout carries only the artifact path.
console = Console(stderr=True, highlight=False)


def log(message: str) -> None:
    console.print(message, markup=False)


@dataclass(frozen=True)
class Runtime:
    """Where and how tensors are computed: ``device`` plus the autocast dtype (``None`` means fp32)."""

    device: torch.device
    autocast_dtype: torch.dtype | None

    @property
    def precision(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast_dtype]

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast context for forward passes (a no-op in fp32)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)


def resolve_runtime(device: str = "auto", precision: str = "auto") -> Runtime:
    """``auto`` device: CUDA when available. ``auto`` precision: bf16 autocast on CUDA (fp16 where bf16 is not
    supported), fp32 on the CPU; ``bf16`` on the CPU is autocast on request; ``fp16`` needs CUDA."""
    if device not in DEVICES:
        raise ConfigError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for but no CUDA device is available")
    dev = torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
    if precision == "auto":
        if dev.type == "cuda":
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            dtype = None
    elif precision == "fp32":
        dtype = None
    elif precision == "bf16":
        dtype = torch.bfloat16
    else:
        if dev.type != "cuda":
            raise ConfigError("--precision fp16 needs a CUDA device; use bf16 on the CPU")
        dtype = torch.float16
    return Runtime(dev, dtype)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


T = TypeVar("T")


def progress_bar() -> Progress:
    """A rich progress bar on stderr (rich falls back to plain output when stderr is not a terminal)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("MLTK_PROGRESS") != "1",
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar on stderr when it is a terminal."""
    if not console.is_terminal:
        yield from items
        return
    with progress_bar() as progress:
        task = progress.add_task(description, total=total if total is not None else _len_or_none(items))
        for item in items:
            yield item
            progress.advance(task)


def _len_or_none(items: Iterable) -> int | None:
    try:
        return len(items)  # type: ignore[arg-type]
    except TypeError:
        return None
