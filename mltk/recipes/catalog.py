"""What ``mltk recipes list``, ``show`` and ``cp`` do: the packaged recipes, one recipe's every value with the file
it comes from, and a recipe copied to a file of the user's (to edit and pass as ``--recipe FILE``).

Imported by ``mltk --help``: no torch, numpy or pyarrow (the artifact writer is imported when a copy is written).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mltk.recipes import STAGE_RECIPES, Recipe, load_recipe, recipe_names, recipe_path, recipe_text


@dataclass(frozen=True)
class RecipeValue:
    """One value of a recipe: ``key`` (``loop.lr``, ``config.batch_size``), the value, and the recipe it comes
    from (this one, or one it extends)."""

    key: str
    value: object
    source: str
    meaning: str = ""  # the help of the key's config field


def recipe_summaries() -> list[dict]:
    """Every packaged recipe: name, stage, what it extends, whether it is its stage's default, description."""
    defaults = set(STAGE_RECIPES.values())
    rows = []
    for name in recipe_names():
        recipe = load_recipe(name)
        extends = json.loads(recipe_path(name).read_text(encoding="utf-8")).get("extends")
        rows.append(
            {
                "name": name,
                "stage": recipe.stage,
                "extends": extends,
                "default": name in defaults,
                "description": recipe.description,
            }
        )
    return rows


def source_name(recipe: Recipe, path: Path) -> str:
    """A packaged recipe by its name, a user's file by its path."""
    if path.parent == recipe_path(recipe_names()[0]).parent:
        return path.stem
    return str(path)


def copy_recipe(name_or_path: str | Path, out: str | Path) -> Path:
    """Write the recipe's own file to ``out`` (a recipe file that still ``extends`` its parent, as shipped), by
    the safe write of files outside artifacts: atomic, never over an existing file without ``--overwrite``, never
    inside an artifact. Returns the path written."""
    from mltk.artifacts.loose import write_file

    text = recipe_text(name_or_path)
    return write_file(out, text.encode("utf-8"), [recipe_path(name_or_path)], what="recipe copy")
