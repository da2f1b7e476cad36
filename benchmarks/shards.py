"""Peak memory and time per image of ``encode-images`` on img2dataset-style webdataset shards, at 1x and at
``--scale``x the number of tars, side by side in one run.

Each tar holds ``--per-shard`` random 256x256 JPEGs (``KEY.jpg`` / ``KEY.txt`` / ``KEY.json``, written with
``webdataset.TarWriter``). Every encode runs in its own process (the mltk-tiny tower with random weights, on the
CPU, decoding in the main process), so its peak resident memory is its own; the sizes are interleaved over
``--repeats`` rounds and the medians printed. Streaming means the peak does not grow with the number of tars.

    .venv/bin/python benchmarks/shards.py --shards 4 --scale 4 --per-shard 64 --repeats 2
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ENCODE = """
import json, resource, sys, time
from mltk.encode.images import encode_images
start = time.perf_counter()
encode_images(sys.argv[1], sys.argv[2], model="mltk-tiny", device="cpu", precision="fp32", workers=0,
              batch_size=32)
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_shards(folder: Path, shards: int, per_shard: int, seed: int = 0) -> Path:
    import webdataset
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for shard in range(shards):
        with webdataset.TarWriter(str(folder / f"{shard:05d}.tar")) as sink:
            for row in range(per_shard):
                buffer = io.BytesIO()
                Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(buffer, format="JPEG")
                key = f"{shard:05d}{row:04d}"
                sink.write({"__key__": key, "jpg": buffer.getvalue(), "txt": f"image {key}", "json": {"key": key}})
    return folder


def encode_once(shards: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", ENCODE, str(shards), str(out)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=4, help="tars at 1x")
    parser.add_argument("--scale", type=int, default=4, help="the larger set has this many times the tars")
    parser.add_argument("--per-shard", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mltk-shards-bench-") as tmp:
        tmp = Path(tmp)
        sets = {
            factor: write_shards(tmp / f"x{factor}", args.shards * factor, args.per_shard) for factor in (1, args.scale)
        }
        data_mb = {
            factor: sum(p.stat().st_size for p in folder.glob("*.tar")) / 2**20 for factor, folder in sets.items()
        }
        runs: dict[int, list[dict]] = {factor: [] for factor in sets}
        for repeat in range(args.repeats):
            for factor, folder in sets.items():
                runs[factor].append(encode_once(folder, tmp / f"emb-{factor}-{repeat}"))
    print(
        f"encode-images on webdataset shards: mltk-tiny, CPU, {args.per_shard} JPEGs (256x256) per tar, "
        f"median of {args.repeats}"
    )
    summary = {}
    for factor, results in runs.items():
        images = args.shards * factor * args.per_shard
        peak = statistics.median(r["peak_mb"] for r in results)
        per_image = statistics.median(r["seconds"] for r in results) / images * 1e3
        summary[factor] = (peak, per_image)
        print(
            f"  {factor:>3}x: {args.shards * factor:>4} tars ({data_mb[factor]:6.1f} MB), {images:>6} images: "
            f"peak {peak:7.1f} MB, "
            f"{per_image:6.2f} ms/image"
        )
    (peak_1, time_1), (peak_n, time_n) = summary[1], summary[args.scale]
    print(
        f"  ratio {args.scale}x/1x: peak memory {peak_n / peak_1:.2f}x, time per image {time_n / time_1:.2f}x "
        f"(for {args.scale}x the images)"
    )


if __name__ == "__main__":
    main()
