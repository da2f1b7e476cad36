"""AME's alignment as the authors ran it: a linear map of the source language's word vectors, learnt by RCSLS
apart from the rest of the model (the authors' ``model.py``: ``EncoderText.translator_deen``, ``rcsls``,
``VSE.train_emb``).

- **Where the map acts.** AME feeds ``R e(w)`` to its sentence encoder, R a [D, D] map per language that starts as
  the Procrustes solution over the lexicon pairs. In an MLA encoder the source words' vectors are
  ``proj(table[ids]) = A e + b`` (``mltk.ame.words``), so the map folds into that projection exactly:
  ``R (A e + b) = (R A) e + R b``. The checkpoint is then an ordinary MLA checkpoint whose forward applies the map;
  nothing new to load. (The projection is shared by every non-native language of the encoder, so they all read
  the map; AME trains one pair of languages.) A CLL-CLIP table has no projection (English reads the same table)
  and keeps the in-table form (``--align-form table``, ``mltk.ame.rcsls:LexiconAlignment``).
- **How it learns.** Every ``every`` steps (AME's paper: T = 500) the map takes one gradient step of RCSLS
  (``mltk.ame.rcsls``) at its own rate ``lr`` (AME's paper: 2; 5 on COCO), ``R <- R - lr dRCSLS/dR``;
  with ``orthogonal`` it is then projected back onto the orthogonal matrices (``U V^T`` of its SVD). The gradient
  is taken with the word vectors detached: it reaches the map only, never the token table, and the stage's loss
  gains no term (the value is logged as ``rcsls``). mltk folds each step into the projection as a map ``M`` applied
  after the current one, with the gradient taken at ``M = I``; for an orthogonal map this equals AME's step on R.
- **Neighbours** (RCSLS's ``N_Y``, ``N_X``) run over each language's whole vocabulary: the words of the training
  captions (``mltk.ame.vocabulary``) together with the lexicon's, as AME takes them over all its known words.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mltk.ame.words import WordIds, WordTables
from mltk.core.errors import ConfigError


def procrustes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The orthogonal W [D, D] minimising ``||x W^T - y||`` over the pairs (rows of x [n, D] and y [n, D]):
    ``U V^T`` of the SVD of ``y^T x`` (AME's ``procrustes``)."""
    u, _, vh = torch.linalg.svd(y.T @ x)
    return u @ vh


def orthogonalised(matrix: torch.Tensor) -> torch.Tensor:
    """The nearest orthogonal matrix: ``U V^T`` of ``matrix``'s SVD."""
    u, _, vh = torch.linalg.svd(matrix)
    return u @ vh


class MappedWords:
    """The map R of one MLA encoder's source language, folded into its non-native projection (see the module
    docstring). ``pairs [P, 2]`` index ``sources`` and ``targets`` (the lexicon's words); ``source_vocabulary``
    and ``target_vocabulary`` are the candidate words of the neighbourhoods; ``rcsls(x, y, x_candidates,
    y_candidates)`` the loss (``mltk.ame.rcsls:RcslsLoss``)."""

    def __init__(
        self,
        tables: WordTables,
        pairs: torch.Tensor,
        sources: WordIds,
        targets: WordIds,
        source_vocabulary: WordIds,
        target_vocabulary: WordIds,
        rcsls,
        lr: float,
        orthogonal: bool,
    ):
        if not tables.is_mla:
            raise ConfigError(
                "--align-form map folds the map into MLA's non-native projection; a CLL-CLIP table "
                "has none (English reads it too): use --align-form table"
            )
        if lr <= 0:
            raise ConfigError(f"--align-lr must be positive, got {lr}")
        self.tables, self.pairs, self.rcsls, self.lr, self.orthogonal = tables, pairs, rcsls, lr, orthogonal
        self.sources, self.targets = sources, targets
        self.source_vocabulary, self.target_vocabulary = source_vocabulary, target_vocabulary
        with torch.no_grad():
            self.target_vectors = tables.english_vectors(targets)  # [m, W] frozen
            self.target_candidates = tables.english_vectors(target_vocabulary)  # [M, W] frozen

    @property
    def projection(self) -> torch.nn.Linear:
        return self.tables.encoder.embedding.proj

    def fold(self, matrix: torch.Tensor) -> None:
        """proj <- matrix o proj: ``A <- M A``, ``b <- M b``."""
        with torch.no_grad():
            proj = self.projection
            proj.weight.copy_((matrix @ proj.weight.float()).to(proj.weight.dtype))
            proj.bias.copy_((matrix @ proj.bias.float()).to(proj.bias.dtype))

    def source_vectors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(the lexicon's source words [p, W], the source vocabulary [S, W]), detached."""
        with torch.no_grad():
            return self.tables.source_vectors(self.sources), self.tables.source_vectors(self.source_vocabulary)

    def start(self) -> None:
        """Fold the Procrustes map over the lexicon pairs (AME's starting R)."""
        x, _ = self.source_vectors()
        x_pairs = F.normalize(x[self.pairs[:, 0]], dim=-1)
        y_pairs = F.normalize(self.target_vectors[self.pairs[:, 1]], dim=-1)
        self.fold(procrustes(x_pairs, y_pairs))

    def step(self, pairs: torch.Tensor) -> float:
        """One RCSLS gradient step of the map on ``pairs [n, 2]``, folded; returns RCSLS before the step."""
        x, x_vocabulary = self.source_vectors()
        width = x.shape[1]
        with torch.enable_grad(), torch.autocast(x.device.type, enabled=False):
            identity = torch.eye(width, device=x.device, requires_grad=True)  # M at identity
            loss = self.rcsls(
                x[pairs[:, 0]] @ identity.T,
                self.target_vectors[pairs[:, 1]],
                x_vocabulary @ identity.T,
                self.target_candidates,
            )
            (gradient,) = torch.autograd.grad(loss, identity)
        matrix = torch.eye(width, device=x.device) - self.lr * gradient
        self.fold(orthogonalised(matrix) if self.orthogonal else matrix)
        return float(loss.detach())
