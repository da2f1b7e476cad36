"""``mltk evaluate`` from artifacts to artifact: load embeddings artifacts (or encode captions through a checkpoint),
call ``mltk.metrics.retrieval.evaluate_retrieval``, warn when the test images are training images, and write the
metrics artifact with its report files (``mltk.present.report``).

Text vectors come from ``text_embeddings_for``: a text embeddings artifact, or the captions encoded through a
checkpoint (``mltk.encode.text_encoders``, ``mltk.encode.texts``), each language through its own path. Image
embeddings are optional when only caption-to-caption retrieval is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk import artifacts
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.runtime import Runtime, log, resolve_array_device, resolve_runtime
from mltk.data.overlap import training_data_of, warn_if_overlap
from mltk.evaluate.bli_fusion import check_seed_options, fusion_section, retrieval_metrics
from mltk.evaluate.clip_benchmark import clip_benchmark_files
from mltk.evaluate.continual import ContinualConfig, run_continual  # noqa: F401 (API)
from mltk.evaluate.folds import evaluate_folds
from mltk.evaluate.guards import Guard, check_same_model, check_vectors
from mltk.evaluate.metrics_artifact import REPORT_FORMATS, check_report_format, write_and_report  # noqa: F401 (API)
from mltk.evaluate.scorer import evaluation_similarity
from mltk.metrics import ranks as M
from mltk.metrics.retrieval import check_options, evaluate_retrieval
from mltk.metrics.retrieval_rows import column_strings, in_splits, split_column
from mltk.present import plots


@dataclass(frozen=True)
class EvaluateConfig:
    """Everything ``mltk evaluate`` needs (built by the CLI, received by ``run_evaluation``)."""

    images: Path | None  # None: text embeddings alone (only --metric c2c)
    out: Path
    texts: Path | None = None  # a text embeddings artifact, or:
    model: str | None = None  # a checkpoint (or open_clip name) that encodes ``captions``
    pretrained: str | None = None  # open_clip pretrained tag or weights file, for a model name
    captions: Path | None = None
    metrics: tuple[str, ...] = ("recall",)
    mrv_variant: str = "paper"
    mrv_instance: str = "auto"  # auto, image or caption_id (see retrieval.mrv_instance_mode)
    split: str | None = None
    languages: tuple[str, ...] = ()
    c2c_pairs: tuple[tuple[str, str], ...] = ()
    c2c_relevance: str = "image"  # image (AME) or caption_id
    protocol: str = "all-captions"  # or first-caption (CLIP_benchmark on XM3600-style sets)
    folds: int = 1  # 5: COCO 1K, the mean over 5 folds of the gallery (mltk.evaluate.folds)
    dataset: str | None = None  # the dataset name written by --format clip-benchmark
    ks: tuple[int, ...] = M.DEFAULT_KS
    report_format: str = "table"
    device: str = "auto"
    precision: str = "auto"  # autocast of the text encoder; ranking is always float32
    batch_size: int = 256  # captions per encoder batch
    chunk_mb: float = 256
    force: bool = False  # score degenerate vectors or a model mismatch, with warnings (guards.py)
    lexicon: Path | None = None  # --metric bli: the lexicon artifact (mltk.ame.bli)
    bli_k: int = 10  # CSLS's k (MUSE: 10)
    bli_vocab: Path | None = None  # --metric bli: captions whose words are the model's vocabulary
    translations: Path | None = None  # --fusion: English translations sharing the caption_id (mltk.evaluate.fusion)
    fusion: tuple[float, ...] = ()  # the etas of score fusion
    similarity: str | None = None  # cosine or order; None: what the model trained with (mltk.evaluate.scorer)


# ----------------------------------------------------------------------------------------------------------------
# Artifacts in, artifact out
# ----------------------------------------------------------------------------------------------------------------


def load_normalized_embeddings(path: Path, guard: Guard | None = None) -> tuple[pa.Table, np.ndarray]:
    """An embeddings artifact as ``(table, vectors)``, checked by ``guard`` (``mltk.evaluate.guards``; a refusing
    one when None) and L2-normalised when the manifest says it is not."""
    table, vectors = artifacts.load_embeddings(path, check_finite=False)
    normalized = artifacts.read_manifest(path, "embeddings").get("normalized", True)
    vectors = check_vectors(vectors, path, guard or Guard(), unit_expected=bool(normalized))
    if not normalized:
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
        raise ConfigError(
            "give either --texts (text embeddings) or --model with --captions (captions to encode), not both"
        )
    if config.texts is None and config.model is None:
        raise ConfigError(
            "--texts (text embeddings with image_id, lang and caption_id) or --model with --captions is required"
        )
    if config.model is not None and config.captions is None:
        raise ConfigError(f"--model {config.model} needs --captions (the captions artifact to encode)")
    if config.model is None and (config.captions is not None or config.pretrained is not None):
        raise ConfigError("--captions and --pretrained go with --model (the checkpoint that encodes the captions)")
    if config.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {config.batch_size}")


def text_embeddings_for(
    config: EvaluateConfig, image_table: pa.Table | None, runtime: Runtime | None, guard: Guard | None = None
) -> TextVectors:
    """The caption vectors to evaluate: a text embeddings artifact (``--texts``), or the captions of
    ``--captions`` encoded by ``--model``, each language through its own path.

    Only the captions that will be evaluated are encoded: those of ``--split`` (the captions' own split column,
    or, when it is empty, the images of that split) and of the ``--lang`` languages.
    """
    guard = guard or Guard()
    if config.texts is not None:
        table, vectors = load_normalized_embeddings(config.texts, guard)
        return TextVectors(
            table,
            vectors,
            [config.texts],
            str(config.texts),
            {"from": "embeddings", "texts": str(Path(config.texts).resolve())},
        )
    source = str(config.captions)
    captions = _captions_to_encode(
        artifacts.load_captions(config.captions, drop_empty=True), image_table, config, source
    )
    from mltk.encode.text_encoders import load_model_encoder, readable_languages
    from mltk.encode.texts import encode_captions

    encoder = load_model_encoder(config.model, config.pretrained, runtime.device)
    languages = readable_languages(
        encoder, sorted(config.languages or ()), sorted(set(captions.column("lang").to_pylist())), config.model
    )
    captions = captions.filter(pc.is_in(captions.column("lang"), pa.array(languages, pa.string())))
    log(
        f"encoding {captions.num_rows} caption(s) in {', '.join(languages)} with {config.model} "
        f"({runtime.device}, {runtime.precision})"
    )
    table, vectors = encode_captions(encoder, captions, runtime, batch_size=config.batch_size, languages=languages)
    vectors = check_vectors(vectors, f"{config.model} (encoding {config.captions})", guard, unit_expected=True)
    model_path = Path(config.model)
    settings = {
        "from": "model",
        "model": str(model_path.resolve()) if model_path.exists() else config.model,
        "pretrained": config.pretrained,
        "captions": str(Path(config.captions).resolve()),
        "captions_encoded": table.num_rows,
        "languages_encoded": languages,
        "precision": runtime.precision,
        "batch_size": config.batch_size,
    }
    inputs = [config.captions, *([model_path] if model_path.exists() else [])]
    return TextVectors(table, vectors, inputs, source, settings)


def _captions_to_encode(
    captions: pa.Table, image_table: pa.Table | None, config: EvaluateConfig, source: str
) -> pa.Table:
    """The rows of a captions table that the evaluation will use (see ``text_embeddings_for``), checked before
    any encoding: the asked languages exist and every caption's image has an embedding."""
    if config.split is not None:
        caption_split = split_column(captions)
        image_split = split_column(image_table) if image_table is not None else None
        if caption_split is not None:
            keep = in_splits(caption_split, config.split)
        elif image_split is not None:
            in_split = set(column_strings(image_table, "id")[in_splits(image_split, config.split)].tolist())
            keep = np.isin(column_strings(captions, "image_id"), list(in_split))
        else:
            raise ConfigError(
                f"--split {config.split}: neither the image embeddings nor the captions have a split value"
            )
        captions = captions.filter(pa.array(keep, pa.bool_()))
    if config.languages:
        present = set(captions.column("lang").to_pylist())
        unknown = [lang for lang in config.languages if lang not in present]
        if unknown:
            raise ConfigError(
                f"language(s) {', '.join(unknown)} have no captions"
                + (f" in split {config.split}" if config.split else ""),
                source,
            )
        captions = captions.filter(
            pa.array(np.isin(column_strings(captions, "lang"), list(config.languages)), pa.bool_())
        )
    if captions.num_rows == 0:
        raise ConfigError("no captions to evaluate" + (f" in split {config.split}" if config.split else ""), source)
    if image_table is None:  # caption-to-caption retrieval from the captions alone
        return captions
    image_ids = set(column_strings(image_table, "id").tolist())
    orphans = [i for i in dict.fromkeys(captions.column("image_id").to_pylist()) if i not in image_ids]
    if orphans:
        raise SchemaError(
            f"{len(orphans)} image id(s) of the captions have no image embedding (first: {orphans[0]!r})", source
        )
    return captions


