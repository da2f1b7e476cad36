"""Pictures of a continual run, drawn with Pillow (no matplotlib dependency): PNG bytes.

- ``continual_heatmap(matrix, tasks, metric)``: a_{j,i}, one row per trained task j (top to bottom), one column
  per task i, coloured on a viridis-like scale with the value in each cell; cells not evaluated (i > j) are blank.
- ``continual_curves(AR, F, tasks)``: AR_j and F_j after each task, as two lines on one axis.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont

# Viridis, sampled at 0, 0.25, 0.5, 0.75, 1.
_SCALE = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
BACKGROUND, INK, GRID, BLANK = (255, 255, 255), (30, 30, 30), (220, 220, 220), (240, 240, 240)
AR_COLOUR, F_COLOUR = (31, 119, 180), (214, 39, 40)


def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: a fixed bitmap font
        return ImageFont.load_default()


def colour(fraction: float) -> tuple[int, int, int]:
    """The scale's colour at ``fraction`` in [0, 1] (clipped), linearly interpolated."""
    fraction = min(max(fraction, 0.0), 1.0) * (len(_SCALE) - 1)
    low = min(int(fraction), len(_SCALE) - 2)
    t = fraction - low
    return tuple(round(a + (b - a) * t) for a, b in zip(_SCALE[low], _SCALE[low + 1]))


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, font, fill=INK, anchor="mm") -> None:
    draw.text(xy, text, fill=fill, font=font, anchor=anchor)


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def continual_heatmap(matrix: Sequence[Sequence[float | None]], tasks: Sequence[str], metric: str = "",
                      title: str = "", cell: int = 56) -> bytes:
    """PNG of the continual matrix a[j][i] (rows: after training task j; columns: task i)."""
    rows, columns = len(matrix), len(tasks)
    font, small = _font(14), _font(12)
    left, top, right, bottom = 90, 60, 90, 40
    width, height = max(left + columns * cell + right, 380), top + rows * cell + bottom
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    values = _finite(v for row in matrix for v in row)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    span = high - low or 1.0
    _text(draw, (width / 2, 16), title or "continual matrix", font)
    _text(draw, (left + columns * cell / 2, 38), f"{metric} on task i (columns) after training task j (rows)", small)
    for i, task in enumerate(tasks):
        _text(draw, (left + i * cell + cell / 2, top + rows * cell + 14), task, font)
    for j, row in enumerate(matrix):
        _text(draw, (left - 8, top + j * cell + cell / 2), f"after {tasks[j]}", font, anchor="rm")
        for i in range(columns):
            value = row[i] if i < len(row) else None
            box = (left + i * cell, top + j * cell, left + (i + 1) * cell - 1, top + (j + 1) * cell - 1)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                draw.rectangle(box, fill=BLANK)
                continue
            fill = colour((float(value) - low) / span)
            draw.rectangle(box, fill=fill)
            luminance = 0.299 * fill[0] + 0.587 * fill[1] + 0.114 * fill[2]
            _text(draw, (box[0] + cell / 2, box[1] + cell / 2), f"{value:.1f}", small,
                  fill=INK if luminance > 140 else BACKGROUND)
    # colour bar
    bar_left, bar_top, bar_height = left + columns * cell + 20, top, rows * cell
    for y in range(bar_height):
        draw.line([(bar_left, bar_top + y), (bar_left + 14, bar_top + y)], fill=colour(1 - y / max(bar_height - 1, 1)))
    _text(draw, (bar_left + 18, bar_top), f"{high:.1f}", small, anchor="lt")
    _text(draw, (bar_left + 18, bar_top + bar_height), f"{low:.1f}", small, anchor="lb")
    return _png(image)


def _nice_step(span: float) -> float:
    raw = span / 5 if span > 0 else 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def continual_curves(average: Sequence[float | None], forgetting: Sequence[float | None], tasks: Sequence[str],
                     title: str = "", size: tuple[int, int] = (640, 400)) -> bytes:
    """PNG of AR_j and F_j over the tasks (F_0 is undefined and not drawn)."""
    width, height = size
    left, top, right, bottom = 60, 50, 20, 60
    font, small = _font(14), _font(12)
    image = Image.new("RGB", size, BACKGROUND)
    draw = ImageDraw.Draw(image)
    values = _finite(list(average) + list(forgetting)) or [0.0]
    step = _nice_step(max(values + [0.0]) - min(values + [0.0]))
    low = math.floor(min(values + [0.0]) / step) * step
    high = math.ceil(max(values + [0.0]) / step) * step
    high = high if high > low else low + step
    plot_w, plot_h = width - left - right, height - top - bottom
    count = max(len(tasks), 1)

    def x_of(j: int) -> float:
        return left + (j + 0.5) * plot_w / count

    def y_of(v: float) -> float:
        return top + plot_h * (1 - (v - low) / (high - low))

    _text(draw, (width / 2, 18), title or "average recall and forgetting", font)
    tick = low
    while tick <= high + step / 2:
        y = y_of(tick)
        draw.line([(left, y), (left + plot_w, y)], fill=GRID)
        _text(draw, (left - 6, y), f"{tick:g}", small, anchor="rm")
        tick += step
    draw.rectangle((left, top, left + plot_w, top + plot_h), outline=INK)
    for j, task in enumerate(tasks):
        _text(draw, (x_of(j), top + plot_h + 14), task, small)
    _text(draw, (left + plot_w / 2, height - 24), "after training task", small)
    for series, fill in ((average, AR_COLOUR), (forgetting, F_COLOUR)):
        points = [(x_of(j), y_of(float(v))) for j, v in enumerate(series) if v is not None and not math.isnan(v)]
        if len(points) > 1:
            draw.line(points, fill=fill, width=3)
        for x, y in points:
            draw.ellipse((x - 4, y - 4, x + 4, y + 4), fill=fill)
    for n, (label, fill) in enumerate((("AR", AR_COLOUR), ("F", F_COLOUR))):
        x = left + 12 + n * 70
        draw.line([(x, top + 14), (x + 20, top + 14)], fill=fill, width=3)
        _text(draw, (x + 26, top + 14), label, small, anchor="lm")
    return _png(image)
