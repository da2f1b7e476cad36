"""``mltk evaluate``: retrieval metrics (Recall@K, AR, ranks, MRV, caption-to-caption) or continual metrics."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import BaseOption
from mltk.cli.common import (DeviceOption, JsonOption, PrecisionOption, emit, examples, lang_option, out_option,
                              resolve_input, route_input, split_list)
from mltk.core.errors import ConfigError

EXAMPLE = examples(
    "mltk evaluate runs/le --images emb --captions world/captions \\",
    "    --split test --metric recall,mrv -o m",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk evaluate --model runs/le --captions world/captions -o m")


def parse_pair(text: str) -> tuple[str, str]:
    """``"en:de"`` -> ``("en", "de")`` (for ``--c2c-pair``)."""
    parts = [p.strip() for p in text.replace(",", ":").split(":")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--c2c-pair expects two languages as SRC:TGT, got {text!r}")
    return parts[0], parts[1]


def evaluate(
    source: Optional[str] = typer.Argument(
        None, metavar="[ARTIFACT]", help="Taken by its kind: a checkpoint (as --model), image embeddings (as "
        "--images), text embeddings (as --texts) or captions (as --captions); - or a pipe reads its path from "
        "stdin."),
    out: Path = out_option("Directory of the metrics artifact to write."),
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
    base: Optional[List[str]] = BaseOption,
    captions: Optional[str] = typer.Option(
        None, "--captions", help="Captions artifact (or .parquet) to encode with --model; only the rows of --split "
        "and --lang are encoded."),
    metric: List[str] = typer.Option(
        ["recall"], "--metric", metavar="A[,B...]", help="recall (always computed), mrv, c2c; repeat the option or "
        "comma-separate (recall,mrv). bli: bilingual lexicon induction of --model's table over --lexicon (alone, "
        "it needs no captions or images)."),
    lexicon: Optional[Path] = typer.Option(
        None, "--lexicon", help="--metric bli: a lexicon artifact (source language -> en)."),
    bli_k: int = typer.Option(10, "--bli-k", help="--metric bli: CSLS's k nearest neighbours (MUSE: 10)."),
    translations: Optional[Path] = typer.Option(
        None, "--translations", help="Captions artifact whose English rows translate the evaluated captions (same "
        "caption_id), e.g. xFlickr&CO's annotations_machine-translate; with --fusion."),
    fusion: List[str] = typer.Option(
        [], "--fusion", metavar="ETA[,ETA...]", help="Score fusion weights in [0, 1]: (1 - eta) s(model, foreign) + "
        "eta s(English tower, translation); 0 = the model alone, 1 = translate-test. Adds a fusion table and "
        "fusion_curve.png."),
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
    folds: int = typer.Option(
        1, "--folds", help="Cut the gallery into N consecutive folds, evaluate each alone and average (5 on COCO's "
        "5K test split = the COCO 1K protocol); per-fold results are kept in metrics.json."),
    split: Optional[str] = typer.Option(None, "--split", help="Evaluate only rows of this split (e.g. test)."),
    lang: List[str] = lang_option("Languages to evaluate (default: all); repeat or comma-separate."),
    c2c_pair: List[str] = typer.Option(
        [], "--c2c-pair", help="SRC:TGT language pair for --metric c2c (default: every pair); repeatable."),
    c2c_relevance: str = typer.Option(
        "image", "--c2c-relevance", help="c2c hit: any caption of the same image (image, AME's definition) or the "
        "translation with the same caption_id (caption_id)."),
    report_format: str = typer.Option(
        "table", "--format", help="table (rich on stderr), markdown or csv (also written into the artifact), or "
        "clip-benchmark (CLIP_benchmark's JSON per language in clip_benchmark/LANG.json; `clip_benchmark build "
        "ARTIFACT/clip_benchmark` reads them). Every artifact also "
        "holds metrics_long.csv (language, direction, metric, value)."),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="Dataset name for --format clip-benchmark (default: the captions' folder name)."),
    continual: List[Path] = typer.Option(
        [], "--continual", help="Metrics artifact after each trained task, in order; computes a_{j,i}, AR_j, F_j "
        "instead of retrieval metrics."),
    task: List[str] = typer.Option([], "--task", metavar="A[,B...]", help="Task languages in training order, for "
                                   "--continual; repeat or comma-separate."),
    continual_metric: str = typer.Option(
        "t2i.R@1", "--continual-metric", help="a_{j,i} for --continual: AR or <i2t|t2i>.R@<K>."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    batch_size: int = typer.Option(256, "--batch-size", help="Captions per encoder batch (with --model)."),
    chunk_mb: float = typer.Option(256, "--chunk-mb", help="Memory bound of one chunk of the score matrix (MiB)."),
    force: bool = typer.Option(
        False, "--force", help="Score embeddings that are refused otherwise (NaN/inf, all-zero, constant, not unit "
        "length under normalized: true, image and text from different models) and list each problem in "
        "metrics.json warnings."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the metrics as PNG and SVG files in this "
                                        "directory (per-language recall, ranks; continual matrix and curves)."),
    as_json: bool = JsonOption,
) -> None:
    """Evaluate cross-lingual, cross-modal retrieval per language and write a metrics artifact.

    Caption vectors come from --texts, or from --model encoding --captions (only the --split and --lang rows).
    Ranks count the other candidates scoring at or above each ground truth (ties count against it; metrics.json
    ties says how many). Degenerate embeddings (NaN/inf, zero, constant, not unit length) and image and text
    embeddings from different models are refused (exit 2) unless --force.

    Median and mean rank are 1-based; recalls are percentages; metrics.json records every convention, and what
    one MRV or c2c instance is and how many there were. A warning names test images that the model's training
    data (found through the artifacts' manifests) also holds."""
    from mltk.present import plots
    from mltk.evaluate import ContinualConfig, EvaluateConfig, run_continual, run_evaluation

    from mltk.evaluate.fusion import parse_etas

    metrics = split_list(metric)
    given = [Path(p) for p in (images, texts, captions, model, source, *continual) if p not in (None, "-")]
    inputs = [p for p in given if p.exists()] + [Path(out)]
    if plot is not None:
        plots.check_plot_dir(plot, inputs)
    if continual:
        path = run_continual(ContinualConfig(runs=tuple(continual), tasks=split_list(task), out=out,
                                             metric=continual_metric, report_format=report_format))
        if plot is not None:
            plots.write_evaluation_plots(path, plot, inputs=inputs)
        emit(path, as_json)
        return
    if images == "-":  # the old way to pipe image embeddings: now the positional (or nothing) does it by kind
        if source is not None:
            raise ConfigError("--images - and a positional input both read stdin; give one")
        source, images = "-", None
    for value in (images, texts, captions):
        if value is not None:
            resolve_input(value)  # a missing path fails here, naming it
    # stdin is consulted only for what is still missing (a --model name needs no checkpoint from a pipe)
    wanting = ["image-embeddings"] if images is None and set(metrics) - {"c2c", "bli"} else []
    if texts is None and captions is None and set(metrics) != {"bli"}:
        wanting += ["text-embeddings", "captions"] + (["checkpoint"] if model is None else [])
    routed = route_input(source, {"checkpoint": model if model is not None and Path(model).exists() else None,
                                  "image-embeddings": images, "text-embeddings": texts, "captions": captions},
                         default="captions", options={"checkpoint": "--model", "image-embeddings": "--images",
                                                      "text-embeddings": "--texts", "captions": "--captions"},
                         wanting=wanting)
    if routed["checkpoint"] is not None:
        model = str(routed["checkpoint"])
    config = EvaluateConfig(
        images=routed["image-embeddings"],
        texts=routed["text-embeddings"],
        model=model,
        pretrained=pretrained,
        captions=routed["captions"],
        out=out,
        metrics=metrics,
        mrv_variant=mrv_variant,
        mrv_instance=mrv_instance,
        protocol=protocol,
        folds=folds,
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
        force=force,
        lexicon=lexicon,
        bli_k=bli_k,
        translations=translations,
        fusion=parse_etas(fusion),
    )
    path = run_evaluation(config)
    if plot is not None:
        plots.write_evaluation_plots(path, plot, inputs=inputs)
    emit(path, as_json)


def register(app: typer.Typer) -> None:
    app.command("evaluate", epilog=EXAMPLE)(evaluate)
