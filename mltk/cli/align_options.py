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
AlignWeightOption = typer.Option(1.0, "--align-weight", min=0.0, help="Weight of the RCSLS term (with --lexicon).")
AlignKOption = typer.Option(5, "--align-k", min=1, help="RCSLS's k nearest neighbours (AME: 5; RCSLS's paper: 10).")


def alignment_config(lexicon: Optional[Path], weight: float, k: int):
    from mltk.ame.rcsls import AlignmentConfig

    return AlignmentConfig(lexicon=lexicon, weight=weight, k=k)
