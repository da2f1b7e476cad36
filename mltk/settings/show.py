"""What ``mltk recipes show`` prints: each value of a recipe that its stage reads, the recipe it comes from and
what it means (its config field's help). Here rather than in ``mltk.recipes`` because which keys a stage reads,
and what they mean, are the stage configs' to say. Imported by ``mltk --help``: no torch, numpy or pyarrow.
"""

from __future__ import annotations

from pathlib import Path

from mltk.recipes import Recipe, load_recipe
from mltk.recipes.catalog import RecipeValue, source_name
from mltk.settings.loop import LoopConfig
from mltk.settings.methods import check_section, method_rows, section_field
from mltk.settings.resolve import field_hints, stage_config, stage_keys


def recipe_values(name_or_path: str | Path) -> tuple[Recipe, list[RecipeValue]]:
    """A recipe and each value its stage reads, with its source and meaning, loop keys first, in the file's order
    (a key inherited from a recipe of another stage that this stage does not read is left out), then each
    continual method's options (``methods.er.memory_size``)."""
    recipe = load_recipe(name_or_path)
    fields = {"loop": field_hints(LoopConfig), "config": field_hints(stage_config(recipe.stage))}
    check_section(recipe, section_field(stage_config(recipe.stage)) is not None)
    rows = [
        RecipeValue(
            f"{section}.{key}",
            value,
            source_name(recipe, recipe.source_of(section, key)),
            _meaning(fields[section].get(key)),
        )
        for section, values in (("loop", recipe.loop), ("config", stage_keys(recipe)))
        for key, value in values.items()
    ]
    rows += [
        RecipeValue(key, value, source_name(recipe, path), meaning) for key, value, path, meaning in method_rows(recipe)
    ]
    return recipe, rows


def _meaning(hint_and_metadata: tuple | None) -> str:
    """A field's help as one line (empty for a key without one, or an unknown key)."""
    return " ".join(hint_and_metadata[1].get("help", "").split()) if hint_and_metadata else ""
