"""train-ccrk step cost against K, the number of languages per image: time and peak memory of one training step
(forward of the B*K captions, 1-to-K loss, backward) for K = 1, 2, 4, 8 at the same batch of B images.

The captions of a batch are encoded grouped by language (one forward per language, at most B captions each) and
the loss holds one [B, B*K] score matrix, so both should grow linearly in K: the time per language (ms/K) and the
memory added per extra language should stay about constant.

    .venv/bin/python benchmarks/ccrk.py [--batch-size 64] [--rounds 5] [--device auto]

Time: the K settings are interleaved round by round in one process, medians reported. Memory: on CUDA the peak
``torch.cuda.max_memory_allocated`` of a step above what was allocated before it; on the CPU the growth of the
process's peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs`` once the task is built) over its
resident set before two steps, each K in its own fresh subprocess (an allocator keeps freed memory, so one
process could not measure several K). Slots are non-English languages, so every slot
runs the text tower (English captions would be precomputed constants). Base: a random-weight ``mltk-tiny`` CLIP,
random image embeddings, a BPE vocabulary grown over the 8 languages of a small synthetic world.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from mltk import artifacts
from mltk.data.synth import SynthConfig, synthesize
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.train import ccrk
from mltk.vocab import build_vocab

LANGS = ("de", "fr", "es", "it", "ru", "el", "zh", "ja")
KS = (1, 2, 4, 8)


def make_world(root: Path, train_images: int) -> None:
    """World, random base checkpoint, random image embeddings and a vocabulary over LANGS, under ``root``."""
    world = synthesize(root / "world", SynthConfig(train=train_images, val=16, test=0, langs=("en", *LANGS)))
    torch.manual_seed(0)
    artifacts.write_checkpoint(root / "base", load_clip("mltk-tiny").model.state_dict(),
                               clip_checkpoint_config("mltk-tiny"), stage="benchmark")
    table = artifacts.load_images(world.images_path)
    vectors = np.random.default_rng(0).standard_normal((table.num_rows, 128)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    artifacts.write_embeddings(root / "img", table.column("image_id").to_pylist(), vectors,
                               split=table.column("split").to_pylist())
    vocab = None
    for lang in LANGS:
        vocab = build_vocab(world.captions_path, lang, root / f"vocab-{lang}", parent=vocab, size=600)


def build(root: Path, k: int, batch_size: int, device: str) -> ccrk.CcrkTask:
    config = ccrk.CcrkConfig(images=root / "img", captions=root / "world" / "captions", out=root / "unused",
                             model=str(root / "base"), tokenizer=str(root / f"vocab-{LANGS[-1]}"),
                             languages=LANGS[:k], batch_size=batch_size, steps=1000, device=device,
                             precision="fp32", val_images=8)
    task, _ = ccrk.build_task(config)
    task.encoder.train()
    return task


def train_step(task: ccrk.CcrkTask, step: int) -> None:
    params = list(task.parameters_to_train().values())
    loss = task.loss(step)
    loss.backward()
    for p in params:
        p.grad = None
    if task.runtime.device.type == "cuda":
        torch.cuda.synchronize()


def time_steps(tasks: dict[int, ccrk.CcrkTask], rounds: int) -> dict[int, float]:
    """Median seconds of one step per K, K settings interleaved within each round (after one warm-up each)."""
    for task in tasks.values():
        train_step(task, 0)
    times = {k: [] for k in tasks}
    for step in range(1, rounds + 1):
        for k, task in tasks.items():
            start = time.perf_counter()
            train_step(task, step)
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def cuda_peak_bytes(task: ccrk.CcrkTask) -> int:
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    train_step(task, 1)
    return torch.cuda.max_memory_allocated() - before


def cpu_peak_bytes(root: Path, k: int, batch_size: int) -> int:
    """Peak-RSS growth of two steps, measured in a fresh subprocess."""
    out = subprocess.run([sys.executable, __file__, "--memory-child", str(k), "--root", str(root),
                          "--batch-size", str(batch_size)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["bytes"]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def memory_child(root: Path, k: int, batch_size: int) -> None:
    task = build(root, k, batch_size, "cpu")
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current resident set
    before = _status_kib("VmRSS")
    train_step(task, 0)
    train_step(task, 1)
    print(json.dumps({"bytes": (_status_kib("VmHWM") - before) * 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--train-images", type=int, default=256)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        memory_child(args.root, args.memory_child, args.batch_size)
        return

    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_world(root, args.train_images)
        tasks = {k: build(root, k, args.batch_size, device) for k in KS}
        seconds = time_steps(tasks, args.rounds)
        if device == "cuda":
            memory = {k: cuda_peak_bytes(task) for k, task in tasks.items()}
        else:
            del tasks
            memory = {k: cpu_peak_bytes(root, k, args.batch_size) for k in KS}

    memory_kind = "CUDA max_memory_allocated" if device == "cuda" else "peak RSS growth (VmHWM), a subprocess per K"
    print(f"train-ccrk step (1-to-K loss, forward + backward), mltk-tiny, B = {args.batch_size} images, "
          f"device {device}, median of {args.rounds} interleaved rounds; memory: {memory_kind}")
    print(f"{'K':>3} {'step ms':>9} {'ms/K':>8} {'time xK=1':>10} {'peak MiB':>9} {'MiB per added lang':>19}")
    for k in KS:
        added = (memory[k] - memory[KS[0]]) / (k - KS[0]) / 2**20 if k != KS[0] else float("nan")
        print(f"{k:>3} {seconds[k] * 1e3:>9.1f} {seconds[k] * 1e3 / k:>8.1f} {seconds[k] / seconds[KS[0]]:>10.2f} "
              f"{memory[k] / 2**20:>9.1f} {added:>19.1f}")


if __name__ == "__main__":
    main()
