"""One rule for every learning rate mltk takes: ``--lr`` (a recipe's ``loop.lr``), ``--embedding-lr``,
``--method-lr`` and any later ``*_lr`` field of a stage's configuration.

A rate must be a finite number above 0. A negative rate makes AdamW climb the loss (gradient ascent, silently: the
run finishes and saves a model), 0 trains nothing while looking like training, and an infinite or NaN rate turns the
first step into NaN. Every rate is checked by :func:`learning_rate_problem`, so ``--embedding-lr -1`` is refused
exactly as ``--lr -1`` is; a field counts as a rate when it is named ``lr`` or ends in ``_lr``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from mltk.core.errors import ConfigError


def is_rate_name(name: str) -> bool:
    return name == "lr" or name.endswith("_lr")


def option_name(field_name: str) -> str:
    """``embedding_lr`` -> ``--embedding-lr`` (the CLI spells each field so)."""
    return "--" + field_name.replace("_", "-")


def learning_rate_problem(value: Any, option: str) -> str | None:
    """Why ``value`` is not a usable learning rate for ``option`` (None: it is, or it is unset)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{option} must be a number, got {value!r}"
    if not math.isfinite(value) or value <= 0:
        ascent = " (a negative rate climbs the loss)" if value < 0 else ""
        return f"{option} must be a finite learning rate above 0, got {value}{ascent}"
    return None


def learning_rate_problems(values: Mapping[str, Any]) -> list[str]:
    """The problems of every rate among ``values`` (a stage's fields by name), nested dataclasses included (the
    loop's settings, a method's options)."""
    problems = []
    for name, value in values.items():
        if is_rate_name(name):
            problem = learning_rate_problem(value, option_name(name))
            problems += [problem] if problem else []
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            problems += learning_rate_problems(
                {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
            )
    return problems


def check_learning_rates(values: Mapping[str, Any]) -> None:
    """Raise one ``ConfigError`` listing every bad rate among ``values``."""
    problems = list(dict.fromkeys(learning_rate_problems(values)))
    if problems:
        raise ConfigError("; ".join(problems))
