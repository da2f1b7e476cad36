"""``mltk evaluate`` from artifacts to artifact: load embeddings artifacts (or encode captions through a checkpoint),
call ``mltk.evaluate.retrieval.evaluate_retrieval``, warn when the test images are training images, and write the
metrics artifact with its report files (``mltk.present.report``).

Text vectors come from ``text_embeddings_for``: a text embeddings artifact, or the captions encoded through a
checkpoint (``mltk.encode_texts``), each language through its own path. Image embeddings are optional when only
caption-to-caption retrieval is asked for.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from mltk import artifacts, metrics as M

from mltk.present import report
from mltk.core.errors import ConfigError, SchemaError
from mltk.evaluate.folds import evaluate_folds
from mltk.evaluate.retrieval import _column_strings, _split_column, check_options, evaluate_retrieval
from mltk.train.preflight import check_image_embeddings
from mltk.check_overlap import training_data_of, warn_if_overlap
from mltk.core.runtime import Runtime, log, resolve_runtime

if TYPE_CHECKING:  # mltk.encode_texts imports open_clip; evaluating embeddings artifacts does not need it
    from mltk.encode_texts import TextEncoder

REPORT_FORMATS = ("table", "markdown", "csv", "clip-benchmark")


@dataclass(frozen=True)
class EvaluateConfig:
    """Everything ``mltk evaluate`` needs (built by the CLI, received by ``run_evaluation``)."""

    images: Path | None                # None: text embeddings alone (only --metric c2c)
    out: Path
    texts: Path | None = None          # a text embeddings artifact, or:
    model: str | None = None           # a checkpoint (or open_clip name) that encodes ``captions``
    pretrained: str | None = None      # open_clip pretrained tag or weights file, for a model name
    captions: Path | None = None
    metrics: tuple[str, ...] = ("recall",)
    mrv_variant: str = "paper"
    mrv_instance: str = "auto"         # auto, image or caption_id (see retrieval.mrv_instance_mode)
    split: str | None = None
    languages: tuple[str, ...] = ()
    c2c_pairs: tuple[tuple[str, str], ...] = ()
    c2c_relevance: str = "image"       # image (AME) or caption_id
    protocol: str = "all-captions"     # or first-caption (CLIP_benchmark on XM3600-style sets)
    folds: int = 1                     # 5: COCO 1K, the mean over 5 folds of the gallery (mltk.evaluate.folds)
    dataset: str | None = None         # the dataset name written by --format clip-benchmark
    ks: tuple[int, ...] = M.DEFAULT_KS
    report_format: str = "table"
    device: str = "auto"
    precision: str = "auto"            # autocast of the text encoder; ranking is always float32
    batch_size: int = 256              # captions per encoder batch
    chunk_mb: float = 256


@dataclass(frozen=True)
class ContinualConfig:
    """``mltk evaluate --continual``: one metrics artifact per trained task, in training order."""

    runs: tuple[Path, ...]
    tasks: tuple[str, ...]
    out: Path
    metric: str = "t2i.R@1"
    report_format: str = "table"


# ----------------------------------------------------------------------------------------------------------------
# Artifacts in, artifact out
# ----------------------------------------------------------------------------------------------------------------


def load_normalized_embeddings(path: Path) -> tuple[pa.Table, np.ndarray]:
    """An embeddings artifact as ``(table, vectors)``, L2-normalised when the manifest says it is not."""
    table, vectors = artifacts.load_embeddings(path)
    if not artifacts.read_manifest(path, "embeddings").get("normalized", True):
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, 1e-12)
    return table, vectors


@dataclass(frozen=True)
class TextVectors:
    """The caption vectors to evaluate, where they came from (``inputs`` for the manifest, ``source`` for error
    messages) and how they were obtained (``settings``, copied into ``metrics.json`` as ``settings.texts``)."""

    table: pa.Table
    vectors: np.ndarray
    inputs: list[Path]
    source: str
    settings: dict


def check_text_source(config: EvaluateConfig) -> None:
    """Exactly one source of caption vectors: ``--texts``, or ``--model`` with ``--captions``."""
    if config.texts is not None and config.model is not None:
        raise ConfigError("give either --texts (text embeddings) or --model with --captions (captions to encode), "
                          "not both")
    if config.texts is None and config.model is None:
        raise ConfigError("--texts (text embeddings with image_id, lang and caption_id) or --model with --captions "
                          "is required")
    if config.model is not None and config.captions is None:
        raise ConfigError(f"--model {config.model} needs --captions (the captions artifact to encode)")
    if config.model is None and (config.captions is not None or config.pretrained is not None):
        raise ConfigError("--captions and --pretrained go with --model (the checkpoint that encodes the captions)")
    if config.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {config.batch_size}")


def text_embeddings_for(config: EvaluateConfig, image_table: pa.Table | None, runtime: Runtime) -> TextVectors:
    """The caption vectors to evaluate: a text embeddings artifact (``--texts``), or the captions of
    ``--captions`` encoded by ``--model``, each language through its own path.

    Only the captions that will be evaluated are encoded: those of ``--split`` (the captions' own split column,
    or, when it is empty, the images of that split) and of the ``--lang`` languages.
    """
    if config.texts is not None:
        table, vectors = load_normalized_embeddings(config.texts)
        return TextVectors(table, vectors, [config.texts], str(config.texts),
                           {"from": "embeddings", "texts": str(Path(config.texts).resolve())})
    source = str(config.captions)
    captions = _captions_to_encode(artifacts.load_captions(config.captions), image_table, config, source)
    languages = sorted(set(captions.column("lang").to_pylist()))
    encoder = load_model_encoder(config.model, config.pretrained, runtime.device)
    check_model_languages(encoder, languages, config.model)
    log(f"encoding {captions.num_rows} caption(s) in {', '.join(languages)} with {config.model} "
        f"({runtime.device}, {runtime.precision})")
    from mltk.encode_texts import encode_captions

    table, vectors = encode_captions(encoder, captions, runtime, batch_size=config.batch_size, languages=languages)
    model_path = Path(config.model)
    settings = {"from": "model", "model": str(model_path.resolve()) if model_path.exists() else config.model,
                "pretrained": config.pretrained, "captions": str(Path(config.captions).resolve()),
                "captions_encoded": table.num_rows, "languages_encoded": languages,
                "precision": runtime.precision, "batch_size": config.batch_size}
    inputs = [config.captions, *([model_path] if model_path.exists() else [])]
    return TextVectors(table, vectors, inputs, source, settings)


def _captions_to_encode(captions: pa.Table, image_table: pa.Table | None, config: EvaluateConfig,
                        source: str) -> pa.Table:
    """The rows of a captions table that the evaluation will use (see ``text_embeddings_for``), checked before
    any encoding: the asked languages exist and every caption's image has an embedding."""
    if config.split is not None:
        caption_split = _split_column(captions)
        image_split = _split_column(image_table) if image_table is not None else None
        if caption_split is not None:
            keep = caption_split == config.split
        elif image_split is not None:
            in_split = set(_column_strings(image_table, "id")[image_split == config.split].tolist())
            keep = np.isin(_column_strings(captions, "image_id"), list(in_split))
        else:
            raise ConfigError(f"--split {config.split}: neither the image embeddings nor the captions have a split "
                              "value")
        captions = captions.filter(pa.array(keep, pa.bool_()))
    if config.languages:
        present = set(captions.column("lang").to_pylist())
        unknown = [lang for lang in config.languages if lang not in present]
        if unknown:
            raise ConfigError(f"language(s) {', '.join(unknown)} have no captions"
                              + (f" in split {config.split}" if config.split else ""), source)
        captions = captions.filter(pa.array(np.isin(_column_strings(captions, "lang"), list(config.languages)),
                                            pa.bool_()))
    if captions.num_rows == 0:
        raise ConfigError("no captions to evaluate" + (f" in split {config.split}" if config.split else ""), source)
    if image_table is None:  # caption-to-caption retrieval from the captions alone
        return captions
    image_ids = set(_column_strings(image_table, "id").tolist())
    orphans = [i for i in dict.fromkeys(captions.column("image_id").to_pylist()) if i not in image_ids]
    if orphans:
        raise SchemaError(f"{len(orphans)} image id(s) of the captions have no image embedding (first: "
                          f"{orphans[0]!r})", source)
    return captions