def run_evaluation(config: EvaluateConfig) -> Path:
    """Evaluate embeddings artifacts (or captions encoded by a checkpoint), write the metrics artifact (with
    metrics_long.csv, and metrics.md / metrics.csv / clip_benchmark/LANG.json for those formats), print the
    report on stderr, and return the artifact path."""
    check_report_format(config.report_format)
    check_seed_options(config)
    metrics = retrieval_metrics(config)
    if not metrics:  # --metric bli alone: no captions, no images
        return run_bli(config)
    check_text_source(config)
    if config.images is None and set(metrics) - {"c2c"}:
        raise ConfigError("--images (image embeddings) is required unless the only metric is c2c")
    check_options(
        metrics,
        config.images is not None,
        config.mrv_variant,
        config.mrv_instance,
        config.c2c_relevance,
        config.protocol,
    )  # before any caption is encoded
    _check_folds(config)
    guard = Guard(force=config.force)
    check_same_model(config.images, config.model, config.pretrained, guard, config.texts)
    model_path = Path(config.model) if config.texts is None else None
    planned = [
        *([config.images] if config.images is not None else []),
        *(
            [config.texts]
            if config.texts is not None
            else [config.captions, *([model_path] if model_path.exists() else [])]
        ),
        *[p for p in (config.lexicon, config.bli_vocab, config.translations) if p is not None],
    ]
    existing = artifacts.reusable(config.out, "metrics", stage="evaluate", config=config, inputs=planned)
    if existing is not None:
        return existing
    runtime = resolve_runtime(config.device, config.precision) if _encodes_with_model(config) else None
    device = runtime.device.type if runtime is not None else resolve_array_device(config.device, config.precision)
    image_table, image_vectors = (
        load_normalized_embeddings(config.images, guard) if config.images is not None else (None, None)
    )
    texts = text_embeddings_for(config, image_table, runtime, guard)
    similarity = evaluation_similarity(config.similarity, config.model, config.texts)
    evaluate = evaluate_retrieval if config.folds <= 1 else partial(evaluate_folds, folds=config.folds)
    evaluate = partial(
        evaluate,
        image_table,
        image_vectors,
        texts.table,
        metrics=metrics,
        mrv_variant=config.mrv_variant,
        mrv_instance=config.mrv_instance,
        ks=config.ks,
        languages=config.languages,
        c2c_pairs=config.c2c_pairs,
        c2c_relevance=config.c2c_relevance,
        protocol=config.protocol,
        split=config.split,
        device=device,
        chunk_mb=config.chunk_mb,
        image_source=str(config.images),
        text_source=texts.source,
        similarity=similarity,
    )
    result = evaluate(texts.vectors)
    result["settings"]["texts"] = texts.settings
    _note_all_splits(config, result, (texts.table, image_table))
    result["warnings"] = guard.warnings
    _note_ties(result.get("ties", {}))
    extra = {}
    if config.translations is not None:
        result["fusion"] = fusion_section(config, texts, runtime, evaluate, similarity)
        extra["fusion_curve.png"] = plots.fusion_curve(result["fusion"])
    if "bli" in config.metrics:
        result["bli"] = _bli_of_model(config, runtime)
    inputs = [
        *([config.images] if config.images is not None else []),
        *texts.inputs,
        *[p for p in (config.lexicon, config.bli_vocab, config.translations) if p is not None],
    ]
    overlap = warn_if_overlap(
        training_data_of(texts.inputs), [], test_ids=evaluated_image_ids(texts.table, config), stage="evaluate"
    )
    if overlap is not None:
        result["settings"]["overlap_with_training_data"] = overlap.as_dict()
    if config.report_format == "clip-benchmark":
        extra.update(clip_benchmark_files(result, config, image_table_manifest(config.images)))
    return write_and_report(config.out, result, config, inputs, config.report_format, extra)


