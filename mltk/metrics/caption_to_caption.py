"""Caption-to-caption retrieval between languages (AME, Mohammadshahi et al. 2019), on the text rows of
``mltk.metrics.text_rows``: a hit is a caption of the same image (AME's definition) or, on request, the same
caption_id (the translation)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mltk.core.errors import ConfigError, SchemaError
from mltk.metrics import ranks as M
from mltk.metrics.grouped_ranks import grouped_ranks
from mltk.metrics.text_rows import TextRows


def c2c_pairs_of(langs: list[str], pairs: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """The language pairs for caption-to-caption retrieval: the given ones, checked, or every pair."""
    if not pairs:
        return list(itertools.combinations(langs, 2))
    for src, tgt in pairs:
        if src == tgt or src not in langs or tgt not in langs:
            raise ConfigError(
                f"--c2c-pair {src}:{tgt} must name two different evaluated languages ({', '.join(langs)})"
            )
    return list(pairs)


def caption_to_caption(
    texts: TextRows, pairs: list[tuple[str, str]], ks: tuple[int, ...], device: Any, chunk_mb: float, relevance: str
) -> tuple[dict, dict]:
    """Caption-to-caption retrieval between two languages (AME, Mohammadshahi et al. 2019). With ``relevance``
    ``"image"`` (AME's definition) a caption in one language retrieves the other language's captions and a hit is
    any caption of the same image; with ``"caption_id"`` only its translation (same caption_id) is a hit. Only
    captions whose image (or caption_id) is present in both languages take part, as queries and as gallery.
    Returns the result and, per pair and direction, how many queries' best hit ties with a non-hit."""
    result, ties = {}, {}
    for src, tgt in pairs:
        src_rows, tgt_rows, src_groups, tgt_groups = _c2c_rows(texts, src, tgt, relevance)
        forward, forward_tied = grouped_ranks(
            texts.vectors[src_rows], texts.vectors[tgt_rows], src_groups, tgt_groups, chunk_mb=chunk_mb, device=device
        )
        backward, backward_tied = grouped_ranks(
            texts.vectors[tgt_rows], texts.vectors[src_rows], tgt_groups, src_groups, chunk_mb=chunk_mb, device=device
        )
        summary: dict[str, Any] = {
            f"{src}->{tgt}": M.rank_summary(forward, ks),
            f"{tgt}->{src}": M.rank_summary(backward, ks),
        }
        summary["AR"] = M.average_recall(summary[f"{src}->{tgt}"], summary[f"{tgt}->{src}"], ks)
        summary["relevance"] = relevance
        summary["queries"] = {f"{src}->{tgt}": len(src_rows), f"{tgt}->{src}": len(tgt_rows)}
        summary["instances"] = len(set(src_groups.tolist()))
        result[f"{src}-{tgt}"] = summary
        ties[f"{src}-{tgt}"] = {f"{src}->{tgt}": int(forward_tied.sum()), f"{tgt}->{src}": int(backward_tied.sum())}
    return result, ties


def _c2c_rows(
    texts: TextRows, src: str, tgt: str, relevance: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``src`` and ``tgt`` whose group (image or caption_id) is in both languages, and integer group codes
    (equal codes: relevant to each other)."""
    key = texts.image_ids if relevance == "image" else texts.caption_ids
    rows = {lang: np.flatnonzero(texts.lang == lang) for lang in (src, tgt)}
    if relevance == "caption_id":
        for lang, lang_rows in rows.items():
            if len(set(key[lang_rows].tolist())) != len(lang_rows):
                raise SchemaError(
                    f"caption_id is not unique within language {lang}; c2c by caption_id matches translations by it",
                    texts.source,
                )
    shared = np.intersect1d(key[rows[src]], key[rows[tgt]])
    if len(shared) == 0:
        hint = (
            ""
            if relevance == "image"
            else (" (captions written independently per language: use --c2c-relevance image)")
        )
        raise ConfigError(
            f"languages {src} and {tgt} share no {'image' if relevance == 'image' else 'caption_id'};"
            f" nothing to retrieve{hint}",
            texts.source,
        )
    src_rows = rows[src][np.isin(key[rows[src]], shared)]
    tgt_rows = rows[tgt][np.isin(key[rows[tgt]], shared)]
    if relevance == "image":
        _refuse_partly_translated(texts, src, tgt, src_rows, tgt_rows)
    return src_rows, tgt_rows, np.searchsorted(shared, key[src_rows]), np.searchsorted(shared, key[tgt_rows])


def _refuse_partly_translated(texts: TextRows, src: str, tgt: str, src_rows: np.ndarray, tgt_rows: np.ndarray) -> None:
    """Translations (a caption_id in both languages) and independent descriptions of the same images mixed in one
    c2c pair are two benchmarks blended into one number: a translation is retrieved almost always, an independent
    description far less often, so the blend reports neither (Multi30K's task 1 and task 2 in one test split).
    Refused, naming how many captions lack a translation partner and the ways out."""
    for lang, other, lang_rows, other_rows in ((src, tgt, src_rows, tgt_rows), (tgt, src, tgt_rows, src_rows)):
        partnered = np.isin(texts.caption_ids[lang_rows], texts.caption_ids[other_rows])
        if partnered.any() and not partnered.all():
            lonely = int((~partnered).sum())
            raise ConfigError(
                f"c2c {src}-{tgt}: {lonely} of {len(lang_rows)} {lang} captions have no translation "
                f"partner in {other} (same caption_id) while the others do: translations and "
                f"independent descriptions would be scored as one number; evaluate them apart "
                f"(import-data multi30k --task task1 or task2) or score the translations alone "
                f"with --c2c-relevance caption_id",
                texts.source,
            )
