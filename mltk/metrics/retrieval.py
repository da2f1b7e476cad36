"""Cross-lingual, cross-modal retrieval on tables and vectors in memory: per-language recall, MRV and
caption-to-caption retrieval (``evaluate_retrieval``; training stages call it for validation, ``mltk evaluate``
through ``mltk.evaluate.stage``).

Inputs: the image table has ``id`` (the image id); the text table has ``id``, ``image_id`` (the image a caption
describes), ``lang`` and ``caption_id`` (shared by translations of one sentence). Each language is evaluated
against the whole image gallery; instances are matched by id, never by position. The rank conventions (base,
tie rule) are in ``mltk.metrics.ranks`` and are copied into ``settings``.

Real test sets are not all parallel, so what counts as one instance is decided from the captions and stated in
the result (see ``mrv_instance_mode`` and ``mltk.metrics.caption_to_caption``):

- MRV image-to-text: the instance is the image. Text-to-image: the image when every image has at most one caption
  per language (xFlickr&CO, XTD10, the CCRk paper's setting; for parallel captions this is the same as the
  sentence), else the sentence (``caption_id``) shared by translations. A direction with 0 instances is an error.
- Caption-to-caption (AME): a hit is a caption of the same image (default), or the same caption_id on request.
- ``protocol="first-caption"`` keeps only the first caption of each image and language (CLIP_benchmark's way on
  XM3600-style sets); ``"all-captions"`` (default) keeps them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.metrics import ranks as M
from mltk.metrics.arrays import array_ops
from mltk.metrics.caption_to_caption import c2c_pairs_of, caption_to_caption
from mltk.metrics.retrieval_options import check_options
from mltk.metrics.retrieval_rows import (  # noqa: F401 (API)
    TEXT_COLUMNS,
    ImageRows,
    as_table,
    column_strings,
    first_caption_rows,
    image_rows,
    in_splits,
    select_split,
    split_column,
    take_texts,
    text_rows,
)
from mltk.metrics.text_rows import TextRows

SIMILARITY_DEFINITIONS = {
    "cosine": "dot product of the float32 vectors (cosine: vectors are L2-normalised)",
    "order": "image-text: AME's order violation -||max(0, caption - image)||^2 (Vendrov et al. 2016), the "
    "similarity the model was trained with; caption-to-caption: cosine",
}


# ----------------------------------------------------------------------------------------------------------------
# In-memory evaluation
# ----------------------------------------------------------------------------------------------------------------


def evaluate_retrieval(
    image_table: pa.Table | Mapping[str, Sequence] | None,
    image_vectors: np.ndarray | Any | None,
    text_table: pa.Table | Mapping[str, Sequence],
    text_vectors: np.ndarray | Any,
    *,
    metrics: Sequence[str] = ("recall",),
    mrv_variant: str = "paper",
    mrv_instance: str = "auto",
    ks: Sequence[int] = M.DEFAULT_KS,
    languages: Sequence[str] | None = None,
    c2c_pairs: Sequence[tuple[str, str]] | None = None,
    c2c_relevance: str = "image",
    protocol: str = "all-captions",
    split: str | None = None,
    device: Any = "cpu",
    chunk_mb: float = 256,
    image_source: str = "<images>",
    text_source: str = "<texts>",
    similarity: str = "cosine",
) -> dict:
    """Evaluate retrieval per language; returns the ``metrics.json`` content.

    ``per_language[lang]`` holds ``i2t`` and ``t2i`` (R@K in percent, 1-based median and mean rank) and ``AR``
    (always computed when images are given); ``metrics`` adds ``mrv`` (needs >= 2 languages) and ``c2c`` (every
    pair of languages unless ``c2c_pairs`` names them). Without images (``image_table=None``) only ``c2c`` can be
    computed, from the text vectors alone. ``split`` keeps only rows of that split (see ``select_split``).
    ``similarity``: image-text pairs ranked by ``cosine`` or AME's ``order`` violation; c2c always by cosine.
    """
    with_images = image_table is not None
    metrics = check_options(metrics, with_images, mrv_variant, mrv_instance, c2c_relevance, protocol)
    ks = tuple(int(k) for k in ks)
    texts = text_rows(as_table(text_table), text_vectors, text_source)
    images = image_rows(as_table(image_table), image_vectors, image_source) if with_images else None
    _check_same_width(images, texts, image_source, text_source)
    images, texts = select_split(images, texts, split)
    if protocol == "first-caption":
        texts = take_texts(texts, first_caption_rows(texts))
    langs = _languages(texts, languages)
    if "mrv" in metrics and len(langs) < 2:
        raise ConfigError(f"--metric mrv needs captions in at least 2 languages, found {len(langs)}")
    pairs = c2c_pairs_of(langs, c2c_pairs) if "c2c" in metrics else []

    result: dict[str, Any] = {}
    counts: dict[str, dict] = {}
    ties: dict[str, Any] = {"rule": M.TIE_RULE, "per_language": {}, "c2c": {}}
    if images is not None:
        per_language, i2t_by_lang, t2i_by_lang = _rank_languages(
            images, texts, langs, ks, device, chunk_mb, counts, ties["per_language"], _scorer(similarity)
        )
        result["per_language"] = per_language
        result["summary"] = {"languages": langs, "mean_AR": float(np.mean([v["AR"] for v in per_language.values()]))}
        if "mrv" in metrics:
            result["mrv"] = _mrv(texts, i2t_by_lang, t2i_by_lang, langs, mrv_variant, mrv_instance)
    if "c2c" in metrics:
        result["c2c"], ties["c2c"] = caption_to_caption(texts, pairs, ks, device, chunk_mb, c2c_relevance)
    result["ties"] = _with_total(ties)
    result["settings"] = _settings(
        metrics,
        mrv_variant,
        ks,
        split,
        len(images.ids) if images else None,
        counts,
        device,
        protocol,
        c2c_relevance,
        len(texts.lang),
        similarity,
    )
    return result


def _scorer(similarity: str):
    """None for cosine (the ranking's own chunked dot product, numpy on the CPU); the torch scorer of another
    similarity (imported only then)."""
    if similarity == "cosine":
        return None
    from mltk.losses.ranking import retrieval_scorer

    return retrieval_scorer(similarity)


def _check_same_width(images, texts, image_source: str, text_source: str) -> None:
    if images is not None and images.vectors.shape[1] != texts.vectors.shape[1]:
        raise ArtifactError(
            f"text vectors have dim {texts.vectors.shape[1]} but image vectors have dim "
            f"{images.vectors.shape[1]} ({image_source})",
            text_source,
        )


def _rank_languages(
    images: ImageRows,
    texts: TextRows,
    langs: list[str],
    ks: tuple[int, ...],
    device: Any,
    chunk_mb: float,
    counts: dict,
    ties: dict,
    scorer=None,
) -> tuple[dict, dict, dict]:
    """Each language's captions ranked against the whole gallery: ``(per_language summaries, i2t ranks by
    language, t2i ranks by language)``; fills ``counts`` (queries) and ``ties`` (tied ground truths)."""
    owner = _caption_owners(images, texts)
    image_tensor = array_ops(device, images.vectors, torch_scorer=scorer is not None).float32(
        images.vectors
    )  # [N, d], shared by every language
    per_language, i2t_by_lang, t2i_by_lang = {}, {}, {}
    for lang in langs:
        rows = np.flatnonzero(texts.lang == lang)
        ranked = M.rank_both_directions(
            image_tensor,
            texts.vectors[rows],
            owner[rows],
            chunk_mb=chunk_mb,
            device=device,
            progress=f"ranking {lang}",
            scorer=scorer,
        )
        queried = ranked.left >= 0
        ties[lang] = {"i2t": int(ranked.left_tied[queried].sum()), "t2i": int(ranked.right_tied.sum())}
        per_language[lang] = _direction_summary(ranked.left[queried], ranked.right, ks)
        counts[lang] = {"i2t_queries": int(queried.sum()), "t2i_queries": int(len(rows))}
        i2t_by_lang[lang] = (images.ids[queried], ranked.left[queried])
        t2i_by_lang[lang] = (rows, ranked.right)
    return per_language, i2t_by_lang, t2i_by_lang


def _caption_owners(images: ImageRows, texts: TextRows) -> np.ndarray:
    """Row of each caption's image in the image table (matched by id)."""
    position = {image_id: row for row, image_id in enumerate(images.ids)}
    owner = np.fromiter((position.get(i, -1) for i in texts.image_ids), dtype=np.int64, count=len(texts.image_ids))
    missing = np.flatnonzero(owner < 0)
    if len(missing):
        raise SchemaError(
            f"{len(missing)} caption(s) refer to image ids that are not in the image embeddings "
            f"(first: {texts.image_ids[missing[0]]!r})",
            texts.source,
        )
    return owner


