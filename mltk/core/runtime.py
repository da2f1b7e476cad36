"""Device, precision, seeding and stderr logging, handled in one place for every stage.

torch is imported where a runtime is resolved or used, not when this module is: logging and progress are needed by
paths that never touch torch (scoring precomputed embeddings), where importing it would cost seconds.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mltk.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

# All human-facing output goes to stderr; stdout carries only the artifact path.
console = Console(stderr=True, highlight=False)


def log(message: str) -> None:
    """One log line on stderr. Off a terminal (a log file, a pipe) rich would wrap at 80 columns and cut paths in
    two; there a line stays one line."""
    console.print(message, markup=False, soft_wrap=not console.is_terminal)


@dataclass(frozen=True)
class Runtime:
    """Where and how tensors are computed: ``device`` plus the autocast dtype (``None`` means fp32), and why that
    precision (what ``--precision`` asked for, or what ``auto`` found on this machine)."""

    device: torch.device
    autocast_dtype: torch.dtype | None
    reason: str = ""

    @property
    def precision(self) -> str:
        import torch

        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast_dtype]

    def describe(self) -> dict[str, str]:
        """What the manifest records: the device and precision a run used, and why that precision."""
        return {"device": self.device.type, "precision": self.precision, "reason": self.reason}

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast context for forward passes (a no-op in fp32)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)


def check_runtime_options(device: str, precision: str) -> None:
    """``--device`` and ``--precision`` are among the known values (asked without importing torch)."""
    if device not in DEVICES:
        raise ConfigError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


def cuda_visible() -> bool:
    """Whether a GPU could be there for torch, asked without importing torch: an NVIDIA (or ROCm) driver's device
    files, and ``CUDA_VISIBLE_DEVICES`` not emptied. ``--device auto`` uses it to keep the CPU path torch-free."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    return any(os.path.exists(path) for path in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")) or os.path.isdir(
        "/proc/driver/nvidia"
    )


def resolve_array_device(device: str = "auto", precision: str = "auto") -> str:
    """The device type (``"cpu"`` or ``"cuda"``) of work on arrays alone, such as ranking precomputed embeddings:
    the options checked as ``resolve_runtime`` checks them, and the CPU answered without importing torch where
    ``--device cpu`` says so or ``auto`` finds no GPU (there numpy does the work and torch is never needed)."""
    check_runtime_options(device, precision)
    if device == "cpu" or (device == "auto" and not cuda_visible()):
        return "cpu"
    return resolve_runtime(device, precision).device.type


def resolve_runtime(device: str = "auto", precision: str = "auto", cpu_bf16: bool = False) -> Runtime:
    """``auto`` device: CUDA when available. ``auto`` precision: bf16 autocast on CUDA (fp16 where bf16 is not
    supported); on the CPU fp32, or bf16 autocast when ``cpu_bf16`` (the stage's recipe measured it faster at the
    same quality) and the CPU multiplies bf16 in hardware (AMX or AVX512-BF16, confirmed by a calibration cached per
    machine: ``mltk.core.cpu_bf16``). ``bf16`` on the CPU is autocast on request; ``fp16`` needs CUDA."""
    check_runtime_options(device, precision)
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for but no CUDA device is available")
    dev = torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
    if precision == "fp16" and dev.type != "cuda":
        raise ConfigError("--precision fp16 needs a CUDA device; use bf16 on the CPU")
    return Runtime(dev, *_autocast_dtype(dev, precision, cpu_bf16))


def _autocast_dtype(device: torch.device, precision: str, cpu_bf16: bool) -> tuple[torch.dtype | None, str]:
    """The autocast dtype and why it was chosen."""
    import torch

    if precision != "auto":
        return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision], "--precision " + precision
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "cuda device supports bf16"
        return torch.float16, "cuda device without bf16"
    if not cpu_bf16:
        return None, "cpu default (the stage's recipe does not set cpu_bf16)"
    from mltk.core.cpu_bf16 import cpu_bf16_choice

    choice = cpu_bf16_choice()
    return (torch.bfloat16 if choice.use_bf16 else None), choice.reason


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    import torch

    torch.manual_seed(seed)


T = TypeVar("T")


def progress_bar(transient: bool = True) -> Progress | PlainProgress:
    """Progress on stderr: a rich bar on a terminal (or with ``MLTK_PROGRESS=1``), removed when it finishes
    (``transient``) so that finished sub-bars do not pile up; elsewhere (a pipe, a Slurm log) ``PlainProgress``,
    plain lines at most every ``$MLTK_PROGRESS_SECONDS`` (default 10) seconds."""
    if not console.is_terminal and os.environ.get("MLTK_PROGRESS") != "1":
        return PlainProgress()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
    )


class PlainProgress:
    """The part of ``rich.progress.Progress`` mltk uses, as plain stderr lines for logs that are not terminals::

        encode-images 1200/6000 (20%) 00:12 elapsed, 98.5/s

    A task prints when ``$MLTK_PROGRESS_SECONDS`` have passed since its last line, and once more when it
    completes if it printed before, so quick tasks stay silent and long ones end with their total."""

    def __init__(self, interval: float | None = None):
        self.interval = float(os.environ.get("MLTK_PROGRESS_SECONDS", 10)) if interval is None else interval
        self._tasks: dict[int, dict] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        for task_id in list(self._tasks):
            self._finish(task_id)

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **_) -> int:
        task_id = len(self._tasks)
        now = time.perf_counter()
        self._tasks[task_id] = {
            "description": description,
            "total": total,
            "completed": completed,
            "start": now,
            "last": now,
            "printed": False,
            "done": False,
        }
        return task_id

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(
        self,
        task_id: int,
        *,
        completed: float | None = None,
        advance: float | None = None,
        total: float | None = None,
        description: str | None = None,
        **_,
    ) -> None:
        task = self._tasks[task_id]
        if total is not None:
            task["total"] = total
        if description is not None:
            task["description"] = description
        task["completed"] = completed if completed is not None else task["completed"] + (advance or 0)
        if task["total"] is not None and task["completed"] >= task["total"]:
            self._finish(task_id)
        elif time.perf_counter() - task["last"] >= self.interval:
            self._line(task)

    def _finish(self, task_id: int) -> None:
        task = self._tasks[task_id]
        if task["printed"] and not task["done"]:
            self._line(task)
        task["done"] = True

    def _line(self, task: dict) -> None:
        now = time.perf_counter()
        elapsed = now - task["start"]
        done, total = task["completed"], task["total"]
        share = f"{done:g}/{total:g} ({100 * done / total:.0f}%)" if total else f"{done:g}"
        minutes, seconds = divmod(int(elapsed), 60)
        rate = f", {done / elapsed:.1f}/s" if elapsed > 0 else ""
        console.print(
            f"{task['description']} {share} {minutes:02d}:{seconds:02d} elapsed{rate}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        task["last"], task["printed"] = now, True


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with progress on stderr: a bar on a terminal, removed when done; plain lines elsewhere."""
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
