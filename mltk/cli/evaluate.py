"""``mltk evaluate``: retrieval metrics (Recall@K, AR, ranks, MRV, caption-to-caption) or continual metrics."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk import plots
from mltk.cli.common import DeviceOption, JsonOption, PrecisionOption, emit, resolve_input
from mltk.errors import ConfigError
from mltk.evaluate import ContinualConfig, EvaluateConfig, run_continual, run_evaluation


def parse_pair(text: str) -> tuple[str, str]:
    """``"en:de"`` -> ``("en", "de")`` (for ``--c2c-pair``)."""
    parts = [p.strip() for p in text.replace(",", ":").split(":")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--c2c-pair expects two languages as SRC:TGT, got {text!r}")
    return parts[0], parts[1]


def split_list(values: List[str]) -> tuple[str, ...]:
    """Repeated options that may also hold comma-separated items: ``["fr,de", "ja"]`` -> ``("fr", "de", "ja")``."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def evaluate(
    out: Path = typer.Option(..., "--out", help="Directory of the metrics artifact to write."),
    images: Optional[str] = typer.Option(
        None, "--images", help="Image embeddings artifact (rows: id = image_id), or - to read its path from stdin; "
        "not needed when the only metric is c2c."),
    texts: Optional[str] = typer.Option(
        None, "--texts", help="Text embeddings artifact with image_id, lang and caption_id columns."),
    model: Optional[str] = typer.Option(
        None, "--model", help="Instead of --texts: a checkpoint (MLA, train-continual, a whole CLIP) or an open_clip "
        "name that encodes --captions, each language through its own path."),
    pretrained: Optional[str] = typer.Option(
        None, "--pretrained", help="open_clip pretrained tag or weights file, when --model is an architecture name."),
    captions: Optional[str] = typer.Option(
        None, "--captions", help="Captions artifact (or .parquet) to encode with --model; only the rows of --split "
        "and --lang are encoded."),
    metric: List[str] = typer.Option(
        ["recall"], "--metric", help="recall (always computed), mrv, c2c; repeat the option for several."),
    mrv_variant: str = typer.Option(
        "paper", "--mrv-variant", help="paper: mean per-instance rank variance (eq. 7); code: mean per-instance "
        "standard deviation of 0-based ranks (the authors' code)."),
    mrv_instance: str = typer.Option(
        "auto", "--mrv-instance", help="What one text-to-image MRV instance is: auto (the image when every image "
        "has one caption per language, as on xFlickr&CO and XTD10, else the caption_id of translations), image or "
        "caption_id."),
    protocol: str = typer.Option(
        "all-captions", "--protocol", help="all-captions (every caption is a query) or first-caption (only the "
        "first caption of each image and language, as CLIP_benchmark does on XM3600-style sets)."),
    split: Optional[str] = typer.Option(None, "--split", help="Evaluate only rows of this split (e.g. test)."),
    lang: List[str] = typer.Option(
        [], "--lang", help="Languages to evaluate (default: all); repeat or comma-separate."),
    c2c_pair: List[str] = typer.Option(
        [], "--c2c-pair", help="SRC:TGT language pair for --metric c2c (default: every pair); repeatable."),
    c2c_relevance: str = typer.Option(
        "image", "--c2c-relevance", help="c2c hit: any caption of the same image (image, AME's definition) or the "
        "translation with the same caption_id (caption_id)."),
    report_format: str = typer.Option(
        "table", "--format", help="table (rich on stderr), markdown or csv (also written into the artifact), or "
        "clip-benchmark (CLIP_benchmark's JSON per language, clip_benchmark_LANG.json). Every artifact also "
        "holds metrics_long.csv (language, direction, metric, value)."),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="Dataset name for --format clip-benchmark (default: the captions' folder name)."),
    continual: List[Path] = typer.Option(
        [], "--continual", help="Metrics artifact after each trained task, in order; computes a_{j,i}, AR_j, F_j "
        "instead of retrieval metrics."),
    task: List[str] = typer.Option([], "--task", help="Task languages in training order, for --continual."),
    continual_metric: str = typer.Option(
        "t2i.R@1", "--continual-metric", help="a_{j,i} for --continual: AR or <i2t|t2i>.R@<K>."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    batch_size: int = typer.Option(256, "--batch-size", help="Captions per encoder batch (with --model)."),
    chunk_mb: float = typer.Option(256, "--chunk-mb", help="Memory bound of one chunk of the score matrix (MiB)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the metrics as PNG and SVG files in this "
                                        "directory (per-language recall, ranks; continual matrix and curves)."),
    as_json: bool = JsonOption,
) -> None:
    """Evaluate cross-lingual, cross-modal retrieval per language and write a metrics artifact.

    Caption vectors come from --texts, or from --model encoding --captions (only the --split and --lang rows).
    Ranks count the scores strictly above each ground truth (ties count in its favour).

    Median and mean rank are 1-based; recalls are percentages; metrics.json records every convention, and what
    one MRV or c2c instance is and how many there were. A warning names test images that the model's training
    data (found through the artifacts' manifests) also holds.
    """
    if continual:
        path = run_continual(ContinualConfig(runs=tuple(continual), tasks=split_list(task), out=out,
                                             metric=continual_metric, report_format=report_format))
        if plot is not None:
            plots.write_evaluation_plots(path, plot)
        emit(path, as_json)
        return
    text_only = images is None and set(metric) == {"c2c"}  # c2c runs from text embeddings alone
    config = EvaluateConfig(
        images=None if text_only else resolve_input(images, what="image embeddings"),
        texts=resolve_input(texts, what="text embeddings") if texts is not None else None,
        model=model,
        pretrained=pretrained,
        captions=resolve_input(captions, what="captions") if captions is not None else None,
        out=out,
        metrics=tuple(metric),
        mrv_variant=mrv_variant,
        mrv_instance=mrv_instance,
        protocol=protocol,
        c2c_relevance=c2c_relevance,
        dataset=dataset,
        split=split,
        languages=split_list(lang),
        c2c_pairs=tuple(parse_pair(pair) for pair in c2c_pair),
        report_format=report_format,
        device=device,
        precision=precision,
        batch_size=batch_size,
        chunk_mb=chunk_mb,
    )
    path = run_evaluation(config)
    if plot is not None:
        plots.write_evaluation_plots(path, plot)
    emit(path, as_json)


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
