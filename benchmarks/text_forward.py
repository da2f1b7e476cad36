"""Trimmed text forward against open_clip's ``encode_text`` on realistic caption lengths.

    .venv/bin/python benchmarks/text_forward.py [--model ViT-B-32] [--batch 128] [--repeats 5]

Both run side by side in one process (interleaved, median of repeats) on a random-weight text tower, over lines of
``../shared/data/multi30k/task1/raw/val.en`` when present (else synthetic captions of similar length). Prints the
speed ratio and the max abs difference. Target: >= 3x on CPU, difference <= 1e-5.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()

    torch.manual_seed(0)
    bundle = load_clip(args.model)
    tower = OpenClipTextTower(bundle.model)
    texts, source = captions(args.batch * args.batches)
    batches = [bundle.tokenizer(texts[i:i + args.batch]) for i in range(0, len(texts), args.batch)]

    def run(fn):
        start = time.perf_counter()
        outputs = [fn(tokens) for tokens in batches]
        return time.perf_counter() - start, torch.cat(outputs)

    full_times, trimmed_times = [], []
    with torch.inference_mode():
        run(bundle.model.encode_text), run(tower.encode)  # warm-up
        for _ in range(args.repeats):
            t_full, full = run(bundle.model.encode_text)
            t_trim, trimmed = run(tower.encode)
            full_times.append(t_full)
            trimmed_times.append(t_trim)
    diff = (full - trimmed).abs().max().item()
    lengths = torch.cat([(b != 0).sum(1) for b in batches]).float()
    n = len(texts)
    print(f"model {args.model} (random weights), {source}, batch {args.batch}, threads {torch.get_num_threads()}")
    print(f"tokens per caption: mean {lengths.mean():.1f}, max {int(lengths.max())} (context 77)")
    print(f"encode_text : {n / statistics.median(full_times):8.1f} captions/s")
    print(f"trimmed     : {n / statistics.median(trimmed_times):8.1f} captions/s")
    print(f"speed ratio trimmed/encode_text: {statistics.median(full_times) / statistics.median(trimmed_times):.2f}x")
    print(f"max abs difference: {diff:.2e}")


if __name__ == "__main__":
    main()
