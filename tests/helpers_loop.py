"""A ``LoopConfig`` for tests: ``LoopConfig`` has no defaults of its own (the recipe is their home), so tests take
the mla-nlt recipe's values for whatever they leave out."""

from __future__ import annotations

from mltk.recipes import load_recipe
from mltk.settings.loop import LoopConfig
from mltk.settings.resolve import recipe_loop


def loop_config(**given) -> LoopConfig:
    """The mla-nlt recipe's loop with ``given`` values."""
    return recipe_loop(load_recipe("mla-nlt"), **given)
