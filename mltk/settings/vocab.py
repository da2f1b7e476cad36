"""``build-vocab``'s sizes, resolved like every other hyper-parameter: what the caller gave, else the value the
``cll-clip`` recipe gives its tasks (``config.vocab_size``, ``config.vocab_min_frequency``), so that a vocabulary
built on its own and one built inside ``train-continual`` follow one number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mltk.recipes import load_recipe

VOCABULARY_RECIPE = "cll-clip"


def vocabulary_sizes(size: int | None, min_frequency: int | None) -> tuple[int, int]:
    """(size, min_frequency): the given values, the recipe's where None."""
    recipe = load_recipe(VOCABULARY_RECIPE).config
    return (
        recipe["vocab_size"] if size is None else size,
        recipe["vocab_min_frequency"] if min_frequency is None else min_frequency,
    )


def build_vocab(
    captions: Any,
    lang: str,
    out_dir: Any,
    *,
    parent: Any = None,
    size: int | None = None,
    split: str | None = "train",
    min_frequency: int | None = None,
    protect_lang: str | None = None,
) -> Path:
    """``mltk build-vocab`` (``mltk.vocab.build_vocab``) with ``size`` and ``min_frequency`` from the
    ``cll-clip`` recipe when not given; the manifest records the values used."""
    from mltk.vocab.build import build_vocab as build  # torch: when a vocabulary is built, not for --help

    size, min_frequency = vocabulary_sizes(size, min_frequency)
    return build(
        captions,
        lang,
        out_dir,
        parent=parent,
        size=size,
        split=split,
        min_frequency=min_frequency,
        protect_lang=protect_lang,
    )
