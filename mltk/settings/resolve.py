"""A stage config's hyper-parameters resolved from its recipe, and ``--set KEY=VALUE`` overrides.

A stage's config (``MlaConfig``, ``CcrkConfig``, ``ContinualTrainConfig``, ``PretrainConfig``) leaves the fields a
recipe sets at ``FROM_RECIPE`` and its ``loop`` at None or a dict of the ``LoopConfig`` fields given (by the CLI:
a named option or ``--set``); ``recipe_fields`` fills them from the recipe named by the config's ``recipe`` (a
packaged name or a JSON file), else the stage's default (``mltk.recipes.stage_recipe``). Every value a recipe gives
is checked against its field's type (``mltk.recipes.values``), so a bad recipe file fails naming the file, the key
and what was expected; a key the resolved recipe lacks is refused naming the key and the file. The resolved values
(and the recipe's name) are what the manifest records.

Torch-free: ``mltk --help`` reads the same fields to generate options.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Iterable
from typing import Any

from mltk.core.errors import ConfigError
from mltk.core.rates import check_learning_rates, is_rate_name, learning_rate_problem, option_name
from mltk.recipes import FROM_RECIPE, Recipe, did_you_mean, stage_recipe
from mltk.recipes.values import check_value, parse_value
from mltk.settings.loop import LoopConfig
from mltk.settings.methods import add_given, check_section, resolved_options, section_field, set_key

LOOP_KEYS = tuple(f.name for f in dataclasses.fields(LoopConfig))
# The loop's hyper-parameters: the keys every recipe must give (the fields without a default)
RECIPE_LOOP_KEYS = tuple(f.name for f in dataclasses.fields(LoopConfig) if f.default is dataclasses.MISSING)


# Loop keys a stage sets itself, per task, and why (its recipe and its callers leave them out; None until then).
PER_TASK_LOOP_KEYS = {"train-continual": {"steps": "each task's steps come from its config's steps or epochs"}}


def field_hints(config_class: type) -> dict[str, tuple[Any, typing.Mapping]]:
    """Each field of a config dataclass: its type and its metadata."""
    hints = typing.get_type_hints(config_class)
    return {f.name: (hints[f.name], f.metadata) for f in dataclasses.fields(config_class)}


def recipe_loop(recipe: Recipe, **given: Any) -> LoopConfig:
    """The ``LoopConfig`` of ``recipe`` with the values given (None: the recipe's); ``grad_clip=0`` turns clipping
    off. Every key of the recipe's loop is checked against its field's type; a missing one is refused, and so is a
    loop key its stage does not read (``PER_TASK_LOOP_KEYS``: left None, set per task)."""
    hints = field_hints(LoopConfig)
    unread = PER_TASK_LOOP_KEYS.get(recipe.stage, {})
    values: dict[str, Any] = dict.fromkeys(unread)
    for key, value in recipe.loop.items():
        path = recipe.source_of("loop", key)
        if key not in hints:
            raise ConfigError(
                f"unknown recipe key 'loop.{key}'{did_you_mean(key, hints)} (known: {', '.join(LOOP_KEYS)})", path
            )
        if key in unread:
            raise ConfigError(
                f"recipe key 'loop.{key}': {recipe.stage} does not read it ({unread[key]}); leave it out", path
            )
        values[key] = check_value(value, hints[key][0], f"loop.{key}", path, metadata=hints[key][1])
    missing = [key for key in RECIPE_LOOP_KEYS if key not in values]
    if missing:
        raise ConfigError(
            f"the recipe sets no 'loop.{missing[0]}' (a recipe names every loop key "
            f"{', '.join(RECIPE_LOOP_KEYS)}, or extends one that does)",
            recipe.path,
        )
    for key in given.keys() & unread.keys():
        raise ConfigError(f"loop key {key!r}: {recipe.stage} does not read it ({unread[key]})")
    values.update({key: given_value(value, *hints[key], key) for key, value in given.items() if value is not None})
    if values.get("grad_clip") == 0:
        values["grad_clip"] = None
    try:
        return LoopConfig(**values)
    except ConfigError as error:
        raise ConfigError(f"{error} (the recipe's or a given value)", recipe.path) from None


# The config class of each training stage, imported when asked (the config modules import this one).
STAGE_CONFIGS = {
    "train-nlt": "mltk.settings.mla:MlaConfig",
    "train-le": "mltk.settings.mla:MlaConfig",
    "train-nlt-le": "mltk.settings.mla:MlaConfig",
    "train-ccrk": "mltk.settings.ccrk:CcrkConfig",
    "train-continual": "mltk.settings.continual:ContinualTrainConfig",
    "pretrain": "mltk.settings.pretrain:PretrainConfig",
}


def stage_config(stage: str) -> type:
    """The config class of ``stage``."""
    module, _, name = STAGE_CONFIGS[stage].partition(":")
    return getattr(importlib.import_module(module), name)


def unread_by(stage: str, key: str, metadata: typing.Mapping) -> str | None:
    """Why ``stage`` refuses ``key`` of a config that several stages share, when its field's ``read_by`` leaves
    ``stage`` out (``train-nlt does not read 'temperature' (train-le and train-nlt-le read it)``); else None."""
    readers = metadata.get("read_by")
    if not readers or stage in readers:
        return None
    return f"{stage} does not read {key!r} ({' and '.join(readers)} {'reads' if len(readers) == 1 else 'read'} it)"


def stage_keys(recipe: Recipe) -> dict:
    """The config keys of ``recipe`` its stage reads: a key inherited from a recipe of another stage (``mla-le``
    extends ``mla-nlt``, whose ``mse_form`` train-le does not read) is left out; a key the recipe's own file sets
    for a stage that does not read it is refused, naming the key, the stage and the stages that read it."""
    hints = field_hints(stage_config(recipe.stage))
    kept = {}
    for key, value in recipe.config.items():
        if key not in hints or key in ("loop", "recipe"):
            raise ConfigError(
                f"unknown recipe key 'config.{key}' for {recipe.stage}{did_you_mean(key, hints)}",
                recipe.source_of("config", key),
            )
        problem = unread_by(recipe.stage, key, hints[key][1])
        if problem and recipe.source_of("config", key) == recipe.path:
            raise ConfigError(f"recipe key 'config.{key}': {problem}; leave it out", recipe.path)
        if not problem:
            kept[key] = value
    return kept


def given_value(value: Any, hint: Any, metadata: typing.Mapping, key: str) -> Any:
    """A value given by an option or a caller, checked like a recipe's (finite, within its field's bounds); a
    learning rate is named by its option, as every stage's rate options are refused alike."""
    problem = learning_rate_problem(value, option_name(key)) if is_rate_name(key) else None
    if problem:
        raise ConfigError(problem)
    plain = list(value) if isinstance(value, tuple) else value
    return check_value(plain, hint, key, None, what="given", metadata=metadata)


