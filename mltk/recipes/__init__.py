"""Recipes: the published hyper-parameters of each training stage, as data (open_clip's ``model_configs`` is the
model). One JSON file per recipe in this folder, loaded by ``load_recipe``; it is the only place a default
hyper-parameter lives. A recipe file holds::

    {"name": "mla-le", "stage": "train-le", "extends": "mla-nlt",   # extends: another recipe, updated key by key
     "description": "...", "source": "the paper / code the values come from",
     "loop": {...LoopConfig fields: steps, lr, warmup_fraction, schedule, weight_decay, betas, eps, grad_clip,
              clip_mode...},
     "config": {...fields of the stage's config: batch_size, temperature, ...}}

A stage's config (``MlaConfig``, ``CcrkConfig``, ``ContinualTrainConfig``, ``PretrainConfig``) leaves the fields
a recipe sets at ``FROM_RECIPE`` and its ``loop`` at None (or a dict of the LoopConfig fields given, e.g. by the
CLI); ``recipe_fields`` fills them from the recipe named by the config's ``recipe`` (a name here or a JSON file),
else the stage's default: ``STAGE_RECIPES``, or ``HF_TOWER_RECIPES`` when the base model is a Hugging Face text
tower. The resolved values (and the recipe's name) are what the manifest records.

This module is imported by ``mltk --help``: no torch, numpy or pyarrow at import time.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.core.rates import check_learning_rates

RECIPES_DIR = Path(__file__).resolve().parent
# The recipe each training stage uses unless --recipe names another.
STAGE_RECIPES = {"train-nlt": "mla-nlt", "train-le": "mla-le", "train-nlt-le": "mla-nlt-le",
                 "train-continual": "cll-clip", "train-ccrk": "ccrk", "pretrain": "clip-pretrain"}
# ... and on a Hugging Face (transformers / sentence-transformers) text tower.
HF_TOWER_RECIPES = {"train-nlt": "real-text-minilm", "train-continual": "teir-minilm"}
RECIPE_KEYS = {"name", "stage", "extends", "description", "source", "loop", "config"}


class _FromRecipe:
    """The default of a config field whose value the stage's recipe gives."""

    def __repr__(self) -> str:
        return "FROM_RECIPE"


FROM_RECIPE: Any = _FromRecipe()


@dataclass(frozen=True)
class Recipe:
    name: str  # the packaged name, or the file's path for a recipe file
    stage: str
    description: str
    source: str
    loop: dict  # LoopConfig fields
    config: dict  # fields of the stage's config
    path: Path

    def values(self) -> dict:
        """Every value, loop and config together (the keys are distinct)."""
        return {**self.loop, **self.config}


def recipe_names() -> list[str]:
    """The packaged recipes, by name."""
    return sorted(path.stem for path in RECIPES_DIR.glob("*.json"))


def load_recipe(name_or_path: str | Path) -> Recipe:
    """The recipe called ``name_or_path`` (see ``recipe_names``) or held in that JSON file, with what it extends
    merged in. A missing, malformed or unknown recipe raises ConfigError naming the file."""
    text = str(name_or_path)
    if text in recipe_names():
        return _load(RECIPES_DIR / f"{text}.json", text, ())
    path = Path(text)
    if path.suffix != ".json" and not path.exists():
        raise ConfigError(f"no recipe {text!r}: give a JSON file or one of {', '.join(recipe_names())}")
    return _load(path, str(path), ())


def _load(path: Path, name: str, seen: tuple[str, ...]) -> Recipe:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("no such recipe file", path) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"not a readable JSON recipe ({exc})", path) from None
    problem = _shape_problem(data)
    if problem:
        raise ConfigError(f"not a recipe: {problem}", path)
    loop, config = dict(data.get("loop", {})), dict(data.get("config", {}))
    parent = data.get("extends")
    if parent is not None:
        if parent in seen or parent not in recipe_names():
            raise ConfigError(f"'extends' must name another packaged recipe ({', '.join(recipe_names())}), got "
                              f"{parent!r}", path)
        base = _load(RECIPES_DIR / f"{parent}.json", parent, (*seen, name))
        loop, config = {**base.loop, **loop}, {**base.config, **config}
    return Recipe(name=name, stage=data["stage"], description=data.get("description", ""),
                  source=data.get("source", ""), loop=loop, config=config, path=path)


