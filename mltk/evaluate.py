"""Cross-lingual, cross-modal retrieval evaluation: per-language recall, MRV, caption-to-caption retrieval and the
continual-learning metrics, written as a metrics artifact.

Two entry points:

- ``evaluate_retrieval(image_table, image_vectors, text_table, text_vectors, ...) -> dict`` works on tables and
  vectors in memory (training stages call it for validation) and returns the ``metrics.json`` content.
- ``run_evaluation(EvaluateConfig) -> Path`` loads embeddings artifacts, calls it, writes the artifact and prints
  the report on stderr. Text vectors come from ``text_embeddings_for``: a text embeddings artifact, or the
  captions encoded through a checkpoint (``mltk.encoders``), each language through its own path.

Inputs: the image table has ``id`` (the image id); the text table has ``id``, ``image_id`` (the image a caption
describes), ``lang`` and ``caption_id`` (shared by translations of one sentence). Each language is evaluated
against the whole image gallery; instances are matched by id, never by position. The metric conventions (rank
base, tie rule) are in ``mltk.metrics`` and are copied into ``settings``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from mltk import artifacts, metrics as M, report
from mltk.errors import ArtifactError, ConfigError, SchemaError
from mltk.runtime import Runtime, log, resolve_runtime

if TYPE_CHECKING:  # mltk.encoders imports open_clip; evaluating embeddings artifacts does not need it
    from mltk.encoders import TextEncoder

METRIC_NAMES = ("recall", "mrv", "c2c")
REPORT_FORMATS = ("table", "markdown", "csv")
TEXT_COLUMNS = ("id", "image_id", "lang", "caption_id")


@dataclass(frozen=True)
class EvaluateConfig:
    """Everything ``mltk evaluate`` needs (built by the CLI, received by ``run_evaluation``)."""

    images: Path
    out: Path
    texts: Path | None = None          # a text embeddings artifact, or:
    model: str | None = None           # a checkpoint (or open_clip name) that encodes ``captions``
    pretrained: str | None = None      # open_clip pretrained tag or weights file, for a model name
    captions: Path | None = None
    metrics: tuple[str, ...] = ("recall",)
    mrv_variant: str = "paper"
    split: str | None = None
    languages: tuple[str, ...] = ()
    c2c_pairs: tuple[tuple[str, str], ...] = ()
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
# In-memory evaluation
# ----------------------------------------------------------------------------------------------------------------


def evaluate_retrieval(
    image_table: pa.Table | Mapping[str, Sequence],
    image_vectors: np.ndarray | torch.Tensor,
    text_table: pa.Table | Mapping[str, Sequence],
    text_vectors: np.ndarray | torch.Tensor,
    *,
    metrics: Sequence[str] = ("recall",),
    mrv_variant: str = "paper",
    ks: Sequence[int] = M.DEFAULT_KS,
    languages: Sequence[str] | None = None,
    c2c_pairs: Sequence[tuple[str, str]] | None = None,
    split: str | None = None,
    device: str | torch.device = "cpu",
    chunk_mb: float = 256,
    image_source: str = "<images>",
    text_source: str = "<texts>",
) -> dict:
    """Evaluate retrieval per language; returns the ``metrics.json`` content.

    ``per_language[lang]`` always holds ``i2t`` and ``t2i`` (R@K in percent, 1-based median and mean rank) and
    ``AR``; ``metrics`` adds ``mrv`` (needs >= 2 languages) and ``c2c`` (every pair of languages unless
    ``c2c_pairs`` names them). ``split`` keeps only rows of that split (see ``_select_split``).
    """
    metrics = _check_metric_names(metrics)
    if mrv_variant not in M.MRV_VARIANTS:
        raise ConfigError(f"--mrv-variant must be one of {', '.join(M.MRV_VARIANTS)}, got {mrv_variant!r}")
    ks = tuple(int(k) for k in ks)
    images = _image_rows(_as_table(image_table), image_vectors, image_source)
    texts = _text_rows(_as_table(text_table), text_vectors, text_source)
    if images.vectors.shape[1] != texts.vectors.shape[1]:
        raise ArtifactError(f"text vectors have dim {texts.vectors.shape[1]} but image vectors have dim "
                            f"{images.vectors.shape[1]} ({image_source})", text_source)
    images, texts = _select_split(images, texts, split)
    owner = _caption_owners(images, texts)
    langs = _languages(texts, languages)
    if "mrv" in metrics and len(langs) < 2:
        raise ConfigError(f"--metric mrv needs captions in at least 2 languages, found {len(langs)}")
    pairs = _c2c_pairs(langs, c2c_pairs) if "c2c" in metrics else []
    device = torch.device(device)
    image_tensor = M.as_float32_tensor(images.vectors, device)  # [N, d], shared by every language

    per_language, counts, i2t_by_lang, t2i_by_lang = {}, {}, {}, {}
    for lang in langs:
        rows = np.flatnonzero(texts.lang == lang)
        i2t, t2i = M.bidirectional_ranks(image_tensor, texts.vectors[rows], owner[rows], chunk_mb=chunk_mb,
                                         device=device, progress=f"ranking {lang}")
        queried = i2t >= 0
        per_language[lang] = _direction_summary(i2t[queried], t2i, ks)
        counts[lang] = {"i2t_queries": int(queried.sum()), "t2i_queries": int(len(rows))}
        i2t_by_lang[lang] = (images.ids[queried], i2t[queried])
        t2i_by_lang[lang] = (texts.caption_ids[rows], t2i)

    result: dict[str, Any] = {"per_language": per_language}
    result["summary"] = {"languages": langs, "mean_AR": float(np.mean([v["AR"] for v in per_language.values()]))}
    if "mrv" in metrics:
        result["mrv"] = _mrv(i2t_by_lang, t2i_by_lang, langs, mrv_variant, text_source)
    if "c2c" in metrics:
        result["c2c"] = _caption_to_caption(texts, pairs, ks, device, chunk_mb, text_source)
    result["settings"] = _settings(metrics, mrv_variant, ks, split, len(images.ids), counts, device)
    return result


@dataclass(frozen=True)
class _ImageRows:
    ids: np.ndarray          # [N] str
    vectors: np.ndarray      # [N, d]
    split: np.ndarray | None


@dataclass(frozen=True)
class _TextRows:
    image_ids: np.ndarray    # [M] str
    lang: np.ndarray         # [M] str
    caption_ids: np.ndarray  # [M] str
    vectors: np.ndarray      # [M, d]
    split: np.ndarray | None
    source: str = field(default="<texts>")


def _as_table(table: pa.Table | Mapping[str, Sequence]) -> pa.Table:
    return table if isinstance(table, pa.Table) else pa.table(dict(table))


def _column_strings(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).cast(pa.string()).to_pylist(), dtype=object)


def _check_rows(table: pa.Table, vectors: np.ndarray | torch.Tensor, columns: Sequence[str], source: str) -> None:
    artifacts.require_columns(table, columns, source)
    for name in columns:
        if table.column(name).null_count:
            raise SchemaError(f"column {name} has {table.column(name).null_count} null value(s)", source)
    if len(vectors) != table.num_rows or np.ndim(vectors) != 2:
        raise ArtifactError(f"{table.num_rows} rows but vectors of shape {tuple(np.shape(vectors))}", source)


def _image_rows(table: pa.Table, vectors, source: str) -> _ImageRows:
    _check_rows(table, vectors, ["id"], source)
    ids = _column_strings(table, "id")
    if len(set(ids)) != len(ids):
        raise SchemaError("image ids (column id) are not unique", source)
    return _ImageRows(ids, _to_numpy(vectors), _split_column(table))


def _text_rows(table: pa.Table, vectors, source: str) -> _TextRows:
    _check_rows(table, vectors, TEXT_COLUMNS, source)
    return _TextRows(_column_strings(table, "image_id"), _column_strings(table, "lang"),
                     _column_strings(table, "caption_id"), _to_numpy(vectors), _split_column(table), source)


def _split_column(table: pa.Table) -> np.ndarray | None:
    """The ``split`` column, or None when there is none or it is all empty (images encoded from a folder)."""
    if "split" not in table.column_names:
        return None
    split = _column_strings(table, "split")
    return split if any(split) else None


def _to_numpy(vectors: np.ndarray | torch.Tensor) -> np.ndarray:
    return vectors.detach().cpu().numpy() if isinstance(vectors, torch.Tensor) else vectors


def _select_split(images: _ImageRows, texts: _TextRows, split: str | None) -> tuple[_ImageRows, _TextRows]:
    """Keep rows of ``split``. A table without a ``split`` column (or with only empty values) follows the other
    one: images are kept when a kept caption refers to them, captions when their image is kept. Neither table
    having the column is an error."""
    if split is None:
        return images, texts
    if images.split is None and texts.split is None:
        raise ConfigError(f"--split {split}: neither the image nor the text embeddings have a split column")
    if images.split is not None:
        images = _take_images(images, images.split == split)
    if texts.split is not None:
        texts = _take_texts(texts, texts.split == split)
    if images.split is None:
        images = _take_images(images, np.isin(images.ids, np.unique(texts.image_ids)))
    if texts.split is None:
        texts = _take_texts(texts, np.isin(texts.image_ids, images.ids))
    if len(images.ids) == 0 or len(texts.lang) == 0:
        raise ConfigError(f"--split {split} leaves {len(images.ids)} image(s) and {len(texts.lang)} caption(s)")
    return images, texts


def _take_images(images: _ImageRows, keep: np.ndarray) -> _ImageRows:
    split = images.split[keep] if images.split is not None else None
    return _ImageRows(images.ids[keep], images.vectors[np.flatnonzero(keep)], split)


def _take_texts(texts: _TextRows, keep: np.ndarray) -> _TextRows:
    split = texts.split[keep] if texts.split is not None else None
    return _TextRows(texts.image_ids[keep], texts.lang[keep], texts.caption_ids[keep],
                     texts.vectors[np.flatnonzero(keep)], split, texts.source)


def _caption_owners(images: _ImageRows, texts: _TextRows) -> np.ndarray:
    """Row of each caption's image in the image table (matched by id)."""
    position = {image_id: row for row, image_id in enumerate(images.ids)}
    owner = np.fromiter((position.get(i, -1) for i in texts.image_ids), dtype=np.int64, count=len(texts.image_ids))
    missing = np.flatnonzero(owner < 0)
    if len(missing):
        raise SchemaError(f"{len(missing)} caption(s) refer to image ids that are not in the image embeddings "
                          f"(first: {texts.image_ids[missing[0]]!r})", texts.source)
    return owner


