"""The continual methods' options as a recipe section: ``"methods": {"er": {"memory_size": 8000, ...}, "lora":
{"rank": 8, ...}, ...}`` in a train-continual recipe, one object per method, each key a field of the method's
options dataclass (``mltk.cll_clip.options``, where each field's meaning and source are written).

A run reads the entry of its ``--method``: every option must have a value there (a missing one is refused naming
the key and the file) unless given; ``--set method.KEY=VALUE`` (or ``--set methods.METHOD.KEY=VALUE`` as ``mltk
recipes show`` prints it) gives one, typed by its field when the method is known, at resolution. The config field
holding the options (``ContinualTrainConfig.options``, metadata ``recipe_section``) takes the dataclass, or a
mapping of the options given (``{"rank": 16}``, or ``{"lora": {"rank": 16}}``) over the recipe's.

Torch-free: ``mltk --help`` and ``mltk recipes show`` read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mltk.cll_clip.options import METHOD_OPTIONS, checked_options, option_fields, unknown_options
from mltk.core.errors import ConfigError
from mltk.recipes import Recipe, did_you_mean
from mltk.recipes.values import check_value, optional_inner, parse_value

SECTION = "methods"


def section_field(config_class: type) -> str | None:
    """The field of ``config_class`` that holds a method's options from the recipe's ``methods`` section."""
    return next((f.name for f in dataclasses.fields(config_class) if f.metadata.get("recipe_section") == SECTION), None)


def set_key(key: str) -> tuple[str | None, str] | None:
    """``method.KEY`` -> (None, KEY); ``methods.METHOD.KEY`` -> (METHOD, KEY); anything else None."""
    head, dot, rest = key.partition(".")
    if not dot or head not in ("method", SECTION):
        return None
    if head == "method":
        return None, rest
    method, dot, option = rest.partition(".")
    return (method, option) if dot else (None, "")


def add_given(given: dict[str, Any], key: str, text: str) -> None:
    """Record ``--set KEY=TEXT`` of a method option (``set_key``) in ``given``, the options given so far."""
    method, option = set_key(key) or (None, "")
    if not option:
        raise ConfigError(f"--set {key}: name the option, as method.KEY=VALUE (e.g. method.rank=16)")
    if method is not None and method not in METHOD_OPTIONS:
        raise ConfigError(
            f"--set {key}: no method {method!r}{did_you_mean(method, METHOD_OPTIONS)} (methods: "
            f"{', '.join(METHOD_OPTIONS)})"
        )
    entry = given.setdefault(method, {}) if method else given
    if option in entry:
        raise ConfigError(f"--set {key} given twice")
    entry[option] = text


def check_section(recipe: Recipe, reads_methods: bool) -> None:
    """Refuse a ``methods`` section in a recipe whose stage has no methods, a method that does not exist and an
    option its method lacks, naming the file; check each value against its field."""
    for method, entry in recipe.methods.items():
        if not reads_methods:
            raise ConfigError(
                f"recipe section 'methods': {recipe.stage} has no continual methods; leave it out", recipe.path
            )
        if method not in METHOD_OPTIONS:
            raise ConfigError(
                f"recipe key 'methods.{method}': no such method{did_you_mean(method, METHOD_OPTIONS)} "
                f"(methods: {', '.join(METHOD_OPTIONS)})",
                recipe.path,
            )
        fields = option_fields(method)
        for key, value in entry.items():
            where = recipe.source_of(SECTION, f"{method}.{key}")
            if key not in fields:
                raise ConfigError(
                    f"unknown recipe key 'methods.{method}.{key}'{did_you_mean(key, fields)} (the "
                    f"options of {method}: {', '.join(fields) or 'none'})",
                    where,
                )
            check_value(value, fields[key][0], f"methods.{method}.{key}", where, metadata=fields[key][1])


def resolved_options(method: str, given: Any, recipe: Recipe) -> Any:
    """The options of ``method``: ``given`` when it is the method's dataclass (checked), else the recipe's entry
    with the options ``given`` (a mapping, or None) over it, each typed by its field, then ``check()``ed."""
    if method not in METHOD_OPTIONS:
        return given  # ContinualTrainConfig.check refuses the method
    options_class = METHOD_OPTIONS[method]
    if isinstance(given, options_class):
        return checked_options(method, {f.name: getattr(given, f.name) for f in dataclasses.fields(given)})
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(
            f"method {method} takes {options_class.__name__} or a mapping of its options, got {type(given).__name__}"
        )
    given = _own_entries(method, given or {})
    unknown_options(method, given, "--set method.{}")
    entry = recipe.methods.get(method, {})
    values = {}
    for key, (hint, metadata) in option_fields(method).items():
        if key in given:
            values[key] = _given_value(given[key], hint, metadata, f"method.{key}")
        elif key in entry:
            values[key] = check_value(
                entry[key],
                hint,
                f"methods.{method}.{key}",
                recipe.source_of(SECTION, f"{method}.{key}"),
                metadata=metadata,
            )
        else:
            raise ConfigError(
                f"the recipe sets no 'methods.{method}.{key}' (a train-continual recipe must, or extend one that does)",
                recipe.path,
            )
    return checked_options(method, values)


def _own_entries(method: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given: plain keys, and those given for ``method`` by name (``methods.METHOD.KEY``); options
    given for another method are refused (they would do nothing)."""
    plain = {key: value for key, value in given.items() if key not in METHOD_OPTIONS}
    for other in sorted(set(given) & set(METHOD_OPTIONS) - {method}):
        raise ConfigError(
            f"--set {SECTION}.{other}.{next(iter(given[other]), '')}: the run's method is {method}, "
            f"which does not read {other}'s options"
        )
    both = sorted(set(plain) & set(given.get(method, {})))
    if both:
        raise ConfigError(
            f"method option {both[0]} given twice (method.{both[0]} and {SECTION}.{method}.{both[0]}); give it once"
        )
    return {**plain, **given.get(method, {})}


def _given_value(value: Any, hint: Any, metadata: Mapping, key: str) -> Any:
    """A given option's value: the text of ``--set`` read as its field's type (a string field keeps it), or a
    value given from Python checked like a recipe's."""
    if isinstance(value, str) and optional_inner(hint)[0] is not str:
        return parse_value(value, hint, key, metadata=metadata)
    plain = list(value) if isinstance(value, tuple) else value
    return check_value(plain, hint, key, None, what="given", metadata=metadata)


def method_rows(recipe: Recipe) -> list[tuple[str, Any, Path, str]]:
    """Each option in the recipe's ``methods`` section: its key (``methods.er.memory_size``), value, the file it
    comes from, and its meaning (its field's help)."""
    rows = []
    for method, entry in recipe.methods.items():
        fields = option_fields(method)
        rows += [
            (
                f"{SECTION}.{method}.{key}",
                value,
                recipe.source_of(SECTION, f"{method}.{key}"),
                " ".join(fields[key][1].get("help", "").split()),
            )
            for key, value in entry.items()
        ]
    return rows
