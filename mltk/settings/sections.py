"""Components as recipe sections: a stage whose component is chosen by name keeps each component's options in a
section of its recipe, one object per component, each key a field of that component's options dataclass (no
defaults; each field's meaning and source are written there):

- ``methods`` (train-continual, chosen by ``--method``): ``"methods": {"er": {"memory_size": 8000, ...}, ...}``,
  the dataclasses of ``mltk.cll_clip.options``;
- ``losses`` (train-ccrk, chosen by the recipe's ``loss`` or ``--loss``): ``"losses": {"one-to-k":
  {"temperature": 0.07, ...}, "hinge": {"margin": null, ...}, ...}``, the dataclasses of ``mltk.losses.options``.

A run reads the entry of its component: every option must have a value there (a missing one is refused naming the
key and the file) unless given; ``--set method.KEY=VALUE`` / ``--set loss.KEY=VALUE`` (or ``--set
methods.METHOD.KEY=VALUE`` / ``losses.LOSS.KEY=VALUE`` as ``mltk recipes show`` prints it) gives one, typed by its
field when the component is known, at resolution. The config field holding the options (metadata
``recipe_section``: ``ContinualTrainConfig.options``, ``CcrkConfig.loss_options``) takes the dataclass, or a
mapping of the options given (``{"rank": 16}``, or ``{"lora": {"rank": 16}}``) over the recipe's. An option of
another component than the run's is refused (it would do nothing), and so is an option the component lacks.

Torch-free: ``mltk --help`` and ``mltk recipes show`` read it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.recipes import Recipe, did_you_mean
from mltk.recipes.options import checked, fields_of, refuse_unknown
from mltk.recipes.values import check_value, optional_inner, parse_value


@dataclass(frozen=True)
class Section:
    """A recipe section of components: ``key`` the section (``methods``), ``one`` the name of one component, which
    is also the config field that chooses it and the ``--set`` prefix (``method``), ``kinds`` where the mapping of
    each component to its options dataclass lives (imported when asked)."""

    key: str
    one: str
    kinds: str
    absent: str  # why a stage without the section refuses it
    example: str  # a --set key of one option

    def options(self) -> Mapping[str, type]:
        module, _, name = self.kinds.partition(":")
        return getattr(importlib.import_module(module), name)

    def what(self, name: str) -> str:
        return f"{self.one} {name}"


SECTIONS = {
    "methods": Section(
        "methods", "method", "mltk.cll_clip.options:METHOD_OPTIONS", "has no continual methods", "method.rank=16"
    ),
    "losses": Section(
        "losses", "loss", "mltk.losses.options:CCRK_LOSS_OPTIONS", "chooses no loss by name", "loss.temperature=0.05"
    ),
}


def section_field(config_class: type) -> tuple[str, Section] | None:
    """The field of ``config_class`` that holds a component's options from a recipe section, and the section."""
    for f in dataclasses.fields(config_class):
        if f.metadata.get("recipe_section") in SECTIONS:
            return f.name, SECTIONS[f.metadata["recipe_section"]]
    return None


def set_key(section: Section, key: str) -> tuple[str | None, str] | None:
    """``method.KEY`` -> (None, KEY); ``methods.METHOD.KEY`` -> (METHOD, KEY); anything else None."""
    head, dot, rest = key.partition(".")
    if not dot or head not in (section.one, section.key):
        return None
    if head == section.one:
        return None, rest
    name, dot, option = rest.partition(".")
    return (name, option) if dot else (None, "")


def add_given(section: Section, given: dict[str, Any], key: str, text: str) -> None:
    """Record ``--set KEY=TEXT`` of a component's option (``set_key``) in ``given``, the options given so far."""
    name, option = set_key(section, key) or (None, "")
    if not option:
        raise ConfigError(f"--set {key}: name the option, as {section.one}.KEY=VALUE (e.g. {section.example})")
    kinds = section.options()
    if name is not None and name not in kinds:
        raise ConfigError(
            f"--set {key}: no {section.one} {name!r}{did_you_mean(name, kinds)} ({section.key}: {', '.join(kinds)})"
        )
    entry = given.setdefault(name, {}) if name else given
    if option in entry:
        raise ConfigError(f"--set {key} given twice")
    entry[option] = text


