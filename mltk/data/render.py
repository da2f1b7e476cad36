"""Drawing the embedded world's scenes: shapes on a textured background, and a fast PNG encoder."""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np
from PIL import Image, ImageDraw

from mltk.data.scene import Scene

GRID = 3  # the image is a GRID x GRID board of cells, at most one object per cell

# Well separated at 64 x 64, and all far from the low-saturation mid-tone backgrounds.
PALETTE = {
    "red": (215, 35, 35),
    "green": (35, 165, 60),
    "blue": (40, 80, 225),
    "yellow": (240, 215, 30),
    "purple": (140, 50, 190),
    "orange": (250, 135, 25),
    "white": (245, 245, 245),
    "black": (25, 25, 25),
}
# Radius as a fraction of the image side.
RADIUS_RANGE = {"small": (0.070, 0.090), "large": (0.120, 0.150)}
SUPERSAMPLE = 4  # shapes are drawn at 4x and box-filtered down, for anti-aliased edges


def _regular_polygon(n: int, radius: float, inner: float | None = None, start: float = -math.pi / 2) -> np.ndarray:
    """Vertices (x, y) of a regular polygon, or of a star when ``inner`` (the inner radius) is given."""
    points = []
    steps = 2 * n if inner is not None else n
    for k in range(steps):
        r = inner if inner is not None and k % 2 else radius
        angle = start + 2 * math.pi * k / steps
        points.append((r * math.cos(angle), r * math.sin(angle)))
    return np.array(points)


def _heart() -> np.ndarray:
    t = np.linspace(0, 2 * math.pi, 48, endpoint=False)
    x = 16 * np.sin(t) ** 3
    y = -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))
    points = np.stack([x, y + 2.5], axis=1) / 16.5
    return points


def _cross(arm: float = 0.32) -> np.ndarray:
    a, r = arm, 1.0
    return np.array(
        [(-a, -r), (a, -r), (a, -a), (r, -a), (r, a), (a, a), (a, r), (-a, r), (-a, a), (-r, a), (-r, -a), (-a, -a)]
    )


# Unit outlines (radius 1, y pointing down). Circle and ring are drawn as ellipses.
OUTLINES = {
    "square": np.array([(-0.8, -0.8), (0.8, -0.8), (0.8, 0.8), (-0.8, 0.8)]),
    "triangle": _regular_polygon(3, 1.0) + np.array([0.0, 0.15]),
    "star": _regular_polygon(5, 1.0, inner=0.42),
    "cross": _cross(),
    "heart": _heart(),
    "diamond": np.array([(0.0, -1.0), (0.62, 0.0), (0.0, 1.0), (-0.62, 0.0)]),
}
RING_INNER = 0.55
MAX_ROTATION_DEG = 10.0  # small, so a square never turns into a diamond or a plus into an x


def paint_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A low-saturation mid-tone base colour, a gentle gradient and a blotchy texture: float32 (size, size, 3)."""
    hue, saturation, value = rng.random(), rng.uniform(0.0, 0.22), rng.uniform(0.42, 0.70)
    base = np.array(_hsv_to_rgb(hue, saturation, value), dtype=np.float32) * 255
    coords = np.arange(size, dtype=np.float32) / (size - 1) - 0.5
    angle = rng.uniform(0, 2 * math.pi)
    gradient = (np.cos(angle) * coords[None, :] + np.sin(angle) * coords[:, None]) * rng.uniform(0, 30)
    coarse = (128 + rng.normal(0, rng.uniform(2, 10), (4, 4))).clip(0, 255).astype(np.uint8)
    texture = np.asarray(Image.fromarray(coarse).resize((size, size), Image.BILINEAR), dtype=np.float32) - 128
    return base[None, None, :] + (gradient + texture)[:, :, None]


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def _object_mask(
    shape: str, radius: float, rotation: float, centre: tuple[float, float], box: tuple[int, int, int, int]
) -> np.ndarray:
    """Anti-aliased coverage in [0, 1] of one object over the pixel box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    s = SUPERSAMPLE
    canvas = Image.new("L", ((x1 - x0) * s, (y1 - y0) * s), 0)
    draw = ImageDraw.Draw(canvas)
    cx, cy = (centre[0] - x0) * s, (centre[1] - y0) * s
    r = radius * s
    if shape in ("circle", "ring"):
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
        if shape == "ring":
            ri = r * RING_INNER
            draw.ellipse((cx - ri, cy - ri, cx + ri, cy + ri), fill=0)
    else:
        c, si = math.cos(rotation), math.sin(rotation)
        points = OUTLINES[shape] @ np.array([[c, si], [-si, c]]) * r + np.array([cx, cy])
        draw.polygon([tuple(p) for p in points.tolist()], fill=255)
    return np.asarray(canvas.reduce(s), dtype=np.float32) / 255.0


