"""``mltk evaluate``: retrieval metrics (Recall@K, AR, ranks, MRV, caption-to-caption); ``mltk
evaluate-continual``: the continual metrics (a_{j,i}, AR_j, F_j) of a sequence of metrics artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from mltk.cli.common import (
    LIST_METAVAR,
    BaseOption,
    emit,
    examples,
    hidden_alias,
    lang_option,
    out_option,
    resolve_input,
    route_input,
    split_list,
)
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt, PretrainedOpt
from mltk.core.errors import ConfigError

EXAMPLE = examples(
    "mltk evaluate runs/le --images emb --captions world/captions \\",
    "    --split test --metric recall,mrv -o m-le",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk evaluate -m runs/le --captions world/captions -o m",
)
CONTINUAL_EXAMPLE = examples("mltk evaluate-continual m-task1 m-task2 m-task3 --task de,fr,zh -o continual")

SourceArg = typer.Argument(
    None,
    metavar="[ARTIFACT]",
    help="Taken by its kind: a checkpoint (as --model), image embeddings (as --images), "
    "text embeddings (as --texts) or captions (as --captions); - or a pipe reads its path from stdin.",
)
OutOpt = out_option("Directory of the metrics artifact to write.")
ImagesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--images",
        help="Image embeddings artifact (rows: id = image_id), or - to read its path from stdin; not needed "
        "when the only metric is c2c.",
    ),
]
TextsOpt = Annotated[
    Optional[str], typer.Option("--texts", help="Text embeddings artifact with image_id, lang and caption_id columns.")
]
CaptionsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--captions",
        help="Captions artifact (or .parquet) to encode with --model; only the rows of --split and --lang are encoded.",
    ),
]
MetricOpt = Annotated[
    List[str],
    typer.Option(
        "--metric",
        metavar=LIST_METAVAR,
        help="recall (always computed), mrv, c2c; repeat the option or comma-separate "
        "(recall,mrv). bli: bilingual lexicon induction of --model's table over --lexicon (alone, it needs no captions "
        "or images).",
    ),
]
LexiconOpt = Annotated[
    Optional[Path], typer.Option("--lexicon", help="--metric bli: a lexicon artifact (source language -> en).")
]
BliKOpt = Annotated[int, typer.Option("--bli-k", help="--metric bli: CSLS's k nearest neighbours (MUSE: 10).")]
SimilarityOpt = Annotated[
    Optional[str],
    typer.Option(
        "--similarity",
        help="Rank image-text pairs by cosine or order (AME's order violation). Default: the similarity "
        "the model trained with (train-ccrk --similarity), else cosine.",
    ),
]
BliVocabOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--bli-vocab",
        help="--metric bli: a captions artifact whose train words are the model's vocabulary (default: "
        "the captions the model was trained on, found through its manifests).",
    ),
]
TranslationsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--translations",
        help="Captions artifact whose English rows translate the evaluated captions (same "
        "caption_id), e.g. xFlickr&CO's annotations_machine-translate; with --fusion.",
    ),
]
FusionOpt = Annotated[
    List[str],
    typer.Option(
        "--fusion",
        metavar=LIST_METAVAR,
        help="Score fusion weights in [0, 1]: (1 - eta) s(model, native caption) + "
        "eta s(model's English path, translation); 0 = the model alone, 1 = translate-test. 'default' is the "
        "authors' grid 0,0.1,...,1 (a range A,B,...,C parses too). Adds a fusion table and fusion_curve.png.",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Score embeddings that are refused otherwise (NaN/inf, all-zero, constant, not unit length "
        "under normalized: true, image and text from different models) and list each problem in metrics.json "
        "warnings.",
    ),
]
MrvVariantOpt = Annotated[
    str,
    typer.Option(
        "--mrv-variant",
        help="paper: mean per-instance rank variance (eq. 7); code: mean per-instance standard "
        "deviation of 0-based ranks (the authors' code).",
    ),
]
MrvInstanceOpt = Annotated[
    str,
    typer.Option(
        "--mrv-instance",
        help="What one text-to-image MRV instance is: auto (the image when every image has one "
        "caption per language, as on xFlickr&CO and XTD10, else the caption_id of translations), image or caption_id.",
    ),
]
ProtocolOpt = Annotated[
    str,
    typer.Option(
        "--protocol",
        help="all-captions (every caption is a query) or first-caption (only the first caption of each "
        "image and language, as CLIP_benchmark does on XM3600-style sets).",
    ),
]
FoldsOpt = Annotated[
    int,
    typer.Option(
        "--folds",
        help="Cut the gallery into N consecutive folds, evaluate each alone and average (5 on COCO's 5K test "
        "split = the COCO 1K protocol); per-fold results are kept in metrics.json.",
    ),
]
SplitOpt = Annotated[
    List[str],
    typer.Option(
        "--split",
        metavar=LIST_METAVAR,
        help="Evaluate only rows of these splits (e.g. test, or test,val); repeat or comma-separate.",
    ),
]
LangOpt = lang_option("Languages to evaluate (default: all); repeat or comma-separate.")
C2cPairOpt = Annotated[
    List[str],
    typer.Option("--c2c-pair", help="SRC:TGT language pair for --metric c2c (default: every pair); repeatable."),
]
C2cRelevanceOpt = Annotated[
    str,
    typer.Option(
        "--c2c-relevance",
        help="c2c hit: any caption of the same image (image, AME's definition) or the translation "
        "with the same caption_id (caption_id). By image, a pair where some captions have a translation and others "
        "do not (Multi30K's two tasks merged) is refused.",
    ),
]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        help="table (rich on stderr), markdown or csv (also written into the artifact), or clip-benchmark "
        "(CLIP_benchmark's JSON per language in clip_benchmark/LANG.json; `clip_benchmark build "
        "ARTIFACT/clip_benchmark` reads them). Every artifact also holds metrics_long.csv (language, direction, "
        "metric, value).",
    ),
]
DatasetOpt = Annotated[
    Optional[str],
    typer.Option("--dataset", help="Dataset name for --format clip-benchmark (default: the captions' folder name)."),
]
EncodeBatchOpt = Annotated[int, typer.Option("--batch-size", help="Captions per encoder batch (with --model).")]
ChunkOpt = Annotated[float, typer.Option("--chunk-mb", help="Memory bound of one chunk of the score matrix (MiB).")]
PlotOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--plot",
        help="Also draw the metrics as PNG and SVG files in this directory (per-language recall, ranks; "
        "continual matrix and curves).",
    ),
]
EvalModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        help="Instead of --texts: a checkpoint (MLA, train-continual, a whole CLIP) or an open_clip "
        "name that encodes --captions, each language through its own path.",
    ),
]


def parse_pair(text: str) -> tuple[str, str]:
    """``"en:de"`` -> ``("en", "de")`` (for ``--c2c-pair``)."""
    parts = [p.strip() for p in text.replace(",", ":").split(":")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--c2c-pair expects two languages as SRC:TGT, got {text!r}")
    return parts[0], parts[1]


def evaluate(
    source: Optional[str] = SourceArg,
    out: Path = OutOpt,
    images: ImagesOpt = None,
    texts: TextsOpt = None,
    model: EvalModelOpt = None,
    pretrained: PretrainedOpt = None,
    base: Optional[List[str]] = BaseOption,
    captions: CaptionsOpt = None,
    metric: MetricOpt = ["recall"],
    lexicon: LexiconOpt = None,
    bli_k: BliKOpt = 10,
    bli_vocab: BliVocabOpt = None,
    similarity: SimilarityOpt = None,
    translations: TranslationsOpt = None,
    fusion: FusionOpt = [],
    mrv_variant: MrvVariantOpt = "paper",
    mrv_instance: MrvInstanceOpt = "auto",
    protocol: ProtocolOpt = "all-captions",
    folds: FoldsOpt = 1,
    split: SplitOpt = [],
    lang: List[str] = LangOpt,
    c2c_pair: C2cPairOpt = [],
    c2c_relevance: C2cRelevanceOpt = "image",
    report_format: FormatOpt = "table",
    dataset: DatasetOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    batch_size: EncodeBatchOpt = 256,
    chunk_mb: ChunkOpt = 256,
    force: ForceOpt = False,
    plot: PlotOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate cross-lingual, cross-modal retrieval per language and write a metrics artifact.

    Caption vectors come from --texts, or from --model encoding --captions (only the --split and --lang rows).
    Ranks count the other candidates scoring at or above each ground truth (ties count against it; metrics.json
    ties says how many). Degenerate embeddings (NaN/inf, zero, constant, not unit length) and image and text
    embeddings from different models are refused (exit 2) unless --force.

    Median and mean rank are 1-based; recalls are percentages; metrics.json records every convention, and what
    one MRV or c2c instance is and how many there were. A warning names test images that the model's training
    data (found through the artifacts' manifests) also holds. Continual metrics: mltk evaluate-continual."""
    from mltk.evaluate import EvaluateConfig, run_evaluation
    from mltk.evaluate.fusion import parse_etas

    metrics, etas = split_list(metric), parse_etas(fusion)  # option values checked before any file
    routed = _route_inputs(source, images, texts, model, captions, metrics)
    inputs = _check_plot(plot, [*(p for p in routed.values() if p is not None), Path(out)])
    config = EvaluateConfig(
        images=routed["image-embeddings"],
        texts=routed["text-embeddings"],
        captions=routed["captions"],
        model=str(routed["checkpoint"]) if routed["checkpoint"] is not None else model,
        pretrained=pretrained,
        out=out,
        metrics=metrics,
        mrv_variant=mrv_variant,
        mrv_instance=mrv_instance,
        protocol=protocol,
        folds=folds,
        c2c_relevance=c2c_relevance,
        dataset=dataset,
        split=",".join(split_list(split)) or None,
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
        bli_vocab=bli_vocab,
        similarity=similarity,
        translations=translations,
        fusion=etas,
    )
    _emit_with_plots(run_evaluation(config), plot, as_json, inputs)


