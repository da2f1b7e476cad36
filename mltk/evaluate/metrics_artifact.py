"""The metrics artifact an evaluation writes, with its report files (the long CSV, Markdown or CSV tables as
``--format`` asks) and the tables printed on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.present import report

REPORT_FORMATS = ("table", "markdown", "csv", "clip-benchmark")


def check_report_format(report_format: str) -> None:
    if report_format not in REPORT_FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(REPORT_FORMATS)}, got {report_format!r}")


def write_and_report(
    out: Path, result: dict, config: Any, inputs: list[Path], report_format: str, extra: dict[str, bytes] | None = None
) -> Path:
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
