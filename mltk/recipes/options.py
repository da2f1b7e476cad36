"""Options dataclasses of a component a recipe section configures (a continual method, a loss): a frozen dataclass
per component, each field without a default and with its meaning as ``help`` (``choices``, ``min`` and ``max``
bound it as they bound a config field). The values live in the recipe; the settings layer fills a run's component
from its entry (``mltk.settings.sections``), types each value by its field and then asks the dataclass's
``check()`` (a phrase naming what is wrong, or None) and ``completed()`` (the values that follow from the others,
so that what is recorded is what the run used), when it has them.

Imported by ``mltk --help``: no torch, numpy or pyarrow.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.recipes.values import check_value


def option(help_text: str, **more: Any) -> Any:
    """A field without a default (its value is the recipe's), with its meaning as ``help``."""
    return dataclasses.field(metadata={"help": help_text, **more})


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A component without options of its own."""


def options_dict(options: Any) -> dict[str, Any]:
    """JSON-ready ``{key: value}`` of an options dataclass (tuples as lists)."""
    return {
        f.name: list(v) if isinstance(v := getattr(options, f.name), tuple) else v for f in dataclasses.fields(options)
    }


def fields_of(options_class: type) -> dict[str, tuple[Any, Any]]:
    """Each option of ``options_class``: its type and its metadata (``help``, ``choices``, ``min``)."""
    hints = typing.get_type_hints(options_class)
    return {f.name: (hints[f.name], f.metadata) for f in dataclasses.fields(options_class)}


def refuse_unknown(options_class: type, what: str, keys: Iterable[str], how: str) -> None:
    """Refuse the keys of ``keys`` that are no option of ``options_class`` (``what``: ``method lora``, ``loss
    hinge``), naming them (as ``how`` writes a key, e.g. ``--set method.{}``), the component and its options."""
    fields = fields_of(options_class)
    unknown = [key for key in keys if key not in fields]
    if unknown:
        named = ", ".join(how.format(key) for key in unknown)
        raise ConfigError(f"{named}: not an option of {what} (its options: {', '.join(fields) or 'none'})")


def checked(options_class: type, what: str, values: Mapping[str, Any]) -> Any:
    """The options dataclass from every option's typed value, refused unless its ``check()`` passes, with the
    values its ``completed()`` derives filled in."""
    options = options_class(**values)
    problem = options.check() if hasattr(options, "check") else None
    if problem:
        raise ConfigError(f"the options of {what}: {problem}")
    return options.completed() if hasattr(options, "completed") else options


def from_mapping(options_class: type, what: str, values: Mapping[str, Any], source: str | Path | None = None) -> Any:
    """The options from a mapping of JSON values naming every option (a checkpoint's recorded options), each
    checked against its field; an unknown or a missing key is refused, naming ``source``."""
    fields = fields_of(options_class)
    refuse_unknown(options_class, what, values, "option {}")
    missing = [key for key in fields if key not in values]
    if missing:
        raise ConfigError(f"the options of {what} lack {', '.join(missing)}", source)
    plain = {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}
    return checked(
        options_class,
        what,
        {
            key: check_value(plain[key], hint, key, source, what="option", metadata=metadata)
            for key, (hint, metadata) in fields.items()
        },
    )
