"""Recipes: the published hyper-parameters of each training stage, as data (torchtune's recipe configs and
open_clip's ``model_configs`` are the models). One JSON file per recipe in this folder, loaded by ``load_recipe``;
it is the only place a hyper-parameter's value lives: ``LoopConfig`` and the stage configs have no defaults for
them, and ``--help`` reads its "default" from here. A recipe file holds::

    {"name": "mla-le", "stage": "train-le", "extends": "mla-nlt",   # extends: another recipe, updated key by key
     "description": "...", "source": "the paper / code the values come from",
     "loop": {...LoopConfig fields: steps, lr, warmup_fraction, schedule, weight_decay, betas, eps, grad_clip,
              clip_mode...},
     "config": {...fields of the stage's config: batch_size, temperature, ...},
     "methods": {"lora": {"rank": 8, ...}, ...}}   # train-continual: each continual method's options

A recipe names every key its stage needs, or ``extends`` a packaged recipe that does; a key missing after the
merge is refused naming the key and the file, and each value is checked against its field's type when a stage
resolves it (``mltk.settings.resolve``). ``Recipe.sources`` says which file gave each value (``mltk recipes
show``). A recipe file is known by its content, not by how its path was spelled (``Recipe.name``), so the same
file given as ``./r.json`` or ``/abs/r.json`` makes the same settings.

Resolving a stage config from its recipe (filling the fields left at ``FROM_RECIPE``) is the settings layer's
(``mltk.settings.resolve``); this package only reads recipes. Imported by ``mltk --help``: no torch, numpy or
pyarrow at import time.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.core.user_files import expect, read_user_json

RECIPES_DIR = Path(__file__).resolve().parent
# The recipe each training stage uses unless --recipe names another.
STAGE_RECIPES = {
    "train-nlt": "mla-nlt",
    "train-le": "mla-le",
    "train-nlt-le": "mla-nlt-le",
    "train-continual": "cll-clip",
    "train-ccrk": "ccrk",
    "pretrain": "clip-pretrain",
}
# ... and on a Hugging Face (transformers / sentence-transformers) text tower.
HF_TOWER_RECIPES = {"train-nlt": "real-text-minilm", "train-continual": "teir-minilm"}
RECIPE_KEYS = {
    "name": str,
    "stage": str,
    "extends": str,
    "description": str,
    "source": str,
    "loop": dict,
    "config": dict,
    "methods": dict,
}
MAX_RECIPE_DEPTH = 4  # the file, its loop / config / methods sections, a list value, one more for a nested section


class _FromRecipe:
    """The default of a config field whose value the stage's recipe gives."""

    def __repr__(self) -> str:
        return "FROM_RECIPE"


FROM_RECIPE: Any = _FromRecipe()


@dataclass(frozen=True)
class Recipe:
    """A recipe with what it extends merged in. ``name``: the packaged name, or for a file its content identity
    (``file sha256:...``, the same however the path is spelled); ``sources``: the file that gave each key."""

    name: str
    stage: str
    description: str
    source: str
    loop: dict  # LoopConfig fields
    config: dict  # fields of the stage's config
    path: Path
    sources: dict  # "loop.KEY" / "config.KEY" / "methods.METHOD.KEY" -> the file that set it
    methods: dict = field(default_factory=dict)  # train-continual: method -> its options' values

    def values(self) -> dict:
        """Every value, loop and config together (the keys are distinct)."""
        return {**self.loop, **self.config}

    def source_of(self, section: str, key: str) -> Path:
        """The file that gave ``section``'s ``key`` (this recipe's file, or one it extends)."""
        return self.sources.get(f"{section}.{key}", self.path)


def recipe_names() -> list[str]:
    """The packaged recipes, by name."""
    return sorted(path.stem for path in RECIPES_DIR.glob("*.json"))