def _route_inputs(
    source: str | None,
    images: str | None,
    texts: str | None,
    model: str | None,
    captions: str | None,
    metrics: tuple[str, ...],
) -> dict[str, Path | None]:
    """The inputs of ``evaluate`` by role (checkpoint, image-embeddings, text-embeddings, captions) from the
    options and the positional / piped artifact. stdin is consulted only for what is still missing (a --model
    name needs no checkpoint from a pipe)."""
    if images == "-":  # the old way to pipe image embeddings: now the positional (or nothing) does it by kind
        if source is not None:
            raise ConfigError("--images - and a positional input both read stdin; give one")
        source, images = "-", None
    for value in (images, texts, captions):
        if value is not None:
            resolve_input(value)  # a missing path fails here, naming it
    wanting = ["image-embeddings"] if images is None and set(metrics) - {"c2c", "bli"} else []
    if texts is None and captions is None and set(metrics) != {"bli"}:
        wanting += ["text-embeddings", "captions"] + (["checkpoint"] if model is None else [])
    return route_input(
        source,
        {
            "checkpoint": model if model is not None and Path(model).exists() else None,
            "image-embeddings": images,
            "text-embeddings": texts,
            "captions": captions,
        },
        default="captions",
        options={
            "checkpoint": "--model",
            "image-embeddings": "--images",
            "text-embeddings": "--texts",
            "captions": "--captions",
        },
        wanting=wanting,
    )


