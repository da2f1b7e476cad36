"""The training commands' hyper-parameter options, generated from the config dataclasses' fields, as transformers'
``HfArgumentParser`` and Lightning's ``LightningCLI`` do: a new hyper-parameter is one field and one recipe key.

``@training_options(stage, config_class)`` on a command function adds to its signature:

- one option per field of ``LoopConfig`` (``mltk.train.loop_config``) that has ``help`` in its metadata and no
  ``cli: False``, unless the command declares that name itself (train-continual's ``--steps`` counts per task);
- ``--set KEY=VALUE`` (repeatable): any loop or config key, typed by its field (``mltk.train.settings``);

and hands the command, in place of those options, one ``settings`` argument: the loop values and config values
given (by name or by ``--set``; one key both ways is refused), to pass on as ``loop=settings.loop,
**settings.config``. Options the command declares itself whose parameter names a recipe key (``batch_size``,
``temperature``) get the recipe's value appended to their help, read from the stage's recipe when ``--help`` is
built, so no help text restates a number.

The metadata convention of a field (the same for a stage config's fields, which still declare their options by
hand and can be moved here field by field): ``help`` (required for an option), ``option`` (its name when not
``--`` + the field name with ``-`` for ``_``), ``aliases`` (more names, e.g. ``("-s",)``), ``choices`` (allowed
strings), ``min`` (smallest number; checked in recipes and ``--set`` too), ``cli: False`` (a key for the recipe
and ``--set`` only).

Imported by ``mltk --help``: no torch, numpy or pyarrow (``LoopConfig`` lives in a torch-free module; a stage's
config class is named as ``"module:Class"`` and imported only when the command runs).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, List, Optional

import typer

from mltk.recipes import STAGE_RECIPES, load_recipe
from mltk.train.loop_config import LoopConfig

SET_HELP = ("Set any recipe key, loop or config (e.g. --set lr=3e-4 --set betas=0.9,0.98); repeatable; wins over "
            "the recipe and is recorded in the manifest like a named option. `mltk recipes show NAME` lists the "
            "keys.")
RECIPE_DEFAULT = re.compile(r"\s*\(?[Dd]efault: the recipe's\)?\.?$")


@dataclasses.dataclass(frozen=True)
class GivenSettings:
    """What a training command was given: ``loop`` (LoopConfig fields) and ``config`` (the stage config's)."""

    loop: dict
    config: dict


def option_name(field: dataclasses.Field) -> str:
    return field.metadata.get("option", "--" + field.name.replace("_", "-"))


def recipe_value_words(stage: str, key: str) -> str | None:
    """`` Default: the recipe's (mla-nlt: 0.0001).`` read from the stage's default recipe, or None."""
    recipe = load_recipe(STAGE_RECIPES[stage])
    values = recipe.values()
    if key not in values:
        return None
    value = values[key]
    shown = ", ".join(map(str, value)) if isinstance(value, list) else ("none" if value is None else value)
    return f"Default: the recipe's ({recipe.name}: {shown})."


def with_default(help_text: str, words: str | None) -> str:
    """``help_text`` without a "(default: the recipe's)" it may end with, then ``words``."""
    text = RECIPE_DEFAULT.sub("", help_text).rstrip()
    if not words:
        return text
    return f"{text}{'' if text.endswith(('.', ')')) else '.'} {words}"


def _help_with_default(help_text: str, stage: str, field: dataclasses.Field) -> str:
    words = recipe_value_words(stage, field.name)
    if words is None and field.default is not dataclasses.MISSING:
        words = f"Default: {field.default}."
    return with_default(help_text, words)


def _loop_parameter(stage: str, field: dataclasses.Field, hint: Any) -> inspect.Parameter:
    inner = typing.get_args(hint)[0] if typing.get_origin(hint) is not None else hint
    bounds = {"min": field.metadata["min"]} if "min" in field.metadata else {}
    info = typer.Option(None, option_name(field), *field.metadata.get("aliases", ()),
                        help=_help_with_default(field.metadata["help"], stage, field), **bounds)
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=Optional[inner])


def _generated_loop_fields(own: set[str]) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(LoopConfig)
            if "help" in f.metadata and f.metadata.get("cli", True) and f.name not in own]


def _with_recipe_help(parameter: inspect.Parameter, stage: str) -> inspect.Parameter:
    """A command's own option named for a recipe key, its help ending with the recipe's value."""
    annotation, default = parameter.annotation, parameter.default
    if typing.get_origin(annotation) is Annotated:
        base, info = typing.get_args(annotation)[0], copy.copy(typing.get_args(annotation)[1])
    elif isinstance(default, typer.models.OptionInfo):
        base, info = annotation, copy.copy(default)
    else:
        return parameter
    words = recipe_value_words(stage, parameter.name)
    if words is None or not isinstance(info, typer.models.OptionInfo):
        return parameter
    info.help = with_default(info.help or "", words)
    if typing.get_origin(annotation) is Annotated:
        return parameter.replace(annotation=Annotated[base, info])
    return parameter.replace(default=info)


def training_options(stage: str, config_class: str) -> Callable[[Callable], Callable]:
    """Give a training command its generated options (see the module's docstring); ``config_class`` is
    ``"module:Class"``, imported when the command runs (``--set`` is typed by its fields)."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function, eval_str=True)
        own = set(signature.parameters)
        hints = typing.get_type_hints(LoopConfig)
        loop_fields = _generated_loop_fields(own)
        added = [_loop_parameter(stage, f, hints[f.name]) for f in loop_fields]
        added.append(inspect.Parameter("set_", inspect.Parameter.KEYWORD_ONLY, annotation=List[str],
                                       default=typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP)))
        names = [f.name for f in loop_fields]

        @functools.wraps(function)
        def command(*args, **kwargs):
            named = {name: kwargs.pop(name) for name in names}
            kwargs["settings"] = given_settings(config_class, named, kwargs.pop("set_"))
            return function(*args, **kwargs)

        kept = [_with_recipe_help(p, stage) for name, p in signature.parameters.items() if name != "settings"]
        command.__signature__ = signature.replace(parameters=[*kept, *added])
        command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}
        return command

    return decorate


def given_settings(config_class: str, named_loop: dict, pairs: list[str]) -> GivenSettings:
    """The loop values given by name and every ``--set`` pair, typed and merged (``mltk.train.settings``)."""
    from mltk.train.settings import merge_given, parse_overrides

    module, _, name = config_class.partition(":")
    overrides = parse_overrides(pairs, getattr(importlib.import_module(module), name))
    return GivenSettings(loop=merge_given(named_loop, overrides["loop"], "loop"), config=overrides["config"])


def config_values(settings: GivenSettings, as_is: dict | None = None, **named: Any) -> dict[str, Any]:
    """The stage config's values: the options given by name (None: not given), those in ``as_is`` (given, even
    when None) and the ``--set`` ones; a key given two ways is refused."""
    from mltk.train.settings import merge_given

    given = {**{key: value for key, value in named.items() if value is not None}, **(as_is or {})}
    merge_given({key: True for key in given}, settings.config, "config")  # refuses a key given twice
    return {**given, **settings.config}
