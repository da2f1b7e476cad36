"""Encode images with a frozen CLIP image tower into an embeddings artifact (``mltk encode-images``).

The image tower never changes during training, so every image is encoded exactly once and the vectors are reused
by every later stage (design notes, section 5). The work is split into shards with fixed boundaries (shard ``i``
holds rows ``[i * shard_size, (i + 1) * shard_size)`` of the source order), and each shard is written into the
artifact's partial directory as soon as it is done. A run that is killed keeps its finished shards; the next run
with the same source and settings skips them and encodes only the rest. Because shard and batch boundaries depend
only on the source order, a resumed run produces exactly the vectors an uninterrupted run would.

Decoding and preprocessing run in DataLoader workers; the forward pass runs under the runtime's autocast and the
output is L2-normalised in float32 before it is stored as float16 or float32. Images that cannot be read are
skipped, counted and listed in the manifest (``skipped``), never silently dropped.

Sources and where their files are (several ``--images-root`` folders, an ``--image-map``) are read by
``mltk.data.image_sources``; a folder of img2dataset's webdataset shards is streamed tar by tar, one shard per tar
(``mltk.encode.image_shards``). Under ``torchrun`` each rank encodes the shards ``i`` with
``i % world_size == rank`` into the one partial directory (each rank keeps its own resume file) and rank 0 writes
the manifest after a barrier: the artifact is the one a single process writes, shard for shard, so N GPUs encode
about N times faster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.distributed import init_from_env, world
from mltk.core.errors import ConfigError, MltkError
from mltk.core.runtime import Runtime, log, progress_bar, resolve_runtime, seed_everything
from mltk.data.image_sources import (  # noqa: F401 (API)
    IMAGE_EXTENSIONS,
    NO_SPLIT,
    ImageRecords,
    check_unique_ids,
    filter_splits,
    read_image_source,
    resolve_image_paths,
)
from mltk.data.webdataset_shards import check_unique_keys, is_shard_folder, list_shards
from mltk.encode.frozen_tower import (  # noqa: F401 (API)
    MAX_ERROR_CHARS,
    decode_image,
    encode_with_frozen_tower,
    frozen_tower_session,
)
from mltk.encode.image_decoding import DecodedBatch, DecodedImages, collate_decoded, default_workers  # noqa: F401 (API)
from mltk.encode.image_resume import RESUME_STATE, ResumeState, batch_plan, shard_ranges  # noqa: F401 (API)
from mltk.encode.image_shards import bad_shards, encode_my_shard_files

# ----------------------------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodeConfig:
    """Everything that changes the vectors (plus how the work is cut); recorded in the manifest."""

    model: str
    pretrained: str | None
    dtype: str
    shard_size: int | None  # None: each tar of a webdataset folder is a shard
    batch_size: int
    splits: tuple[str, ...]
    precision: str
    device: str
    seed: int
    images_roots: tuple[str, ...] = ()
    image_map: str | None = None


def encode_images(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    model: str,
    pretrained: str | None = None,
    batch_size: int = 256,
    workers: int | None = None,
    dtype: str = "float16",
    shard_size: int = 4096,
    splits: Sequence[str] | None = None,
    device: str = "auto",
    precision: str = "auto",
    seed: int = 0,
    images_roots: Sequence[str | os.PathLike] = (),
    image_map: str | os.PathLike | None = None,
) -> Path:
    """Encode the images of ``source`` with the image tower of ``model`` into an embeddings artifact at
    ``out_dir``; returns its path (on every rank under torchrun). Rows carry ``id`` (the image_id) and ``split``.
    ``seed`` fixes random weights (an architecture without ``pretrained``), so that a resumed run continues with
    the same model. ``images_roots`` and ``image_map`` say where the files are (``resolve_image_paths``)."""
    _check_options(batch_size, shard_size, dtype, workers)
    source = Path(source)
    workers = default_workers() if workers is None else workers
    if is_shard_folder(source) and not artifacts.is_artifact(source):
        plan = _plan_shard_files(source, splits, images_roots, image_map, batch_size, workers)
        shard_size = None  # each tar is a shard
    else:
        plan = _plan_records(source, splits, images_roots, image_map, batch_size, shard_size, workers)
    runtime = init_from_env(resolve_runtime(device, precision))
    rank, world_size = world()
    seed_everything(seed)
    from mltk.models.clip import load_clip  # open_clip import is slow; keep it off the module import path

    bundle = load_clip(model, pretrained, device=runtime.device)
    config = EncodeConfig(
        str(model),
        pretrained,
        dtype,
        shard_size,
        batch_size,
        tuple(splits or ()),
        runtime.precision,
        runtime.device.type,
        seed,
        tuple(str(Path(r).resolve()) for r in images_roots),
        str(Path(image_map).resolve()) if image_map is not None else None,
    )
    inputs = [source] + [Path(p) for p in (model, pretrained, image_map) if p and Path(p).exists()]
    writer = artifacts.ArtifactWriter(
        out_dir, "embeddings", stage="encode-images", config=config, inputs=inputs, resume=True
    )
    if writer.existing is not None:
        return writer.reuse()
    key = _plain_json({"config": dataclasses.asdict(config), "inputs": writer.manifest["inputs"], "rows": plan.rows})
    if world_size == 1:
        with writer:
            state = ResumeState.load_or_reset(writer.dir, key)
            plan.encode_mine(state, bundle, runtime, writer.dir, rank, world_size)
            _finish(writer, state, plan.shard_count, bundle, config, source)
        return writer.path
    return _encode_distributed(writer, key, plan, bundle, runtime, config, source, rank, world_size)


@dataclass
class EncodePlan:
    """What a source gives the stage: its number of shards, its row count (part of the resume key), and how one
    rank encodes its shards that are not done yet: ``encode_mine(state, bundle, runtime, directory, rank,
    world_size)``."""

    shard_count: int
    rows: int
    encode_mine: Callable[..., None]


def _plan_records(
    source: Path,
    splits: Sequence[str] | None,
    images_roots: Sequence[str | os.PathLike],
    image_map: str | os.PathLike | None,
    batch_size: int,
    shard_size: int,
    workers: int,
) -> EncodePlan:
    """An images artifact, an image folder or a Parquet of paths: shards of ``shard_size`` rows."""
    records = filter_splits(read_image_source(source), splits, source)
    check_unique_ids(records, source)
    records = resolve_image_paths(
        records, [Path(r) for r in images_roots], Path(image_map) if image_map is not None else None, source
    )

    def encode_mine(state, bundle, runtime, directory, rank, world_size):
        _encode_my_shards(records, state, bundle, runtime, directory, batch_size, workers, rank, world_size)

    return EncodePlan(len(shard_ranges(len(records), shard_size)), len(records), encode_mine)


def _plan_shard_files(
    source: Path,
    splits: Sequence[str] | None,
    images_roots: Sequence[str | os.PathLike],
    image_map: str | os.PathLike | None,
    batch_size: int,
    workers: int,
) -> EncodePlan:
    """img2dataset's webdataset shards: one shard per tar, the keys checked unique before any work."""
    if splits or images_roots or image_map is not None:
        raise ConfigError(
            "--split, --images-root and --image-map do not apply to webdataset shards (the images "
            "are inside the tars, with no split)",
            source,
        )
    shards = list_shards(source)
    rows = check_unique_keys(shards, source)

    def encode_mine(state, bundle, runtime, directory, rank, world_size):
        encode_my_shard_files(shards, state, bundle, runtime, directory, batch_size, workers, rank, world_size)

    return EncodePlan(len(shards), rows, encode_mine)


