"""The task order and the metric of the continual matrix of ``mltk train-continual``; its options
(``ContinualTrainConfig``) live in ``mltk.settings.continual``, torch-free, and are re-exported here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from mltk import artifacts
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.names import check_names
from mltk.settings.continual import ContinualTrainConfig, temperature_range_option

__all__ = [
    "CONTINUAL_FILE",
    "TEIR_PARTS",
    "ContinualTrainConfig",
    "final_summary",
    "metric_value",
    "read_summary",
    "task_order",
    "teir_parts",
    "temperature_range_option",
]

CONTINUAL_FILE = "continual.json"


TEIR_PARTS = ("init", "grad", "decay")


def teir_parts(
    teir: bool = False, init_only: bool = False, reg_only: bool = False, parts: tuple[str, ...] = ()
) -> dict[str, bool]:
    """The config fields of TEIR's parts from ``--teir`` (all), ``--teir-init-only``, ``--teir-reg-only`` (gradient
    and decay scaling) or ``--teir-part`` (any of init, grad, decay): the paper's ablations, each alone or together."""
    unknown = [p for p in parts if p not in TEIR_PARTS]
    if unknown:
        raise ConfigError(f"--teir-part must be among {', '.join(TEIR_PARTS)}, got {', '.join(unknown)}")
    if sum([teir, init_only, reg_only, bool(parts)]) > 1:
        raise ConfigError("choose one of --teir, --teir-init-only, --teir-reg-only and --teir-part")
    chosen = set(TEIR_PARTS if teir else ("init",) if init_only else ("grad", "decay") if reg_only else parts)
    regularise = bool(chosen & {"grad", "decay"})
    return {
        "teir_init": "init" in chosen,
        "teir_reg": regularise,
        "teir_reg_grad": "grad" in chosen or not regularise,
        "teir_reg_decay": "decay" in chosen or not regularise,
    }


def metric_value(result: dict, lang: str, metric: str) -> float | None:
    """``metric`` (``AR`` or ``<i2t|t2i>.R@K``) of ``result["per_language"][lang]``; None when not evaluated."""
    value: Any = result.get("per_language", {}).get(lang)
    if value is None:
        return None
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ConfigError(f"--continual-metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
        value = value[part]
    if isinstance(value, dict):
        raise ConfigError(f"--continual-metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
    return float(value)


def read_summary(checkpoint: Path) -> dict[str, Any]:
    """The ``continual`` block of a train-continual checkpoint's ``continual.json`` (tasks, metric, matrix, AR, F)."""
    return artifacts.read_json(Path(checkpoint) / CONTINUAL_FILE)["continual"]


def final_summary(checkpoint: Path) -> dict[str, Any]:
    """The task order and the final AR and F of a train-continual checkpoint (``continual.json``)."""
    summary = read_summary(checkpoint)
    return {"tasks": summary["tasks"], "AR": summary["AR"][-1], "F": summary["F"][-1]}


def task_order(config: ContinualTrainConfig, captions: pa.Table) -> list[str]:
    """The task languages: ``config.languages``, or English first and the others in order of appearance (a
    text-only run leaves English out: it is the teacher)."""
    available = check_names(dict.fromkeys(captions.column("lang").to_pylist()), "caption lang", config.captions)
    if config.languages:
        missing = [lang for lang in config.languages if lang not in available]
        if missing:
            raise ConfigError(
                f"no captions in language(s) {', '.join(missing)} (has {', '.join(available)})", config.captions
            )
        return list(config.languages)
    english = [NATIVE_LANG] if NATIVE_LANG in available and not config.text_only else []
    return english + [lang for lang in available if lang != NATIVE_LANG]
