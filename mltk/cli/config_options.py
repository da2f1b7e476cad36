"""The training commands' hyper-parameter options, generated from the config dataclasses' fields, as transformers'
``HfArgumentParser`` and Lightning's ``LightningCLI`` do: a new hyper-parameter is one field and one recipe key.

``@training_options(stage, ConfigClass)`` on a command function adds to its signature:

- one option per field of the stage's config class (``MlaConfig``, ``CcrkConfig``, ``ContinualTrainConfig``,
  ``PretrainConfig``) that has ``help`` in its metadata, and one per such field of a nested settings dataclass
  (``alignment``: ``AlignmentConfig``'s ``--lexicon``, ``--align-k``, ...);
- one option per field of ``LoopConfig`` (``mltk.settings.loop``) likewise, unless the config or the command
  has that name (train-continual's ``--steps`` counts per task);
- ``--set KEY=VALUE`` (repeatable): any loop or config key, typed by its field (``mltk.settings.resolve``);

and hands the command, in place of those options, one ``settings`` argument: the loop values and config values
given (by name or by ``--set``; one key both ways is refused), to pass on as ``loop=settings.loop,
**settings.config``. A parameter the command declares itself is left alone. Each generated option's help ends
with the recipe's value, read from the stage's recipe when ``--help`` is built, so no help text restates a number.

The metadata of a field: ``help`` (required for an option), ``option`` (its name when not ``--`` + the field name
with ``-`` for ``_``; ``--a/--b`` for an on/off pair), ``aliases`` (more names, e.g. ``("-s",)``), ``choices``
(allowed strings), ``min`` (smallest number; checked in recipes and ``--set`` too), ``cli: False`` (a key for the
recipe and ``--set`` only), ``stages`` (the commands that offer it, when several share one config; default all),
``parse`` (a function from the option's text to the field's value, e.g. ``--temperature clip``), ``metavar``, and
``flag_value`` (a plain flag that sets the field to this value).

Imported by ``mltk --help``: no torch, numpy or pyarrow (the config classes live in torch-free modules).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, List, Optional

import typer

from mltk.recipes import FROM_RECIPE, HF_TOWER_RECIPES, STAGE_RECIPES, load_recipe
from mltk.settings.loop import LoopConfig

SET_HELP = (
    "Set any recipe key, loop or config (e.g. --set lr=3e-4 --set betas=0.9,0.98); repeatable; wins over "
    "the recipe and is recorded in the manifest like a named option. `mltk recipes show NAME` lists the "
    "keys."
)
RECIPE_DEFAULT = re.compile(r"\s*\(?[Dd]efault: the recipe's\)?\.?$")


@dataclasses.dataclass(frozen=True)
class GivenSettings:
    """What a training command was given: ``loop`` (LoopConfig fields) and ``config`` (the stage config's)."""

    loop: dict
    config: dict


@dataclasses.dataclass(frozen=True)
class GeneratedOption:
    """A field offered as an option: ``path`` is ``(field,)`` or, for a nested settings dataclass,
    ``(field, its field)``; ``parameter`` the command parameter's name (the path joined by ``_``)."""

    path: tuple[str, ...]
    field: dataclasses.Field
    hint: Any
    section: str  # loop or config

    @property
    def parameter(self) -> str:
        return "_".join(self.path)

    def value(self, raw: Any) -> tuple[bool, Any]:
        """(given, the field's value) of what the option received."""
        metadata = self.field.metadata
        if "flag_value" in metadata:
            return bool(raw), metadata["flag_value"]
        if raw is None:
            return False, None
        return True, metadata["parse"](raw) if "parse" in metadata else raw


def option_name(field: dataclasses.Field) -> str:
    return field.metadata.get("option", "--" + field.name.replace("_", "-"))


def recipe_value_words(stage: str, *path: str) -> str | None:
    """`` Default: the recipe's (mla-nlt: 0.0001).`` read from the stage's default recipe (``path``: a key, or a
    section and its key), or None when the recipe has no such key. Where a Hugging Face tower runs another recipe
    (``HF_TOWER_RECIPES``) with another value, that value follows, so the help names what either run will use."""
    shown = _recipe_value(STAGE_RECIPES[stage], path)
    if shown is None:
        return None
    words = f"{STAGE_RECIPES[stage]}: {shown}"
    tower_recipe = HF_TOWER_RECIPES.get(stage)
    tower_shown = _recipe_value(tower_recipe, path) if tower_recipe else None
    if tower_shown is not None and tower_shown != shown:
        words += f"; {tower_recipe} on a Hugging Face tower: {tower_shown}"
    return f"Default: the recipe's ({words})."


def _recipe_value(name: str, path: tuple[str, ...]) -> str | None:
    """The value at ``path`` in the packaged recipe ``name``, as help shows it, or None when it has no such key."""
    value: Any = load_recipe(name).values()
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return ", ".join(map(str, value)) if isinstance(value, list) else ("none" if value is None else str(value))


def with_default(help_text: str, words: str | None) -> str:
    """``help_text`` without a "(default: the recipe's)" it may end with, then ``words``."""
    text = RECIPE_DEFAULT.sub("", help_text).rstrip()
    if not words:
        return text
    return f"{text}{'' if text.endswith(('.', ')')) else '.'} {words}"


def _help_with_default(stage: str, option: GeneratedOption) -> str:
    """The field's help, then the recipe's value (or a run setting's own default, such as ``seed``'s 0)."""
    field = option.field
    if "flag_value" in field.metadata:
        return field.metadata["help"]
    words = recipe_value_words(stage, *option.path)
    if words is None and field.default not in (dataclasses.MISSING, None) and field.default is not FROM_RECIPE:
        words = f"Default: {field.default}."
    return with_default(field.metadata["help"], words)


def _parameter(stage: str, option: GeneratedOption) -> inspect.Parameter:
    metadata, hint = option.field.metadata, option.hint
    if "flag_value" in metadata:
        annotation, default = bool, False
    else:
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is not None else hint
        inner = str if "parse" in metadata else inner  # the parser reads the option's text
        annotation, default = Optional[inner], None
    extra = {key: metadata[key] for key in ("min", "max", "metavar") if key in metadata}
    info = typer.Option(
        default,
        option_name(option.field),
        *metadata.get("aliases", ()),
        help=_help_with_default(stage, option),
        **extra,
    )
    return inspect.Parameter(option.parameter, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def _offered(field: dataclasses.Field, stage: str) -> bool:
    return field.metadata.get("cli", True) and stage in field.metadata.get("stages", (stage,))


def _options_of(config_class: type, stage: str, section: str, prefix: tuple[str, ...] = ()) -> list[GeneratedOption]:
    """The fields of ``config_class`` offered as options by ``stage``, a nested settings dataclass's included."""
    hints = typing.get_type_hints(config_class)
    found = []
    for field in dataclasses.fields(config_class):
        if not _offered(field, stage):
            continue
        if dataclasses.is_dataclass(hints[field.name]) and not prefix:
            found += _options_of(hints[field.name], stage, section, (field.name,))
        elif "help" in field.metadata:
            found.append(GeneratedOption((*prefix, field.name), field, hints[field.name], section))
    return found


def generated_options(stage: str, config_class: type, own: set[str]) -> list[GeneratedOption]:
    """The options ``training_options`` adds for ``stage``: the config's, then the loop's it has not (and none the
    command declares itself)."""
    config = [option for option in _options_of(config_class, stage, "config") if option.parameter not in own]
    taken = own | {option.parameter for option in config}
    return config + [option for option in _options_of(LoopConfig, stage, "loop") if option.parameter not in taken]


def training_options(stage: str, config_class: type) -> Callable[[Callable], Callable]:
    """Give a training command its generated options (see the module's docstring)."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function, eval_str=True)
        options = generated_options(stage, config_class, set(signature.parameters))
        added = [_parameter(stage, option) for option in options]
        added.append(
            inspect.Parameter(
                "set_",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=List[str],
                default=typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
            )
        )

        @functools.wraps(function)
        def command(*args, **kwargs):
            received = {option: kwargs.pop(option.parameter) for option in options}
            loop = {o.parameter: raw for o, raw in received.items() if o.section == "loop"}
            config = given_config(config_class, {o: raw for o, raw in received.items() if o.section == "config"})
            kwargs["settings"] = given_settings(config_class, loop, config, kwargs.pop("set_"), stage)
            return function(*args, **kwargs)

        kept = [p for name, p in signature.parameters.items() if name != "settings"]
        command.__signature__ = signature.replace(parameters=[*kept, *added])
        command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}
        return command

    return decorate


def given_config(config_class: type, received: dict[GeneratedOption, Any]) -> dict[str, Any]:
    """The config values the options were given (a nested settings dataclass built from its own), by field."""
    given: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for option, raw in received.items():
        is_given, value = option.value(raw)
        if is_given and len(option.path) == 2:
            nested.setdefault(option.path[0], {})[option.path[1]] = value
        elif is_given:
            given[option.path[0]] = value
    hints = typing.get_type_hints(config_class)
    return {**given, **{name: hints[name](**values) for name, values in nested.items()}}


def given_settings(
    config_class: type, named_loop: dict, named_config: dict, pairs: list[str], stage: str | None = None
) -> GivenSettings:
    """The loop values given by name (None: not given), the config values given and every ``--set`` pair, typed
    and merged (``mltk.settings.resolve``); a key given two ways is refused."""
    from mltk.settings.resolve import merge_given, parse_overrides

    overrides = parse_overrides(pairs, config_class, stage)
    merge_given({key: True for key in named_config}, overrides["config"], "config")  # refuses a key given twice
    return GivenSettings(
        loop=merge_given(named_loop, overrides["loop"], "loop"), config={**named_config, **overrides["config"]}
    )