def load_model_encoder(model: str, pretrained: str | None, device: torch.device) -> TextEncoder:
    """A text encoder from a checkpoint artifact (any format in ``mltk.encode_texts.TEXT_ENCODER_LOADERS``), a
    transformers / sentence-transformers folder, or an open_clip architecture name (with ``pretrained`` weights). A path that does not exist is named as such
    instead of being taken for an unknown architecture."""
    from mltk.encode_texts import load_text_encoder
    from mltk.models.clip import is_hf_model_folder

    path = Path(model)
    if is_hf_model_folder(path):  # a transformers / sentence-transformers folder: a text tower, no artifact
        return load_text_encoder(model, pretrained, device=device)
    if pretrained is None and (path.exists() or os.sep in model or model.startswith(".")):
        artifacts.read_manifest(path, "checkpoint")
    return load_text_encoder(model, pretrained, device=device)


def check_model_languages(encoder: TextEncoder, languages: Sequence[str], model: str) -> None:
    """Every language must have a path through the encoder (an encoder whose ``languages`` is None reads any)."""
    if encoder.languages is None:
        return
    known = [getattr(encoder, "native_lang", "en"), *encoder.languages]
    unknown = [lang for lang in languages if lang not in known]
    if unknown:
        raise ConfigError(f"the model has no path for language(s) {', '.join(unknown)} (it reads "
                          f"{', '.join(known)}); pick languages with --lang", model)


