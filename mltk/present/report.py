"""Tables of metrics for people: rich on stderr, Markdown for papers, CSV for spreadsheets.

``metrics_tables(metrics)`` turns a ``metrics.json`` document (see ``mltk.evaluate``) into ``ReportTable``s, one per
section present (per-language retrieval, MRV, caption-to-caption, continual); ``print_tables``, ``to_markdown`` and
``to_csv`` render them. Training stages reuse ``print_metrics`` to show their validation table.

For other programs: ``long_rows``/``to_long_csv`` give one tidy row per (language, direction, metric, value)
(``metrics_long.csv`` in every evaluate artifact, one ``pandas.read_csv`` away), and ``clip_benchmark_records``
writes CLIP_benchmark's JSON (``dataset``, ``model``, ``pretrained``, ``task``, ``metrics``, ``language``; recalls
as fractions, ``image_retrieval`` = text-to-image) so results sit beside numbers published with that harness.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mltk.core.runtime import console

FORMATS = ("table", "markdown", "csv")
DIRECTION_LABELS = {"i2t": "I→T", "t2i": "T→I"}


@dataclass(frozen=True)
class ReportTable:
    """One titled table; ``rows`` hold raw values (floats, ints, strings or None), formatted by the renderers."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def metrics_tables(metrics: Mapping[str, Any]) -> list[ReportTable]:
    """Every table a metrics document supports, in reading order."""
    tables = []
    ks = tuple(metrics.get("settings", {}).get("ks", (1, 5, 10)))
    if metrics.get("per_language"):
        tables.append(per_language_table(metrics["per_language"], ks))
    if metrics.get("mrv"):
        tables.append(mrv_table(metrics["mrv"]))
    if metrics.get("c2c"):
        tables.append(c2c_table(metrics["c2c"], ks))
    if metrics.get("continual"):
        tables.append(continual_table(metrics["continual"]))
    if metrics.get("bli"):
        tables.append(bli_table(metrics["bli"]))
    if metrics.get("fusion"):
        tables.append(fusion_table(metrics["fusion"]))
    return tables


def bli_table(bli: Mapping[str, Any]) -> ReportTable:
    """Pair | P@1 (AME: cosine, all words, misses counted) | reverse | P@1 CSLS (MUSE) | source words | OOV |
    candidates | k."""
    row = (
        f"{bli.get('src_lang')}->{bli.get('tgt_lang')}",
        bli.get("P@1"),
        bli.get("P@1_reverse"),
        bli.get("P@1_csls"),
        bli.get("source_words"),
        bli.get("out_of_vocabulary"),
        bli.get("candidates"),
        bli.get("k"),
    )
    return ReportTable(
        "Bilingual lexicon induction (AME: cosine P@1 over all words, OOV as misses; CSLS: MUSE's)",
        ("pair", "P@1", "P@1 reverse", "P@1 CSLS (MUSE)", "source words", "OOV", "candidates", "k"),
        (row,),
    )


def fusion_table(fusion: Mapping[str, Any]) -> ReportTable:
    """One row per eta, one column per curve (``de t2i R@1``, ``de->en R@1``, ...)."""
    curves = fusion.get("curves") or {}
    names = [name for name in curves if name.endswith("R@1")] or list(curves)
    rows = tuple((eta, *(curves[name][i] for name in names)) for i, eta in enumerate(fusion.get("etas", [])))
    return ReportTable(f"Score fusion over eta: {fusion.get('form', '')}", ("eta", *names), rows)


def _direction_columns(ks: Sequence[int]) -> list[str]:
    return [f"R@{k}" for k in ks] + ["medR", "meanR"]


def _direction_values(summary: Mapping[str, float], ks: Sequence[int]) -> list[float]:
    return [summary.get(f"R@{k}") for k in ks] + [summary.get("median_rank"), summary.get("mean_rank")]


def per_language_table(per_language: Mapping[str, Mapping], ks: Sequence[int] = (1, 5, 10)) -> ReportTable:
    """Language | I→T R@K, medR, meanR | T→I R@K, medR, meanR | AR, plus a ``mean`` row over languages."""
    headers = ["lang"]
    for direction in ("i2t", "t2i"):
        headers += [f"{DIRECTION_LABELS[direction]} {column}" for column in _direction_columns(ks)]
    headers.append("AR")
    rows = []
    for lang, entry in per_language.items():
        rows.append([lang, *_direction_values(entry["i2t"], ks), *_direction_values(entry["t2i"], ks), entry["AR"]])
    if len(rows) > 1:
        rows.append(["mean", *(_mean(column) for column in list(zip(*rows))[1:])])
    return ReportTable("Retrieval per language", tuple(headers), tuple(tuple(r) for r in rows))


