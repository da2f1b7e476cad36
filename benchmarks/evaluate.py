"""Benchmark ``mltk evaluate`` against a straightforward reference, and its memory on a set too large for 4 GiB.

Part 1 (5,000 images x 25,000 captions, 5 per image, random L2-normalised 512-d float32 embeddings, written once
as embeddings artifacts; both sides start from those artifacts on disk):
  - mltk: ``mltk.evaluate.run_evaluation`` (what ``mltk evaluate --images I --texts T --out M`` runs after
    parsing its options): load the artifacts, chunked products, ranks by counting the scores above each ground
    truth in both directions from one pass, metrics artifact written, report rendered (to /dev/null here).
  - reference: load the same artifacts, compute the full similarity matrix (the same numpy product as mltk's
    CPU ranking, so the same float32 scores), ``np.argsort`` every row (images x captions for image-to-text, then
    the transposed matrix, captions x images, for text-to-image) and find the ground truth's place in its sorted
    row (ties resolved the same pessimistic way, so the results can match).
  - the command a user types: ``mltk evaluate --images I --texts T --out M`` as a subprocess (its imports count;
    on the CPU it imports no torch: numpy ranks the vectors).
  Runs alternate (mltk, CLI, reference, mltk, ...); medians are reported, and the metrics must be identical. The
  float32 product alone is timed too: every exact method has to compute it, so reference / product bounds the
  speed-up any exact evaluation can reach on this machine. The cost of starting ``mltk`` (importing the CLI and
  the evaluate command) is measured on its own.

Part 2 (20,000 images x 60,000 captions: a full float32 score matrix of 4.5 GiB): runs ``mltk evaluate`` as a
subprocess on embeddings artifacts and reports its wall time and peak resident memory (``ru_maxrss``).

mltk runs on ``--device`` (default auto, as ``mltk evaluate``: CUDA when available); the reference on the CPU.

    .venv/bin/python benchmarks/evaluate.py            # both parts
    .venv/bin/python benchmarks/evaluate.py --no-large # part 1 only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from mltk import artifacts
from mltk.core.runtime import resolve_runtime
from mltk.evaluate import EvaluateConfig, run_evaluation

KS = (1, 5, 10)


def random_world(n_images: int, n_captions: int, dim: int, seed: int = 0):
    """Random unit vectors; caption j describes image j // (n_captions // n_images)."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((n_images, dim), dtype=np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    captions = rng.standard_normal((n_captions, dim), dtype=np.float32)
    captions /= np.linalg.norm(captions, axis=1, keepdims=True)
    owner = np.arange(n_captions) // max(n_captions // n_images, 1) % n_images
    return images, captions, owner


def tables(n_images: int, owner: np.ndarray):
    image_ids = [f"i{i}" for i in range(n_images)]
    text_table = {
        "id": [f"c{j}" for j in range(len(owner))],
        "image_id": [image_ids[o] for o in owner],
        "lang": ["en"] * len(owner),
        "caption_id": [f"c{j}" for j in range(len(owner))],
    }
    return {"id": image_ids}, text_table


def write_world(directory: Path, n_images: int, n_captions: int, dim: int, seed: int = 0) -> tuple[Path, Path]:
    """The random world as two embeddings artifacts (float32): ``img`` (id) and ``txt`` (id, image_id, lang,
    caption_id)."""
    images, captions, owner = random_world(n_images, n_captions, dim, seed)
    image_table, text_table = tables(n_images, owner)
    image_path = artifacts.write_embeddings(directory / "img", image_table["id"], images)
    text_path = artifacts.write_embeddings(
        directory / "txt",
        text_table["id"],
        captions,
        image_id=text_table["image_id"],
        lang=text_table["lang"],
        caption_id=text_table["caption_id"],
    )
    return image_path, text_path


