"""RCSLS, the alignment term of AME (Mohammadshahi, Lebret and Aberer 2019), from Joulin et al. 2018, "Loss in
Translation: Learning Bilingual Word Mapping with a Retrieval Criterion".

``rcsls_loss`` is the formula; ``LexiconAlignment`` is what a training stage adds (``--lexicon L --align-k K``):
the lexicon's source words read from the model's trainable token table, their English translations from the
frozen English table (``mltk.ame.words``); ``AlignedTask`` wraps any training task (``mltk.train.loop.TrainTask``)
with it. Two forms (``--align-form``):

- ``map`` (default, AME's): a linear map of the source words learnt by RCSLS every ``--align-every`` steps at
  ``--align-lr``, folded into MLA's non-native projection; the gradient never reaches the table and the stage's
  loss gains no term (``mltk.ame.word_map``).
- ``table`` (mltk's earlier form; the only one for CLL-CLIP's table): ``weight * RCSLS`` added to the stage's loss
  every step on a batch of lexicon pairs, its gradient into the token table through the stage's optimizer. RCSLS
  is a mean over the pairs (about -2 .. 2) while a summed hinge (train-ccrk ``--loss hinge``) adds about
  2 B (B - 1) terms per language: raise ``--align-weight`` accordingly (a weight of B (B - 1) puts the term on the
  scale of one hinge term per pair of batch items).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.ame.alignment_config import ALIGN_BATCH, ALIGN_FORMS, AlignmentConfig
from mltk.ame.lexicon import lexicon_languages, lexicon_pairs, load_lexicon
from mltk.ame.vocabulary import vocabulary_words
from mltk.ame.word_map import MappedWords
from mltk.ame.words import WordTables
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.losses.base import split_loss

__all__ = [
    "ALIGN_BATCH",
    "ALIGN_FORMS",
    "AlignedTask",
    "AlignmentConfig",
    "LexiconAlignment",
    "RcslsLoss",
    "rcsls_loss",
    "with_alignment",
]


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


class LexiconAlignment:
    """``weight * RCSLS`` over a lexicon, for one model and the lexicon's source language.

    Each step takes ``batch`` pairs (all of them when the lexicon is smaller; otherwise a random subset drawn from
    ``(seed, step)``); the candidates are the distinct source and target words of those pairs. Pairs whose word has
    no token (see ``mltk.ame.words``) are dropped, and their number logged.
    """

    def __init__(
        self,
        encoder: nn.Module,
        lexicon: pa.Table,
        weight: float,
        k: int,
        batch: int = ALIGN_BATCH,
        seed: int = 0,
        config: AlignmentConfig | None = None,
        captions: Path | None = None,
    ):
        src_lang, tgt_lang = lexicon_languages(lexicon)
        if tgt_lang != NATIVE_LANG:
            raise ConfigError(
                f"the alignment pulls words towards the frozen English table: the lexicon must "
                f"translate into {NATIVE_LANG}, not {tgt_lang}"
            )
        if weight < 0 or batch < 2:
            raise ConfigError(f"--align-weight must be >= 0 and the pair batch >= 2, got {weight} and {batch}")
        self.tables, self.weight, self.loss, self.batch, self.seed = (
            WordTables(encoder, src_lang),
            weight,
            RcslsLoss(k),
            batch,
            seed,
        )
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
        self.config = config or AlignmentConfig(form="table")
        self.mapped = self.word_map(sources, targets, captions) if self.config.form == "map" else None
        self.last = torch.tensor(float("nan"))

    def word_map(self, sources: list[str], targets: list[str], captions: Path | None) -> MappedWords:
        """The map form (``mltk.ame.word_map``), started from Procrustes; neighbours over the captions' words
        and the lexicon's."""
        vocabulary = {
            lang: vocabulary_words([captions], lang) if captions is not None else []
            for lang in (self.src_lang, NATIVE_LANG)
        }
        source_vocabulary = self.tables.source_ids(list(dict.fromkeys(sources + vocabulary[self.src_lang])))
        target_vocabulary = self.tables.english_ids(list(dict.fromkeys(targets + vocabulary[NATIVE_LANG])))
        mapped = MappedWords(
            self.tables,
            self.pairs,
            self.source_words,
            self.target_words,
            source_vocabulary,
            target_vocabulary,
            self.loss,
            self.config.lr,
            self.config.orthogonal,
        )
        mapped.start()
        return mapped

    def check_trained(self, parameters: dict[str, nn.Parameter]) -> None:
        """Refuse a run whose trained tensors do not include the table the source words read (the map form too:
        AME trains the word embeddings with the ranking loss while the map aligns them)."""
        if not any(p is self.tables.parameter for p in parameters.values()):
            raise ConfigError("--lexicon aligns the trainable token table, but this run does not train it")

    def step_pairs(self, step: int) -> torch.Tensor:
        if len(self.pairs) <= self.batch:
            return self.pairs
        generator = torch.Generator().manual_seed(int(np.random.SeedSequence([self.seed, step]).generate_state(1)[0]))
        return self.pairs[torch.randperm(len(self.pairs), generator=generator)[: self.batch]]

    def __call__(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.mapped is not None:
            return self.map_step(step)
        pairs = self.step_pairs(step)
        sources, s_index = pairs[:, 0].unique(return_inverse=True)
        targets, t_index = pairs[:, 1].unique(return_inverse=True)
        x_all = self.tables.source_vectors(_select(self.source_words, sources))  # [p, W]
        y_all = self.tables.english_vectors(_select(self.target_words, targets))  # [m, W]
        s_index, t_index = s_index.to(x_all.device), t_index.to(x_all.device)
        loss = self.loss(x_all[s_index], y_all[t_index], x_all, y_all)
        return self.weight * loss, {"rcsls": loss}

    def map_step(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The map form: after every ``every`` optimizer steps (called before steps every, 2 every, ..., so that no
        graph of the stage's loss holds the projection it changes) one RCSLS step of the map; no term for the
        stage's loss (0), the last RCSLS value logged."""
        if step > 0 and step % self.config.every == 0:
            self.last = torch.tensor(self.mapped.step(self.step_pairs(step)))
        zero = torch.zeros((), device=self.tables.device)
        return zero, {"rcsls": self.last}


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
        extra, extra_terms = self.alignment(step)  # first: the map form changes weights the task's graph reads
        loss, terms = split_loss(self.task.loss(step))
        return loss + extra, {**terms, **extra_terms}

    def __getattr__(self, name):
        return getattr(self.task, name)

    def __setattr__(self, name, value):
        setattr(self.task, name, value)


def with_alignment(
    task,
    encoder: nn.Module,
    config: AlignmentConfig,
    seed: int,
    languages: list[str],
    other_language_ok: bool = False,
    captions: Path | None = None,
):
    """``task`` itself without a lexicon; with one, ``AlignedTask``. The lexicon's source language must be among
    the ``languages`` trained, unless ``other_language_ok`` (train-continual: only that language's task aligns)."""
    if config.lexicon is None:
        return task
    lexicon = load_lexicon(config.lexicon)
    src_lang = lexicon_languages(lexicon)[0]
    if src_lang not in languages and other_language_ok:
        return task
    if src_lang not in languages:
        raise ConfigError(
            f"the lexicon translates {src_lang}, which this run does not train ({', '.join(languages)})", config.lexicon
        )
    alignment = LexiconAlignment(encoder, lexicon, config.weight, config.k, config.batch, seed, config, captions)
    how = (
        f"a map updated every {config.every} steps at rate {config.lr}"
        if config.form == "map"
        else f"in the table, weight {config.weight}"
    )
    log(f"alignment: RCSLS over {len(alignment.pairs)} {src_lang}-{NATIVE_LANG} lexicon pairs, k = {config.k}, {how}")
    return AlignedTask(task, alignment)
