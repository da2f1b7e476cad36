"""Captions per second of translate-data's batching: length-sorted batches against unsorted ones.

    .venv/bin/python benchmarks/translate.py [--captions 512] [--batch-size 32] [--beams 1] [--repeats 3] [--threads 1]

Both orders translate the same captions with the same tiny Marian model through ``Seq2SeqTranslator`` (the
real transformers code path of ``mltk translate-data``), interleaved A/B per repeat; medians are reported.
Captions are Multi30K's val.en when ``../shared/data`` has it, synthetic sentences otherwise.

Two tiny models, because what sorting saves depends on the model:
- ``random``: random weights. Its output length has nothing to do with the input, so sorting only trims encoder
  padding (and decoder cross-attention over it).
- ``copy``: the same architecture trained for a few hundred steps to copy its input. Its output length tracks
  the input length as a real translation model's does, so a sorted batch also stops decoding sooner
  (generation runs until the batch's longest output is done).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from mltk.core.runtime import resolve_runtime
from mltk.translate.seq2seq import Seq2SeqTranslator, plan_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tiny models are a test fixture
from helpers_translate import build_tiny_marian, synthetic_sentences

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k" / "task1" / "raw"


def load_captions(count: int) -> tuple[list[str], list[str], str]:
    """(benchmark captions, tokenizer/training captions, where they came from)."""
    if (SHARED / "val.en").is_file() and (SHARED / "train.en").is_file():
        val = [line.strip() for line in (SHARED / "val.en").read_text(encoding="utf-8").splitlines() if line.strip()]
        train = [
            line.strip() for line in (SHARED / "train.en").read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        return val[:count], train[:5000], f"Multi30K val.en ({SHARED / 'val.en'})"
    return synthetic_sentences(count, seed=1), synthetic_sentences(5000, seed=2), "synthetic sentences"


def train_copy_model(model_dir: Path, texts: list[str], steps: int, seed: int = 0) -> None:
    """Teach the tiny model to copy its input (teacher forcing, AdamW 3e-3, batch 32), then save it in place."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(seed)
    model.train()
    for _ in range(steps):
        batch = rng.sample(texts, 32)
        encoded = tokenizer(batch, text_target=batch, return_tensors="pt", padding=True, truncation=True, max_length=64)
        encoded["labels"][encoded["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**encoded).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"  copy model trained {steps} steps, final loss {loss.item():.3f}", file=sys.stderr)
    model.save_pretrained(model_dir)


def padding_share(translator: Seq2SeqTranslator, texts: list[str], batch_size: int, sort: bool) -> float:
    """Share of encoder input positions that are padding."""
    lengths = translator.token_lengths(texts)
    batches = plan_batches(lengths, batch_size, sort)
    padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)
    return 1 - sum(lengths) / padded


def measure(translator: Seq2SeqTranslator, texts: list[str], batch_size: int, repeats: int) -> dict[str, list]:
    translator.translate(texts[: 2 * batch_size], "de", batch_size)  # warm-up
    timings = {"sorted": [], "unsorted": []}
    for _ in range(repeats):
        for name, sort in (("sorted", True), ("unsorted", False)):
            start = time.perf_counter()
            translator.translate(texts, "de", batch_size, sort_by_length=sort)
            timings[name].append(len(texts) / (time.perf_counter() - start))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captions", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beams", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: a tiny model gains nothing from more, and shared cores stay calm)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    texts, train_texts, origin = load_captions(args.captions)
    runtime = resolve_runtime(args.device, "auto")
    print(
        f"{len(texts)} captions from {origin}; batch {args.batch_size}, beams {args.beams}, "
        f"max length {args.max_length}, {runtime.device} {runtime.precision}, {torch.get_num_threads()} threads, "
        f"{args.repeats} interleaved repeats, medians"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("random", "copy"):
            model_dir = build_tiny_marian(
                Path(tmp) / kind / "opus-mt-en-de",
                texts=train_texts,
                d_model=64,
                layers=2,
                vocab_size=1000,
                init_std=1.0 if kind == "random" else 0.02,
            )
            if kind == "copy":
                train_copy_model(model_dir, train_texts, args.train_steps)
            translator = Seq2SeqTranslator(
                str(model_dir), "marian", "en", runtime, beams=args.beams, max_length=args.max_length
            )
            timings = measure(translator, texts, args.batch_size, args.repeats)
            sorted_rate, unsorted_rate = (statistics.median(timings[k]) for k in ("sorted", "unsorted"))
            print(
                f"{kind:>6} model: sorted {sorted_rate:7.1f} captions/s (padding "
                f"{padding_share(translator, texts, args.batch_size, True):.0%}), unsorted {unsorted_rate:7.1f} "
                f"captions/s (padding {padding_share(translator, texts, args.batch_size, False):.0%}), "
                f"sorted/unsorted {sorted_rate / unsorted_rate:.2f}x"
            )


if __name__ == "__main__":
    main()
