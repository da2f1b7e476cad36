"""Whether bf16 autocast pays on this CPU: the CPU's bf16 instructions, confirmed by a short calibration.

A CPU that multiplies bf16 in hardware (Intel AMX, or AVX512-BF16 on AMD Zen 4 and 5 and Intel Cooper Lake and
newer) runs a transformer's matrix products faster under bf16 autocast than in fp32; one without them emulates bf16
and is several times slower. The flags say what the CPU can do; a calibration (the same matrix products timed in
both precisions, interleaved) says whether it pays here, with this torch and this many threads. The calibration
runs once per machine and is cached in mltk's cache directory.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from mltk.core.cache import cache_root

# CPU flags (as Linux names them in /proc/cpuinfo) of bf16 matrix instructions, the faster first.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# bf16 autocast is chosen when the calibration measures it at least this much faster than fp32; below, the cast of
# weights and activations at every layer eats what the faster products gain.
MIN_SPEEDUP = 1.1
CALIBRATION_FILE = "cpu_bf16_calibration.json"
# One MiniLM-sized feed-forward pair: [ROWS, IN] @ [IN, OUT] @ [OUT, IN] (a batch of 64 captions of 16 tokens
# through a feed-forward layer of width 1536 and back).
ROWS, IN, OUT = 1024, 384, 1536
CALIBRATION_REPEATS = 7


@dataclass(frozen=True)
class Bf16Choice:
    """Whether ``--precision auto`` runs bf16 autocast on this CPU, and why (the manifest records ``reason``)."""

    use_bf16: bool
    reason: str


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (Linux); elsewhere torch's AMX probe is all there is to ask."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    try:
        return frozenset({"amx_bf16"}) if torch.cpu._is_amx_tile_supported() else frozenset()
    except AttributeError:  # a torch without the probe
        return frozenset()


def bf16_instructions(flags: frozenset[str]) -> str | None:
    """The first of ``BF16_FLAGS`` the CPU has (``amx_bf16`` before ``avx512_bf16``), else ``None``."""
    return next((flag for flag in BF16_FLAGS if flag in flags), None)


def measure_bf16_speedup(repeats: int = CALIBRATION_REPEATS) -> float:
    """fp32 seconds over bf16 seconds for a MiniLM-sized feed-forward pair of matrix products, the two precisions
    interleaved so that the machine's load hits both alike (medians of ``repeats``, after a warm-up that lets
    oneDNN build its kernels). Where the CPU reports bf16 instructions that torch does not use (an old oneDNN, a
    virtual machine hiding them) bf16 is emulated and the ratio falls below 1."""
    generator = torch.Generator().manual_seed(0)
    fp32 = [
        torch.randn(ROWS, IN, generator=generator),
        torch.randn(IN, OUT, generator=generator),
        torch.randn(OUT, IN, generator=generator),
    ]  # x [ROWS, IN], up [IN, OUT], down [OUT, IN]
    bf16 = [tensor.bfloat16() for tensor in fp32]

    def once(tensors: list[torch.Tensor]) -> float:
        x, up, down = tensors
        start = time.perf_counter()
        (x @ up) @ down  # [ROWS, IN]
        return time.perf_counter() - start

    once(fp32), once(bf16)
    seconds: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(repeats):
        seconds["fp32"].append(once(fp32))
        seconds["bf16"].append(once(bf16))
    return statistics.median(seconds["fp32"]) / statistics.median(seconds["bf16"])


def machine_key(instructions: str) -> str:
    """What the calibration depends on: the CPU model, its bf16 instructions, torch's version and the threads."""
    return f"{cpu_model()}|{instructions}|torch {torch.__version__}|{torch.get_num_threads()} threads"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cached_bf16_speedup(instructions: str) -> float:
    """The calibrated speedup of bf16 autocast for this machine, measured once and kept in
    ``<cache>/cpu_bf16_calibration.json`` (one entry per ``machine_key``); an unwritable cache only costs a rerun."""
    path, key = cache_root() / CALIBRATION_FILE, machine_key(instructions)
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    if isinstance(cached.get(key), (int, float)):
        return float(cached[key])
    speedup = measure_bf16_speedup()
    cached[key] = round(speedup, 3)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(cached, indent=1, sort_keys=True) + "\n")
        partial.replace(path)
    except OSError:
        pass
    return speedup


def cpu_bf16_choice() -> Bf16Choice:
    """bf16 autocast where the CPU has bf16 matrix instructions and the calibration measures it at least
    ``MIN_SPEEDUP`` times faster than fp32; fp32 elsewhere. No calibration runs on a CPU without the instructions."""
    instructions = bf16_instructions(cpu_flags())
    if instructions is None:
        return Bf16Choice(False, f"cpu has no bf16 matrix instructions ({' or '.join(BF16_FLAGS)})")
    speedup = cached_bf16_speedup(instructions)
    if speedup < MIN_SPEEDUP:
        return Bf16Choice(
            False, f"cpu has {instructions} but bf16 calibrated {speedup:.2f}x fp32 (below {MIN_SPEEDUP}x)"
        )
    return Bf16Choice(True, f"cpu has {instructions} (calibrated {speedup:.1f}x)")