def recipe_path(name_or_path: str | Path) -> Path:
    """The file of a packaged recipe name, or ``name_or_path`` itself as a file."""
    text = str(name_or_path)
    if text in recipe_names():
        return RECIPES_DIR / f"{text}.json"
    path = Path(text)
    if path.suffix != ".json" and not path.exists():
        close = difflib.get_close_matches(text, recipe_names(), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"no recipe {text!r}{hint}: give a JSON file or one of {', '.join(recipe_names())}")
    return path


def load_recipe(name_or_path: str | Path) -> Recipe:
    """The recipe called ``name_or_path`` (see ``recipe_names``) or held in that JSON file, with what it extends
    merged in. A missing, malformed or unknown recipe raises ConfigError naming the file."""
    text = str(name_or_path)
    packaged = text in recipe_names()
    return _load(recipe_path(text), text if packaged else None, ())


def _load(path: Path, name: str | None, seen: tuple[str, ...]) -> Recipe:
    data = read_user_json(path, what="recipe", max_bytes=1024 * 1024, max_depth=MAX_RECIPE_DEPTH)
    _check_shape(data, path)
    loop, config = dict(data.get("loop", {})), dict(data.get("config", {}))
    methods = _methods_section(data.get("methods", {}), path)
    sources = {f"{section}.{key}": path for section, part in (("loop", loop), ("config", config)) for key in part}
    sources.update({f"methods.{method}.{key}": path for method, entry in methods.items() for key in entry})
    parent = data.get("extends")
    if parent is not None:
        if parent in seen or parent not in recipe_names():
            raise ConfigError(
                f"recipe key 'extends' must name another packaged recipe ({', '.join(recipe_names())}), not {parent!r}",
                path,
            )
        base = _load(RECIPES_DIR / f"{parent}.json", parent, (*seen, name or str(path)))
        loop, config = {**base.loop, **loop}, {**base.config, **config}
        methods = {
            method: {**base.methods.get(method, {}), **methods.get(method, {})}
            for method in {**base.methods, **methods}
        }  # each method's options updated key by key
        sources = {**base.sources, **sources}
    return Recipe(
        name=name or content_name(data),
        stage=data["stage"],
        description=data.get("description", ""),
        source=data.get("source", ""),
        loop=loop,
        config=config,
        path=path,
        sources=sources,
        methods=methods,
    )


def _methods_section(section: dict, path: Path) -> dict:
    """The ``methods`` section: an object of options per method (their keys and values are checked against the
    methods' options when a stage reads them, ``mltk.settings.methods``)."""
    for method, entry in section.items():
        expect(entry, dict, f"methods.{method}", path, what="recipe")
    return {method: dict(entry) for method, entry in section.items()}


def content_name(data: dict) -> str:
    """A recipe file's identity: the sha256 of its JSON content (key order and spacing aside), not its path."""
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"file sha256:{digest[:16]}"


def _check_shape(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise ConfigError("a recipe file must hold a JSON object", path)
    for key in data:
        if key not in RECIPE_KEYS:
            raise ConfigError(
                f"unknown recipe key {key!r}{did_you_mean(key, RECIPE_KEYS)} (known: {', '.join(sorted(RECIPE_KEYS))})",
                path,
            )
        expect(data[key], RECIPE_KEYS[key], key, path, what="recipe")
    if data.get("stage") not in STAGE_RECIPES:
        raise ConfigError(
            f"recipe key 'stage' must be one of {', '.join(STAGE_RECIPES)}, not {json.dumps(data.get('stage'))}", path
        )


def did_you_mean(key: str, known) -> str:
    """`` (did you mean X?)`` for the known key closest to a misspelt one, else nothing."""
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


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


def recipe_text(name_or_path: str | Path) -> str:
    """The text of a recipe's own file (what ``mltk recipes cp`` copies), checked to load."""
    load_recipe(name_or_path)
    return recipe_path(name_or_path).read_text(encoding="utf-8")