def evaluate_continual(
    runs: List[Path] = typer.Argument(
        None, metavar="RUNS...", help="Metrics artifact after each trained task (mltk evaluate), in training order."
    ),
    old_runs: List[Path] = hidden_alias("--continual", []),
    task: List[str] = typer.Option(
        [], "--task", metavar=LIST_METAVAR, help="Task languages in training order; repeat or comma-separate."
    ),
    continual_metric: str = typer.Option("t2i.R@1", "--continual-metric", help="a_{j,i}: AR or <i2t|t2i>.R@<K>."),
    out: Path = OutOpt,
    report_format: FormatOpt = "table",
    plot: PlotOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continual-learning metrics of a sequence of metrics artifacts, one per trained task: a_{j,i} (the metric of
    language i after task j), AR_j (the mean over the languages so far) and F_j (forgetting)."""
    from mltk.evaluate import ContinualConfig, run_continual

    if runs and old_runs:
        raise ConfigError("give the metrics artifacts as positional RUNS or with the old --continual, not both")
    inputs = _check_plot(plot, [*(runs or old_runs), Path(out)])
    _emit_with_plots(
        run_continual(
            ContinualConfig(
                runs=tuple(runs or old_runs),
                tasks=split_list(task),
                out=out,
                metric=continual_metric,
                report_format=report_format,
            )
        ),
        plot,
        as_json,
        inputs,
    )


def _check_plot(plot: Path | None, inputs: list[Path]) -> list[Path]:
    """--plot is refused before any work (inside an input or an artifact, over pictures without --overwrite);
    returns the inputs the pictures must stay out of."""
    if plot is not None:
        from mltk.present import plots

        plots.check_plot_dir(plot, inputs)
    return inputs


def _emit_with_plots(path: Path, plot: Path | None, as_json: bool, inputs: list[Path]) -> None:
    if plot is not None:
        from mltk.present import plots

        plots.write_evaluation_plots(path, plot, inputs=inputs)
    emit(path, as_json)


def register(app: typer.Typer) -> None:
    app.command("evaluate", epilog=EXAMPLE)(evaluate)
    app.command("evaluate-continual", epilog=CONTINUAL_EXAMPLE)(evaluate_continual)
