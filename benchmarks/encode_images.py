"""Images per second of ``mltk encode-images`` against a plain open_clip loop over the same images.

Both sides do the same work end to end: build the model (same architecture, same seed, random weights), decode
and preprocess the PNGs with the same open_clip eval transform in the same number of DataLoader workers, run
``encode_image`` with the same batch size under the same precision (fp32, or bf16 autocast on the CPU),
L2-normalise in float32 and write the vectors to disk (mltk: a sharded embeddings artifact with ids; plain: one
NPY file). The runs alternate in ABBA order (mltk, plain, plain, mltk, ...) so that neither side always runs
first on a machine whose load drifts, and the medians are compared. Besides wall-clock images/s the script prints
the ratio of CPU seconds (this process plus its DataLoader workers), which stays meaningful when other jobs share
the cores.

    .venv/bin/python benchmarks/encode_images.py [--tiny-images 1024] [--tiny-repeats 4]
                                                 [--b32-images 256] [--b32-repeats 2] [--skip-b32]

``--fp32-only`` skips the bf16 runs (slow on CPUs without bf16 arithmetic), so longer fp32 runs fit in the time.

Target: ratio mltk/plain >= 0.95 in fp32. The bf16 line shows what autocast buys on this CPU.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import open_clip
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import mltk.models.clip  # registers mltk-tiny with open_clip
from mltk import artifacts
from mltk.core.runtime import resolve_runtime
from mltk.encode.images import default_workers, encode_images


def make_images(folder: Path, count: int, side: int, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"{i:06d}.png"
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


class PlainImages(Dataset):
    def __init__(self, paths: list[Path], preprocess):
        self.paths, self.preprocess = paths, preprocess

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.preprocess(Image.open(self.paths[index]).convert("RGB"))


def plain_open_clip(folder: Path, out: Path, model_name: str, batch_size: int, workers: int, precision: str) -> None:
    """What a researcher would write by hand with open_clip."""
    paths = sorted(folder.rglob("*.png"))
    torch.manual_seed(0)
    with mltk.models.clip.quiet_open_clip():  # the same silence around random init as mltk
        model = open_clip.create_model(model_name, pretrained=None).eval()
    preprocess = open_clip.image_transform(model.visual.image_size, is_train=False)
    loader = DataLoader(PlainImages(paths, preprocess), batch_size=batch_size, num_workers=workers)
    chunks = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        for pixels in loader:
            chunks.append(F.normalize(model.encode_image(pixels).float(), dim=-1).numpy())
    np.save(out, np.concatenate(chunks))


def mltk_encode(folder: Path, out: Path, model_name: str, batch_size: int, workers: int, precision: str) -> None:
    encode_images(
        folder,
        out,
        model=model_name,
        batch_size=batch_size,
        workers=workers,
        dtype="float32",
        precision=precision,
        device="cpu",
        seed=0,
    )


def clean(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(artifacts.partial_dir(path), ignore_errors=True)
    if path.with_suffix(".npy").exists():
        path.with_suffix(".npy").unlink()


def measure(
    name: str,
    side: int,
    count: int,
    batch_size: int,
    repeats: int,
    workers: int,
    work: Path,
    precisions: tuple[str, ...],
) -> dict:
    folder = work / f"{name}-{side}"
    make_images(folder, count, side)
    out = work / "out"
    results = {}
    for precision in precisions:
        resolve_runtime("cpu", precision)  # validates the option the same way the stage does
        times = {"mltk": [], "plain": []}
        cpu = {"mltk": [], "plain": []}
        for repeat in range(repeats):
            for side_name in ("mltk", "plain") if repeat % 2 == 0 else ("plain", "mltk"):
                clean(out)
                start, cpu_start = time.perf_counter(), cpu_seconds()
                if side_name == "mltk":
                    mltk_encode(folder, out, name, batch_size, workers, precision)
                else:
                    plain_open_clip(folder, out.with_suffix(".npy"), name, batch_size, workers, precision)
                times[side_name].append(time.perf_counter() - start)
                cpu[side_name].append(cpu_seconds() - cpu_start)
        clean(out)
        results[precision] = {side_name: count / statistics.median(t) for side_name, t in times.items()}
        results[precision]["cpu_ratio"] = statistics.median(cpu["plain"]) / statistics.median(cpu["mltk"])
    return results


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its reaped children (the DataLoader workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def check_same_vectors(work: Path, workers: int, precision: str) -> float:
    """Both paths must compute the same embeddings (max abs difference, tiny model)."""
    folder = work / "check"
    make_images(folder, 16, 64, seed=1)
    clean(work / "check-mltk")
    mltk_encode(folder, work / "check-mltk", "mltk-tiny", 8, workers, precision)
    plain_open_clip(folder, work / "check-plain.npy", "mltk-tiny", 8, workers, precision)
    _, ours = artifacts.load_embeddings(work / "check-mltk")
    return float(np.abs(np.asarray(ours) - np.load(work / "check-plain.npy")).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-images", type=int, default=1024)
    parser.add_argument("--tiny-repeats", type=int, default=4)
    parser.add_argument("--b32-images", type=int, default=256)
    parser.add_argument("--b32-repeats", type=int, default=2)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--skip-b32", action="store_true")
    parser.add_argument(
        "--fp32-only", action="store_true", help="skip the bf16 runs (slow on CPUs without bf16 arithmetic)"
    )
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, open_clip {open_clip.__version__}, {torch.get_num_threads()} threads, "
        f"{args.workers} DataLoader worker(s), CPU, medians of ABBA-alternating runs, end to end "
        f"(model build + decode + encode + write)"
    )
    configs = [("mltk-tiny", 64, args.tiny_images, 256, args.tiny_repeats)]
    if not args.skip_b32:
        configs.append(("ViT-B-32", 224, args.b32_images, 64, args.b32_repeats))
    with tempfile.TemporaryDirectory(prefix="mltk-bench-encode-") as tmp:
        work = Path(tmp)
        precisions = ("fp32",) if args.fp32_only else ("fp32", "bf16")
        differences = {p: check_same_vectors(work, args.workers, p) for p in precisions}
        print("same vectors: max |mltk - plain| = " + ", ".join(f"{d:.2e} ({p})" for p, d in differences.items()))
        header = (
            f"{'model':<10} {'px':>4} {'images':>6} {'batch':>5} {'runs':>4} {'prec':<5} {'mltk img/s':>11} "
            f"{'plain img/s':>11} {'ratio':>6} {'cpu ratio':>9}"
        )
        print(header, flush=True)
        for name, side, count, batch_size, repeats in configs:
            results = measure(name, side, count, batch_size, repeats, args.workers, work, precisions)
            for precision, rate in results.items():  # ratio: mltk/plain images/s; cpu ratio: plain/mltk CPU s
                print(
                    f"{name:<10} {side:>4} {count:>6} {batch_size:>5} {repeats:>4} {precision:<5} "
                    f"{rate['mltk']:>11.1f} {rate['plain']:>11.1f} {rate['mltk'] / rate['plain']:>6.3f} "
                    f"{rate['cpu_ratio']:>9.3f}",
                    flush=True,
                )
            if "bf16" not in results:
                continue
            speedup = results["bf16"]["mltk"] / results["fp32"]["mltk"]
            print(f"{name:<10} bf16 autocast speedup over fp32 (mltk): {speedup:.2f}x", flush=True)


if __name__ == "__main__":
    main()