def _check_folds(config: EvaluateConfig) -> None:
    if config.folds < 1 or (config.folds > 1 and config.images is None):
        raise ConfigError(f"--folds must be at least 1 and cuts the image gallery (needs --images), got {config.folds}")


def _encodes_with_model(config: EvaluateConfig) -> bool:
    """Whether the evaluation runs a model (captions to encode, translations to fuse, a table's BLI) and so needs
    torch; ranking precomputed embeddings needs numpy only (on the CPU)."""
    return config.texts is None or config.translations is not None or "bli" in config.metrics


def _bli_of_model(config: EvaluateConfig, runtime: Runtime) -> dict:
    """The lexicon alignment of ``--model``'s table. The model's libraries (torch, open_clip, transformers) are
    imported here, not at module level: scoring precomputed embeddings must not pay seconds of imports for them."""
    from mltk.ame.bli import evaluate_bli
    from mltk.encode.text_encoders import load_model_encoder

    return evaluate_bli(
        load_model_encoder(config.model, config.pretrained, runtime.device),
        config.lexicon,
        config.bli_k,
        config.model,
        config.bli_vocab,
    )


SPLIT_ORDER = ("train", "val", "test")


def _note_all_splits(config: EvaluateConfig, result: dict, tables: Sequence[pa.Table | None]) -> None:
    """No --split: every split is scored together, and the run says so (the overlap warning's "test images" are
    then every image), on stderr and in the metrics' settings, naming the splits the data holds."""
    if config.split is not None:
        return
    result["settings"]["split"] = "all splits"
    columns = [split_column(table) for table in tables if table is not None]
    found = {name for column in columns if column is not None for name in column.tolist() if name}
    names = [*(name for name in SPLIT_ORDER if name in found), *sorted(found - set(SPLIT_ORDER))]
    if len(names) > 1:
        alone = "test" if "test" in names else names[0]
        log(
            f"evaluate: no --split, so the data's splits ({', '.join(names)}) are scored together; "
            f"--split {alone} scores the {alone} split alone"
        )
    elif names:
        log(f"evaluate: no --split; the data holds one split ({names[0]}), scored as it is")
    else:
        log("evaluate: no --split, and the data names no splits: every row is scored together")


