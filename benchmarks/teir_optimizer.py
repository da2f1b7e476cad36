"""Optimizer step time: TEIR's AdamW with per-row lambda against torch.optim.AdamW, side by side in one run.

The table is CLIP's token embedding grown by one 10K task (59,408 x 512). As in a CLL-CLIP task, only the tokens
of the current language have lambda > 0 (``--active`` rows), and a batch's gradient touches some of them.
Run: ``.venv/bin/python benchmarks/teir_optimizer.py [--device cuda] [--repeats 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mltk.cll_clip.teir import TeirAdamW


def build(kind: str, table: torch.Tensor, lambdas: torch.Tensor):
    param = torch.nn.Parameter(table.clone())
    if kind == "torch AdamW":
        return param, torch.optim.AdamW([param], lr=5e-5, weight_decay=0.05)
    scales = torch.ones_like(lambdas) if kind == "TeirAdamW lambda=1 (dense)" else lambdas
    return param, TeirAdamW([param], lr=5e-5, weight_decay=0.05, row_scales={param: scales})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=59408)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--active", type=int, default=6000, help="rows with lambda > 0 (the task's tokens)")
    parser.add_argument("--touched", type=int, default=1500, help="rows with a gradient in one batch")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(args.rows, args.dim, generator=generator).to(device)
    active = torch.randperm(args.rows, generator=generator)[: args.active]
    lambdas = torch.zeros(args.rows)
    lambdas[active] = 1.0 / (1.0 + torch.randint(0, 3, (args.active,), generator=generator).float())
    touched = active[torch.randperm(args.active, generator=generator)[: args.touched]].to(device)
    grad = torch.zeros(args.rows, args.dim, device=device)
    grad[touched] = torch.randn(args.touched, args.dim, generator=generator).to(device)

    kinds = ["torch AdamW", "TeirAdamW (sparse rows)", "TeirAdamW lambda=1 (dense)"]
    setups = {kind: build(kind, table, lambdas.to(device)) for kind in kinds}
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for repeat in range(args.repeats + 3):
        for kind in kinds:  # interleaved, so drifts in machine load hit all three alike
            param, optimizer = setups[kind]
            param.grad = grad
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            optimizer.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if repeat >= 3:  # warm-up
                times[kind].append(time.perf_counter() - start)
    base = statistics.median(times["torch AdamW"])
    print(
        f"device {device}, table {args.rows}x{args.dim}, {args.active} rows with lambda>0, "
        f"{args.touched} with a gradient, median of {args.repeats}"
    )
    for kind in kinds:
        median = statistics.median(times[kind])
        print(f"  {kind:28s} {median * 1e3:8.2f} ms   ratio to torch AdamW {median / base:5.2f}")


if __name__ == "__main__":
    main()
