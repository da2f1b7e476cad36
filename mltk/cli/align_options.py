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
AlignWeightOption = typer.Option(1.0, "--align-weight", min=0.0, help="Weight of the RCSLS term (with --lexicon).")
AlignKOption = typer.Option(5, "--align-k", min=1, help="RCSLS's k nearest neighbours (AME: 5; RCSLS's paper: 10).")
AlignFormOption = typer.Option(
    None, "--align-form", help="map (AME: a linear map of the source words, learnt by RCSLS apart from the table and "
    "folded into MLA's projection; default) or table (RCSLS added to the loss, into the token table; CLL-CLIP).")
AlignEveryOption = typer.Option(None, "--align-every", help="--align-form map: steps between map updates (AME: 500).")
AlignLrOption = typer.Option(None, "--align-lr", help="--align-form map: the map's rate (AME: 2; 5 on COCO).")
AlignOrthogonalOption = typer.Option(None, "--align-orthogonal/--align-free",
                                     help="--align-form map: keep the map orthogonal (default: free, as AME).")


def alignment_config(lexicon: Optional[Path], weight: float, k: int, form: Optional[str] = None,
                     every: Optional[int] = None, lr: Optional[float] = None, orthogonal: Optional[bool] = None):
    from mltk.ame.rcsls import AlignmentConfig

    given = {name: value for name, value in (("form", form), ("every", every), ("lr", lr),
                                              ("orthogonal", orthogonal)) if value is not None}
    return AlignmentConfig(lexicon=lexicon, weight=weight, k=k, **given)