def _note_ties(ties: dict) -> None:
    if ties.get("total"):
        log(
            f"note: {ties['total']} ground truth(s) score exactly as another candidate and are ranked below it "
            "(pessimistic tie rule; counts in metrics.json ties)"
        )


def run_bli(config: EvaluateConfig) -> Path:
    """``--metric bli`` alone: the lexicon alignment of ``--model``'s trainable table (``mltk.ame.bli``)."""
    existing = artifacts.reusable(
        config.out,
        "metrics",
        stage="evaluate",
        config=config,
        inputs=[p for p in (Path(config.model), config.lexicon, config.bli_vocab) if p is not None and p.exists()],
    )
    if existing is not None:
        return existing
    runtime = resolve_runtime(config.device, config.precision)
    result = {"bli": _bli_of_model(config, runtime), "settings": {"model": str(Path(config.model).resolve())}}
    inputs = [p for p in (Path(config.model), config.lexicon, config.bli_vocab) if p is not None and p.exists()]
    return write_and_report(config.out, result, config, inputs, config.report_format)


def evaluated_image_ids(text_table: pa.Table, config: EvaluateConfig) -> set[str]:
    """The images of the captions evaluated (their split and languages), for the overlap check."""
    keep = np.ones(text_table.num_rows, dtype=bool)
    split = split_column(text_table)
    if config.split is not None and split is not None:
        keep &= in_splits(split, config.split)
    if config.languages:
        keep &= np.isin(column_strings(text_table, "lang"), list(config.languages))
    return set(column_strings(text_table, "image_id")[keep].tolist())


def image_table_manifest(images: Path | None) -> dict:
    return artifacts.read_manifest(images) if images is not None else {}