def _encode_my_shards(
    records: ImageRecords,
    state: ResumeState,
    bundle,
    runtime: Runtime,
    directory: Path,
    batch_size: int,
    workers: int,
    rank: int,
    world_size: int,
) -> None:
    shards = shard_ranges(len(records), state.key["config"]["shard_size"])
    pending = {i: rows for i, rows in enumerate(shards) if str(i) not in state.done and i % world_size == rank}
    if len(state.done):
        log(f"encode-images: resuming, {len(state.done)} of {len(shards)} shards already done")
    _encode_pending(records, pending, bundle, runtime, directory, state, batch_size, workers)


def _encode_distributed(
    writer: artifacts.ArtifactWriter,
    key: dict,
    plan: EncodePlan,
    bundle,
    runtime: Runtime,
    config: EncodeConfig,
    source: Path,
    rank: int,
    world_size: int,
) -> Path:
    """Every rank encodes its shards into the shared partial directory; rank 0 writes the manifest once all
    are done. Barriers order the steps: rank 0 prepares the directory (dropping a stale run) before the others
    read it, and every rank waits until the artifact is in place before it returns its path."""
    import torch.distributed as dist

    if rank == 0:
        writer.__enter__()
        ResumeState.load_or_reset(writer.dir, key)
    dist.barrier()
    state = ResumeState.load_or_reset(writer.dir, key, f"encode-state.rank{rank}.json", reset=False)
    try:
        plan.encode_mine(state, bundle, runtime, writer.dir, rank, world_size)
    finally:
        dist.barrier()  # a failing rank still lets the others reach their barrier; rank 0 then sees the gap
    if rank == 0:
        merged = ResumeState.load_or_reset(writer.dir, key, reset=False)
        shard_count = plan.shard_count
        missing = [i for i in range(shard_count) if str(i) not in merged.done]
        if missing:
            raise MltkError(
                f"{len(missing)} shard(s) were not encoded by their rank (first: {missing[0]}); rerun to resume", source
            )
        _finish(writer, merged, shard_count, bundle, config, source)
        writer.commit()
    dist.barrier()
    return writer.path


