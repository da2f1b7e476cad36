"""The options of AME's alignment term (``--lexicon --align-weight --align-k``), shared by the stages that train a
token table (train-nlt, train-continual, train-ccrk), and the ``AlignmentConfig`` they build."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

LexiconOption = typer.Option(
    None, "--lexicon", help="A lexicon artifact (mltk import-data lexicon / synth-lexicon, mltk induce-lexicon): "
    "adds AME's RCSLS term aligning the trained token rows of its source words with the frozen English rows of "
    "their translations.")
AlignWeightOption = typer.Option(None, "--align-weight", min=0.0, help="Weight of the RCSLS term (with --lexicon); "
                                 "default: the recipe's alignment.weight.")
AlignKOption = typer.Option(None, "--align-k", min=1, help="RCSLS's k nearest neighbours (RCSLS's paper: 10); "
                            "default: the recipe's alignment.k (AME's).")


def alignment_config(lexicon: Optional[Path], weight: float | None, k: int | None):
    """The ``AlignmentConfig`` of the options given; the ones left out come from the recipe."""
    from mltk.ame.rcsls import AlignmentConfig
    from mltk.recipes import FROM_RECIPE

    return AlignmentConfig(lexicon=lexicon, weight=FROM_RECIPE if weight is None else weight,
                           k=FROM_RECIPE if k is None else k)
