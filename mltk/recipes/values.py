"""One typed value of a setting, checked against the type its config field declares: from a recipe file's JSON
(``check_value``) or from the text of ``--set KEY=VALUE`` (``parse_value``). A wrong value fails with one line
naming where it came from (the file, or ``--set``), the key and what was expected, never deep inside training.

Every number must be finite (NaN passes every comparison, and an infinite eps trains nothing); the field's
``metadata`` may add ``min`` and ``max`` (the smallest and largest allowed number) and ``choices`` (the allowed
strings).
Imported by ``mltk --help``: no torch, numpy or pyarrow.
"""

from __future__ import annotations

import json
import math
import types
import typing
from pathlib import Path
from typing import Any, Union

from mltk.core.errors import ConfigError
from mltk.core.user_files import expect

SCALARS = (bool, int, float, str)


def optional_inner(hint: Any) -> tuple[Any, bool]:
    """``X`` and True for ``X | None``; ``hint`` and False otherwise."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(inner) == 1 and len(inner) < len(typing.get_args(hint)):
            return inner[0], True
    return hint, False


def type_words(hint: Any) -> str:
    """The type as a user reads it: ``a number or null``, ``a list of 2 numbers``."""
    inner, optional = optional_inner(hint)
    if typing.get_origin(inner) is tuple:
        args = typing.get_args(inner)
        words = f"a list of {len(args)} numbers" if Ellipsis not in args else "a list"
    else:
        words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(inner, str(inner))
    return words + (" or null" if optional else "")


def check_value(
    value: Any,
    hint: Any,
    key: str,
    path: str | Path | None,
    *,
    what: str = "recipe",
    metadata: typing.Mapping | None = None,
) -> Any:
    """``value`` (JSON) as a value of a field typed ``hint`` (a JSON list becomes a tuple), or ConfigError naming
    ``path``, ``key`` and the type; ``metadata``'s ``min`` and ``choices`` bound it."""
    metadata = metadata or {}
    inner, optional = optional_inner(hint)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{what} key {key!r} must be {type_words(hint)}, not null", path)
    if typing.get_origin(inner) is tuple:
        value = _check_tuple(value, inner, key, path, what, hint)
    elif inner in SCALARS:
        try:
            expect(value, inner, key, path, what=what)
        except ConfigError:
            raise ConfigError(
                f"{what} key {key!r} must be {type_words(hint)}, not {json.dumps(value)[:60]}", path
            ) from None
        value = float(value) if inner is float else value
    else:
        raise ConfigError(f"{what} key {key!r} cannot be set here (it is not a plain value)", path)
    _check_bounds(value, key, path, what, metadata)
    return value


def _check_tuple(value: Any, inner: Any, key: str, path: str | Path, what: str, hint: Any) -> tuple:
    args = [arg for arg in typing.get_args(inner) if arg is not Ellipsis]
    fixed = Ellipsis not in typing.get_args(inner)
    if not isinstance(value, list) or (fixed and len(value) != len(args)):
        raise ConfigError(f"{what} key {key!r} must be {type_words(hint)}, not {json.dumps(value)[:60]}", path)
    kinds = args if fixed else args * len(value)
    return tuple(
        check_value(item, kind, f"{key}[{index}]", path, what=what)
        for index, (item, kind) in enumerate(zip(value, kinds))
    )


def _check_bounds(value: Any, key: str, path: str | Path, what: str, metadata: typing.Mapping) -> None:
    minimum, maximum, choices = metadata.get("min"), metadata.get("max"), metadata.get("choices")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and not math.isfinite(value):  # NaN passes every comparison; Infinity trains nothing
        raise ConfigError(f"{what} key {key!r} must be a finite number, not {value}", path)
    if minimum is not None and number and value < minimum:
        raise ConfigError(f"{what} key {key!r} must be at least {minimum}, not {value}", path)
    if maximum is not None and number and value > maximum:
        raise ConfigError(f"{what} key {key!r} must be at most {maximum:,}, not {value:,}", path)
    if choices and value not in choices:
        raise ConfigError(f"{what} key {key!r} must be one of {', '.join(map(str, choices))}, not {value!r}", path)


def parse_value(text: str, hint: Any, key: str, *, metadata: typing.Mapping | None = None) -> Any:
    """The text of ``--set KEY=TEXT`` as a value of a field typed ``hint``: a string field takes the text as it is
    (``null``/``none`` is None where allowed), a list field takes ``0.9,0.98`` or ``[0.9, 0.98]``, and every other
    field takes a JSON number or ``true``/``false``."""
    inner, optional = optional_inner(hint)
    stripped = text.strip()
    if optional and stripped.lower() in ("null", "none"):
        return check_value(None, hint, key, None, what="--set", metadata=metadata)
    if inner is str:
        value: Any = text
    elif typing.get_origin(inner) is tuple and not stripped.startswith("["):
        value = [_json_or_text(part) for part in stripped.split(",")]
    else:
        value = _json_or_text(stripped.lower() if stripped.lower() in ("true", "false") else stripped)
    return check_value(value, hint, key, None, what="--set", metadata=metadata)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