def _languages(texts: _TextRows, languages: Sequence[str] | None) -> list[str]:
    present = sorted(set(texts.lang.tolist()))
    if not languages:
        return present
    unknown = [lang for lang in languages if lang not in present]
    if unknown:
        raise ConfigError(f"language(s) {', '.join(unknown)} have no captions (present: {', '.join(present)})")
    return list(dict.fromkeys(languages))


def _check_metric_names(metrics: Sequence[str]) -> tuple[str, ...]:
    unknown = [m for m in metrics if m not in METRIC_NAMES]
    if unknown:
        raise ConfigError(f"unknown --metric {', '.join(unknown)} (choose from {', '.join(METRIC_NAMES)})")
    return tuple(dict.fromkeys(("recall", *metrics)))


def _direction_summary(i2t: np.ndarray, t2i: np.ndarray, ks: tuple[int, ...]) -> dict:
    i2t_summary, t2i_summary = M.rank_summary(i2t, ks), M.rank_summary(t2i, ks)
    return {"i2t": i2t_summary, "t2i": t2i_summary, "AR": M.average_recall(i2t_summary, t2i_summary, ks)}


def _mrv(i2t_by_lang: dict, t2i_by_lang: dict, langs: list[str], variant: str, source: str) -> dict:
    """MRV in both directions: i2t instances are images (ranks of their best caption per language), t2i instances
    are sentences (caption_id) with one caption per language. Only instances present in all K languages count."""
    for lang in langs:
        caption_ids = t2i_by_lang[lang][0]
        if len(set(caption_ids.tolist())) != len(caption_ids):
            raise SchemaError(f"caption_id is not unique within language {lang}; MRV matches translations by it",
                              source)
    result: dict[str, Any] = {"variant": variant, "languages": langs, "K": len(langs)}
    for direction, by_lang in (("i2t", i2t_by_lang), ("t2i", t2i_by_lang)):
        matrix, _, excluded = M.align_instance_ranks({lang: by_lang[lang] for lang in langs})
        result[direction] = M.mean_rank_variance(matrix, variant) if len(matrix) else None
        result.setdefault("instances", {})[direction] = len(matrix)
        result.setdefault("excluded_instances", {})[direction] = excluded
    return result


