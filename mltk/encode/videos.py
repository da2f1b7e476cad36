"""Encode videos with a frozen CLIP image tower into one vector per video (``mltk encode-videos``).

MLA's video-text retrieval (Zhang et al., arXiv:2206.11091, MSR-VTT) follows CLIP4Clip's parameter-free "meanP":
N frames sampled uniformly over the whole video (N = 12), each through the frozen image tower, the frame vectors
L2-normalised and averaged, and the mean normalised again:

    v(video) = normalize( (1/N) * sum_n normalize(f_image(frame_{t_n})) ),   t_n = round(n * (T - 1) / (N - 1))

so the first and last frames are always among the N (a video of T < N frames repeats frames). The result is an
ordinary embeddings artifact whose ``id`` is the video id: ``evaluate``, ``index`` and the training stages read it
as they read image embeddings. ``--keep-frames`` adds the frame vectors (``frames.npy`` [V * N, D] row-aligned with
``frames.parquet``: video id and frame index) for frame-level work.

Videos are decoded with PyAV (FFmpeg bundled in its wheel; torchvision's video reader is gone from current
releases). A video that cannot be decoded is skipped, counted and listed in the manifest, like an unreadable image.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
import torch.nn.functional as F
from PIL import Image

from mltk import artifacts
from mltk.core.errors import ConfigError, MltkError
from mltk.core.runtime import log, resolve_runtime, seed_everything, track
from mltk.data.image_sources import ImageRecords, filter_splits, read_image_source
from mltk.encode.images import describe_preprocess, frozen_tower_session

DEFAULT_FRAMES = 12
MAX_FRAMES = 256
"""Frames per video at most: CLIP4Clip and MLA sample 12, video-text work rarely more than 64; each frame is one
image through the tower (``--batch-size`` videos x frames per forward pass), so a larger count only exhausts memory."""
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v")
FRAMES_FILE, FRAME_ROWS_FILE = "frames.npy", "frames.parquet"


@dataclass(frozen=True)
class VideoEncodeConfig:
    """Everything that changes the vectors, recorded in the manifest, and where the videos are and the vectors go
    (``source``, ``out``: not recorded; the input is fingerprinted)."""

    model: str
    pretrained: str | None = None
    frames: int = DEFAULT_FRAMES
    batch_size: int = 8  # videos per forward pass (frames x batch_size images)
    dtype: str = "float16"
    splits: tuple[str, ...] = ()
    keep_frames: bool = False
    device: str = "auto"
    precision: str = "auto"
    seed: int = 0
    source: str | Path | None = None  # the videos to encode (an input, fingerprinted apart from the settings)
    out: str | Path | None = None  # the embeddings artifact to write


def uniform_frame_indices(total: int, count: int) -> list[int]:
    """``count`` frame indices spread evenly over ``0 .. total - 1``, both ends included (see module docstring)."""
    if total < 1:
        raise ValueError("a video with no frames")
    if count == 1:
        return [(total - 1) // 2]
    return [int(round(n * (total - 1) / (count - 1))) for n in range(count)]


def read_frames(source: str | bytes, count: int) -> list[Image.Image]:
    """``count`` uniformly sampled RGB frames of a video file path or its bytes. Frames are decoded in order and
    only up to the last one needed."""
    import av

    with av.open(io.BytesIO(source) if isinstance(source, bytes) else source) as container:
        stream = container.streams.video[0]
        total = stream.frames or sum(1 for _ in container.decode(stream))
        if not stream.frames:  # the container did not say: counted by decoding, so rewind
            container.seek(0)
        wanted = uniform_frame_indices(total, count)
        kept: dict[int, Image.Image] = {}
        for position, frame in enumerate(container.decode(stream)):
            if position in wanted:
                kept[position] = frame.to_image().convert("RGB")
            if position >= wanted[-1]:
                break
    if len(kept) < len(set(wanted)):
        raise ValueError(f"decoded {len(kept)} of the {len(set(wanted))} frames wanted (the video says {total})")
    return [kept[i] for i in wanted]


def mean_pool(frame_vectors: torch.Tensor) -> torch.Tensor:
    """[B, N, D] frame vectors -> [B, D]: normalise each frame, average, normalise again (meanP)."""
    return F.normalize(F.normalize(frame_vectors.float(), dim=-1).mean(dim=1), dim=-1)


def video_records(source: Path, splits: tuple[str, ...]) -> ImageRecords:
    """A video folder, a Parquet of ids and paths, or a videos artifact (``synth-videos``, ``import-data msrvtt``)."""
    if source.is_dir() and not artifacts.is_artifact(source):
        paths = sorted(
            p
            for p in source.rglob("*")
            if p.suffix.lower() in VIDEO_EXTENSIONS
            and not any(part.startswith(".") for part in p.relative_to(source).parts)
        )
        if not paths:
            raise ConfigError(f"no video files ({', '.join(VIDEO_EXTENSIONS)}) in the folder", source)
        ids = [p.relative_to(source).with_suffix("").as_posix() for p in paths]
        refuse_shared_ids(ids, paths, source)
        return ImageRecords(ids, ["none"] * len(ids), paths=[str(p.resolve()) for p in paths])
    return filter_splits(read_image_source(source), splits, source)


def refuse_shared_ids(ids: list[str], paths: list[Path], source: Path) -> None:
    """A video's id is its path without the extension, so ``a.mp4`` and ``a.mov`` would both be ``a``: refused
    before anything is written (the embeddings would hold one id twice, which every reader refuses)."""
    first_path: dict[str, Path] = {}
    for video_id, path in zip(ids, paths):
        if video_id in first_path:
            raise ConfigError(
                f"{first_path[video_id].relative_to(source)} and {path.relative_to(source)} would both "
                f"be video {video_id!r} (the id is the path without its extension); rename or move "
                f"one",
                source,
            )
        first_path[video_id] = path


def encode_videos(config: VideoEncodeConfig) -> Path:
    """``mltk encode-videos``: encode the videos of ``config.source`` into an embeddings artifact at
    ``config.out``; returns its path."""
    if config.source is None or config.out is None:
        raise ConfigError("VideoEncodeConfig needs source (the videos) and out (the embeddings artifact)")
    if config.frames < 1 or config.batch_size < 1:
        raise ConfigError(f"--frames and --batch-size must be at least 1, got {config.frames}, {config.batch_size}")
    if config.frames > MAX_FRAMES:
        raise ConfigError(
            f"--frames {config.frames} is over the limit of {MAX_FRAMES} frames per video (MLA "
            f"samples {DEFAULT_FRAMES})"
        )
    source, out_dir = Path(config.source), config.out
    records = video_records(source, config.splits)
    inputs = [source] + [Path(p) for p in (config.model, config.pretrained) if p and Path(p).exists()]
    writer = artifacts.ArtifactWriter(
        out_dir,
        "embeddings",
        stage="encode-videos",
        config=artifacts.settings_without(config, "source", "out"),
        inputs=inputs,
    )
    if writer.existing is not None:
        return writer.reuse()
    runtime = resolve_runtime(config.device, config.precision)
    seed_everything(config.seed)
    from mltk.models.clip import load_clip

    bundle = load_clip(config.model, config.pretrained, device=runtime.device)
    frames, ids, splits, skipped = _encode_all(records, bundle, runtime, config)
    if not ids:
        raise MltkError(
            f"none of the {len(records)} videos could be decoded (first error: {skipped[0]['error']})", source
        )
    with writer:
        pooled = mean_pool(torch.from_numpy(np.stack(frames))).numpy()  # [V, D]
        entry = artifacts.write_embedding_shard(writer.dir, 0, ids, pooled, config.dtype, split=splits)
        if config.keep_frames:
            _write_frames(writer.dir, ids, np.stack(frames))
        artifacts.finish_embeddings(
            writer,
            [entry],
            dim=int(pooled.shape[1]),
            dtype=config.dtype,
            normalized=True,
            model=bundle.spec,
            preprocess=describe_preprocess(bundle),
            media="video",
            frames=config.frames,
            pooling="mean of normalised frame vectors",
            skipped=skipped,
            skipped_count=len(skipped),
            source=str(source.resolve()),
        )
    log(f"encode-videos: {len(ids)} videos x {config.frames} frames encoded, {len(skipped)} skipped")
    return writer.path


def _encode_all(records: ImageRecords, bundle, runtime, config: VideoEncodeConfig):
    """Frame vectors ([N, D] float32 per video, L2-normalised), ids and splits of the decodable videos, and the
    skipped ones."""
    frames, ids, splits, skipped = [], [], [], []
    batches = range(0, len(records), config.batch_size)
    with frozen_tower_session(bundle.model.visual, runtime):
        for start in track(batches, "encode-videos", total=len(batches)):
            pixels, kept = [], []
            for row in range(start, min(start + config.batch_size, len(records))):
                try:
                    images = read_frames(_video_source(records, row), config.frames)
                except Exception as exc:  # one bad video is reported, not fatal
                    skipped.append({"video_id": records.ids[row], "error": f"{type(exc).__name__}: {exc}"[:200]})
                    continue
                pixels.append(torch.stack([bundle.preprocess(image) for image in images]))  # [N, 3, H, W]
                kept.append(row)
            if not kept:
                continue
            batch = torch.cat(pixels).to(runtime.device)  # [B * N, 3, H, W]
            vectors = F.normalize(bundle.model.encode_image(batch).float(), dim=-1).cpu()
            frames.extend(vectors.view(len(kept), config.frames, -1).numpy())
            ids.extend(records.ids[row] for row in kept)
            splits.extend(records.splits[row] for row in kept)
    return frames, ids, splits, skipped


def _video_source(records: ImageRecords, row: int) -> str | bytes:
    if records.blobs is not None:
        return records.blobs[row].as_py()
    return records.paths[row]


def _write_frames(directory: Path, ids: list[str], frames: np.ndarray) -> None:
    """``frames.npy`` [V * N, D] float32 and ``frames.parquet`` (video id, frame number) in the same order."""
    count = frames.shape[1]
    artifacts.save_array(directory / FRAMES_FILE, frames.reshape(-1, frames.shape[2]).astype(np.float32))
    rows = pa.table(
        {
            "id": [video for video in ids for _ in range(count)],
            "frame": pa.array([n for _ in ids for n in range(count)], pa.int32()),
        }
    )
    artifacts.write_table(directory / FRAME_ROWS_FILE, rows)
