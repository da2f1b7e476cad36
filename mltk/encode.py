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
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset, default_collate

from mltk import artifacts, schema
from mltk.errors import ArtifactError, ConfigError, MltkError, SchemaError
from mltk.runtime import Runtime, log, progress_bar, resolve_runtime, seed_everything

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
NO_SPLIT = ""  # the split of images from a folder or a Parquet file without a ``split`` column
RESUME_STATE = "encode-state.json"  # lives in the partial directory only; removed before the manifest is written
MAX_ERROR_CHARS = 300


# ----------------------------------------------------------------------------------------------------------------
# Sources: an images artifact, an image folder, or a Parquet table of ids and paths
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class ImageRecords:
    """The images to encode, in source order: ids, splits, and either file paths or encoded bytes."""

    ids: list[str]
    splits: list[str]
    paths: list[str] | None = None
    blobs: pa.Array | None = None  # binary, one encoded image (PNG, JPEG, ...) per row

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, rows: Sequence[int]) -> ImageRecords:
        rows = list(rows)
        return ImageRecords(
            [self.ids[i] for i in rows],
            [self.splits[i] for i in rows],
            [self.paths[i] for i in rows] if self.paths is not None else None,
            self.blobs.take(pa.array(rows, pa.int64())) if self.blobs is not None else None,
        )


def read_image_source(source: str | os.PathLike) -> ImageRecords:
    """Read what ``encode-images`` accepts: an images artifact (bytes or paths), a folder of image files
    (recursive; ``image_id`` is the relative path without extension), or a Parquet file of ``image_id`` and
    ``path`` (or ``image`` bytes) with an optional ``split`` column."""
    source = Path(source)
    if not source.exists():
        raise ArtifactError("no such file or directory", source)
    if artifacts.is_artifact(source):
        return _records_from_table(artifacts.load_images(source), source)
    if source.is_dir():
        return _records_from_folder(source)
    if source.suffix == ".parquet":
        return _records_from_parquet(source)
    raise ArtifactError("not an images artifact, an image folder or a Parquet file of image paths", source)


def _records_from_folder(folder: Path) -> ImageRecords:
    """Image files under ``folder`` (hidden files and folders skipped), sorted by relative path."""
    root = folder.resolve()
    relative = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
        prefix = os.path.relpath(directory, root)
        relative += [name if prefix == "." else f"{prefix}/{name}" for name in names
                     if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS]
    if not relative:
        raise ArtifactError(f"no image files ({', '.join(sorted(IMAGE_EXTENSIONS))}) in the folder", folder)
    relative.sort()
    ids = [os.path.splitext(name)[0] for name in relative]
    return ImageRecords(ids, [NO_SPLIT] * len(ids), paths=[str(root / name) for name in relative])


def _records_from_parquet(path: Path) -> ImageRecords:
    table = artifacts.read_table(path)
    if "split" not in table.column_names:
        table = table.append_column("split", pa.array([NO_SPLIT] * table.num_rows, pa.string()))
    table = artifacts.validate_images(table, path)
    if "path" in table.column_names:
        resolved = [p if _is_absolute_or_url(p) else str((path.parent / p).resolve())
                    for p in table.column("path").to_pylist()]
        table = table.set_column(table.schema.get_field_index("path"), "path", pa.array(resolved, pa.string()))
    return _records_from_table(table, path)


def _is_absolute_or_url(path: str) -> bool:
    return os.path.isabs(path) or "://" in path


def _records_from_table(table: pa.Table, origin: Path) -> ImageRecords:
    ids = table.column("image_id").to_pylist()
    splits = table.column("split").to_pylist()
    if "path" in table.column_names:
        paths = table.column("path").to_pylist()
        if any(p is None for p in paths):
            raise SchemaError("column path has null values", origin)
        return ImageRecords(ids, splits, paths=paths)
    blobs = table.column("image").combine_chunks()
    if not (pa.types.is_binary(blobs.type) or pa.types.is_large_binary(blobs.type)):
        raise SchemaError(f"column image has type {blobs.type}, expected binary (encoded image bytes)", origin)
    return ImageRecords(ids, splits, blobs=blobs)


def filter_splits(records: ImageRecords, splits: Sequence[str] | None, origin: Path) -> ImageRecords:
    """Keep the rows of the named splits (all rows when ``splits`` is empty)."""
    if not splits:
        return records
    wanted = set(splits)
    rows = [i for i, split in enumerate(records.splits) if split in wanted]
    if not rows:
        present = sorted(set(records.splits))
        raise ConfigError(f"no images in split(s) {', '.join(sorted(wanted))} (the source has "
                          f"{', '.join(repr(s) for s in present)})", origin)
    return records.select(rows)


def check_unique_ids(records: ImageRecords, origin: Path) -> None:
    if len(set(records.ids)) != len(records.ids):
        seen, duplicates = set(), []
        for image_id in records.ids:
            if image_id in seen and len(duplicates) < 3:
                duplicates.append(image_id)
            seen.add(image_id)
        raise SchemaError(f"image_id values are not unique (e.g. {', '.join(map(repr, duplicates))})", origin)


