"""RCSLS, the alignment term of AME (Mohammadshahi, Lebret and Aberer 2019), from Joulin et al. 2018, "Loss in
Translation: Learning Bilingual Word Mapping with a Retrieval Criterion".

``rcsls_loss`` is the formula; ``LexiconAlignment`` is what a training stage adds to its loss
(``--lexicon L --align-weight W --align-k K``): the lexicon's source words read from the model's trainable token
table, their English translations from the frozen English table (``mltk.ame.words``), each step on a batch of
lexicon pairs; ``AlignedTask`` wraps any training task (``mltk.train.loop.TrainTask``) with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.ame.lexicon import lexicon_languages, lexicon_pairs, load_lexicon
from mltk.ame.words import WordTables
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.recipes import FROM_RECIPE
from mltk.train.step_log import split_loss

ALIGN_BATCH = 1024  # lexicon pairs per step


def rcsls_loss(x: torch.Tensor, y: torch.Tensor, k: int, x_candidates: torch.Tensor | None = None,
               y_candidates: torch.Tensor | None = None) -> torch.Tensor:
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


class LexiconAlignment:
    """``weight * RCSLS`` over a lexicon, for one model and the lexicon's source language.

    Each step takes ``batch`` pairs (all of them when the lexicon is smaller; otherwise a random subset drawn from
    ``(seed, step)``); the candidates are the distinct source and target words of those pairs. Pairs whose word has
    no token (see ``mltk.ame.words``) are dropped, and their number logged.
    """

    def __init__(self, encoder: nn.Module, lexicon: pa.Table, weight: float, k: int, batch: int = ALIGN_BATCH,
                 seed: int = 0):
        src_lang, tgt_lang = lexicon_languages(lexicon)
        if tgt_lang != NATIVE_LANG:
            raise ConfigError(f"the alignment pulls words towards the frozen English table: the lexicon must "
                              f"translate into {NATIVE_LANG}, not {tgt_lang}")
        if weight < 0 or batch < 2:
            raise ConfigError(f"--align-weight must be >= 0 and the pair batch >= 2, got {weight} and {batch}")
        self.tables, self.weight, self.loss, self.batch, self.seed = WordTables(encoder, src_lang), weight, \
            RcslsLoss(k), batch, seed
        self.src_lang = src_lang
        pairs = lexicon_pairs(lexicon)
        sources, targets = list(dict.fromkeys(s for s, _ in pairs)), list(dict.fromkeys(t for _, t in pairs))
        self.source_words, self.target_words = self.tables.source_ids(sources), self.tables.english_ids(targets)
        s_row = _rows_of(sources, self.source_words.kept)
        t_row = _rows_of(targets, self.target_words.kept)
        kept = [(s_row[s], t_row[t]) for s, t in pairs if s in s_row and t in t_row]
        if len(kept) < 2:
            raise ConfigError(f"the lexicon has {len(kept)} usable {src_lang}-{tgt_lang} pair(s); RCSLS needs 2")
        if len(kept) < len(pairs):
            log(f"alignment: {len(pairs) - len(kept)} of {len(pairs)} lexicon pairs dropped (a word with no token)")
        self.pairs = torch.tensor(kept, dtype=torch.long)  # [P, 2]: rows of source_words, target_words

    def check_trained(self, parameters: dict[str, nn.Parameter]) -> None:
        """Refuse a run whose trained tensors do not include the table the source words read."""
        if not any(p is self.tables.parameter for p in parameters.values()):
            raise ConfigError("--lexicon aligns the trainable token table, but this run does not train it")

    def step_pairs(self, step: int) -> torch.Tensor:
        if len(self.pairs) <= self.batch:
            return self.pairs
        generator = torch.Generator().manual_seed(int(np.random.SeedSequence([self.seed, step]).generate_state(1)[0]))
        return self.pairs[torch.randperm(len(self.pairs), generator=generator)[: self.batch]]

    def __call__(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        pairs = self.step_pairs(step)
        sources, s_index = pairs[:, 0].unique(return_inverse=True)
        targets, t_index = pairs[:, 1].unique(return_inverse=True)
        x_all = self.tables.source_vectors(_select(self.source_words, sources))  # [p, W]
        y_all = self.tables.english_vectors(_select(self.target_words, targets))  # [m, W]
        s_index, t_index = s_index.to(x_all.device), t_index.to(x_all.device)
        loss = self.loss(x_all[s_index], y_all[t_index], x_all, y_all)
        return self.weight * loss, {"rcsls": loss}


def _rows_of(words: list[str], kept: torch.Tensor) -> dict[str, int]:
    """word -> its row among the kept words."""
    return {w: i for i, w in enumerate(w for w, keep in zip(words, kept.tolist()) if keep)}


def _select(words, rows: torch.Tensor):
    return type(words)(words.ids[rows], words.mask[rows], words.kept)


class AlignedTask:
    """A training task whose loss gains the alignment term: ``loss(step) = task loss + weight * RCSLS`` (the term
    is logged as ``rcsls``). Everything else is the wrapped task's."""

    def __init__(self, task, alignment: LexiconAlignment):
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "alignment", alignment)
        alignment.check_trained(task.parameters_to_train())

    def loss(self, step: int):
        loss, terms = split_loss(self.task.loss(step))
        extra, extra_terms = self.alignment(step)
        return loss + extra, {**terms, **extra_terms}

    def __getattr__(self, name):
        return getattr(self.task, name)

    def __setattr__(self, name, value):
        setattr(self.task, name, value)


@dataclass(frozen=True)
class AlignmentConfig:
    """``--lexicon L --align-weight W --align-k K`` of a training stage (no lexicon: no term). ``weight`` and ``k``
    come from the stage's recipe (its ``alignment`` section: AME's k) unless given."""

    lexicon: Path | None = None
    weight: float = field(default=FROM_RECIPE, metadata={"help": "Weight of the RCSLS term (with --lexicon).",
                                                         "min": 0.0})
    k: int = field(default=FROM_RECIPE, metadata={"help": "RCSLS's k nearest neighbours.", "min": 1})
    batch: int = ALIGN_BATCH


def with_alignment(task, encoder: nn.Module, config: AlignmentConfig, seed: int, languages: list[str],
                   other_language_ok: bool = False):
    """``task`` itself without a lexicon; with one, ``AlignedTask``. The lexicon's source language must be among
    the ``languages`` trained, unless ``other_language_ok`` (train-continual: only that language's task aligns)."""
    if config.lexicon is None:
        return task
    lexicon = load_lexicon(config.lexicon)
    src_lang = lexicon_languages(lexicon)[0]
    if src_lang not in languages and other_language_ok:
        return task
    if src_lang not in languages:
        raise ConfigError(f"the lexicon translates {src_lang}, which this run does not train "
                          f"({', '.join(languages)})", config.lexicon)
    alignment = LexiconAlignment(encoder, lexicon, config.weight, config.k, config.batch, seed)
    log(f"alignment: RCSLS over {len(alignment.pairs)} {src_lang}-{NATIVE_LANG} lexicon pairs, k = {config.k}, "
        f"weight {config.weight}")
    return AlignedTask(task, alignment)