def check_sections(recipe: Recipe, config_class: type) -> None:
    """Refuse a section in a recipe whose stage does not read it, a component that does not exist and an option
    its component lacks, naming the file; check each value against its field."""
    own = section_field(config_class)
    for section in SECTIONS.values():
        entries = recipe.sections.get(section.key, {})
        if entries and (own is None or own[1] is not section):
            raise ConfigError(
                f"recipe section '{section.key}': {recipe.stage} {section.absent}; leave it out",
                recipe.path,
            )
        kinds = section.options() if entries else {}
        for name, entry in entries.items():
            if name not in kinds:
                raise ConfigError(
                    f"recipe key '{section.key}.{name}': no such {section.one}{did_you_mean(name, kinds)} "
                    f"({section.key}: {', '.join(kinds)})",
                    recipe.path,
                )
            fields = fields_of(kinds[name])
            for key, value in entry.items():
                where = recipe.source_of(section.key, f"{name}.{key}")
                if key not in fields:
                    raise ConfigError(
                        f"unknown recipe key '{section.key}.{name}.{key}'{did_you_mean(key, fields)} (the options "
                        f"of {section.what(name)}: {', '.join(fields) or 'none'})",
                        where,
                    )
                check_value(value, fields[key][0], f"{section.key}.{name}.{key}", where, metadata=fields[key][1])


def resolved_options(section: Section, name: str, given: Any, recipe: Recipe) -> Any:
    """The options of component ``name``: ``given`` when it is its dataclass (checked), else the recipe's entry
    with the options ``given`` (a mapping, or None) over it, each typed by its field, then ``check()``ed."""
    kinds = section.options()
    if name not in kinds:
        return given  # the stage's own check refuses the name
    options_class, what = kinds[name], section.what(name)
    if isinstance(given, options_class):
        return checked(options_class, what, {f.name: getattr(given, f.name) for f in dataclasses.fields(given)})
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(
            f"{what} takes {options_class.__name__} or a mapping of its options, got {type(given).__name__}"
        )
    given = _own_entries(section, name, given or {})
    refuse_unknown(options_class, what, given, f"--set {section.one}.{{}}")
    entry = recipe.sections.get(section.key, {}).get(name, {})
    values = {}
    for key, (hint, metadata) in fields_of(options_class).items():
        if key in given:
            values[key] = _given_value(given[key], hint, metadata, f"{section.one}.{key}")
        elif key in entry:
            values[key] = check_value(
                entry[key],
                hint,
                f"{section.key}.{name}.{key}",
                recipe.source_of(section.key, f"{name}.{key}"),
                metadata=metadata,
            )
        else:
            raise ConfigError(
                f"the recipe sets no '{section.key}.{name}.{key}' (a {recipe.stage} recipe must, or extend one that "
                f"does)",
                recipe.path,
            )
    return checked(options_class, what, values)


def _own_entries(section: Section, name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given: plain keys, and those given for ``name`` by name (``methods.METHOD.KEY``); options
    given for another component are refused (they would do nothing)."""
    kinds = section.options()
    plain = {key: value for key, value in given.items() if key not in kinds}
    for other in sorted(set(given) & set(kinds) - {name}):
        raise ConfigError(
            f"--set {section.key}.{other}.{next(iter(given[other]), '')}: the run's {section.one} is {name}, "
            f"which does not read {other}'s options"
        )
    both = sorted(set(plain) & set(given.get(name, {})))
    if both:
        raise ConfigError(
            f"{section.one} option {both[0]} given twice ({section.one}.{both[0]} and {section.key}.{name}."
            f"{both[0]}); give it once"
        )
    return {**plain, **given.get(name, {})}


def _given_value(value: Any, hint: Any, metadata: Mapping, key: str) -> Any:
    """A given option's value: the text of ``--set`` read as its field's type (a string field keeps it), or a
    value given from Python checked like a recipe's."""
    if isinstance(value, str) and optional_inner(hint)[0] is not str:
        return parse_value(value, hint, key, metadata=metadata)
    plain = list(value) if isinstance(value, tuple) else value
    return check_value(plain, hint, key, None, what="given", metadata=metadata)


def section_rows(recipe: Recipe) -> list[tuple[str, Any, Path, str]]:
    """Each option in the recipe's sections: its key (``methods.er.memory_size``), value, the file it comes from,
    and its meaning (its field's help)."""
    rows = []
    for section in SECTIONS.values():
        entries = recipe.sections.get(section.key, {})
        kinds = section.options() if entries else {}
        for name, entry in entries.items():
            fields = fields_of(kinds[name])
            rows += [
                (
                    f"{section.key}.{name}.{key}",
                    value,
                    recipe.source_of(section.key, f"{name}.{key}"),
                    " ".join(fields[key][1].get("help", "").split()),
                )
                for key, value in entry.items()
            ]
    return rows
