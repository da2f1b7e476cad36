"""encode-images at real scale: images spread over several folders (repeated --images-root, or an image map), and
two processes under torchrun (gloo on the CPU) writing the same artifact a single process writes.

This file is also the torchrun worker: ``python -m torch.distributed.run --standalone --nproc_per_node 2
tests/test_encode_scale.py SOURCE OUT CHECKPOINT`` encodes SOURCE into OUT on both ranks.
"""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from helpers_torchrun import leave_worker, report_shard_writes, run_two_ranks, tiny_clip_checkpoint

from mltk import artifacts
from mltk.encode.images import encode_images

SETTINGS = {"batch_size": 2, "shard_size": 3, "workers": 0, "dtype": "float32", "device": "cpu", "precision": "fp32"}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return tiny_clip_checkpoint(tmp_path_factory.mktemp("ckpt"))


def _pngs(folder: Path, names: list[str], seed: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.fromarray(rng.integers(0, 256, (36, 44, 3), dtype=np.uint8)).save(folder / name)


@pytest.fixture
def coco_like(tmp_path):
    """An images artifact as import-data writes it for XTD10 without --images-root: paths under the dataset
    folder, where the files are not; they are in train2014/ and val2014/."""
    train, val = tmp_path / "coco" / "train2014", tmp_path / "coco" / "val2014"
    _pngs(train, [f"COCO_train2014_{i:012d}.png" for i in range(5)], 0)
    _pngs(val, [f"COCO_val2014_{i:012d}.png" for i in range(5, 7)], 1)
    names = [f"COCO_train2014_{i:012d}.png" for i in range(5)] + [f"COCO_val2014_{i:012d}.png" for i in (5, 6)]
    table = pa.table(
        {
            "image_id": [f"coco:{i:012d}" for i in range(7)],
            "split": ["test"] * 7,
            "path": [str(tmp_path / "xtd10" / n) for n in names],
        }
    )
    return artifacts.write_images(tmp_path / "images", table), train, val


def test_several_image_roots_and_an_image_map_find_every_file(tmp_path, coco_like, tiny_checkpoint):
    images, train, val = coco_like
    from mltk.core.errors import MltkError

    with pytest.raises(MltkError, match="none of the 7 images could be read"):
        encode_images(images, tmp_path / "none", model=str(tiny_checkpoint), **SETTINGS)
    by_roots = encode_images(
        images, tmp_path / "roots", model=str(tiny_checkpoint), images_roots=[train, val], **SETTINGS
    )
    manifest = artifacts.read_manifest(by_roots)
    assert manifest["count"] == 7 and manifest["skipped_count"] == 0
    mapping = tmp_path / "map.tsv"
    mapping.write_text(
        "image_id\tpath\n"
        + "".join(
            f"coco:{i:012d}\t{(train if i < 5 else val) / name}\n"
            for i, name in enumerate(
                [f"COCO_train2014_{i:012d}.png" for i in range(5)] + [f"COCO_val2014_{i:012d}.png" for i in (5, 6)]
            )
        )
    )
    by_map = encode_images(images, tmp_path / "map", model=str(tiny_checkpoint), image_map=mapping, **SETTINGS)
    (table_a, vectors_a), (table_b, vectors_b) = artifacts.load_embeddings(by_roots), artifacts.load_embeddings(by_map)
    assert table_a.column("id").to_pylist() == table_b.column("id").to_pylist()
    assert np.array_equal(vectors_a, vectors_b)


@contextlib.contextmanager
def torch_threads(count: int):
    """Run the block with ``count`` intra-op threads: sums over other thread counts add in another order, so a
    bit-exact comparison holds only between runs with the same count."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_two_processes_write_the_artifact_of_one(tmp_path, coco_like, tiny_checkpoint):
    """Bit-exact: the single process runs with one thread, as each torchrun worker does (OMP_NUM_THREADS=1), whatever
    the caller's thread settings and cores."""
    images, train, val = coco_like
    with torch_threads(1):
        one = encode_images(images, tmp_path / "one", model=str(tiny_checkpoint), images_roots=[train, val], **SETTINGS)
    done = run_two_ranks(__file__, images, tmp_path / "two", tiny_checkpoint, train, val)
    assert done.returncode == 0, done.stderr[-4000:]
    (table_one, vectors_one), (table_two, vectors_two) = (
        artifacts.load_embeddings(one),
        artifacts.load_embeddings(tmp_path / "two"),
    )
    assert table_two.to_pylist() == table_one.to_pylist()
    assert np.array_equal(vectors_two, vectors_one)
    manifest_one, manifest_two = artifacts.read_manifest(one), artifacts.read_manifest(tmp_path / "two")
    assert manifest_two["shards"] == manifest_one["shards"] and len(manifest_two["shards"]) == 3
    assert manifest_two["created_by"] == manifest_one["created_by"]
    assert not list((tmp_path / "two").glob("encode-state*"))
    assert not artifacts.partial_dir(tmp_path / "two").exists()
    # shard i is encoded by rank i % 2, each exactly once
    # found anywhere in stderr: two ranks share the pipe, so a report may land inside the other rank's line
    written = sorted(re.findall(r"test-worker: rank \d+ wrote shard \d+", done.stderr))
    assert written == [
        "test-worker: rank 0 wrote shard 0",
        "test-worker: rank 0 wrote shard 2",
        "test-worker: rank 1 wrote shard 1",
    ]


def _worker(images: str, out: str, checkpoint: str, train: str, val: str) -> None:
    import mltk.encode.images as module
    from mltk.core import distributed

    report_shard_writes(module, "_write_shard")
    encode_images(images, out, model=checkpoint, images_roots=[train, val], **SETTINGS)
    rank, world_size = distributed.world()
    assert world_size == 2 and torch.distributed.get_backend() == "gloo"


if __name__ == "__main__":
    _worker(*sys.argv[1:6])
    leave_worker()
