"""Short clips of moving shapes with captions that describe the motion (``mltk synth-videos``): the embedded
default for video-text retrieval, as MLA evaluates it on MSR-VTT (Zhang et al., arXiv:2206.11091).

Each clip shows one object (a colour and shape of the synthetic world) that moves in a straight line to the left,
to the right, up or down over ``frames`` frames, on a textured background with fresh pixel noise in every frame.
Its caption names the object with the world's own grammar and the direction ("A red circle moves to the left.",
"Ein roter Kreis bewegt sich nach links."), in every language that has a motion phrase here. Clips are MPEG-4
files (PyAV), stored as bytes in an images-kind artifact whose manifest says ``media: video``; captions are an
ordinary captions artifact whose ``image_id`` is the video id, so every retrieval stage reads them unchanged.

Determinism: clip ``index`` of split ``s`` draws everything from ``default_rng([seed, s, index])``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.runtime import log, track
from mltk.data import lang as world_lang
from mltk.data.lang.content import COLOURS, SHAPES, CaptionContent, Mention
from mltk.data.render import PALETTE, RADIUS_RANGE, add_noise, paint_background, paint_object

DIRECTIONS = ("left", "right", "up", "down")
STEP = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, -1.0), "down": (0.0, 1.0)}  # image y points down
# "{subject} <moves DIRECTION>." per language; the subject is the world's frame-0 noun phrase (nominative).
MOTION = {
    "en": {"left": "moves to the left", "right": "moves to the right", "up": "moves up", "down": "moves down"},
    "de": {
        "left": "bewegt sich nach links",
        "right": "bewegt sich nach rechts",
        "up": "bewegt sich nach oben",
        "down": "bewegt sich nach unten",
    },
    "fr": {"left": "se déplace vers la gauche", "right": "se déplace vers la droite", "up": "monte", "down": "descend"},
    "es": {"left": "se mueve hacia la izquierda", "right": "se mueve hacia la derecha", "up": "sube", "down": "baja"},
    "it": {"left": "si muove verso sinistra", "right": "si muove verso destra", "up": "sale", "down": "scende"},
}
SPLITS = ("train", "val", "test")
VIDEOS_DIR, CAPTIONS_DIR = "videos", "captions"
FPS = 8


@dataclass(frozen=True)
class VideoWorldConfig:
    seed: int = 0
    train: int = 200
    val: int = 40
    test: int = 40
    frames: int = 16
    size: int = 64
    langs: tuple[str, ...] = ("en", "de", "fr")
    out: str | Path | None = None  # the folder ``synth_videos`` writes; where the clips are, not what they hold

    def __post_init__(self) -> None:
        unknown = [code for code in self.langs if code not in MOTION]
        if unknown:
            raise ConfigError(
                f"no motion phrase for language(s) {', '.join(unknown)}; video captions exist in {', '.join(MOTION)}"
            )
        if min(self.train, self.val, self.test) < 0 or self.train + self.val + self.test == 0:
            raise ConfigError("the video world needs at least one clip and no negative split size")
        if not 2 <= self.frames <= 256 or self.size % 16 or not 32 <= self.size <= 512:
            raise ConfigError(
                f"--frames must be 2..256 and --size a multiple of 16 in 32..512, got {self.frames}, {self.size}"
            )


@dataclass(frozen=True)
class Clip:
    video_id: str
    split: str
    colour: str
    shape: str
    direction: str
    mp4: bytes


def caption(colour: str, shape: str, direction: str, code: str) -> str:
    """ "A red circle moves to the left." in language ``code``."""
    subject = world_lang.render(CaptionContent((Mention(shape=shape, colour=colour),), frame=0), code).rstrip(".")
    return f"{subject} {MOTION[code][direction]}."


def render_clip(
    colour: str, shape: str, direction: str, rng: np.random.Generator, frames: int, size: int
) -> list[np.ndarray]:
    """The frames (uint8 [size, size, 3] each) of one object crossing most of the image in ``direction``."""
    background = paint_background(rng, size)
    radius = rng.uniform(*RADIUS_RANGE["large"]) * size
    rotation = math.radians(rng.uniform(-10.0, 10.0))
    tint = np.clip(np.array(PALETTE[colour]) + rng.integers(-15, 16, 3), 0, 255).astype(np.float32)
    dx, dy = STEP[direction]
    room = size - 2 * radius - 4  # how far the centre can go without leaving the image
    travel = rng.uniform(0.5, 0.9) * room
    across = rng.uniform(radius + 2, size - radius - 2)  # the coordinate that stays fixed
    start = (
        rng.uniform(radius + 2, size - radius - 2 - travel)
        if dx + dy > 0
        else rng.uniform(radius + 2 + travel, size - radius - 2)
    )
    out = []
    for t in range(frames):
        along = start + (dx + dy) * travel * t / (frames - 1)
        centre = (along, across) if dx else (across, along)
        image = background.copy()
        paint_object(image, shape, radius, rotation, centre, tint)
        out.append(add_noise(image, rng))
    return out


def encode_mp4(frames: list[np.ndarray], fps: int = FPS) -> bytes:
    """MPEG-4 Part 2 in an MP4 container (PyAV's bundled FFmpeg), at a bit rate that keeps small frames sharp."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = 4_000_000  # far above what 64 x 64 pixels need: no smearing of later frames
        stream.gop_size = 4  # a key frame every 4 frames
        stream.thread_count = 1  # the same bytes on every run
        for array in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(array, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def generate_clip(config: VideoWorldConfig, split: str, index: int) -> Clip:
    rng = np.random.default_rng([config.seed, SPLITS.index(split), index])
    colour, shape = COLOURS[rng.integers(len(COLOURS))], SHAPES[rng.integers(len(SHAPES))]
    direction = DIRECTIONS[rng.integers(len(DIRECTIONS))]
    frames = render_clip(colour, shape, direction, rng, config.frames, config.size)
    return Clip(f"{split}-clip-{index:05d}", split, colour, shape, direction, encode_mp4(frames))


def synth_videos(config: VideoWorldConfig) -> Path:
    """``mltk synth-videos``: write ``config.out/videos`` (clips as MP4 bytes) and ``config.out/captions``; returns
    the folder ``config.out``."""
    if config.out is None:
        raise ConfigError("VideoWorldConfig.out names no folder to write the clips into")
    out_dir = Path(config.out).resolve()
    settings = artifacts.settings_without(config, "out")  # what the clips are made of
    videos_out, captions_out = out_dir / VIDEOS_DIR, out_dir / CAPTIONS_DIR
    reused = [
        artifacts.reusable(path, kind, stage="synth-videos", config=settings)
        for path, kind in ((videos_out, "images"), (captions_out, "captions"))
    ]
    if all(reused):
        return out_dir
    tasks = [(split, i) for split in SPLITS for i in range(getattr(config, split))]
    clips = [generate_clip(config, split, i) for split, i in track(tasks, "synth-videos", total=len(tasks))]
    videos = pa.table(
        {
            "image_id": [c.video_id for c in clips],
            "split": [c.split for c in clips],
            "image": pa.array([c.mp4 for c in clips], pa.binary()),
            "scene": [f'{{"colour":"{c.colour}","shape":"{c.shape}","direction":"{c.direction}"}}' for c in clips],
        }
    )
    rows = [
        (c.video_id, code, caption(c.colour, c.shape, c.direction, code), f"{c.video_id}#0", c.split)
        for c in clips
        for code in config.langs
    ]
    captions = pa.table(
        {
            name: pa.array([row[i] for row in rows], pa.string())
            for i, name in enumerate(("image_id", "lang", "caption", "caption_id", "split"))
        }
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    artifacts.write_images(
        videos_out,
        videos,
        stage="synth-videos",
        config=settings,
        media="video",
        format="mp4",
        frames=config.frames,
        fps=FPS,
    )
    artifacts.write_captions(captions_out, captions, stage="synth-videos", config=settings)
    log(
        f"synth-videos: {len(clips)} clips of {config.frames} frames, {captions.num_rows} captions in "
        f"{len(config.langs)} language(s) -> {out_dir}"
    )
    return out_dir