def _plain_json(value):
    """The value as it reads back from JSON (tuples become lists), so a saved key compares equal."""
    return json.loads(json.dumps(value))


def _check_options(batch_size: int, shard_size: int, dtype: str, workers: int | None) -> None:
    if batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {batch_size}")
    if shard_size < 1:
        raise ConfigError(f"--shard-size must be at least 1, got {shard_size}")
    if dtype not in schema.EMBEDDING_DTYPES:
        raise ConfigError(f"--dtype must be one of {', '.join(schema.EMBEDDING_DTYPES)}, got {dtype!r}")
    if workers is not None and workers < 0:
        raise ConfigError(f"--workers must be 0 or more, got {workers}")


def _encode_pending(
    records: ImageRecords,
    pending: dict[int, range],
    bundle,
    runtime: Runtime,
    directory: Path,
    state: ResumeState,
    batch_size: int,
    workers: int,
) -> None:
    """Encode the pending shards, writing each one (and recording it in the resume state) as it completes."""
    if not pending:
        return
    batches, owners = batch_plan(pending, batch_size)
    loader = DataLoader(
        DecodedImages(records, bundle.preprocess),
        batch_sampler=batches,
        num_workers=workers,
        collate_fn=collate_decoded,
        pin_memory=runtime.device.type == "cuda",
    )
    batches_left = {shard: owners.count(shard) for shard in pending}
    collected: dict[int, tuple[list[int], list[np.ndarray], list[tuple[int, str]]]] = {}
    total = sum(len(rows) for rows in pending.values())
    with progress_bar() as progress, frozen_tower_session(bundle.model.visual, runtime):
        task = progress.add_task("encode-images", total=total)
        for batch, shard in zip(loader, owners):
            indices, vectors, failures = collected.setdefault(shard, ([], [], []))
            if batch.pixels is not None:
                pixels = batch.pixels.to(runtime.device, non_blocking=True)
                features = encode_with_frozen_tower(bundle.model.encode_image, pixels)  # [B, D]
                indices.extend(batch.indices)
                vectors.append(features.cpu().numpy())
            failures.extend(batch.failures)
            progress.advance(task, len(batch.indices) + len(batch.failures))
            batches_left[shard] -= 1
            if batches_left[shard] == 0:
                _write_shard(records, shard, collected.pop(shard), directory, state)