def _languages(texts: TextRows, languages: Sequence[str] | None) -> list[str]:
    present = sorted(set(texts.lang.tolist()))
    if not languages:
        return present
    unknown = [lang for lang in languages if lang not in present]
    if unknown:
        raise ConfigError(f"language(s) {', '.join(unknown)} have no captions (present: {', '.join(present)})")
    return list(dict.fromkeys(languages))


def _direction_summary(i2t: np.ndarray, t2i: np.ndarray, ks: tuple[int, ...]) -> dict:
    i2t_summary, t2i_summary = M.rank_summary(i2t, ks), M.rank_summary(t2i, ks)
    return {"i2t": i2t_summary, "t2i": t2i_summary, "AR": M.average_recall(i2t_summary, t2i_summary, ks)}


def mrv_instance_mode(texts: TextRows, langs: Sequence[str], requested: str = "auto") -> str:
    """What one text-to-image MRV instance is: ``"image"`` when every image has at most one caption in each
    language (then an image's K captions are its K queries, translated or not), else ``"caption_id"`` (the K
    translations of one sentence). ``requested`` forces one; ``"image"`` on images with several captions per
    language is an error (``--protocol first-caption`` keeps one)."""
    in_langs = np.isin(texts.lang, list(langs))
    keys = list(zip(texts.image_ids[in_langs].tolist(), texts.lang[in_langs].tolist()))
    one_per_language = len(set(keys)) == len(keys)
    if requested == "image" and not one_per_language:
        raise ConfigError(
            "--mrv-instance image needs one caption per image and language, but some images have "
            "several; use --protocol first-caption or --mrv-instance caption_id"
        )
    if requested != "auto":
        return requested
    return "image" if one_per_language else "caption_id"