# ----------------------------------------------------------------------------------------------------------------
# Decoding in DataLoader workers
# ----------------------------------------------------------------------------------------------------------------


class DecodedImages(Dataset):
    """Row ``i`` -> ``(i, pixels [3, H, W] or None, error or None)``. Never raises for a bad image: the error
    travels with the row so that the main process can skip, count and report it."""

    def __init__(self, records: ImageRecords, preprocess: Callable):
        self.records = records
        self.preprocess = preprocess

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor | None, str | None]:
        try:
            image = self._open(index)
            image.load()
            return index, self.preprocess(image.convert("RGB")), None
        except Exception as exc:  # noqa: BLE001 - any failure to read one image is reported, not fatal
            return index, None, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]

    def _open(self, index: int) -> Image.Image:
        if self.records.blobs is not None:
            data = self.records.blobs[index].as_py()
            if data is None:
                raise ValueError("image bytes are null")
            return Image.open(io.BytesIO(data))
        path = self.records.paths[index]
        if "://" in path:
            raise ValueError(f"{path} is a URL; mltk does not download images (fetch them, then pass local paths)")
        return Image.open(path)


@dataclass
class DecodedBatch:
    indices: list[int]  # source rows of the images in ``pixels``
    pixels: torch.Tensor | None  # [B, 3, H, W], None when no image of the batch could be read
    failures: list[tuple[int, str]]  # (source row, error)


def collate_decoded(items: list[tuple[int, torch.Tensor | None, str | None]]) -> DecodedBatch:
    good = [(index, pixels) for index, pixels, _ in items if pixels is not None]
    failures = [(index, error) for index, pixels, error in items if pixels is None]
    # default_collate stacks straight into shared memory inside a worker, saving a copy per batch
    pixels = default_collate([p for _, p in good]) if good else None
    return DecodedBatch([index for index, _ in good], pixels, failures)


def default_workers() -> int:
    """One worker per spare core, at most 8: decoding overlaps with the forward pass on the main process."""
    return max(0, min(8, (os.cpu_count() or 1) - 1))


# ----------------------------------------------------------------------------------------------------------------
# The forward pass of a frozen tower
# ----------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def frozen_tower_session(tower: torch.nn.Module, runtime: Runtime) -> Iterator[None]:
    """One no-grad autocast region around a whole encoding run of a frozen tower (image or text).

    Why one region, and why the parameters are marked as requiring grad inside it: autocast casts an fp32 weight
    to bf16/fp16 at every op call, and caches the cast only for leaf tensors that require grad, until the
    outermost autocast region exits (the Apex heuristic; the cache is also off under ``torch.inference_mode``).
    A frozen tower with a fresh region per batch therefore re-casts every weight for every batch, which made
    bf16 encoding of ViT-B/32 on the CPU 2.4x slower than a plain open_clip loop. Under ``no_grad`` no graph is
    recorded, so the flags change nothing else; they are restored on exit and the vectors are bitwise the same.
    """
    frozen = [p for p in tower.parameters() if p.is_floating_point() and not p.requires_grad]
    for parameter in frozen:
        parameter.requires_grad_(True)
    try:
        with torch.no_grad(), runtime.autocast():
            yield
    finally:
        for parameter in frozen:
            parameter.requires_grad_(False)