def _write_shard(records: ImageRecords, shard: int, collected, directory: Path, state: ResumeState) -> None:
    indices, vectors, failures = collected
    skipped = [{"image_id": records.ids[i], "split": records.splits[i], "error": error} for i, error in failures]
    if skipped:  # every one is listed in the manifest; the log names a few per shard
        examples = "; ".join(f"{item['image_id']} ({item['error']})" for item in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        log(f"encode-images: shard {shard}: skipped {len(skipped)} unreadable image(s): {examples}{more}")
    entry, dim = None, None
    if indices:
        stacked = np.concatenate(vectors)  # [n, D] float32, L2-normalised
        dim = int(stacked.shape[1])
        dtype = state.key["config"]["dtype"]
        entry = artifacts.write_embedding_shard(
            directory,
            shard,
            [records.ids[i] for i in indices],
            stacked,
            dtype,
            split=[records.splits[i] for i in indices],
        )
    state.mark_done(directory, shard, entry, skipped, dim)


def _finish(
    writer: artifacts.ArtifactWriter, state: ResumeState, shard_count: int, bundle, config: EncodeConfig, source: Path
) -> None:
    done = [state.done[str(i)] for i in range(shard_count)]
    entries = [record["entry"] for record in done if record["entry"]]
    skipped = [item for record in done for item in record["skipped"]]
    if not entries:  # nothing worth resuming: the next run reads every image again
        shutil.rmtree(writer.dir, ignore_errors=True)
        first = skipped[0]["error"] if skipped else "no rows"
        raise MltkError(f"none of the {len(skipped)} images could be read (first error: {first})", source)
    unreadable_shards = bad_shards(done)
    dims = {record["dim"] for record in done if record["entry"]}
    for state_file in writer.dir.glob("encode-state*.json"):
        state_file.unlink()
    artifacts.finish_embeddings(
        writer,
        entries,
        dim=dims.pop(),
        dtype=config.dtype,
        normalized=True,
        model=bundle.spec,
        preprocess=describe_preprocess(bundle),
        precision=config.precision,
        skipped=skipped,
        skipped_count=len(skipped),
        source=str(source.resolve()),
        **(
            {"bad_shards": unreadable_shards, "bad_shard_count": len(unreadable_shards)}
            if config.shard_size is None
            else {}
        ),
    )
    count = sum(entry["count"] for entry in entries)
    log(
        f"encode-images: {count} images encoded into {len(entries)} shard(s), {len(skipped)} skipped"
        + (
            f", {len(unreadable_shards)} bad shard(s): {', '.join(b['shard'] for b in unreadable_shards)}"
            if unreadable_shards
            else ""
        )
    )


def describe_preprocess(bundle) -> dict:
    """How pixels were prepared (enough to reproduce or to compare with another run)."""
    transforms = getattr(bundle.preprocess, "transforms", [bundle.preprocess])
    normalize = next((t for t in transforms if hasattr(t, "mean") and hasattr(t, "std")), None)
    image_size = getattr(bundle.model.visual, "image_size", ())  # (H, W) for ViTs, an int for ModifiedResNet
    return {
        "image_size": [image_size] * 2 if isinstance(image_size, int) else list(image_size),
        "mean": [float(v) for v in normalize.mean] if normalize is not None else None,
        "std": [float(v) for v in normalize.std] if normalize is not None else None,
        "transforms": [str(t) for t in transforms],
    }