def _shape_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "the file must hold a JSON object"
    unknown = sorted(set(data) - RECIPE_KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(RECIPE_KEYS))})"
    if data.get("stage") not in STAGE_RECIPES:
        return f"'stage' must be one of {', '.join(STAGE_RECIPES)}, got {data.get('stage')!r}"
    if not all(isinstance(data.get(part, {}), dict) for part in ("loop", "config")):
        return "'loop' and 'config' must be JSON objects"
    return None


def stage_recipe(stage: str, name: str | Path | None = None, model: str | None = None) -> Recipe:
    """The recipe of ``stage``: ``name`` when given, else the stage's default (on a Hugging Face text tower,
    ``HF_TOWER_RECIPES``). A recipe written for another stage is refused."""
    if name is None:
        name = STAGE_RECIPES[stage]
        if stage in HF_TOWER_RECIPES and model is not None:
            from mltk.models.towers import names_hf_tower

            name = HF_TOWER_RECIPES[stage] if names_hf_tower(model) else name
    recipe = load_recipe(name)
    if recipe.stage != stage:
        raise ConfigError(f"recipe {recipe.name} is for {recipe.stage}, not {stage}", recipe.path)
    return recipe


def loop_from_options(recipe: Recipe, **given: Any):
    """The ``LoopConfig`` of ``recipe`` with the options given (None: the recipe's); ``grad_clip=0`` turns
    clipping off."""
    from mltk.train.loop import LoopConfig

    known = {field.name for field in dataclasses.fields(LoopConfig)}
    unknown = sorted(set(recipe.loop) - known)
    if unknown:
        raise ConfigError(f"unknown loop key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})",
                          recipe.path)
    values = {**recipe.loop, **{key: value for key, value in given.items() if value is not None}}
    if values.get("grad_clip") == 0:
        values["grad_clip"] = None
    return LoopConfig(**values)


def recipe_fields(config: Any, stage: str) -> dict[str, Any]:
    """The fields of ``config`` (a stage's config dataclass) that its recipe fills: every ``FROM_RECIPE`` field,
    ``loop`` when it is None or a dict of given LoopConfig fields, and ``recipe`` (the recipe's name)."""
    from mltk.train.loop import LoopConfig

    recipe = stage_recipe(stage, config.recipe, getattr(config, "model", None))
    names = {field.name for field in dataclasses.fields(config)}
    unknown = sorted(set(recipe.config) - names)
    if unknown:
        raise ConfigError(f"unknown {stage} key(s) {', '.join(unknown)}", recipe.path)
    filled: dict[str, Any] = {"recipe": recipe.name}
    for name in names:
        if getattr(config, name) is FROM_RECIPE:
            if name not in recipe.config:
                raise ConfigError(f"the recipe sets no {name!r} (a {stage} recipe must)", recipe.path)
            value = recipe.config[name]
            filled[name] = tuple(value) if isinstance(value, list) else value
    if not isinstance(config.loop, LoopConfig):
        filled["loop"] = loop_from_options(recipe, **(config.loop or {}))
    check_learning_rates({**{name: getattr(config, name) for name in names}, **filled})  # every rate, one rule
    return filled


def with_recipe(config: Any, stage: str) -> Any:
    """``config`` with its recipe's values filled in (``recipe_fields``)."""
    return dataclasses.replace(config, **recipe_fields(config, stage))


def fill_from_recipe(config: Any, stage: str) -> None:
    """``recipe_fields`` set on a frozen config in place (from its ``__post_init__``)."""
    for name, value in recipe_fields(config, stage).items():
        object.__setattr__(config, name, value)