def _mrv(
    texts: TextRows, i2t_by_lang: dict, t2i_by_lang: dict, langs: list[str], variant: str, requested_instance: str
) -> dict:
    """MRV in both directions over the instances present in all K languages (i2t: images, ranks of their best
    caption per language; t2i: see ``mrv_instance_mode``). A direction left with 0 instances is an error that
    says why, never a silent dash."""
    mode = mrv_instance_mode(texts, langs, requested_instance)
    t2i_ids = {}
    for lang in langs:
        rows, ranks = t2i_by_lang[lang]
        ids = (texts.image_ids if mode == "image" else texts.caption_ids)[rows]
        if len(set(ids.tolist())) != len(ids):
            raise SchemaError(
                f"caption_id is not unique within language {lang}; MRV matches translations by it", texts.source
            )
        t2i_ids[lang] = (ids, ranks)
    result: dict[str, Any] = {
        "variant": variant,
        "languages": langs,
        "K": len(langs),
        "instance": {"i2t": "image", "t2i": mode},
        "instances": {},
        "excluded_instances": {},
    }
    for direction, by_lang in (("i2t", i2t_by_lang), ("t2i", t2i_ids)):
        matrix, _, excluded = M.align_instance_ranks({lang: by_lang[lang] for lang in langs})
        if len(matrix) == 0:
            unit = "image" if direction == "i2t" or mode == "image" else "caption_id"
            raise ConfigError(
                f"MRV {direction} has 0 instances: no {unit} has captions in all of "
                f"{', '.join(langs)}"
                + (
                    ""
                    if unit == "image"
                    else " (the languages share no caption_id; captions written "
                    "independently per language need one caption per image "
                    "and language: try --protocol first-caption)"
                )
                + "; pick languages with --lang",
                texts.source,
            )
        result[direction] = M.mean_rank_variance(matrix, variant)
        result["instances"][direction] = len(matrix)
        result["excluded_instances"][direction] = excluded
    return result


def _with_total(ties: dict) -> dict:
    """``ties`` with ``total``: the ground truths (all directions and languages) that tie with another candidate."""
    counts = [n for section in ("per_language", "c2c") for entry in ties[section].values() for n in entry.values()]
    return {**ties, "total": int(sum(counts))}


def _settings(
    metrics: tuple[str, ...],
    variant: str,
    ks: tuple[int, ...],
    split: str | None,
    n_images: int | None,
    counts: dict,
    device: Any,
    protocol: str,
    c2c_relevance: str,
    n_captions: int,
    similarity: str = "cosine",
) -> dict:
    return {
        "metrics": list(metrics),
        "ks": list(ks),
        "recall_unit": "percent",
        "rank_base": M.RANK_BASE,
        "tie_rule": M.TIE_RULE,
        "protocol": protocol,
        "protocol_definition": {
            "all-captions": "every caption of an image and language is a query (and a ground truth for i2t)",
            "first-caption": "only the first caption (table order) of each image and language is kept, as "
            "CLIP_benchmark does on XM3600-style sets",
        }[protocol],
        "i2t": "an image's rank is that of its best-ranked caption in the language (hit if any caption is in the "
        "top K); gallery: that language's captions",
        "t2i": "one query per caption; gallery: all images",
        "AR": "mean of R@K over ks in both directions",
        "mrv_variant": variant if "mrv" in metrics else None,
        "mrv_definition": {
            "paper": "mean over instances of the population variance of its ranks across the K languages (eq. 7)",
            "code": "mean over instances of the population standard deviation of its 0-based ranks",
        }[variant]
        if "mrv" in metrics
        else None,
        "mrv_instances": "i2t: the image; t2i: the image when every image has at most one caption per language, "
        "else the caption_id shared by translations (mrv.instance says which); only instances "
        "present in all K languages are used"
        if "mrv" in metrics
        else None,
        "c2c": {
            "image": "a hit is any caption of the query's image (AME); queries and gallery: captions whose "
            "image has captions in both languages",
            "caption_id": "a hit is the query's translation (same caption_id); queries and gallery: captions "
            "whose caption_id exists in both languages",
        }[c2c_relevance]
        if "c2c" in metrics
        else None,
        "similarity": similarity,
        "similarity_definition": SIMILARITY_DEFINITIONS[similarity],
        "split": split,
        "device": str(device),
        "counts": {"images": n_images, "captions": n_captions, "per_language": counts},
    }