def reference_metrics(image_path: Path, text_path: Path) -> tuple[dict, dict]:
    """Load both artifacts, compute the full similarity matrix, argsort every row in both directions, and find the
    ground truth's position in its sorted row. Returns the metrics and the seconds of each step."""
    seconds, start = {}, time.perf_counter()
    image_table, images = artifacts.load_embeddings(image_path)
    text_table, captions = artifacts.load_embeddings(text_path)
    row_of = {image_id: row for row, image_id in enumerate(image_table.column("id").to_pylist())}
    owner = [row_of[image_id] for image_id in text_table.column("image_id").to_pylist()]
    seconds["load"], start = time.perf_counter() - start, time.perf_counter()
    scores = np.array(images) @ np.array(captions).T  # [N, M], the product mltk's CPU ranking computes
    seconds["product"], start = time.perf_counter() - start, time.perf_counter()
    captions_of = [[] for _ in range(len(images))]
    for caption, image in enumerate(owner):
        captions_of[image].append(caption)
    i2t = []
    for row, own in enumerate(captions_of):
        if not own:
            continue
        order = np.argsort(-scores[row])  # best first
        best = scores[row, own].max()
        # position of the best own caption, other captions tying with it placed above it (mltk's pessimistic
        # rule): every score >= best, less the own captions that reach it
        own_at_best = int(np.count_nonzero(scores[row, own] == best))
        i2t.append(int(np.searchsorted(-scores[row, order], -best, side="right")) - own_at_best)
    seconds["argsort i2t"], start = time.perf_counter() - start, time.perf_counter()
    columns = np.ascontiguousarray(scores.T)  # [M, N]
    t2i = []
    for caption, image in enumerate(owner):
        order = np.argsort(-columns[caption])
        t2i.append(int(np.searchsorted(-columns[caption, order], -columns[caption, image], side="right")) - 1)
    seconds["transpose + argsort t2i"] = time.perf_counter() - start
    return {"i2t": summary(np.array(i2t)), "t2i": summary(np.array(t2i))}, seconds


def summary(ranks: np.ndarray) -> dict:
    result = {f"R@{k}": 100.0 * np.count_nonzero(ranks < k) / ranks.size for k in KS}
    result["median_rank"] = float(np.median(ranks + 1))
    result["mean_rank"] = float((ranks + 1).mean())
    return result


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - start, value


def mltk_metrics(image_path: Path, text_path: Path, out: Path, device: torch.device) -> dict:
    """``mltk evaluate`` in this process: ``run_evaluation`` from the artifacts to the metrics artifact (its report
    rendered into /dev/null)."""
    shutil.rmtree(out, ignore_errors=True)
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        path = run_evaluation(EvaluateConfig(images=image_path, texts=text_path, out=out, device=device.type))
    en = artifacts.load_metrics(path)["per_language"]["en"]
    return {direction: en[direction] for direction in ("i2t", "t2i")}


def product_alone(image_path: Path, text_path: Path) -> float:
    """Seconds of the full float32 similarity product of the loaded vectors (the floor of any exact method)."""
    images = np.array(artifacts.load_embeddings(image_path)[1])
    captions = np.array(artifacts.load_embeddings(text_path)[1])
    return timed(lambda: images @ captions.T)[0]


