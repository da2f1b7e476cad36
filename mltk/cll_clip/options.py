"""One options mechanism for every continual method: a frozen dataclass per method, set by ``key=value`` strings.

Each ``ContinualMethod`` names its ``Options`` dataclass; its defaults are the values CLL-CLIP's authors ran (their
``methods.yaml`` and adapter/prompt configuration files). ``mltk train-continual --method-option key=value`` (repeat,
or comma-separate) overrides them; ``parse_method_options`` checks every key against the method's dataclass and
converts the value to the field's type, so a typo or a key of another method is an error (exit 2) before any work.
The resolved options are recorded in the stage configuration (the manifest) and in the checkpoint config.

Value syntax: numbers and words as written; ``none`` for an optional value; a tuple of integers (block indices) as
``2+3+4`` or a range ``2-4``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from mltk.core.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """Plain CLL-CLIP has no options of its own (the table's settings are the stage's)."""


def _split_items(items: Iterable[str]) -> list[str]:
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def _int_tuple(text: str) -> tuple[int, ...]:
    values: list[int] = []
    for part in text.replace(";", "+").split("+"):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            start, end = part.split("-", 1)
            values.extend(range(int(start), int(end) + 1))
        else:
            values.append(int(part))
    return tuple(values)


def _convert(method: str, key: str, raw: Any, kind: Any) -> Any:
    """``raw`` (a string from the command line, or a JSON value from a checkpoint) as the field's type."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    optional = type(None) in args
    if optional and (raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null", ""))):
        return None
    if optional:
        kind = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(kind), typing.get_args(kind)
    try:
        if origin is tuple:
            return _int_tuple(raw) if isinstance(raw, str) else tuple(int(v) for v in raw)
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes", "on"):
                return True
            if str(raw).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind is int:
            value = float(raw) if isinstance(raw, str) else raw
            if float(value) != int(value):
                raise ValueError(raw)
            return int(value)
        if kind is float:
            return float(raw)
        if typing.get_origin(kind) is typing.Literal:
            if raw not in typing.get_args(kind):
                raise ValueError(raw)
            return raw
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"--method-option {key}={raw} of method {method}: expected {_type_name(kind)}") from None


def _type_name(kind: Any) -> str:
    if typing.get_origin(kind) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(kind)))
    if typing.get_origin(kind) is tuple:
        return "block indices (e.g. 2+3+4 or 2-4)"
    return getattr(kind, "__name__", str(kind))


def _fields(options_class: type) -> dict[str, Any]:
    hints = typing.get_type_hints(options_class)
    return {f.name: hints[f.name] for f in dataclasses.fields(options_class)}


def options_from_mapping(method: str, options_class: type, values: Mapping[str, Any]) -> Any:
    """The method's options with ``values`` (strings or JSON values) over its defaults; unknown keys refused."""
    fields = _fields(options_class)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        known = ", ".join(fields) or "none"
        raise ConfigError(f"--method-option {', '.join(unknown)}: not an option of method {method} "
                          f"(its options: {known})")
    converted = {key: _convert(method, key, value, fields[key]) for key, value in values.items()}
    options = options_class(**converted)
    check = getattr(options, "check", None)
    if check is not None:
        problem = check()
        if problem:
            raise ConfigError(f"--method-option of method {method}: {problem}")
    return options


def parse_method_options(method: str, options_class: type, items: Iterable[str]) -> Any:
    """``key=value`` strings (each may hold a comma-separated list) -> the method's options dataclass."""
    values: dict[str, str] = {}
    for item in _split_items(items):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--method-option expects key=value, got {item!r}")
        key = key.strip().replace("-", "_")
        if key in values:
            raise ConfigError(f"--method-option {key} is given twice")
        values[key] = value.strip()
    return options_from_mapping(method, options_class, values)


def options_dict(options: Any) -> dict[str, Any]:
    """JSON-ready ``{key: value}`` of an options dataclass (tuples as lists)."""
    return {f.name: list(v) if isinstance(v := getattr(options, f.name), tuple) else v
            for f in dataclasses.fields(options)}


def describe_options(options_class: type) -> str:
    """``key=default`` pairs of a method's options, for --help and error messages."""
    defaults = options_dict(options_class())
    return ", ".join(f"{k}={'+'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in defaults.items())
