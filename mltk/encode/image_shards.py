"""``mltk encode-images SHARDS_DIR``: img2dataset's webdataset shards, streamed one tar at a time.

Each tar is one shard of the embeddings artifact (shard ``i`` is the i-th tar by name), so the work, the resume
state and the distribution over processes follow img2dataset's own cut: a killed run keeps every tar it finished
(its vectors are in the artifact's partial directory) and the next run starts at the first tar not done; under
``torchrun`` rank r encodes the tars ``i`` with ``i % world_size == r`` and rank 0 writes one artifact
(``mltk.encode.images`` does the rest, as for every source).

Only a batch of images is in memory at a time: DataLoader workers each read whole tars through ``webdataset``,
decode and preprocess, and hand over batches that never cross a tar, so the vectors of a tar do not depend on
which tars came before or on the number of processes. An image that cannot be decoded, a sample without an image
file, and a tar that breaks off (or holds fewer samples than img2dataset's ``NNNNN.parquet`` says it wrote) are
counted, named on stderr, and listed in the manifest (``skipped``, ``bad_shards``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from mltk import artifacts
from mltk.core.runtime import Runtime, log, progress_bar
from mltk.data.image_sources import NO_SPLIT
from mltk.data.webdataset_shards import IMAGE_SUFFIXES, ShardReadError, image_bytes, read_samples, shortfall
from mltk.encode.frozen_tower import decode_image, encode_with_frozen_tower, frozen_tower_session


@dataclass
class ShardBatch:
    """One batch of one tar; the tar's last batch (possibly empty) says so and carries why the tar is bad."""

    shard: int
    ids: list[str]  # sample keys of the images in ``pixels``
    pixels: torch.Tensor | None  # [B, 3, H, W], None when no image of the batch could be read
    failures: list[tuple[str, str]]  # (sample key, error)
    last: bool = False
    shard_error: str | None = None

    def pin_memory(self) -> ShardBatch:
        """Called by the DataLoader's pinning thread on CUDA, so that the copy to the GPU can overlap."""
        if self.pixels is not None:
            self.pixels = self.pixels.pin_memory()
        return self


class ShardedImages(IterableDataset):
    """The batches of the given tars, tar after tar; each DataLoader worker takes whole tars (every
    ``num_workers``-th one), so a tar's batches come from one worker in order."""

    def __init__(self, shards: dict[int, Path], preprocess: Callable, batch_size: int):
        self.shards = sorted(shards.items())
        self.preprocess = preprocess
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[ShardBatch]:
        info = get_worker_info()
        mine = self.shards if info is None else self.shards[info.id :: info.num_workers]
        for index, path in mine:
            yield from shard_batches(index, path, self.preprocess, self.batch_size)


def shard_batches(index: int, path: Path, preprocess: Callable, batch_size: int) -> Iterator[ShardBatch]:
    """Read one tar and yield its batches of ``batch_size`` samples; the last batch is marked."""
    items: list[tuple[str, torch.Tensor | None, str | None]] = []
    read, error = 0, None
    try:
        for sample in read_samples(path, suffixes=set(IMAGE_SUFFIXES)):
            read += 1
            data = image_bytes(sample)
            if data is None:
                items.append((sample["__key__"], None, "the sample has no image file (.jpg)"))
            else:
                items.append((sample["__key__"], *decode_image(lambda: Image.open(io.BytesIO(data)), preprocess)))
            if len(items) == batch_size:
                yield _collate(index, items)
                items = []
    except ShardReadError as exc:
        error = str(exc)
    yield _collate(index, items, last=True, shard_error=error or shortfall(path, read))


def _collate(index: int, items: list, last: bool = False, shard_error: str | None = None) -> ShardBatch:
    good = [(key, pixels) for key, pixels, _ in items if pixels is not None]
    failures = [(key, error) for key, pixels, error in items if pixels is None]
    pixels = default_collate([p for _, p in good]) if good else None
    return ShardBatch(index, [key for key, _ in good], pixels, failures, last, shard_error)


def encode_my_shard_files(
    shards: list[Path],
    state,
    bundle,
    runtime: Runtime,
    directory: Path,
    batch_size: int,
    workers: int,
    rank: int,
    world_size: int,
) -> None:
    """Encode this rank's tars that the resume state does not hold yet, writing each one as it completes."""
    pending = {i: path for i, path in enumerate(shards) if str(i) not in state.done and i % world_size == rank}
    if state.done:
        log(f"encode-images: resuming, {len(state.done)} of {len(shards)} shards already done")
    if not pending:
        return
    loader = DataLoader(
        ShardedImages(pending, bundle.preprocess, batch_size),
        batch_size=None,
        num_workers=min(workers, len(pending)),
        pin_memory=runtime.device.type == "cuda",
    )
    collected: dict[int, tuple[list[str], list[np.ndarray], list[tuple[str, str]]]] = {}
    with progress_bar() as progress, frozen_tower_session(bundle.model.visual, runtime):
        task = progress.add_task("encode-images (shards)", total=len(pending))
        for batch in loader:
            ids, vectors, failures = collected.setdefault(batch.shard, ([], [], []))
            if batch.pixels is not None:
                pixels = batch.pixels.to(runtime.device, non_blocking=True)
                vectors.append(encode_with_frozen_tower(bundle.model.encode_image, pixels).cpu().numpy())  # [B, D]
                ids.extend(batch.ids)
            failures.extend(batch.failures)
            if batch.last:
                _write_shard_file(
                    shards[batch.shard], batch.shard, collected.pop(batch.shard), batch.shard_error, directory, state
                )
                progress.advance(task)


def _write_shard_file(path: Path, shard: int, collected, shard_error: str | None, directory: Path, state) -> None:
    ids, vectors, failures = collected
    skipped = [{"image_id": key, "split": NO_SPLIT, "shard": path.name, "error": error} for key, error in failures]
    if skipped:
        examples = "; ".join(f"{item['image_id']} ({item['error']})" for item in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        log(f"encode-images: {path.name}: skipped {len(skipped)} unreadable image(s): {examples}{more}")
    if shard_error:
        log(f"encode-images: {path.name}: {shard_error}")
    entry, dim = None, None
    if ids:
        stacked = np.concatenate(vectors)  # [n, D] float32, L2-normalised
        dim = int(stacked.shape[1])
        entry = artifacts.write_embedding_shard(
            directory, shard, ids, stacked, state.key["config"]["dtype"], split=[NO_SPLIT] * len(ids)
        )
    state.mark_done(
        directory,
        shard,
        entry,
        skipped,
        dim,
        bad_shard={"shard": path.name, "error": shard_error} if shard_error else None,
    )


def bad_shards(done: list[dict]) -> list[dict]:
    """The tars that could not be read whole, in shard order (from the resume records)."""
    return [record["bad_shard"] for record in done if record.get("bad_shard")]