def mrv_table(mrv: Mapping[str, Any]) -> ReportTable:
    """Direction | MRV | instance (what one instance is: image or caption_id) | instances | excluded."""
    rows = tuple(
        (
            direction,
            mrv.get(direction),
            mrv.get("instance", {}).get(direction, "-"),
            mrv.get("instances", {}).get(direction),
            mrv.get("excluded_instances", {}).get(direction),
        )
        for direction in ("i2t", "t2i")
    )
    title = f"MRV ({mrv.get('variant')}, K={mrv.get('K', len(mrv.get('languages', [])))})"
    return ReportTable(title, ("direction", "MRV", "instance", "instances", "excluded"), rows)


def c2c_table(c2c: Mapping[str, Mapping], ks: Sequence[int] = (1, 5, 10)) -> ReportTable:
    rows = []
    for entry in c2c.values():
        for direction, summary in entry.items():
            if isinstance(summary, Mapping) and "R@1" in summary:
                queries = entry.get("queries", {}).get(direction, entry.get("sentences"))
                rows.append((direction, *_direction_values(summary, ks), entry.get("relevance", "caption_id"), queries))
    return ReportTable(
        "Caption-to-caption retrieval", ("direction", *_direction_columns(ks), "hit", "queries"), tuple(rows)
    )


def continual_table(continual: Mapping[str, Any]) -> ReportTable:
    """a_{j,i} with one row per trained task j, followed by AR_j and F_j."""
    tasks = list(continual["tasks"])
    rows = []
    for j, row in enumerate(continual["matrix"]):
        rows.append((f"after {tasks[j]}", *row, continual["AR"][j], continual["F"][j]))
    return ReportTable(f"Continual ({continual.get('metric')})", ("trained", *tasks, "AR", "F"), tuple(rows))


def long_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str, str, float | int | None]]:
    """Tidy rows ``(language, direction, metric, value)``: per-language recall and ranks (direction i2t/t2i, AR
    under ``both``), MRV and its instance counts (language ``all``), c2c (language ``src-tgt``)."""
    rows: list[tuple[str, str, str, float | int | None]] = []
    for lang, entry in (metrics.get("per_language") or {}).items():
        for direction in ("i2t", "t2i"):
            rows += [(lang, direction, name, value) for name, value in entry[direction].items()]
        rows.append((lang, "both", "AR", entry["AR"]))
    mrv = metrics.get("mrv") or {}
    for direction in ("i2t", "t2i") if mrv else ():
        rows.append(("all", direction, "MRV", mrv.get(direction)))
        rows.append(("all", direction, "MRV_instances", mrv.get("instances", {}).get(direction)))
    for pair, entry in (metrics.get("c2c") or {}).items():
        for direction, summary in entry.items():
            if isinstance(summary, Mapping) and "R@1" in summary:
                rows += [(pair, direction, name, value) for name, value in summary.items()]
                rows.append((pair, direction, "queries", entry.get("queries", {}).get(direction)))
        rows.append((pair, "both", "AR", entry["AR"]))
    return rows


def to_long_csv(rows: Sequence[tuple[str, str, str, Any]]) -> str:
    """``language,direction,metric,value`` with full precision; an undefined value is an empty cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["language", "direction", "metric", "value"])
    for lang, direction, metric, value in rows:
        writer.writerow(
            [
                lang,
                direction,
                metric,
                "" if value is None or (isinstance(value, float) and math.isnan(value)) else value,
            ]
        )
    return buffer.getvalue()


def clip_benchmark_records(
    metrics: Mapping[str, Any], *, dataset: str, model: str | None, pretrained: str | None
) -> dict[str, dict]:
    """One CLIP_benchmark result object per language: ``image_retrieval_recall@k`` is text-to-image and
    ``text_retrieval_recall@k`` image-to-text, as fractions in [0, 1] like that harness writes them."""
    ks = metrics.get("settings", {}).get("ks", (1, 5, 10))
    records = {}
    for lang, entry in (metrics.get("per_language") or {}).items():
        values = {}
        for k in ks:
            values[f"image_retrieval_recall@{k}"] = entry["t2i"][f"R@{k}"] / 100
            values[f"text_retrieval_recall@{k}"] = entry["i2t"][f"R@{k}"] / 100
        records[lang] = {
            "dataset": dataset,
            "model": model,
            "pretrained": pretrained,
            "task": "zeroshot_retrieval",
            "metrics": values,
            "language": lang,
        }
    return records


def dumps(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    return sum(numbers) / len(numbers) if numbers else None


# ----------------------------------------------------------------------------------------------------------------
# Renderers
# ----------------------------------------------------------------------------------------------------------------


def format_value(value: Any, digits: int = 2) -> str:
    """Numbers to text: None/NaN as an en dash, integers as they are, floats with ``digits`` decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(int(value))
    return f"{value:.{digits}f}"