def render_scene(scene: Scene, rng: np.random.Generator, size: int) -> np.ndarray:
    """Draw ``scene`` as a uint8 RGB array (size, size, 3)."""
    image = paint_background(rng, size)
    cell = size / GRID
    for obj in scene.objects:
        radius = rng.uniform(*RADIUS_RANGE[obj.size]) * size
        slack = max(cell / 2 - radius - 0.5, 0.0)
        row, col = obj.cell
        centre = ((col + 0.5) * cell + rng.uniform(-slack, slack), (row + 0.5) * cell + rng.uniform(-slack, slack))
        rotation = math.radians(rng.uniform(-MAX_ROTATION_DEG, MAX_ROTATION_DEG))
        colour = np.clip(np.array(PALETTE[obj.colour]) + rng.integers(-15, 16, 3), 0, 255).astype(np.float32)
        paint_object(image, obj.shape, radius, rotation, centre, colour)
    return add_noise(image, rng)


def paint_object(
    image: np.ndarray, shape: str, radius: float, rotation: float, centre: tuple[float, float], colour: np.ndarray
) -> None:
    """Draw one anti-aliased shape into the float RGB ``image`` (size, size, 3), in place."""
    size = image.shape[0]
    x0, y0 = max(int(centre[0] - radius) - 1, 0), max(int(centre[1] - radius) - 1, 0)
    x1, y1 = min(int(math.ceil(centre[0] + radius)) + 1, size), min(int(math.ceil(centre[1] + radius)) + 1, size)
    if x1 <= x0 or y1 <= y0:
        return
    alpha = _object_mask(shape, radius, rotation, centre, (x0, y0, x1, y1))[:, :, None]
    patch = image[y0:y1, x0:x1]
    image[y0:y1, x0:x1] = patch * (1 - alpha) + colour * alpha


def add_noise(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Pixel noise of a random strength, then rounding to uint8."""
    image = image + rng.standard_normal(image.shape, dtype=np.float32) * np.float32(rng.uniform(2.0, 6.0))
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def encode_png(array: np.ndarray) -> bytes:
    """Encode a uint8 RGB array (h, w, 3) as PNG with the fixed "Sub" filter and zlib level 1.

    Pillow tries all five PNG filters on every row, which makes encoding 4x slower than everything else in
    this module together; on these noisy images the fixed Sub filter compresses as well (about 8.4 KB per 64 x 64
    image). Any PNG reader decodes the result (tests check the round trip through Pillow)."""
    height, width, channels = array.shape
    if array.dtype != np.uint8 or channels != 3:
        raise ValueError("encode_png expects a uint8 RGB array")
    rows = array.reshape(height, width * 3)
    filtered = rows.copy()
    filtered[:, 3:] -= rows[:, :-3]  # Sub: each byte minus the same channel of the pixel to its left (mod 256)
    scanlines = np.concatenate([np.ones((height, 1), np.uint8), filtered], axis=1)  # filter-type byte 1 = Sub
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 1))
        + _png_chunk(b"IEND", b"")
    )


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