def _c2c_pairs(langs: list[str], pairs: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """The language pairs for caption-to-caption retrieval: the given ones, checked, or every pair."""
    if not pairs:
        return list(itertools.combinations(langs, 2))
    for src, tgt in pairs:
        if src == tgt or src not in langs or tgt not in langs:
            raise ConfigError(f"--c2c-pair {src}:{tgt} must name two different evaluated languages "
                              f"({', '.join(langs)})")
    return list(pairs)


def _caption_to_caption(texts: _TextRows, pairs: list[tuple[str, str]], ks: tuple[int, ...],
                        device: torch.device, chunk_mb: float, source: str) -> dict:
    """Caption-to-caption retrieval between two languages (as in AME, Mohammadshahi et al. 2019): a caption in
    one language retrieves its translation (same ``caption_id``) among the other language's captions. Only
    sentences present in both languages take part, as queries and as gallery."""
    result = {}
    for src, tgt in pairs:
        src_rows, tgt_rows = _translation_rows(texts, src, tgt, source)
        forward, backward = M.bidirectional_ranks(texts.vectors[src_rows], texts.vectors[tgt_rows],
                                                  np.arange(len(src_rows)), chunk_mb=chunk_mb, device=device)
        summary = {f"{src}->{tgt}": M.rank_summary(forward, ks), f"{tgt}->{src}": M.rank_summary(backward, ks)}
        summary["AR"] = M.average_recall(summary[f"{src}->{tgt}"], summary[f"{tgt}->{src}"], ks)
        summary["sentences"] = len(src_rows)
        result[f"{src}-{tgt}"] = summary
    return result


def _translation_rows(texts: _TextRows, src: str, tgt: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the captions of ``src`` and ``tgt`` that share a caption_id, aligned by caption_id."""
    by_id = []
    for lang in (src, tgt):
        rows = np.flatnonzero(texts.lang == lang)
        ids = texts.caption_ids[rows].tolist()
        if len(set(ids)) != len(ids):
            raise SchemaError(f"caption_id is not unique within language {lang}; c2c matches translations by it",
                              source)
        by_id.append(dict(zip(ids, rows.tolist())))
    shared = sorted(set(by_id[0]) & set(by_id[1]))
    if not shared:
        raise ConfigError(f"languages {src} and {tgt} share no caption_id; nothing to retrieve")
    return np.array([by_id[0][i] for i in shared]), np.array([by_id[1][i] for i in shared])


def _settings(metrics: tuple[str, ...], variant: str, ks: tuple[int, ...], split: str | None, n_images: int,
              counts: dict, device: torch.device) -> dict:
    return {
        "metrics": list(metrics),
        "ks": list(ks),
        "recall_unit": "percent",
        "rank_base": M.RANK_BASE,
        "tie_rule": M.TIE_RULE,
        "i2t": "an image's rank is that of its best-ranked caption in the language (hit if any caption is in the "
               "top K); gallery: that language's captions",
        "t2i": "one query per caption; gallery: all images",
        "AR": "mean of R@K over ks in both directions",
        "mrv_variant": variant if "mrv" in metrics else None,
        "mrv_definition": {
            "paper": "mean over instances of the population variance of its ranks across the K languages (eq. 7)",
            "code": "mean over instances of the population standard deviation of its 0-based ranks",
        }[variant] if "mrv" in metrics else None,
        "mrv_instances": "i2t: image_id; t2i: caption_id; only instances present in all K languages are used",
        "c2c": "queries and gallery: captions whose caption_id exists in both languages" if "c2c" in metrics
               else None,
        "similarity": "dot product of the float32 vectors (cosine: vectors are L2-normalised)",
        "split": split,
        "device": str(device),
        "counts": {"images": n_images, "per_language": counts},
    }


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


def text_embeddings_for(config: EvaluateConfig, image_table: pa.Table, runtime: Runtime) -> TextVectors:
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
    from mltk.encoders import encode_captions

    table, vectors = encode_captions(encoder, captions, runtime, batch_size=config.batch_size, languages=languages)
    model_path = Path(config.model)
    settings = {"from": "model", "model": str(model_path.resolve()) if model_path.exists() else config.model,
                "pretrained": config.pretrained, "captions": str(Path(config.captions).resolve()),
                "captions_encoded": table.num_rows, "languages_encoded": languages,
                "precision": runtime.precision, "batch_size": config.batch_size}
    inputs = [config.captions, *([model_path] if model_path.exists() else [])]
    return TextVectors(table, vectors, inputs, source, settings)


def _captions_to_encode(captions: pa.Table, image_table: pa.Table, config: EvaluateConfig, source: str) -> pa.Table:
    """The rows of a captions table that the evaluation will use (see ``text_embeddings_for``), checked before
    any encoding: the asked languages exist and every caption's image has an embedding."""
    if config.split is not None:
        caption_split, image_split = _split_column(captions), _split_column(image_table)
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
    image_ids = set(_column_strings(image_table, "id").tolist())
    orphans = [i for i in dict.fromkeys(captions.column("image_id").to_pylist()) if i not in image_ids]
    if orphans:
        raise SchemaError(f"{len(orphans)} image id(s) of the captions have no image embedding (first: "
                          f"{orphans[0]!r})", source)
    return captions


def load_model_encoder(model: str, pretrained: str | None, device: torch.device) -> TextEncoder:
    """A text encoder from a checkpoint artifact (any format in ``mltk.encoders.TEXT_ENCODER_LOADERS``) or an
    open_clip architecture name (with ``pretrained`` weights). A path that does not exist is named as such
    instead of being taken for an unknown architecture."""
    from mltk.encoders import load_text_encoder

    path = Path(model)
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
    """Evaluate embeddings artifacts (or captions encoded by a checkpoint), write the metrics artifact (plus
    metrics.md/metrics.csv for those formats), print the report on stderr, and return the artifact path."""
    _check_report_format(config.report_format)
    check_text_source(config)
    model_path = Path(config.model) if config.texts is None else None
    planned = [config.images, *([config.texts] if config.texts is not None else
                                [config.captions, *([model_path] if model_path.exists() else [])])]
    existing = artifacts.reusable(config.out, "metrics", stage="evaluate", config=config, inputs=planned)
    if existing is not None:
        return existing
    runtime = resolve_runtime(config.device, config.precision)
    image_table, image_vectors = load_normalized_embeddings(config.images)
    texts = text_embeddings_for(config, image_table, runtime)
    result = evaluate_retrieval(
        image_table, image_vectors, texts.table, texts.vectors,
        metrics=config.metrics, mrv_variant=config.mrv_variant, ks=config.ks, languages=config.languages,
        c2c_pairs=config.c2c_pairs, split=config.split, device=runtime.device, chunk_mb=config.chunk_mb,
        image_source=str(config.images), text_source=texts.source,
    )
    result["settings"]["texts"] = texts.settings
    return _write_and_report(config.out, result, config, [config.images, *texts.inputs], config.report_format)


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
                           "AR": "AR_j = mean_{i<=j} a[j][i]",
                           "F": "F_j = mean_{i<j} max_{k<j} (a[k][i] - a[j][i]); F_0 undefined (null)"}}
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


def _write_and_report(out: Path, result: dict, config: Any, inputs: list[Path], report_format: str) -> Path:
    tables = report.metrics_tables(result)
    extra = {}
    if report_format == "markdown":
        extra["metrics.md"] = report.to_markdown(tables).encode("utf-8")
    elif report_format == "csv":
        extra["metrics.csv"] = report.to_csv(tables).encode("utf-8")
    path = artifacts.write_metrics(out, result, stage="evaluate", config=config, inputs=inputs, extra_files=extra)
    report.print_tables(tables, report_format)
    log(f"metrics written to {path}")
    return path


def parse_pair(text: str) -> tuple[str, str]:
    """``"en:de"`` -> ``("en", "de")`` (for ``--c2c-pair``)."""
    parts = [p.strip() for p in text.replace(",", ":").split(":")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--c2c-pair expects two languages as SRC:TGT, got {text!r}")
    return parts[0], parts[1]


def split_list(values: Sequence[str]) -> tuple[str, ...]:
    """Repeated options that may also hold comma-separated items: ``["fr,de", "ja"]`` -> ``("fr", "de", "ja")``."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())