def compare_with_reference(
    n_images: int, n_captions: int, dim: int, repeats: int, device: torch.device, cli_device: str
) -> None:
    print(
        f"part 1: {n_images:,} images x {n_captions:,} captions, dim {dim}, torch threads "
        f"{torch.get_num_threads()}, mltk on {device}, reference on cpu, {repeats} alternating runs each"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        image_path, text_path = write_world(tmp, n_images, n_captions, dim)
        ours_times, cli_times_, reference_times, product_times, steps = [], [], [], [], []
        ours = reference = None
        for _ in range(repeats):
            seconds, ours = timed(mltk_metrics, image_path, text_path, tmp / "metrics", device)
            ours_times.append(seconds)
            cli_times_.append(cli_seconds(image_path, text_path, tmp / "cli-metrics", cli_device))
            seconds, (reference, reference_steps) = timed(reference_metrics, image_path, text_path)
            reference_times.append(seconds)
            steps.append(reference_steps)
            product_times.append(product_alone(image_path, text_path))
        startup_seconds = startup_time()
        cli = artifacts.load_metrics(tmp / "cli-metrics")["per_language"]["en"]
    ours_s, cli_s, reference_s, product_s = map(
        statistics.median, (ours_times, cli_times_, reference_times, product_times)
    )
    identical = ours == reference == {direction: cli[direction] for direction in ("i2t", "t2i")}
    print(
        f"  mltk evaluate (run_evaluation)   : {ours_s:8.2f} s  (runs: "
        + ", ".join(f"{t:.2f}" for t in ours_times)
        + ")"
    )
    print(
        f"  reference (full matrix, argsort) : {reference_s:8.2f} s  (runs: "
        + ", ".join(f"{t:.2f}" for t in reference_times)
        + ")"
    )
    print(
        "    reference steps (median s): "
        + ", ".join(f"{name} {statistics.median(s[name] for s in steps):.2f}" for name in steps[0])
    )
    print(f"  speed-up                         : {reference_s / ours_s:8.1f} x   (target >= 10x)")
    if device.type == "cpu":
        print(
            f"  float32 product alone            : {product_s:8.2f} s  (runs: "
            + ", ".join(f"{t:.2f}" for t in product_times)
            + f"); mltk spends {ours_s - product_s:.2f} s "
            f"beyond it, the reference {reference_s - product_s:.2f} s "
            f"({(reference_s - product_s) / max(ours_s - product_s, 1e-9):.1f} x)"
        )
        print(f"  bound for any exact method       : reference / product = {reference_s / product_s:.1f} x")
    print(
        f"  mltk evaluate CLI (subprocess)   : {cli_s:8.2f} s  (runs: "
        + ", ".join(f"{t:.2f}" for t in cli_times_)
        + f"), of which starting mltk (importing the CLI and the evaluate command) {startup_seconds:.2f} s"
    )
    print(
        f"  speed-up of the CLI              : {reference_s / cli_s:8.1f} x   (reference / CLI, what a user "
        "sees; the imports count; target >= 10x)"
    )
    print(f"  identical metrics: {identical}")
    for direction in ("i2t", "t2i"):
        print(f"    {direction}: " + ", ".join(f"{k} {v:.4f}" for k, v in ours[direction].items()))
    if not identical:
        print(f"    reference differs: {reference}")
        raise SystemExit(1)


def cli_seconds(image_path: Path, text_path: Path, out: Path, device: str) -> float:
    """Seconds of ``mltk evaluate`` as a subprocess, as a user types it (``--device`` only when the benchmark was
    given one)."""
    shutil.rmtree(out, ignore_errors=True)
    mltk = Path(sys.executable).with_name("mltk")
    command = [
        str(mltk),
        "evaluate",
        "--images",
        str(image_path),
        "--texts",
        str(text_path),
        "--out",
        str(out),
        *(["--device", device] if device != "auto" else []),
    ]
    seconds, completed = timed(subprocess.run, command, capture_output=True, text=True)
    if completed.returncode != 0:
        print(completed.stderr)
        raise SystemExit(1)
    return seconds


def startup_time() -> float:
    """Seconds of starting mltk: importing the CLI and the evaluate command."""
    command = "from mltk.cli.application import build_app; build_app(['mltk.cli.evaluate'])"
    return timed(subprocess.run, [sys.executable, "-c", command], check=True)[0]


def large_set_memory(n_images: int, n_captions: int, dim: int, device: torch.device) -> None:
    full_bytes = n_images * n_captions * 4
    print(
        f"part 2: {n_images:,} images x {n_captions:,} captions, dim {dim}: the full float32 score matrix would "
        f"take {full_bytes / 2**30:.2f} GiB"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        image_path, text_path = write_world(tmp, n_images, n_captions, dim, seed=1)
        mltk = Path(sys.executable).with_name("mltk")
        command = [
            str(mltk),
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--out",
            str(tmp / "metrics"),
            "--device",
            device.type,
        ]
        seconds, completed = timed(subprocess.run, command, capture_output=True, text=True)
        if completed.returncode != 0:
            print(completed.stderr)
            raise SystemExit(1)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB
        en = artifacts.load_metrics(tmp / "metrics")["per_language"]["en"]
    print(
        f"  mltk evaluate (CLI, artifacts on disk): {seconds:.1f} s, peak resident memory "
        f"{peak / 2**30:.2f} GiB (< 4 GiB: {peak < 4 * 2**30}), i2t R@10 {en['i2t']['R@10']:.3f}, "
        f"t2i R@10 {en['t2i']['R@10']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--captions", type=int, default=25000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--large-images", type=int, default=20000)
    parser.add_argument("--large-captions", type=int, default=60000)
    parser.add_argument("--no-large", action="store_true", help="skip part 2")
    parser.add_argument("--device", default="auto", help="mltk's device, as mltk evaluate --device (default auto)")
    args = parser.parse_args()
    device = resolve_runtime(args.device, "fp32").device
    print(f"cpu cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, mltk device: {device}")
    if not args.no_large:  # first, so the peak of the child is not mixed with anything else
        large_set_memory(args.large_images, args.large_captions, args.dim, device)
    compare_with_reference(args.images, args.captions, args.dim, args.repeats, device, args.device)


if __name__ == "__main__":
    main()
