"""RCSLS (Joulin et al. 2018, "Loss in Translation: Learning Bilingual Word Mapping with a Retrieval Criterion"),
the alignment term of AME (Mohammadshahi, Lebret and Aberer 2019): the formula and its module, the loss
registry's ``rcsls``. Where it acts (a lexicon's words, a map or the table) is ``mltk.ame.rcsls``'s.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.core.errors import ConfigError


def rcsls_loss(
    x: torch.Tensor,
    y: torch.Tensor,
    k: int,
    x_candidates: torch.Tensor | None = None,
    y_candidates: torch.Tensor | None = None,
) -> torch.Tensor:
    """RCSLS (Joulin et al. 2018, eq. 5) on pairs (x_i, y_i), x [n, D] the mapped source words, y [n, D] their
    translations; every vector is L2-normalised first, so the dot products are cosines::

        loss = 1/n sum_i [ -2 cos(x_i, y_i)
                           + 1/k sum_{y_j in N_Y(x_i)} cos(x_i, y_j)
                           + 1/k sum_{x_j in N_X(y_i)} cos(x_j, y_i) ]

    N_Y(x_i): the k target candidates nearest x_i (cosine); N_X(y_i): the k source candidates nearest y_i. The
    candidates default to the rows of y and x themselves; pass the *distinct* words (``y_candidates [m, D]``,
    ``x_candidates [p, D]``) when a word occurs in several pairs, so that no neighbour counts twice. k is cut to the
    number of candidates. The neighbours are chosen without gradient (``topk``) and enter with their cosine, as in
    the paper; gradient flows into x and into x_candidates. Returns a scalar.
    """
    if x.dim() != 2 or x.shape != y.shape:
        raise ValueError(f"x and y must both be [n, D], got {tuple(x.shape)} and {tuple(y.shape)}")
    if k < 1:
        raise ConfigError(f"--align-k must be at least 1, got {k}")
    xs, ys = F.normalize(x, dim=-1), F.normalize(y, dim=-1)
    xc = xs if x_candidates is None else F.normalize(x_candidates, dim=-1)
    yc = ys if y_candidates is None else F.normalize(y_candidates, dim=-1)
    positive = (xs * ys).sum(-1)  # [n]
    near_y = (xs @ yc.T).topk(min(k, yc.shape[0]), dim=1).values.mean(1)  # [n]: x_i's k nearest targets
    near_x = (ys @ xc.T).topk(min(k, xc.shape[0]), dim=1).values.mean(1)  # [n]: y_i's k nearest sources
    return (-2.0 * positive + near_y + near_x).mean()


class RcslsLoss(nn.Module):
    """``rcsls_loss`` with its k fixed (AME's value is the recipes' ``alignment.k``)."""

    def __init__(self, k: int):
        super().__init__()
        if k < 1:
            raise ConfigError(f"--align-k must be at least 1, got {k}")
        self.k = k

    def forward(self, x, y, x_candidates=None, y_candidates=None) -> torch.Tensor:
        return rcsls_loss(x, y, self.k, x_candidates, y_candidates)
