"""``mltk evaluate``: retrieval metrics (Recall@K, AR, ranks, MRV, caption-to-caption) or continual metrics."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk import artifacts
from mltk.cli.common import DeviceOption, JsonOption, emit
from mltk.errors import ConfigError
from mltk.evaluate import ContinualConfig, EvaluateConfig, parse_pair, run_continual, run_evaluation, split_list


def evaluate(
    out: Path = typer.Option(..., "--out", help="Directory of the metrics artifact to write."),
    images: Optional[str] = typer.Option(
        None, "--images", help="Image embeddings artifact (rows: id = image_id), or - to read its path from stdin."),
    texts: Optional[str] = typer.Option(
        None, "--texts", help="Text embeddings artifact with image_id, lang and caption_id columns."),
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
    chunk_mb: float = typer.Option(256, "--chunk-mb", help="Memory bound of one chunk of the score matrix (MiB)."),
    as_json: bool = JsonOption,
) -> None:
    """Evaluate cross-lingual, cross-modal retrieval per language and write a metrics artifact.

    Ranks count the scores strictly above each ground truth (ties count in its favour).

    Median and mean rank are 1-based; recalls are percentages; metrics.json records every convention.
    """
    if continual:
        path = run_continual(ContinualConfig(runs=tuple(continual), tasks=split_list(task), out=out,
                                             metric=continual_metric, report_format=report_format))
        emit(path, as_json)
        return
    if texts is None:
        raise ConfigError("--texts is required (a text embeddings artifact with image_id, lang and caption_id)")
    config = EvaluateConfig(
        images=artifacts.resolve_input(images, what="image embeddings"),
        texts=artifacts.resolve_input(texts, what="text embeddings"),
        out=out,
        metrics=tuple(metric),
        mrv_variant=mrv_variant,
        split=split,
        languages=split_list(lang),
        c2c_pairs=tuple(parse_pair(pair) for pair in c2c_pair),
        report_format=report_format,
        device=device,
        chunk_mb=chunk_mb,
    )
    emit(run_evaluation(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