def run_evaluation(config: EvaluateConfig) -> Path:
    """Evaluate embeddings artifacts (or captions encoded by a checkpoint), write the metrics artifact (with
    metrics_long.csv, and metrics.md / metrics.csv / clip_benchmark_LANG.json for those formats), print the
    report on stderr, and return the artifact path."""
    _check_report_format(config.report_format)
    check_text_source(config)
    if config.images is None and set(config.metrics) - {"c2c"}:
        raise ConfigError("--images (image embeddings) is required unless the only metric is c2c")
    check_options(config.metrics, config.images is not None, config.mrv_variant, config.mrv_instance,
                  config.c2c_relevance, config.protocol)  # before any caption is encoded
    if config.folds < 1 or (config.folds > 1 and config.images is None):
        raise ConfigError(f"--folds must be at least 1 and cuts the image gallery (needs --images), got "
                          f"{config.folds}")
    check_image_embeddings(config.images, config.model, config.pretrained)
    model_path = Path(config.model) if config.texts is None else None
    planned = [*([config.images] if config.images is not None else []),
               *([config.texts] if config.texts is not None else
                 [config.captions, *([model_path] if model_path.exists() else [])])]
    existing = artifacts.reusable(config.out, "metrics", stage="evaluate", config=config, inputs=planned)
    if existing is not None:
        return existing
    runtime = resolve_runtime(config.device, config.precision)
    image_table, image_vectors = load_normalized_embeddings(config.images) if config.images is not None else \
        (None, None)
    texts = text_embeddings_for(config, image_table, runtime)
    evaluate = evaluate_retrieval if config.folds <= 1 else partial(evaluate_folds, folds=config.folds)
    result = evaluate(
        image_table, image_vectors, texts.table, texts.vectors,
        metrics=config.metrics, mrv_variant=config.mrv_variant, mrv_instance=config.mrv_instance, ks=config.ks,
        languages=config.languages, c2c_pairs=config.c2c_pairs, c2c_relevance=config.c2c_relevance,
        protocol=config.protocol, split=config.split, device=runtime.device, chunk_mb=config.chunk_mb,
        image_source=str(config.images), text_source=texts.source,
    )
    result["settings"]["texts"] = texts.settings
    inputs = [*([config.images] if config.images is not None else []), *texts.inputs]
    overlap = warn_if_overlap(training_data_of(texts.inputs), [], test_ids=evaluated_image_ids(texts.table, config),
                              stage="evaluate")
    if overlap is not None:
        result["settings"]["overlap_with_training_data"] = overlap.as_dict()
    extra = {}
    if config.report_format == "clip-benchmark":
        names = clip_benchmark_names(config, texts, image_table_manifest(config.images))
        extra = {f"clip_benchmark_{lang}.json": report.dumps(record)
                 for lang, record in report.clip_benchmark_records(result, **names).items()}
    return _write_and_report(config.out, result, config, inputs, config.report_format, extra)


