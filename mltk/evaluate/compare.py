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


def comparison_table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> report.ReportTable:
    """One row per run: name | mean AR | MRV i2t | MRV t2i | AR spread | worst | best (summaries as above)."""
    body = tuple((name, s["mean_AR"], s["MRV_i2t"], s["MRV_t2i"], s["recall_spread"],
                  f"{s['worst']} {s['AR'][s['worst']]:.1f}", f"{s['best']} {s['AR'][s['best']]:.1f}")
                 for name, s in rows)
    return report.ReportTable("Consistency across languages (AR in %, lower MRV and spread are better)",
                              ("run", *SUMMARY_COLUMNS), body)


def per_language_ar_table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> report.ReportTable:
    """AR of each language (columns) for each run (rows)."""
    langs = list(rows[0][1]["languages"])
    body = tuple((name, *(s["AR"][lang] for lang in langs)) for name, s in rows)
    return report.ReportTable("AR per language", ("run", *langs), body)


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
    languages = list(config.languages) or _shared_languages(loaded, config.runs)
    summaries = []
    for name, run, metrics in zip(names, config.runs, loaded):
        try:
            summaries.append((name, consistency_summary(metrics, languages)))
        except ConfigError as exc:
            raise ConfigError(str(exc), run) from None
    if len({tuple(s["mrv_languages"] or ()) for _, s in summaries}) > 1:
        log("compare: the runs' MRV were computed on different languages; evaluate them alike to compare MRV")
    tables = [comparison_table(summaries), per_language_ar_table(summaries)]
    result = {"comparison": {"languages": languages,
                             "runs": [{"name": n, "path": str(Path(r).resolve()), **s}
                                      for (n, s), r in zip(summaries, config.runs)]},
              "settings": {"recall_spread": "max minus min AR over the languages (AR in percent)",
                           "mean_AR": "mean over the languages of AR (mean of R@1/5/10, both directions)",
                           "MRV": "as in each run's metrics artifact (evaluate --metric mrv)"}}
    extra = {}
    if config.report_format == "markdown":
        extra["metrics.md"] = report.to_markdown(tables).encode("utf-8")
    elif config.report_format == "csv":
        extra["metrics.csv"] = report.to_csv(tables).encode("utf-8")
    path = artifacts.write_metrics(config.out, result, stage="compare", config=config, inputs=list(config.runs),
                                   extra_files=extra)
    report.print_tables(tables, config.report_format)
    return path


def _shared_languages(loaded: Sequence[Mapping[str, Any]], runs: Sequence[Path]) -> list[str]:
    first = list(loaded[0].get("per_language") or {})
    shared = [lang for lang in first if all(lang in (m.get("per_language") or {}) for m in loaded)]
    if not shared:
        raise ConfigError("the metrics artifacts share no evaluated language", runs[0])
    return shared