def recipe_fields(config: Any, stage: str) -> dict[str, Any]:
    """The fields of ``config`` (a stage's config dataclass) that its recipe fills: every ``FROM_RECIPE`` field,
    ``loop`` when it is None or a dict of given LoopConfig fields, and ``recipe`` (the recipe's name). A field
    ``stage`` does not read (``read_by``) is None, and refused when given."""
    recipe = stage_recipe(stage, config.recipe, getattr(config, "model", None))
    hints = field_hints(type(config))
    recipe = dataclasses.replace(recipe, config=stage_keys(recipe))
    check_section(recipe, section_field(type(config)) is not None)
    filled: dict[str, Any] = {"recipe": recipe.name}
    for name, (hint, metadata) in hints.items():
        value = getattr(config, name)
        if "recipe_section" in metadata:  # the method's options: its entry of the recipe's methods section
            filled[name] = resolved_options(config.method, value, recipe)
            continue
        if problem := unread_by(stage, name, metadata):
            if value is not FROM_RECIPE and value is not None:
                raise ConfigError(f"{problem}; leave it out")
            filled[name] = None
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            filled.update(_nested_fields(value, name, recipe, stage))
        if value is not FROM_RECIPE:
            if type(config).__dataclass_fields__[name].default is FROM_RECIPE and value is not None:
                given_value(value, hint, metadata, name)
            continue
        if name not in recipe.config:
            raise ConfigError(
                f"the recipe sets no 'config.{name}' (a {stage} recipe must, or extend one that does)", recipe.path
            )
        filled[name] = check_value(
            recipe.config[name], hint, f"config.{name}", recipe.source_of("config", name), metadata=metadata
        )
    if not isinstance(config.loop, LoopConfig):
        filled["loop"] = recipe_loop(recipe, **(config.loop or {}))
    check_learning_rates({**{name: getattr(config, name) for name in hints}, **filled})  # every rate, one rule
    return filled


def _nested_fields(value: Any, name: str, recipe: Recipe, stage: str) -> dict[str, Any]:
    """A nested settings dataclass (``alignment``) with its ``FROM_RECIPE`` fields filled from the recipe's section
    of that name (``"alignment": {"weight": 1.0, "k": 5}``); nothing when none is left to the recipe."""
    path = recipe.source_of("config", name)
    section = recipe.config.get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"recipe key 'config.{name}' must be an object", path)
    hints = field_hints(type(value))
    for key in section:
        if key not in hints:
            raise ConfigError(f"unknown recipe key 'config.{name}.{key}'{did_you_mean(key, hints)}", path)
    values = {
        key: check_value(section[key], hints[key][0], f"config.{name}.{key}", path, metadata=hints[key][1])
        for key in section
    }
    missing = [key for key in hints if getattr(value, key) is FROM_RECIPE and key not in values]
    if missing:
        raise ConfigError(
            f"the recipe sets no 'config.{name}.{missing[0]}' (a {stage} recipe must, or extend one that does)",
            recipe.path,
        )
    left = {key: values[key] for key in hints if getattr(value, key) is FROM_RECIPE}
    return {name: dataclasses.replace(value, **left)} if left else {}


