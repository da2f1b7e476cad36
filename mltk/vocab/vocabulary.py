"""A vocabulary after a task (``Vocabulary``: the tokenizer plus the per-token task counts TEIR needs) and the
sizes of the merge that made it (``MergeSizes``). Grown by ``mltk.vocab.merge`` (CLIP's byte-level BPE) and
``mltk.vocab.wordpiece`` (a BERT tower's WordPiece), read and written by ``mltk.vocab.build``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mltk.core.errors import ConfigError
from mltk.vocab.tokenizer import ClipBpeTokenizer


@dataclass(frozen=True)
class MergeSizes:
    """Sizes of the parts of V_t = V_{t-1} ∪ V̂_t (tokens) and of the merge lists."""

    old: int  # |V_{t-1}|
    new_vocab: int  # |V̂_t|, the vocabulary trained on this task's text
    overlap: int  # |V̂_t ∩ V_{t-1}|
    new: int  # |V̂_t \ V_{t-1}|, appended with ids old .. old + new - 1
    total: int  # |V_t|
    merges_parent: int
    merges_learned: int
    merges_duplicate: int  # learned merges already in the parent, dropped
    merges_total: int
    merges_protected: int = 0  # learned merges dropped to keep a protected language's tokenization


TOKEN_SETS = ("occurrence", "vocabulary")


@dataclass
class Vocabulary:
    """A vocabulary after a task: the tokenizer plus the per-token task counts TEIR needs.

    ``prior_task_counts[j]`` = c_j, the number of earlier tasks whose tokenised training text contained token j
    (CLIP's original vocabulary counts as one earlier task for its 49,408 tokens); ``task_token_freq[j]`` = the
    occurrences of token j in this task's tokenised training text. ``tasks`` lists the tasks so far, this one
    last; the root (CLIP alone) has none.

    TEIR's token sets can also be read as the paper words them, by membership in the task's new vocabulary V̂_t
    rather than occurrence in its text (``token_set("vocabulary")``): ``task_vocab_member[j]`` = 1 where token j
    is in V̂_t, ``prior_vocab_counts[j]`` = earlier tasks whose V̂ held j (CLIP's vocabulary counting as one).
    None in artifacts written before these were recorded.
    """

    tokenizer: ClipBpeTokenizer
    prior_task_counts: np.ndarray  # int64 [V]
    task_token_freq: np.ndarray  # int64 [V]
    tasks: list[dict] = field(default_factory=list)
    sizes: MergeSizes | None = None
    path: Path | None = None
    prior_vocab_counts: np.ndarray | None = None  # int64 [V]
    task_vocab_member: np.ndarray | None = None  # int64 [V], 0 or 1
    protected_words: tuple[str, ...] | None = None  # WordPiece: words of the tasks so far (kept segmentation)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def parent_size(self) -> int:
        """|V_{t-1}|: rows of the embedding table that exist before this task (the rest are new)."""
        return self.sizes.old if self.sizes is not None else self.vocab_size

    @property
    def languages(self) -> list[str]:
        return [task["lang"] for task in self.tasks]

    def present_token_ids(self) -> np.ndarray:
        """Ids of the tokens that occur in this task's tokenised training text (int64, ascending)."""
        return np.flatnonzero(self.task_token_freq)

    def counts_after_task(self) -> np.ndarray:
        """c_j for the *next* task: the earlier tasks' counts plus one where this task's text has token j."""
        return self.prior_task_counts + (self.task_token_freq > 0).astype(np.int64)

    def vocab_counts_after_task(self) -> np.ndarray | None:
        """Membership counts for the *next* task: earlier new vocabularies plus this one."""
        if self.prior_vocab_counts is None or self.task_vocab_member is None:
            return None
        return self.prior_vocab_counts + self.task_vocab_member

    def token_set(self, kind: str = "occurrence") -> tuple[np.ndarray, np.ndarray]:
        """(ids of the current task's tokens, c_j [V]) for TEIR: ``occurrence`` = tokens in the task's tokenised
        training text, counted over earlier tasks' texts (the authors' code, the default); ``vocabulary`` =
        tokens of the task's new vocabulary V̂_t, counted over earlier new vocabularies (the paper's wording)."""
        if kind == "occurrence":
            return self.present_token_ids(), self.prior_task_counts
        if kind != "vocabulary":
            raise ConfigError(f"--token-sets must be one of {', '.join(TOKEN_SETS)}, got {kind!r}")
        if self.task_vocab_member is None or self.prior_vocab_counts is None:
            raise ConfigError(
                "this vocabulary does not record its new vocabulary's membership (built by an older "
                "mltk); rebuild it to use --token-sets vocabulary",
                self.path,
            )
        return np.flatnonzero(self.task_vocab_member), self.prior_vocab_counts