def to_rich(table: ReportTable) -> Table:
    """A rich table; a header "I→T R@1" is shown on two lines ("I→T" over "R@1") to keep columns narrow."""
    rich_table = Table(title=table.title, title_justify="left")
    for index, header in enumerate(table.headers):
        rich_table.add_column(header.replace(" ", "\n", 1), justify="left" if index == 0 else "right", no_wrap=True)
    for row in table.rows:
        rich_table.add_row(*(format_value(v) for v in row))
    return rich_table


def _rich_width(table: ReportTable) -> int:
    """Characters a rich rendering of ``table`` needs without squeezing (cell padding and borders included)."""
    widths = [
        max([len(part) for part in header.split(" ", 1)] + [len(format_value(row[i])) for row in table.rows])
        for i, header in enumerate(table.headers)
    ]
    return sum(widths) + 3 * len(widths) + 1


def to_markdown(tables: Sequence[ReportTable]) -> str:
    """GitHub-flavoured Markdown, one ``###`` section per table, numbers with two decimals."""
    blocks = []
    for table in tables:
        lines = [
            f"### {table.title}",
            "",
            "| " + " | ".join(table.headers) + " |",
            "|" + "|".join([":---"] + ["---:"] * (len(table.headers) - 1)) + "|",
        ]
        lines += ["| " + " | ".join(format_value(v) for v in row) + " |" for row in table.rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def to_csv(tables: Sequence[ReportTable]) -> str:
    """CSV with full precision; several tables are separate blocks (a header row each) split by a blank line, and
    the first column of each header names its table."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for index, table in enumerate(tables):
        if index:
            buffer.write("\n")
        writer.writerow([f"{table.title}: {table.headers[0]}", *table.headers[1:]])
        for row in table.rows:
            writer.writerow(
                [
                    ""
                    if v is None or (isinstance(v, float) and math.isnan(v))
                    else (round(v, 6) if isinstance(v, float) else v)
                    for v in row
                ]
            )
    return buffer.getvalue()


def print_tables(tables: Sequence[ReportTable], report_format: str = "table") -> None:
    """Show tables on stderr as rich tables, Markdown or CSV."""
    if report_format == "table":
        for table in tables:
            # Off a terminal (a log file, a pipe) rich assumes 80 columns; never squeeze numbers to fit that.
            needed = _rich_width(table)
            target = (
                console
                if console.is_terminal or needed <= console.width
                else Console(stderr=True, highlight=False, width=needed)
            )
            target.print(to_rich(table))
    elif report_format == "markdown":
        console.print(to_markdown(tables), markup=False, highlight=False, soft_wrap=True)
    elif report_format == "csv":
        console.print(to_csv(tables), markup=False, highlight=False, soft_wrap=True)
    else:
        raise ValueError(f"unknown report format {report_format!r}; choose from {', '.join(FORMATS)}")


def print_metrics(metrics: Mapping[str, Any], report_format: str = "table") -> None:
    """Print every table of a metrics document on stderr."""
    print_tables(metrics_tables(metrics), report_format)


def print_metrics_artifact(path: Path) -> bool:
    """``mltk inspect`` of a metrics artifact: its tables on stderr, as ``evaluate`` printed them (the headline
    numbers without opening metrics.json). False when it holds no table (a classify or BLI-only document)."""
    from mltk import artifacts
    from mltk.core.runtime import log

    try:
        tables = metrics_tables(artifacts.load_metrics(path))
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # a metrics.json written by another hand
        log(
            f"warning: {path}/metrics.json holds no table in the form evaluate writes ({type(error).__name__}: "
            f"{str(error)[:80]}); its numbers are not shown"
        )
        return False
    print_tables(tables)
    return bool(tables)
