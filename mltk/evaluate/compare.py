"""Consistency of cross-lingual retrieval, side by side for several runs (``mltk compare``).

CCR_k (Nie et al. 2024, "Improving the Consistency in Cross-Lingual Cross-Modal Retrieval with 1-to-K
Contrastive Learning") asks that a multilingual model retrieve equally well, and rank the same instances alike,
in every language. Three numbers per evaluated run (a metrics artifact from ``mltk evaluate``):

- mean AR: the mean over languages of AR (mean of R@1/5/10 in both directions), the usual quality figure;
- MRV in both directions (``evaluate --metric mrv``; paper eq. 7: the mean over instances of the variance of
  their ground truth's rank across the K languages): how consistently each instance is ranked;
- recall spread: ``max_lang AR - min_lang AR``, how far the worst language trails the best.

Lower MRV and spread are better. Runs are compared on the languages they share (the MRV of each run is the
one its metrics artifact holds: evaluate every run on the same languages for it to be comparable).

Caption-to-caption results (``evaluate --metric c2c``, text embeddings alone) get the same table over language
pairs: mean AR over the pairs both runs share, the spread between the worst and best pair, and AR per pair; the
MRV columns stay empty (c2c has no MRV).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.present import report

SUMMARY_COLUMNS = ("mean AR", "MRV i2t", "MRV t2i", "AR spread", "worst", "best")


@dataclass(frozen=True)
class CompareConfig:
    """Options of ``mltk compare``."""

    runs: tuple[Path, ...]  # metrics artifacts from ``mltk evaluate``
    out: Path
    names: tuple[str, ...] = ()  # one label per run (default: the artifact's folder name)
    languages: tuple[str, ...] = ()  # restrict AR and spread to these (default: the languages all runs share)
    report_format: str = "table"


def recall_spread(per_language: Mapping[str, Mapping[str, Any]], languages: Sequence[str] | None = None) -> float:
    """``max AR - min AR`` over ``languages`` (default all) of a ``per_language`` section; 0 for one language."""
    values = [float(per_language[lang]["AR"]) for lang in (languages or per_language)]
    if not values:
        raise ValueError("recall spread needs at least one language")
    return max(values) - min(values)


def consistency_summary(metrics: Mapping[str, Any], languages: Sequence[str] | None = None) -> dict[str, Any]:
    """Mean AR, MRV (i2t, t2i; None when the artifact has no MRV), recall spread, worst and best language."""
    per_language = metrics.get("per_language") or {}
    langs = list(languages or per_language)
    missing = [lang for lang in langs if lang not in per_language]
    if missing or not langs:
        raise ConfigError(f"metrics have no per-language results for {', '.join(missing) or 'any language'}")
    ar = {lang: float(per_language[lang]["AR"]) for lang in langs}
    mrv = metrics.get("mrv") or {}
    return {
        "languages": langs,
        "mean_AR": sum(ar.values()) / len(ar),
        "MRV_i2t": mrv.get("i2t"),
        "MRV_t2i": mrv.get("t2i"),
        "mrv_variant": mrv.get("variant"),
        "mrv_languages": mrv.get("languages"),
        "recall_spread": max(ar.values()) - min(ar.values()),
        "worst": min(ar, key=ar.get),
        "best": max(ar, key=ar.get),
        "AR": ar,
    }


def c2c_summary(metrics: Mapping[str, Any], pairs: Sequence[str] | None = None) -> dict[str, Any]:
    """``consistency_summary`` over caption-to-caption language pairs (``de-en``) instead of languages: mean AR
    over the pairs, spread between the worst and best pair; MRV is None (c2c has none)."""
    c2c = metrics.get("c2c") or {}
    missing = [pair for pair in (pairs or ()) if pair not in c2c]
    if missing or not c2c:
        raise ConfigError(f"metrics have no caption-to-caption results for {', '.join(missing) or 'any pair'}")
    return consistency_summary({"per_language": {pair: {"AR": entry["AR"]} for pair, entry in c2c.items()}}, pairs)


def comparison_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], title: str = "Consistency across languages"
) -> report.ReportTable:
    """One row per run: name | mean AR | MRV i2t | MRV t2i | AR spread | worst | best (summaries as above)."""
    body = tuple(
        (
            name,
            s["mean_AR"],
            s["MRV_i2t"],
            s["MRV_t2i"],
            s["recall_spread"],
            f"{s['worst']} {s['AR'][s['worst']]:.1f}",
            f"{s['best']} {s['AR'][s['best']]:.1f}",
        )
        for name, s in rows
    )
    return report.ReportTable(f"{title} (AR in %, lower MRV and spread are better)", ("run", *SUMMARY_COLUMNS), body)


def per_language_ar_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], title: str = "AR per language"
) -> report.ReportTable:
    """AR of each language (columns) for each run (rows)."""
    langs = list(rows[0][1]["languages"])
    body = tuple((name, *(s["AR"][lang] for lang in langs)) for name, s in rows)
    return report.ReportTable(title, ("run", *langs), body)


def compare_runs(config: CompareConfig) -> Path:
    """``mltk compare``: read metrics artifacts, print the side-by-side tables on stderr, write a metrics
    artifact with a ``comparison`` section; returns its path."""
    if len(config.runs) < 1:
        raise ConfigError("give at least one metrics artifact to compare")
    if config.report_format not in report.FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(report.FORMATS)}, got {config.report_format!r}")
    names = list(config.names) or [Path(run).name for run in config.runs]
    if len(names) != len(config.runs):
        raise ConfigError(f"{len(names)} --name value(s) for {len(config.runs)} metrics artifact(s)")
    existing = artifacts.reusable(config.out, "metrics", stage="compare", config=config, inputs=list(config.runs))
    if existing is not None:
        return existing
    loaded = [artifacts.load_metrics(run) for run in config.runs]
    result: dict[str, Any] = {
        "settings": {
            "recall_spread": "max minus min AR over the languages (AR in percent)",
            "mean_AR": "mean over the languages of AR (mean of R@1/5/10, both directions)",
            "MRV": "as in each run's metrics artifact (evaluate --metric mrv)",
        }
    }
    tables = []
    if all(m.get("per_language") for m in loaded) or not all(m.get("c2c") for m in loaded):
        languages = list(config.languages) or _shared_languages(loaded, config.runs)
        summaries = _summaries(names, config.runs, loaded, lambda metrics: consistency_summary(metrics, languages))
        if len({tuple(s["mrv_languages"] or ()) for _, s in summaries}) > 1:
            log("compare: the runs' MRV were computed on different languages; evaluate them alike to compare MRV")
        tables += [comparison_table(summaries), per_language_ar_table(summaries)]
        result["comparison"] = _section(languages, summaries, config.runs)
    pairs = _shared_pairs(loaded, config.languages) if all(m.get("c2c") for m in loaded) else []
    if "comparison" not in result and not pairs:
        raise ConfigError(
            "the metrics artifacts share no caption-to-caption language pair"
            + (f" within {', '.join(config.languages)}" if config.languages else ""),
            config.runs[0],
        )
    if pairs:
        summaries = _summaries(names, config.runs, loaded, lambda metrics: c2c_summary(metrics, pairs))
        tables += [
            comparison_table(summaries, "Caption-to-caption retrieval across language pairs"),
            per_language_ar_table(summaries, "Caption-to-caption AR per language pair"),
        ]
        result["c2c_comparison"] = _section(pairs, summaries, config.runs)
        result["settings"]["c2c"] = "the same figures over caption-to-caption language pairs (evaluate --metric c2c)"
    extra = {}
    if config.report_format == "markdown":
        extra["metrics.md"] = report.to_markdown(tables).encode("utf-8")
    elif config.report_format == "csv":
        extra["metrics.csv"] = report.to_csv(tables).encode("utf-8")
    path = artifacts.write_metrics(
        config.out, result, stage="compare", config=config, inputs=list(config.runs), extra_files=extra
    )
    report.print_tables(tables, config.report_format)
    return path


def _summaries(
    names: Sequence[str], runs: Sequence[Path], loaded: Sequence[Mapping[str, Any]], summary: Any
) -> list[tuple[str, dict[str, Any]]]:
    """``summary(metrics)`` of each run with its name; an error names the run it is about."""
    summaries = []
    for name, run, metrics in zip(names, runs, loaded):
        try:
            summaries.append((name, summary(metrics)))
        except ConfigError as exc:
            raise ConfigError(str(exc), run) from None
    return summaries


def _section(keys: Sequence[str], summaries: Sequence[tuple[str, dict]], runs: Sequence[Path]) -> dict[str, Any]:
    return {
        "languages": list(keys),
        "runs": [{"name": n, "path": str(Path(r).resolve()), **s} for (n, s), r in zip(summaries, runs)],
    }


def _shared_pairs(loaded: Sequence[Mapping[str, Any]], languages: Sequence[str]) -> list[str]:
    """The c2c pairs every run evaluated (with ``languages``: only pairs of two of them)."""
    return [
        pair
        for pair in loaded[0]["c2c"]
        if all(pair in m["c2c"] for m in loaded) and (not languages or set(pair.split("-")) <= set(languages))
    ]


def _shared_languages(loaded: Sequence[Mapping[str, Any]], runs: Sequence[Path]) -> list[str]:
    first = list(loaded[0].get("per_language") or {})
    shared = [lang for lang in first if all(lang in (m.get("per_language") or {}) for m in loaded)]
    if not shared:
        raise ConfigError("the metrics artifacts share no evaluated language", runs[0])
    return shared
