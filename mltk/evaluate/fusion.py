"""Translate-test and score fusion (``mltk evaluate --translations CAPS --fusion ETA[,ETA...]``), CLL-CLIP's
Figure 5 (Yang et al. 2024, "Embracing Language Inclusivity and Diversity in CLIP through Continual Language
Learning"; the figure's data is XM3600's Hebrew captions machine-translated into English). The evaluated model
reads the native caption and, as English, its English translation, and the two similarity scores are fused with
a weight eta::

    s_eta(q, g) = (1 - eta) * s(model(q), g) + eta * s(model_en(translation(q)), g)

``model_en`` is the model's own English path: for a CLL-CLIP checkpoint the same model (English reads the same
trained token table as every language, as the authors' code encodes both with one CLL-CLIP model); for an MLA
checkpoint the frozen CLIP text tower, its English path; for a text-only tower the tower itself. eta = 0 is the
model on the native caption alone, eta = 1 translate-test alone, values between fuse them (the authors' grid: 0,
0.1, ..., 1, ``--fusion default``). ``g`` is a gallery item: an image embedding (image retrieval), or an English
caption through the same tower (caption-to-caption retrieval on a text-only tower such as all-MiniLM-L6-v2).

Both scores are cosine similarities: dot products of L2-normalised vectors with the *same* gallery vector, so
the fused score is the dot product of the gallery vector with the fused query vector ``(1 - eta) * m + eta * t``,
not re-normalised (the authors fuse the scores of normalised features and do not renormalise either): fusing the
vectors first gives exactly the fused scores, in both directions, and the existing retrieval code ranks them.
Captions with no translation keep the model's vector (their count is reported as ``untranslated``). English rows
are never fused.

Translations: a captions artifact whose English rows (``lang`` = en) share the ``caption_id`` of the caption they
translate (``import-data lines --translation-of``; IGLUE xFlickr&CO's ``annotations_machine-translate`` as
``import-data xflickrco`` labels it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError, SchemaError

FUSION_FORM = (
    "(1 - eta) * s(model, native caption) + eta * s(model's English path, its English translation); "
    "cosine scores, not renormalised"
)
# A model ranked by order violation (AME's --similarity order) scores the fused query (1 - eta) m + eta t of the two
# unit vectors by that similarity: not the eta-weighted sum of two scores, since order violation is not linear.
ORDER_FUSION_FORM = (
    "the query (1 - eta) * m + eta * t of the unit vectors of the native caption (m) and its "
    "English translation (t), not renormalised, ranked by order-violation similarity (not a fusion "
    "of cosine scores)"
)
AUTHORS_ETAS = tuple(i / 10 for i in range(11))  # CLL-CLIP's Figure 5: eta = 0, 0.1, ..., 1
DEFAULT_GRID = "default"
CURVE_KEYS = ("R@1", "R@5", "R@10")
MAX_ETAS = 101  # the finest grid worth a table row each: steps of 0.01 (the authors' is 11 points)


def parse_etas(values: Sequence[str]) -> tuple[float, ...]:
    """``["0,0.25", "1"]`` -> ``(0.0, 0.25, 1.0)``; each in [0, 1], sorted, distinct. ``default`` is the authors'
    grid (0, 0.1, ..., 1); ``A,B,...,C`` the range from A to C in steps of B - A (``0,0.1,...,1``)."""
    etas: list[float] = []
    for value in values:
        parts = [part.strip() for part in str(value).split(",") if part.strip()]
        if not parts:
            raise ConfigError(
                f"--fusion {str(value)!r} holds no weight; give numbers in [0, 1], default, or a range "
                f"such as 0,0.1,...,1"
            )
        if parts == [DEFAULT_GRID]:
            etas.extend(AUTHORS_ETAS)
            continue
        numbers = [_eta(part) if part != "..." else None for part in parts]
        etas.extend(_expand_range(numbers, str(value)) if None in numbers else numbers)
    for eta in etas:
        if not 0.0 <= eta <= 1.0:
            raise ConfigError(f"--fusion weights must lie in [0, 1], got {eta:g}")
    etas = sorted(set(etas))
    if len(etas) > MAX_ETAS:
        raise ConfigError(
            f"--fusion gives {len(etas):,} weights, over the most mltk evaluates ({MAX_ETAS}: steps of "
            f"0.01); give a coarser grid"
        )
    return tuple(etas)


def _eta(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(
            f"--fusion expects numbers in [0, 1], default, or a range such as 0,0.1,...,1; got {text!r}"
        ) from None


def _expand_range(numbers: list[float | None], text: str) -> list[float]:
    """``[a, b, None, c]`` (``a,b,...,c``) -> a, b, ..., c in steps of b - a (c included)."""
    at = numbers.index(None)
    if numbers.count(None) > 1 or at < 2 or at != len(numbers) - 2:
        raise ConfigError(f"--fusion {text}: a range is two first values, ... and a last value (0,0.1,...,1)")
    first, second, last = numbers[at - 2], numbers[at - 1], numbers[at + 1]
    step = second - first
    count = (last - first) / step if step > 0 else -1.0
    if count < 1 or abs(count - round(count)) > 1e-6:
        raise ConfigError(
            f"--fusion {text}: the range must climb from {first:g} to {last:g} in whole steps of {step:g}"
        )
    if count + 1 > MAX_ETAS:  # refused before it is expanded: a typo (0,0.000001,...,1) is a million points
        raise ConfigError(
            f"--fusion {text}: a grid of {int(round(count)) + 1:,} weights, over the most mltk "
            f"evaluates ({MAX_ETAS}: steps of 0.01); give a coarser step"
        )
    return numbers[: at - 2] + [round(first + i * step, 10) for i in range(int(round(count)) + 1)]


def translation_rows(
    text_table: pa.Table, translation_table: pa.Table, source: str | Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows of ``text_table``, rows of ``translation_table``) of every non-English caption with a translation
    (the English row of the translations with the same caption_id). Two different English rows for one caption_id
    are refused, naming ``source`` (the translations) and the caption: picking one would change the result
    silently with the row order."""
    english = np.asarray(translation_table.column("lang").to_pylist()) == NATIVE_LANG
    sentences = (
        translation_table.column("caption").to_pylist()
        if "caption" in translation_table.column_names
        else [None] * translation_table.num_rows
    )
    row_of: dict = {}
    for i, cid in enumerate(translation_table.column("caption_id").to_pylist()):
        if not english[i]:
            continue
        first = row_of.setdefault(cid, i)
        if sentences[first] != sentences[i]:
            raise SchemaError(
                f"caption_id {str(cid)[:60]!r} has two different English translations "
                f"({str(sentences[first])[:40]!r} and {str(sentences[i])[:40]!r}); keep one",
                source,
            )
    langs = text_table.column("lang").to_pylist()
    pairs = [
        (i, row_of[cid])
        for i, (cid, lang) in enumerate(zip(text_table.column("caption_id").to_pylist(), langs))
        if lang != NATIVE_LANG and cid in row_of
    ]
    if not pairs:
        raise ConfigError(
            "no evaluated caption has a translation (an English row of --translations with its caption_id)"
        )
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def fuse(vectors: np.ndarray, translated: np.ndarray, rows: np.ndarray, eta: float) -> np.ndarray:
    """``vectors [N, D]`` with row ``rows[i]`` replaced by ``(1 - eta) * vectors[rows[i]] + eta * translated[i]``
    (both L2-normalised, the result not: see the module docstring)."""
    fused = np.array(vectors, dtype=np.float32, copy=True)
    fused[rows] = (1.0 - eta) * _unit(fused[rows]) + eta * _unit(np.asarray(translated, dtype=np.float32))
    return fused


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def fusion_curve(
    etas: Sequence[float],
    text_table: pa.Table,
    vectors: np.ndarray,
    translation_vectors: np.ndarray,
    rows: np.ndarray,
    evaluate: Callable[[np.ndarray], dict],
    similarity: str = "cosine",
) -> dict:
    """Evaluate the fused vectors at each eta (``evaluate(vectors) -> metrics dict``, ranking by ``similarity``)
    and collect the curve."""
    langs = sorted(set(np.asarray(text_table.column("lang").to_pylist())[rows].tolist()))
    per_eta = {}
    for eta in etas:
        result = evaluate(fuse(vectors, translation_vectors, rows, eta))
        per_eta[f"{eta:g}"] = {key: result[key] for key in ("per_language", "c2c") if key in result}
    foreign = np.asarray(text_table.column("lang").to_pylist()) != NATIVE_LANG
    form = ORDER_FUSION_FORM if similarity == "order" else FUSION_FORM
    return {
        "form": form,
        "etas": list(etas),
        "languages": langs,
        "per_eta": per_eta,
        "curves": _curves(per_eta, langs),
        "translated": int(len(rows)),
        "untranslated": int(foreign.sum()) - int(len(rows)),
        "pure_systems": {
            "0": "the model alone on the native caption",
            "1": "translate-test alone (the model's English path on the translation)",
        },
    }


def _curves(per_eta: dict, langs: list[str]) -> dict:
    """series name (``de t2i R@1``, ``de->en R@1``) -> values over eta."""
    curves: dict[str, list] = {}
    for result in per_eta.values():
        for lang in langs:
            entry = (result.get("per_language") or {}).get(lang)
            for direction in ("t2i", "i2t") if entry else ():
                for key in CURVE_KEYS:
                    curves.setdefault(f"{lang} {direction} {key}", []).append(entry[direction].get(key))
            for pair, summary in (result.get("c2c") or {}).items():
                for name, value in summary.items():
                    if isinstance(value, dict) and "R@1" in value and name.startswith(f"{lang}->"):
                        for key in CURVE_KEYS:
                            curves.setdefault(f"{name} {key}", []).append(value.get(key))
    return curves
