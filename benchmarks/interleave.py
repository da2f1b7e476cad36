"""Side-by-side timing of mltk's ``train_nlt`` and a straightforward loop in one process: each straightforward step
runs inside mltk's ``on_step`` callback, so both sides see the same machine load at the same moment.

mltk's step k is the time from the end of the callback at k-1 to the start of the callback at k."""

from __future__ import annotations

import statistics
import time

import torch


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class Interleaved:
    """``on_step`` for ``train_nlt``: records mltk's loss and step boundaries, then runs one baseline step."""

    def __init__(self, baseline, device):
        self.baseline, self.device = baseline, device
        self.enter: dict[int, float] = {}
        self.exit: dict[int, float] = {}
        self.losses: dict[str, dict[int, float]] = {"mltk": {}, "straightforward": {}}
        self.baseline_seconds: dict[int, float] = {}
        self.teacher_seconds: dict[int, float] = {}

    def __call__(self, step: int, loss: float) -> None:
        synchronize(self.device)
        self.enter[step] = time.perf_counter()
        self.losses["mltk"][step] = loss
        start = time.perf_counter()
        self.losses["straightforward"][step] = self.baseline.step(step)
        synchronize(self.device)
        self.baseline_seconds[step] = time.perf_counter() - start
        self.teacher_seconds[step] = self.baseline.teacher_seconds
        self.exit[step] = time.perf_counter()

    def medians(self, timed) -> tuple[float, float, float]:
        """Median seconds per step over ``timed``: mltk, straightforward, and its teacher recompute."""
        mltk = statistics.median(self.enter[k] - self.exit[k - 1] for k in timed)
        straight = statistics.median(self.baseline_seconds[k] for k in timed)
        return mltk, straight, statistics.median(self.teacher_seconds[k] for k in timed)

    def loss_differences(self, steps: int) -> list[float]:
        return [abs(self.losses["mltk"][k] - self.losses["straightforward"][k]) for k in range(steps)]
