"""Pictures of results, drawn with matplotlib (Agg, no pyplot state), as PNG or SVG bytes.

Why matplotlib: labelled axes, colour bars and vector output (SVG for papers) come for free, and one style holds
for every figure. Recall-like values are drawn on a fixed 0-100 scale by default, so two runs' pictures compare
by eye and a difference of half a point does not fill the whole colour range.

- ``continual_heatmap(matrix, tasks, metric)``: a_{j,i}, rows j = after training task j, columns i = evaluated
  task, the value in each cell; cells never evaluated (i > j) are hatched.
- ``continual_curves(AR, F, tasks)``: AR_j (0-100) above F_j (its own axis) after each task (F_0 is
  undefined and not drawn).
- ``recall_bars(metrics)``: per-language R@K in both directions from a ``metrics.json`` of ``mltk evaluate``.
- ``rank_spread(metrics)``: per-language median and mean rank in both directions, with MRV when it was computed:
  how far the languages' ranks of the same ground truth drift apart.
- ``fusion_curve(fusion)``: recall against the fusion weight eta (``mltk evaluate --fusion``), one line per
  language and direction; eta = 0 is the model alone, eta = 1 translate-test alone.
- ``write_evaluation_plots(metrics, out_dir)``: every figure a metrics dict supports, as PNG and SVG files.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

FORMATS = ("png", "svg")
DPI = 150
AR_COLOUR, F_COLOUR = "#1f77b4", "#d62728"
DIRECTION_TITLES = {"i2t": "image → text", "t2i": "text → image"}
_STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "svg.hashsalt": "mltk",
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def render(figure, fmt: str = "png") -> bytes:
    """The figure as PNG or SVG bytes; SVG and PNG carry no creation date, so the same data gives the same file."""
    import matplotlib

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with matplotlib.rc_context(_STYLE):
        figure.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _styled(build):
    """Build figures under mltk's style (fonts are chosen when text is laid out, so both steps need it).
    matplotlib is imported when a figure is drawn, not when this module is: a run that draws nothing (``mltk
    evaluate`` without fusion or --plot) does not pay a second for it."""

    def wrapper(*args, fmt: str | None = "png", **kwargs):
        import matplotlib

        with matplotlib.rc_context(_STYLE):
            figure = build(*args, **kwargs)
        return figure if fmt is None else render(figure, fmt)

    wrapper.__doc__, wrapper.__name__ = build.__doc__, build.__name__
    return wrapper


# ----------------------------------------------------------------------------------------------------------------
# Continual learning
# ----------------------------------------------------------------------------------------------------------------


@_styled
def continual_heatmap(
    matrix: Sequence[Sequence[float | None]],
    tasks: Sequence[str],
    metric: str = "",
    title: str = "",
    scale: tuple[float, float] | None = (0.0, 100.0),
):
    """a[j][i] as a heatmap (``fmt="png"`` or ``"svg"`` bytes; ``fmt=None`` returns the Figure). ``scale`` fixes
    the colour range (default 0-100, recall in percent); None stretches it to the values."""
    import numpy as np

    rows, columns = len(matrix), len(tasks)
    values = np.full((rows, columns), np.nan)
    for j, row in enumerate(matrix):
        for i, value in enumerate(row[:columns]):
            if not _missing(value):
                values[j, i] = float(value)
    finite = values[np.isfinite(values)]
    low, high = scale if scale is not None else ((finite.min(), finite.max()) if finite.size else (0.0, 1.0))
    figure = _figure(max(4.2, 0.75 * columns + 2.6), max(3.2, 0.6 * rows + 1.9))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=low, vmax=high, aspect="auto")
    axes.set_facecolor("#f2f2f2")
    for j in range(rows):
        for i in range(columns):
            if np.isfinite(values[j, i]):
                fraction = (values[j, i] - low) / ((high - low) or 1.0)
                axes.text(
                    i,
                    j,
                    f"{values[j, i]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="black" if fraction > 0.6 else "white",
                )
            else:
                axes.add_patch(_hatched_cell(i, j))
    axes.set_xticks(range(columns), tasks)
    axes.set_yticks(range(rows), [f"after {tasks[j]}" if j < columns else str(j) for j in range(rows)])
    axes.set_xlabel(f"evaluated task i (its language's {metric or 'score'})")
    axes.set_ylabel("after training task j")
    axes.set_title(title or "continual matrix a[j][i]")
    for side in ("top", "right"):
        axes.spines[side].set_visible(True)
    bar = figure.colorbar(image, ax=axes, shrink=0.9)
    bar.set_label(metric or "score")
    return figure


def _hatched_cell(i: int, j: int):
    from matplotlib.patches import Rectangle

    return Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#c8c8c8", linewidth=0)


@_styled
def continual_curves(
    average: Sequence[float | None],
    forgetting: Sequence[float | None],
    tasks: Sequence[str],
    title: str = "",
    metric: str = "",
    scale: tuple[float, float] | None = (0.0, 100.0),
):
    """AR_j (top, on ``scale``, default 0-100) and F_j (below, on its own axis: forgetting is a few points, which
    a 0-100 axis would flatten) after each task j, each point labelled with its value."""
    steps = list(range(len(tasks)))
    figure = _figure(max(5.0, 0.7 * len(tasks) + 3.0), 4.6)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for axes, series, colour, marker, label in (
        (top, average, AR_COLOUR, "o", "AR"),
        (bottom, forgetting, F_COLOUR, "s", "F"),
    ):
        points = [(j, float(v)) for j, v in zip(steps, series) if not _missing(v)]
        if points:
            axes.plot(*zip(*points), marker=marker, color=colour, label=label)
        for j, v in points:
            axes.annotate(
                f"{v:.2f}", (j, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8, color=colour
            )
        axes.grid(axis="y", color="#e5e5e5")
    if scale is not None:
        top.set_ylim(*scale)
    top.set_ylabel(f"AR (mean {metric or 'score'}\nover tasks so far)")
    f_values = [float(v) for v in forgetting if not _missing(v)]
    bottom.set_ylim(min(f_values + [0.0]) * 1.3, max(f_values + [1.0]) * 1.35)
    bottom.axhline(0.0, color="#999999", linewidth=0.8)
    bottom.set_ylabel("F (forgetting,\npoints)")
    bottom.set_xticks(steps, tasks)
    bottom.set_xlabel("after training task")
    bottom.set_xlim(-0.5, len(tasks) - 0.5)
    top.set_title(title or "average recall (AR) and forgetting (F)")
    return figure


# ----------------------------------------------------------------------------------------------------------------
# Evaluation (metrics.json of mltk evaluate)
# ----------------------------------------------------------------------------------------------------------------


def _languages(metrics: Mapping) -> list[str]:
    per_language = metrics.get("per_language") or {}
    order = (metrics.get("summary") or {}).get("languages") or list(per_language)
    return [lang for lang in order if lang in per_language]


def _ks(metrics: Mapping) -> list[int]:
    return list((metrics.get("settings") or {}).get("ks") or (1, 5, 10))


@_styled
def recall_bars(metrics: Mapping, title: str = ""):
    """Per-language R@K (percent, 0-100) for image-to-text and text-to-image side by side, AR (the mean of the
    six recalls) under each language's name."""
    import numpy as np

    langs, ks = _languages(metrics), _ks(metrics)
    per_language = metrics["per_language"]
    figure = _figure(max(6.0, 1.1 * len(langs) + 2.4), 3.6)
    panels = figure.subplots(1, 2, sharey=True)
    width = 0.8 / max(len(ks), 1)
    colours = ["#9ecae1", "#4292c6", "#08519c", "#08306b"]
    positions = np.arange(len(langs))
    for axes, direction in zip(panels, ("i2t", "t2i")):
        for n, k in enumerate(ks):
            values = [per_language[lang][direction].get(f"R@{k}", np.nan) for lang in langs]
            bars = axes.bar(
                positions + (n - (len(ks) - 1) / 2) * width,
                values,
                width,
                label=f"R@{k}",
                color=colours[n % len(colours)],
            )
            if n == 0:
                axes.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
        axes.set_xticks(positions, [f"{lang}\n{per_language[lang]['AR']:.1f}" for lang in langs])
        axes.set_xlabel("language, and its AR below it")
        axes.set_ylim(0, 100)
        axes.set_title(DIRECTION_TITLES[direction])
        axes.grid(axis="y", color="#e5e5e5")
        axes.set_axisbelow(True)
    panels[0].set_ylabel("recall (%)")
    panels[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    mean = (metrics.get("summary") or {}).get("mean_AR")
    figure.suptitle(
        title or (f"retrieval per language (mean AR {mean:.2f})" if mean is not None else "retrieval per language")
    )
    return figure


@_styled
def rank_spread(metrics: Mapping, title: str = ""):
    """Per-language median and mean rank (1-based) of the ground truth in each direction, with MRV (the mean
    per-instance variance of those ranks across the languages, metrics.json ``mrv``) when it was computed."""
    import numpy as np

    langs = _languages(metrics)
    per_language = metrics["per_language"]
    mrv = metrics.get("mrv") or {}
    figure = _figure(max(6.0, 0.9 * len(langs) + 3.0), 3.4)
    panels = figure.subplots(1, 2)
    positions = np.arange(len(langs))
    for axes, direction in zip(panels, ("i2t", "t2i")):
        medians = [per_language[lang][direction]["median_rank"] for lang in langs]
        means = [per_language[lang][direction]["mean_rank"] for lang in langs]
        axes.bar(positions - 0.2, medians, 0.4, label="median rank", color="#74c476")
        axes.bar(positions + 0.2, means, 0.4, label="mean rank", color="#238b45")
        axes.set_xticks(positions, langs)
        axes.set_ylim(0, max(means + medians + [1.0]) * 1.2)
        axes.set_ylabel("rank of the ground truth (1 = top)")
        heading = DIRECTION_TITLES[direction]
        if mrv.get(direction) is not None:
            heading += f"\nMRV {mrv[direction]:.2f} ({mrv.get('variant', 'paper')}, K={mrv.get('K', len(langs))})"
        axes.set_title(heading)
        axes.grid(axis="y", color="#e5e5e5")
        axes.set_axisbelow(True)
    panels[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    figure.suptitle(title or "ranks across languages (lower and more even is better)")
    return figure


@_styled
def fusion_curve(fusion: Mapping, title: str = "", key: str = "R@1", scale: tuple[float, float] | None = (0.0, 100.0)):
    """Each ``fusion["curves"]`` series ending in ``key`` against ``fusion["etas"]``, points labelled."""
    etas = [float(e) for e in fusion.get("etas", [])]
    figure = _figure(6.0, 4.0)
    axes = figure.subplots()
    series = [(name, values) for name, values in (fusion.get("curves") or {}).items() if name.endswith(key)]
    top = [
        max((float(v) for _, values in series for v in values[i : i + 1] if not _missing(v)), default=None)
        for i in range(len(etas))
    ]  # the highest value at each eta is labelled above its point, others below
    for name, values in series:
        points = [(i, e, float(v)) for i, (e, v) in enumerate(zip(etas, values)) if not _missing(v)]
        if points:
            line = axes.plot([e for _, e, _ in points], [v for _, _, v in points], marker="o", label=name)[0]
            for i, e, v in points:
                axes.annotate(
                    f"{v:.1f}",
                    (e, v),
                    textcoords="offset points",
                    xytext=(0, 6 if v >= top[i] else -12),
                    ha="center",
                    fontsize=7,
                    color=line.get_color(),
                )
    if scale is not None:
        axes.set_ylim(*scale)
    axes.set_xlim(-0.05, 1.05)
    axes.set_xlabel("eta (0: the model alone, 1: translate-test alone)")
    axes.set_ylabel(key + " (%)")
    axes.grid(color="#e5e5e5")
    axes.legend(fontsize=8, loc="best")
    axes.set_title(title or "score fusion: (1 - eta) s(model, foreign) + eta s(English tower, translation)", fontsize=9)
    return figure


FIGURES = ("recall", "ranks", "continual_matrix", "continual_curve", "fusion_curve")


def check_plot_dir(out_dir: Path, inputs: Sequence[Path] = ()) -> None:
    """Refuse ``--plot`` before any work: inside an input or an artifact, or over existing pictures without
    ``--overwrite``."""
    from mltk.artifacts import loose

    folder = loose.check_target(out_dir, inputs, what="--plot", directory=True)
    for name in FIGURES:
        for fmt in FORMATS:
            if (folder / f"{name}.{fmt}").exists() or (folder / f"{name}.{fmt}").is_symlink():
                loose.check_target(folder / f"{name}.{fmt}", inputs, what="--plot")


def write_evaluation_plots(
    metrics: Mapping | Path, out_dir: Path, title: str = "", inputs: Sequence[Path] = ()
) -> list[Path]:
    """Write every figure ``metrics`` supports (a metrics dict, or a metrics artifact) into ``out_dir`` as PNG and
    SVG: ``recall`` and ``ranks`` for retrieval metrics, ``continual_matrix`` and ``continual_curve`` for
    continual ones. Returns the files written. ``out_dir`` is refused inside ``inputs`` or any artifact, and an
    existing picture is replaced only with ``--overwrite`` (``mltk.artifacts.loose``)."""
    from mltk.artifacts import loose

    sources = [*inputs, *([] if isinstance(metrics, Mapping) else [Path(metrics)])]
    loose.check_target(out_dir, sources, what="--plot", directory=True)
    if not isinstance(metrics, Mapping):
        from mltk import artifacts

        metrics = artifacts.load_metrics(Path(metrics))
    figures = {}
    if metrics.get("per_language"):
        figures["recall"] = recall_bars(metrics, title=title, fmt=None)
        figures["ranks"] = rank_spread(metrics, title=title, fmt=None)
    if metrics.get("continual"):
        continual = metrics["continual"]
        figures["continual_matrix"] = continual_heatmap(
            continual["matrix"], continual["tasks"], continual.get("metric", ""), title, fmt=None
        )
        figures["continual_curve"] = continual_curves(
            continual["AR"], continual["F"], continual["tasks"], title, continual.get("metric", ""), fmt=None
        )
    if metrics.get("fusion"):
        figures["fusion_curve"] = fusion_curve(metrics["fusion"], title=title, fmt=None)
    files = {f"{name}.{fmt}": render(figure, fmt) for name, figure in figures.items() for fmt in FORMATS}
    written = loose.write_files(out_dir, files, sources, what="--plot")
    if written:
        from mltk.core.runtime import log

        log(
            f"pictures of the metrics written to {out_dir}: {', '.join(sorted({p.stem for p in written}))} "
            f"({', '.join(FORMATS)})"
        )
    return written