def evaluated_image_ids(text_table: pa.Table, config: EvaluateConfig) -> set[str]:
    """The images of the captions evaluated (their split and languages), for the overlap check."""
    keep = np.ones(text_table.num_rows, dtype=bool)
    split = _split_column(text_table)
    if config.split is not None and split is not None:
        keep &= split == config.split
    if config.languages:
        keep &= np.isin(_column_strings(text_table, "lang"), list(config.languages))
    return set(_column_strings(text_table, "image_id")[keep].tolist())


def image_table_manifest(images: Path | None) -> dict:
    return artifacts.read_manifest(images) if images is not None else {}


def clip_benchmark_names(config: EvaluateConfig, texts: TextVectors, image_manifest: dict) -> dict:
    """``dataset``, ``model`` and ``pretrained`` as CLIP_benchmark writes them: the dataset from ``--dataset`` (or
    the folder of the captions/texts), the model from ``--model`` or the image encoder's manifest."""
    spec = image_manifest.get("model") or {}
    spec = spec if isinstance(spec, dict) else {"name": str(spec)}
    source = Path(config.captions or config.texts)
    dataset = config.dataset or (source.parent.name if source.name in ("captions", "texts") else source.name)
    return {"dataset": dataset, "model": config.model or spec.get("name") or spec.get("model"),
            "pretrained": config.pretrained or spec.get("pretrained")}


def run_continual(config: ContinualConfig) -> Path:
    """Build the continual matrix a_{j,i} (``config.metric`` of task i's language in run j) from a sequence of
    metrics artifacts, compute AR_j and F_j, and write them as a metrics artifact."""
    _check_report_format(config.report_format)
    if len(config.runs) != len(config.tasks):
        raise ConfigError(f"{len(config.runs)} metrics artifact(s) but {len(config.tasks)} task(s); give one "
                          "metrics artifact per task, in training order")
    existing = artifacts.reusable(config.out, "metrics", stage="evaluate", config=config, inputs=list(config.runs))
    if existing is not None:
        return existing
    matrix = [[_continual_value(artifacts.load_metrics(run), task, config.metric, run) for task in config.tasks]
              for run in config.runs]
    result = {"continual": {"tasks": list(config.tasks), "metric": config.metric, **M.continual_metrics(matrix)},
              "settings": {"matrix": "a[j][i] = metric on task i after training task j (null: not evaluated)",
                           "AR": M.AVERAGE_RECALL_FORMULA,
                           "F": M.FORGETTING_FORMULA}}
    return _write_and_report(config.out, result, config, list(config.runs), config.report_format)


def _continual_value(run_metrics: dict, task: str, metric: str, path: Path) -> float | None:
    """``metric`` is ``AR`` or ``<i2t|t2i>.R@K`` of ``per_language[task]``; a language not evaluated is None."""
    entry = run_metrics.get("per_language", {}).get(task)
    if entry is None:
        return None
    value: Any = entry
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ConfigError(f"--continual-metric {metric} is not in per_language.{task} of {path}")
        value = value[part]
    return float(value)


def _check_report_format(report_format: str) -> None:
    if report_format not in REPORT_FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(REPORT_FORMATS)}, got {report_format!r}")


def _write_and_report(out: Path, result: dict, config: Any, inputs: list[Path], report_format: str,
                      extra: dict[str, bytes] | None = None) -> Path:
    tables = report.metrics_tables(result)
    extra = dict(extra or {})
    long_rows = report.long_rows(result)
    if long_rows:
        extra["metrics_long.csv"] = report.to_long_csv(long_rows).encode("utf-8")
    if report_format == "markdown":
        extra["metrics.md"] = report.to_markdown(tables).encode("utf-8")
    elif report_format == "csv":
        extra["metrics.csv"] = report.to_csv(tables).encode("utf-8")
    path = artifacts.write_metrics(out, result, stage="evaluate", config=config, inputs=inputs, extra_files=extra)
    report.print_tables(tables, "table" if report_format == "clip-benchmark" else report_format)
    log(f"metrics written to {path}")
    return path
