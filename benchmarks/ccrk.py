"""train-ccrk step cost against K, the number of languages per image: time and peak memory of one training step
(forward of the B*K captions, 1-to-K loss, backward) for K = 1, 2, 4, 8 at the same batch of B images.

The captions of a batch are encoded grouped by language (one forward per language, at most B captions each) and
the loss holds one [B, B*K] score matrix, so both should grow linearly in K: the time per language (ms/K) and the
memory added per extra language should stay about constant.

    .venv/bin/python benchmarks/ccrk.py [--batch-size 64] [--rounds 9] [--threads 1] [--device auto] [--own-captions]
                                        [--tower mla|cll]

Time: the K settings are interleaved round by round in one process, medians reported. Memory: on CUDA the peak
``torch.cuda.max_memory_allocated`` of a step above what was allocated before it; on the CPU the growth of the
process's peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs`` once the task is built) over its
resident set before two steps, each K in its own fresh subprocess (an allocator keeps freed memory, so one
process could not measure several K). Slots are non-English languages, so every slot
runs the text tower (English captions would be precomputed constants). Base: a random-weight ``mltk-tiny`` CLIP,
random image embeddings, a BPE vocabulary of a small synthetic world.

Every slot does the same work: the K language slots (de, fr, es, it, ru, el, zh, ja, each with its own
acquirers) all hold the German captions of the world, so only K changes between the settings. With each
language's own captions the cost per slot follows its token count (``--own-captions``): batches are cut to
their longest caption, and Russian, Greek, Japanese and Chinese captions tokenise 1.3-2x longer than the Latin
ones in this vocabulary, so K = 8 (which adds those four) costs more than 8x K = 1 for that reason alone; the
``tokens/step`` column shows it.

``--tower cll`` trains CLL-CLIP's token table instead of MLA's acquirers: the starting checkpoint is a
``train-continual`` run over the eight languages (one update per task, only to get a real ``cll`` checkpoint), and
every slot runs the frozen tower over the shared table.
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
import pyarrow as pa
import pyarrow.compute as pc
import torch

from mltk import artifacts
from mltk.data.synth import SynthConfig, synthesize
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.multilingual import trim_tokens
from mltk.settings.vocab import build_vocab
from mltk.train import ccrk

LANGS = ("de", "fr", "es", "it", "ru", "el", "zh", "ja")
KS = (1, 2, 4, 8)


def make_world(root: Path, train_images: int, own_captions: bool = False, tower: str = "mla") -> None:
    """World, random base checkpoint, random image embeddings and a vocabulary, under ``root``: captions in every
    language of LANGS (``root/captions``), by default the German ones copied under each code (equal work per
    slot), with ``own_captions`` each language's own; with ``tower`` cll also a CLL-CLIP checkpoint (``root/cll``)."""
    world = synthesize(root / "world", SynthConfig(train=train_images, val=16, test=0, langs=("en", *LANGS)))
    captions = artifacts.load_captions(world.captions_path)
    if not own_captions:
        german = captions.filter(pc.equal(captions.column("lang"), "de"))
        english = captions.filter(pc.equal(captions.column("lang"), "en"))
        relabelled = [
            german.set_column(
                german.schema.get_field_index("lang"), "lang", pa.array([lang] * german.num_rows, pa.string())
            )
            for lang in LANGS
        ]
        captions = pa.concat_tables([english, *relabelled])
    artifacts.write_captions(root / "captions", captions, stage="benchmark")
    torch.manual_seed(0)
    artifacts.write_checkpoint(
        root / "base", load_clip("mltk-tiny").model.state_dict(), clip_checkpoint_config("mltk-tiny"), stage="benchmark"
    )
    table = artifacts.load_images(world.images_path)
    vectors = np.random.default_rng(0).standard_normal((table.num_rows, 128)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    artifacts.write_embeddings(
        root / "img", table.column("image_id").to_pylist(), vectors, split=table.column("split").to_pylist()
    )
    vocab = None
    for lang in LANGS:
        vocab = build_vocab(root / "captions", lang, root / f"vocab-{lang}", parent=vocab, size=600)
    if tower == "cll":
        from mltk.train.continual import ContinualTrainConfig, train_continual

        train_continual(
            ContinualTrainConfig(
                images=root / "img",
                captions=root / "captions",
                out=root / "cll",
                model=str(root / "base"),
                languages=LANGS,
                vocab_size=600,
                steps=1,
                batch_size=8,
                val_images=8,
                test_split="val",
                device="cpu",
                cache_dir=root / "cache",
            )
        )


def build(root: Path, k: int, batch_size: int, device: str, tower: str = "mla") -> ccrk.CcrkTask:
    start = (
        {"init": root / "cll"}
        if tower == "cll"
        else {"model": str(root / "base"), "tokenizer": str(root / f"vocab-{LANGS[-1]}")}
    )
    config = ccrk.CcrkConfig(
        images=root / "img",
        captions=root / "captions",
        out=root / "unused",
        **start,
        languages=LANGS[:k],
        batch_size=batch_size,
        device=device,
        precision="fp32",
        val_images=8,
        loop={"steps": 1000, "lr": 1e-4},
    )
    task, _ = ccrk.build_task(config)
    task.encoder.train()
    return task


def train_step(task: ccrk.CcrkTask, step: int) -> None:
    params = list(task.parameters_to_train().values())
    loss, _terms = task.loss(step)
    loss.backward()
    for p in params:
        p.grad = None
    if task.runtime.device.type == "cuda":
        torch.cuda.synchronize()


def tokens_per_step(task: ccrk.CcrkTask, steps: range) -> float:
    """Mean number of token positions the text tower runs per step: sum over slots of captions x the length the
    slot's batch is cut to (its longest caption)."""
    end = task.encoder.tokenizer.eot_token_id if task.english_trains else task.encoder.non_native.end_token_id
    total = 0
    for step in steps:
        _, captions = task.batches.batch(step)
        for k, lang in enumerate(task.languages):
            tokens, _ = trim_tokens(task.tokens[lang][captions[:, k]], end)
            total += tokens.numel()
    return total / len(steps)


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


def cpu_peak_bytes(root: Path, k: int, batch_size: int, threads: int, tower: str) -> int:
    """Peak-RSS growth of two steps, measured in a fresh subprocess."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--memory-child",
            str(k),
            "--root",
            str(root),
            "--batch-size",
            str(batch_size),
            "--threads",
            str(threads),
            "--tower",
            tower,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["bytes"]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def memory_child(root: Path, k: int, batch_size: int, tower: str) -> None:
    task = build(root, k, batch_size, "cpu", tower)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current resident set
    before = _status_kib("VmRSS")
    train_step(task, 0)
    train_step(task, 1)
    print(json.dumps({"bytes": (_status_kib("VmHWM") - before) * 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: steady timings on a shared machine; 0 = torch's default)",
    )
    parser.add_argument("--train-images", type=int, default=256)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--own-captions",
        action="store_true",
        help="each language slot its own captions (cost per slot follows its token count)",
    )
    parser.add_argument(
        "--tower",
        default="mla",
        choices=("mla", "cll"),
        help="the tower that trains: MLA's acquirers (default) or CLL-CLIP's token table",
    )
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.memory_child is not None:
        memory_child(args.root, args.memory_child, args.batch_size, args.tower)
        return

    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_world(root, args.train_images, args.own_captions, args.tower)
        tasks = {k: build(root, k, args.batch_size, device, args.tower) for k in KS}
        tokens = {k: tokens_per_step(task, range(1, args.rounds + 1)) for k, task in tasks.items()}
        seconds = time_steps(tasks, args.rounds)
        if device == "cuda":
            memory = {k: cuda_peak_bytes(task) for k, task in tasks.items()}
        else:
            del tasks
            memory = {k: cpu_peak_bytes(root, k, args.batch_size, args.threads, args.tower) for k in KS}

    memory_kind = "CUDA max_memory_allocated" if device == "cuda" else "peak RSS growth (VmHWM), a subprocess per K"
    slots = "each language its own captions" if args.own_captions else "every slot the same (German) captions"
    tower = "CLL-CLIP token table" if args.tower == "cll" else "MLA acquirers"
    print(
        f"train-ccrk step (1-to-K loss, forward + backward), mltk-tiny, {tower}, B = {args.batch_size} images, "
        f"{slots}, "
        f"device {device}"
        + (f" ({torch.get_num_threads()} thread(s))" if device == "cpu" else "")
        + f", median of {args.rounds} interleaved rounds; memory: {memory_kind}"
    )
    print(
        f"{'K':>3} {'tokens/step':>12} {'step ms':>9} {'ms/K':>8} {'time xK=1':>10} {'peak MiB':>9} "
        f"{'MiB per added lang':>19}"
    )
    for k in KS:
        added = (memory[k] - memory[KS[0]]) / (k - KS[0]) / 2**20 if k != KS[0] else float("nan")
        print(
            f"{k:>3} {tokens[k]:>12.0f} {seconds[k] * 1e3:>9.1f} {seconds[k] * 1e3 / k:>8.1f} "
            f"{seconds[k] / seconds[KS[0]]:>10.2f} {memory[k] / 2**20:>9.1f} {added:>19.1f}"
        )


if __name__ == "__main__":
    main()
