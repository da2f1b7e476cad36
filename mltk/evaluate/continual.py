"""``mltk evaluate-continual``: the continual matrix a_{j,i} read from one metrics artifact per trained task, and
its average recall AR_j and forgetting F_j written as a metrics artifact."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.evaluate.metrics_artifact import check_report_format, write_and_report
from mltk.metrics.continual import AVERAGE_RECALL_FORMULA, FORGETTING_FORMULA, continual_metrics


@dataclass(frozen=True)
class ContinualConfig:
    """``mltk evaluate-continual``: one metrics artifact per trained task, in training order."""

    runs: tuple[Path, ...]
    tasks: tuple[str, ...]
    out: Path
    metric: str = "t2i.R@1"
    report_format: str = "table"


def run_continual(config: ContinualConfig) -> Path:
    """Build the continual matrix a_{j,i} (``config.metric`` of task i's language in run j) from a sequence of
    metrics artifacts, compute AR_j and F_j, and write them as a metrics artifact."""
    check_report_format(config.report_format)
    if len(config.runs) != len(config.tasks):
        raise ConfigError(
            f"{len(config.runs)} metrics artifact(s) but {len(config.tasks)} task(s); give one "
            "metrics artifact per task, in training order"
        )
    existing = artifacts.reusable(config.out, "metrics", stage="evaluate", config=config, inputs=list(config.runs))
    if existing is not None:
        return existing
    matrix = [
        [_continual_value(artifacts.load_metrics(run), task, config.metric, run) for task in config.tasks]
        for run in config.runs
    ]
    result = {
        "continual": {"tasks": list(config.tasks), "metric": config.metric, **continual_metrics(matrix)},
        "settings": {
            "matrix": "a[j][i] = metric on task i after training task j (null: not evaluated)",
            "AR": AVERAGE_RECALL_FORMULA,
            "F": FORGETTING_FORMULA,
        },
    }
    return write_and_report(config.out, result, config, list(config.runs), config.report_format)


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
