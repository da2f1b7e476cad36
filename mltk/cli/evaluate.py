"""``mltk evaluate``: retrieval metrics (Recall@K, AR, ranks, MRV, caption-to-caption) or continual metrics."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk import artifacts, plots
from mltk.cli.common import DeviceOption, JsonOption, PrecisionOption, emit
from mltk.evaluate import ContinualConfig, EvaluateConfig, parse_pair, run_continual, run_evaluation, split_list


def evaluate(
    out: Path = typer.Option(..., "--out", help="Directory of the metrics artifact to write."),
    images: Optional[str] = typer.Option(
        None, "--images", help="Image embeddings artifact (rows: id = image_id), or - to read its path from stdin."),
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
    split: Optional[str] = typer.Option(None, "--split", help="Evaluate only rows of this split (e.g. test)."),
    lang: List[str] = typer.Option(
        [], "--lang", help="Languages to evaluate (default: all); repeat or comma-separate."),
    c2c_pair: List[str] = typer.Option(
        [], "--c2c-pair", help="SRC:TGT language pair for --metric c2c (default: every pair); repeatable."),
    report_format: str = typer.Option(
        "table", "--format", help="table (rich on stderr), markdown or csv (also written into the artifact)."),
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

    Median and mean rank are 1-based; recalls are percentages; metrics.json records every convention.
    """
    if continual:
        path = run_continual(ContinualConfig(runs=tuple(continual), tasks=split_list(task), out=out,
                                             metric=continual_metric, report_format=report_format))
        if plot is not None:
            plots.write_evaluation_plots(path, plot)
        emit(path, as_json)
        return
    config = EvaluateConfig(
        images=artifacts.resolve_input(images, what="image embeddings"),
        texts=artifacts.resolve_input(texts, what="text embeddings") if texts is not None else None,
        model=model,
        pretrained=pretrained,
        captions=artifacts.resolve_input(captions, what="captions") if captions is not None else None,
        out=out,
        metrics=tuple(metric),
        mrv_variant=mrv_variant,
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
