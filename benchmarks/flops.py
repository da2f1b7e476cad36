"""How far a step is from the CPU's limit: the floating-point operations of its matrix products (counted by torch's
``FlopCounterMode``: matrix products and attention, forward and backward; elementwise work, LayerNorm and the
optimizer are not counted), this machine's fp32 matrix-product rate measured the same minute, and the nominal peak.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch


def counted_flops(run: Callable[[], object]) -> int:
    """Floating-point operations of the matrix products (and attention) ``run()`` performs, backward included.
    torch's counter knows the CUDA attention kernels only; the CPU's flash attention is counted here as they are
    (its padded shapes: the work the kernel does)."""
    from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten
    cpu_attention = {
        aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *_, out_shape=None, **__: sdpa_flop_count(
            q, k, v
        ),
        aten._scaled_dot_product_flash_attention_for_cpu_backward: (
            lambda grad, q, k, v, *_, out_shape=None, **__: sdpa_backward_flop_count(grad, q, k, v)
        ),
    }
    with FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter:
        run()
    return counter.get_total_flops()


def matmul_rate(size: int = 1536, repeats: int = 5) -> float:
    """FLOP/s of an fp32 [size x size] @ [size x size] product at torch's thread count (median of ``repeats``):
    what the matrix units give a large, well-shaped product right now (on a shared machine, under its load)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(seconds)


def nominal_peak(threads: int) -> tuple[float, str]:
    """fp32 FLOP/s of ``threads`` cores at the nominal clock, and how it was reckoned: 16 fp32 lanes per FMA with
    AVX-512 (8 with AVX2), 2 FLOP per lane, two FMA units per core (server cores; some have one)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    flags = set(re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split()) if "flags" in info else set()
    clock = re.search(r"@\s*([\d.]+)\s*GHz", info)
    ghz = float(clock.group(1)) if clock else float(re.search(r"cpu MHz\s*:\s*([\d.]+)", info).group(1)) / 1000
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    per_cycle = lanes * 2 * 2
    return threads * ghz * 1e9 * per_cycle, f"{threads} cores x {ghz:.2f} GHz x {per_cycle} fp32 FLOP/cycle"


def floor_lines(mltk_flops: float, mltk_seconds: float, other_flops: float, other_seconds: float, threads: int):
    """The lines a benchmark prints: each side's counted work and achieved rate, against the machine's."""
    rate = matmul_rate()
    peak, reckoned = nominal_peak(threads)
    return [
        f"counted matrix-product work per step: mltk {mltk_flops / 1e9:.1f} GFLOP, straightforward "
        f"{other_flops / 1e9:.1f} GFLOP: the speed ratio at equal efficiency would be "
        f"{other_flops / max(mltk_flops, 1):.2f}x",
        f"achieved: mltk {mltk_flops / mltk_seconds / 1e9:.1f} GFLOP/s, straightforward "
        f"{other_flops / other_seconds / 1e9:.1f} GFLOP/s; this CPU's fp32 product now {rate / 1e9:.1f} GFLOP/s "
        f"(1536^3 GEMM), nominal peak {peak / 1e9:.0f} GFLOP/s ({reckoned})",
    ]