# The stage's own finishing step after its recipe is read: derived values and the checks across fields (module:
# function, imported when a stage resolves so that the config modules stay plain).
FINISHERS = {"train-ccrk": "mltk.settings.ccrk:checked", "train-continual": "mltk.settings.continual:completed"}


def resolve(config: Any, stage: str) -> Any:
    """The one point where a stage's settings are settled: ``config`` (a plain value: what the caller gave, the
    rest ``FROM_RECIPE``) with its recipe read, the given values kept, every value checked against its field and
    the stage's derived values filled in (``FINISHERS``). Every training function calls it first; a resolved
    config resolves to itself, so a function handing its config on to another changes nothing."""
    unset = frozenset(name for name in field_hints(type(config)) if getattr(config, name) is FROM_RECIPE)
    if not is_resolved(config):
        config = dataclasses.replace(config, **recipe_fields(config, stage))
    if stage in FINISHERS:
        module, _, name = FINISHERS[stage].partition(":")
        config = getattr(importlib.import_module(module), name)(config, unset)
    return config


def is_resolved(config: Any) -> bool:
    """No field left to the recipe (a nested section's included), a built ``LoopConfig`` and a method's options
    built from the recipe's ``methods`` section (``mltk.settings.methods``)."""
    values = [getattr(config, name) for name in field_hints(type(config))]
    nested = [
        getattr(value, f.name)
        for value in values
        if dataclasses.is_dataclass(value) and not isinstance(value, type)
        for f in dataclasses.fields(value)
    ]
    section = section_field(type(config))
    built = section is None or dataclasses.is_dataclass(getattr(config, section))
    return built and isinstance(config.loop, LoopConfig) and all(value is not FROM_RECIPE for value in values + nested)


def settable_keys(config_class: type) -> dict[str, tuple[str, Any, typing.Mapping]]:
    """What ``--set`` may name for a stage: ``key -> (section, type, metadata)``, section ``loop`` or ``config``:
    every loop field and every config field a recipe sets. A key of both (train-continual's ``steps``, counted per
    task) is the stage's own."""
    keys = {key: ("loop", hint, metadata) for key, (hint, metadata) in field_hints(LoopConfig).items()}
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    for key, (hint, metadata) in field_hints(config_class).items():
        if defaults[key] is FROM_RECIPE or key in keys and key not in ("loop", "recipe"):
            keys[key] = ("config", hint, metadata)
    return keys


def parse_overrides(pairs: Iterable[str], config_class: type, stage: str | None = None) -> dict[str, dict[str, Any]]:
    """``--set KEY=VALUE`` items as ``{"loop": {...}, "config": {...}}``, each value typed by its field; an
    unknown key, a key ``stage`` does not read or a key given twice is refused (with the closest known key). A key
    may carry its section as ``mltk recipes show`` prints it (``loop.lr``, ``config.batch_size``). A method's
    option (``method.rank``, ``methods.lora.rank``) is kept as text until its method is known
    (``mltk.settings.methods``)."""
    keys = settable_keys(config_class)
    parsed: dict[str, dict[str, Any]] = {"loop": {}, "config": {}}
    methods = section_field(config_class)
    for pair in pairs:
        key, equals, text = pair.partition("=")
        key = _without_section(key.strip(), keys)
        if not equals or not key:
            raise ConfigError(f"--set takes KEY=VALUE, got {pair!r}")
        if methods and set_key(key):
            add_given(parsed["config"].setdefault(methods, {}), key, text)
            continue
        if key in keys and stage and (problem := unread_by(stage, key, keys[key][2])):
            raise ConfigError(f"--set {key}: {problem}")
        if key not in keys:
            raise ConfigError(f"--set: unknown key {key!r}{did_you_mean(key, keys)} (known: {', '.join(sorted(keys))})")
        section, hint, metadata = keys[key]
        if key in parsed[section]:
            raise ConfigError(f"--set {key} given twice")
        parsed[section][key] = parse_value(text, hint, key, metadata=metadata)
    return parsed


def _without_section(key: str, keys: dict[str, tuple[str, Any, typing.Mapping]]) -> str:
    """``loop.lr`` -> ``lr`` when ``lr`` is a loop key (``config.batch_size`` likewise): the key as ``mltk recipes
    show`` prints it."""
    section, dot, rest = key.partition(".")
    return rest if dot and rest in keys and keys[rest][0] == section else key


def merge_given(named: dict[str, Any], overrides: dict[str, Any], what: str) -> dict[str, Any]:
    """The options given by name (None: not given) and by ``--set``; one key given both ways is refused."""
    given = {key: value for key, value in named.items() if value is not None}
    both = sorted(set(given) & set(overrides))
    if both:
        raise ConfigError(f"{both[0]} given twice, as an option and as --set {both[0]}=... ({what}); give it once")
    return {**given, **overrides}
