"""Trimmed text forward against open_clip's ``encode_text`` on realistic caption lengths.

    .venv/bin/python benchmarks/text_forward.py [--model ViT-B-32] [--batch 128] [--repeats 5] [--threads 1,2]

Both run side by side in one process (interleaved, median of repeats) on a random-weight text tower, over lines of
``../shared/data/multi30k/task1/raw/val.en`` when present (else synthetic captions of similar length), in fp32, at
each thread count of ``--threads`` in turn (default: torch's). Prints the speed ratio of wall time and of the
process's CPU time, the share of a core the process got (CPU / wall / threads: below 1 the machine is shared), the
load average, and the max abs difference. Target: >= 3x on CPU, difference <= 1e-5.

On a 2-core machine that others load, 2 threads measure the neighbours: every operator waits at its thread
barrier for a thread the scheduler has put aside, and the trimmed forward runs 4 times as many operators (its
length groups), each a quarter the size, so it waits more often for the same work. The CPU-time ratio and the
1-thread run show the forward itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from mltk.models.clip import load_clip
from mltk.models.text import OpenClipTextTower

VAL_EN = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k" / "task1" / "raw" / "val.en"


def captions(n: int) -> list[str]:
    if VAL_EN.is_file():
        lines = [ln.strip() for ln in VAL_EN.read_text(encoding="utf-8").splitlines() if ln.strip()]
        return lines[:n], f"{VAL_EN.name} ({len(lines[:n])} lines)"
    words = "a man in a blue shirt is riding a bicycle down the street next to a red car".split()
    return [" ".join(words[: 6 + i % 12]) for i in range(n)], "synthetic captions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ViT-B-32")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        default=str(torch.get_num_threads()),
        help="comma-separated intra-op thread counts, each measured in turn (default: torch's)",
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    bundle = load_clip(args.model)
    tower = OpenClipTextTower(bundle.model)
    texts, source = captions(args.batch * args.batches)
    batches = [bundle.tokenizer(texts[i : i + args.batch]) for i in range(0, len(texts), args.batch)]

    lengths = torch.cat([(b != 0).sum(1) for b in batches]).float()
    print(f"model {args.model} (random weights), {source}, batch {args.batch}, fp32")
    print(f"tokens per caption: mean {lengths.mean():.1f}, max {int(lengths.max())} (context 77)")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        compare(bundle.model.encode_text, tower.encode, batches, args.repeats, len(texts))


def compare(full_forward, trimmed_forward, batches: list[torch.Tensor], repeats: int, n: int) -> None:
    """Both forwards interleaved ``repeats`` times at torch's current thread count: wall and CPU-time ratios."""

    def run(fn):
        start, cpu_start = time.perf_counter(), time.process_time()
        outputs = [fn(tokens) for tokens in batches]
        return time.perf_counter() - start, time.process_time() - cpu_start, torch.cat(outputs)

    times = {"full": ([], []), "trimmed": ([], [])}
    outputs: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        run(full_forward), run(trimmed_forward)  # warm-up
        for _ in range(repeats):
            for name, forward in (("full", full_forward), ("trimmed", trimmed_forward)):
                wall, cpu, output = run(forward)
                times[name][0].append(wall)
                times[name][1].append(cpu)
                outputs[name] = output
    wall = {name: statistics.median(t[0]) for name, t in times.items()}
    cpu = {name: statistics.median(t[1]) for name, t in times.items()}
    threads = torch.get_num_threads()
    share = sum(cpu.values()) / sum(wall.values()) / threads
    print(
        f"threads {threads} (load average {os.getloadavg()[0]:.1f}; this process got {share:.2f} of each thread's core)"
    )
    print(f"  encode_text : {n / wall['full']:8.1f} captions/s")
    print(f"  trimmed     : {n / wall['trimmed']:8.1f} captions/s")
    print(
        f"  speed ratio trimmed/encode_text: {wall['full'] / wall['trimmed']:.2f}x wall, "
        f"{cpu['full'] / cpu['trimmed']:.2f}x CPU time"
    )
    print(f"  max abs difference: {(outputs['full'] - outputs['trimmed']).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
