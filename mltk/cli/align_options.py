"""The options of AME's alignment (``--lexicon --align-form --align-every --align-lr --align-orthogonal
--align-weight --align-k``), shared by the stages that train a
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
AlignFormOption = typer.Option(
    None, "--align-form", help="map (AME: a linear map of the source words, learnt by RCSLS apart from the table and "
    "folded into MLA's projection; default) or table (RCSLS added to the loss, into the token table; CLL-CLIP).")
AlignEveryOption = typer.Option(None, "--align-every", help="--align-form map: steps between map updates (AME: 500).")
AlignLrOption = typer.Option(None, "--align-lr", help="--align-form map: the map's rate (AME: 2; 5 on COCO).")
AlignOrthogonalOption = typer.Option(None, "--align-orthogonal/--align-free",
                                     help="--align-form map: keep the map orthogonal (default: free, as AME).")


def alignment_config(lexicon: Optional[Path], weight: float | None, k: int | None, form: Optional[str] = None,
                     every: Optional[int] = None, lr: Optional[float] = None, orthogonal: Optional[bool] = None):
    """The ``AlignmentConfig`` of the options given; weight and k left out come from the recipe."""
    from mltk.ame.rcsls import AlignmentConfig
    from mltk.recipes import FROM_RECIPE

    given = {name: value for name, value in (("form", form), ("every", every), ("lr", lr),
                                              ("orthogonal", orthogonal)) if value is not None}
    return AlignmentConfig(lexicon=lexicon, weight=FROM_RECIPE if weight is None else weight,
                           k=FROM_RECIPE if k is None else k, **given)