def encode_with_frozen_tower(encode: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    """Run a frozen tower (``clip.encode_image``, or a text tower's ``encode``) on one batch inside a
    ``frozen_tower_session``: the output [B, D] cast to float32 and L2-normalised, x / ||x||_2 per row.

    Normalising in float32 keeps bf16/fp16 rounding out of the norm."""
    return F.normalize(encode(inputs).float(), dim=-1)


# ----------------------------------------------------------------------------------------------------------------
# Shards and the resume state
# ----------------------------------------------------------------------------------------------------------------


def shard_ranges(count: int, shard_size: int) -> list[range]:
    """Shard ``i`` covers rows ``[i * shard_size, (i + 1) * shard_size)``, the same on every run."""
    return [range(start, min(start + shard_size, count)) for start in range(0, count, shard_size)]


def batch_plan(shards: dict[int, range], batch_size: int) -> tuple[list[list[int]], list[int]]:
    """Batches never cross a shard boundary, so a shard's vectors do not depend on which shards were done
    before. Returns the batches (lists of source rows) and the shard of each batch."""
    batches, owners = [], []
    for shard, rows in shards.items():
        for start in range(rows.start, rows.stop, batch_size):
            batches.append(list(range(start, min(start + batch_size, rows.stop))))
            owners.append(shard)
    return batches, owners


@dataclass
class ResumeState:
    """What a previous run finished, kept in the partial directory: ``key`` identifies the source and every
    setting that changes the vectors; a rerun with another key starts over."""

    key: dict
    done: dict[str, dict] = field(default_factory=dict)  # shard index -> {"entry": ..., "skipped": [...], "dim"}

    @classmethod
    def load_or_reset(cls, directory: Path, key: dict) -> ResumeState:
        path = directory / RESUME_STATE
        if path.is_file():
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                saved = {}
            if saved.get("key") == key:
                state = cls(key, saved.get("done", {}))
                state._drop_incomplete(directory)
                return state
            log("encode-images: the unfinished run in the partial directory used another source or settings; "
                "starting over")
        for stale in directory.iterdir():
            if stale.is_file():
                stale.unlink()
        return cls(key)

    def _drop_incomplete(self, directory: Path) -> None:
        for shard, record in list(self.done.items()):
            entry = record.get("entry")
            if entry and not all((directory / entry[name]).is_file() for name in ("vectors", "rows")):
                del self.done[shard]

    def mark_done(self, directory: Path, shard: int, entry: dict | None, skipped: list[dict], dim: int | None) -> None:
        self.done[str(shard)] = {"entry": entry, "skipped": skipped, "dim": dim}
        artifacts.write_json(directory / RESUME_STATE, {"key": self.key, "done": self.done})


# ----------------------------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodeConfig:
    """Everything that changes the vectors (plus how the work is cut); recorded in the manifest."""

    model: str
    pretrained: str | None
    dtype: str
    shard_size: int
    batch_size: int
    splits: tuple[str, ...]
    precision: str
    device: str
    seed: int


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
) -> Path:
    """Encode the images of ``source`` with the image tower of ``model`` into an embeddings artifact at
    ``out_dir``; returns its path. Rows carry ``id`` (the image_id) and ``split``. ``seed`` fixes random
    weights (an architecture without ``pretrained``), so that a resumed run continues with the same model."""
    _check_options(batch_size, shard_size, dtype, workers)
    source = Path(source)
    records = filter_splits(read_image_source(source), splits, source)
    check_unique_ids(records, source)
    runtime = resolve_runtime(device, precision)
    seed_everything(seed)
    from mltk.models.clip import load_clip  # open_clip import is slow; keep it off the module import path

    bundle = load_clip(model, pretrained, device=runtime.device)
    config = EncodeConfig(str(model), pretrained, dtype, shard_size, batch_size, tuple(splits or ()),
                          runtime.precision, runtime.device.type, seed)
    inputs = [source] + [Path(p) for p in (model, pretrained) if p and Path(p).exists()]
    writer = artifacts.ArtifactWriter(out_dir, "embeddings", stage="encode-images", config=config, inputs=inputs,
                                      resume=True)
    if writer.existing is not None:
        return writer.reuse()
    key = _plain_json({"config": dataclasses.asdict(config), "inputs": writer.manifest["inputs"],
                       "rows": len(records)})
    with writer:
        state = ResumeState.load_or_reset(writer.dir, key)
        shards = shard_ranges(len(records), shard_size)
        pending = {i: rows for i, rows in enumerate(shards) if str(i) not in state.done}
        if len(pending) < len(shards):
            log(f"encode-images: resuming, {len(shards) - len(pending)} of {len(shards)} shards already done")
        _encode_pending(records, pending, bundle, runtime, writer.dir, state, batch_size,
                        default_workers() if workers is None else workers)
        _finish(writer, state, len(shards), bundle, config, source)
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


def _encode_pending(records: ImageRecords, pending: dict[int, range], bundle, runtime: Runtime, directory: Path,
                    state: ResumeState, batch_size: int, workers: int) -> None:
    """Encode the pending shards, writing each one (and recording it in the resume state) as it completes."""
    if not pending:
        return
    batches, owners = batch_plan(pending, batch_size)
    loader = DataLoader(DecodedImages(records, bundle.preprocess), batch_sampler=batches, num_workers=workers,
                        collate_fn=collate_decoded, pin_memory=runtime.device.type == "cuda")
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
        entry = artifacts.write_embedding_shard(directory, shard, [records.ids[i] for i in indices], stacked, dtype,
                                                split=[records.splits[i] for i in indices])
    state.mark_done(directory, shard, entry, skipped, dim)


def _finish(writer: artifacts.ArtifactWriter, state: ResumeState, shard_count: int, bundle, config: EncodeConfig,
            source: Path) -> None:
    done = [state.done[str(i)] for i in range(shard_count)]
    entries = [record["entry"] for record in done if record["entry"]]
    skipped = [item for record in done for item in record["skipped"]]
    if not entries:  # nothing worth resuming: the next run reads every image again
        shutil.rmtree(writer.dir, ignore_errors=True)
        first = skipped[0]["error"] if skipped else "no rows"
        raise MltkError(f"none of the {len(skipped)} images could be read (first error: {first})", source)
    dims = {record["dim"] for record in done if record["entry"]}
    (writer.dir / RESUME_STATE).unlink()
    artifacts.finish_embeddings(
        writer, entries, dim=dims.pop(), dtype=config.dtype, normalized=True,
        model=bundle.spec, preprocess=describe_preprocess(bundle), precision=config.precision,
        skipped=skipped, skipped_count=len(skipped), source=str(source.resolve()),
    )
    count = sum(entry["count"] for entry in entries)
    log(f"encode-images: {count} images encoded into {len(entries)} shard(s), {len(skipped)} skipped")


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
