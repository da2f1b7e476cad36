"""A word's vector in a model's trainable token table and in the frozen English table (AME's word embeddings).

- **Source side** (the lexicon's ``src`` words, a non-English language): the rows of the table the model trains
  for that language. An MLA checkpoint (``train-nlt``, ``train-le``, ``train-ccrk`` on MLA): the shared
  non-native embedding *after its projection*, ``proj(table[ids])`` = ``NonNativeEmbedding(ids)``, so the vector
  lives in the tower's word width W even when the table's own width differs (``--embed-dim``; the projection is
  affine, so the mean of projected rows is the projection of the mean row). A CLL-CLIP checkpoint
  (``train-continual``, ``train-ccrk`` on CLL): the expandable token table ``table[ids]`` [V, W].
- **Target side** (``tgt`` words, English): the frozen base tower's own word embeddings
  ``tower.token_embedding[ids]`` read with the base tokenizer (CLIP's BPE, or the Hugging Face tower's own): the
  English rows the native model was trained with, never updated.

A word is tokenized alone (no context); its content tokens are the ids between the start token and the first end
token (CLIP's ``<start_of_text> ... <end_of_text>``, BERT's ``[CLS] ... [SEP]``). A word of several tokens is the
mean of its tokens' rows (AME's words are single vocabulary entries of fastText; sub-word tables need a choice,
and the mean is the simplest one that keeps every token trained). A word with no content token is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.core.errors import ConfigError
from mltk.models.text import trim_to_lengths


@dataclass(frozen=True)
class WordIds:
    """Token ids of words: ``ids [n, T]`` (padded), ``mask [n, T]`` (True = a content token), ``kept [n0]`` (which
    of the words given have at least one content token; ``ids`` holds those only)."""

    ids: torch.Tensor
    mask: torch.Tensor
    kept: torch.Tensor


def content_tokens(tokens: torch.Tensor, lengths: torch.Tensor) -> WordIds:
    """Rows ``[start, w_1 .. w_m, end, pad ...]`` [n, L] with ``lengths`` = m + 2 -> the content ids."""
    width = max(int(lengths.max()) - 2, 1)
    positions = torch.arange(width).unsqueeze(0)  # [1, T]
    counts = (lengths.cpu() - 2).clamp(min=0)  # [n]
    ids = tokens.cpu()[:, 1 : 1 + width]
    if ids.shape[1] < width:
        ids = F.pad(ids, (0, width - ids.shape[1]))
    mask = positions < counts.unsqueeze(1)  # [n, T]
    kept = counts > 0
    return WordIds(torch.where(mask, ids, torch.zeros_like(ids))[kept], mask[kept], kept)


def mean_rows(rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """rows [n, T, W], mask [n, T] -> the mean of each word's content rows [n, W]."""
    weights = mask.to(rows.dtype).unsqueeze(-1)  # [n, T, 1]
    return (rows * weights).sum(1) / weights.sum(1).clamp(min=1.0)


class WordTables:
    """The two tables of one model and one source language (see the module docstring)."""

    def __init__(self, encoder: nn.Module, src_lang: str):
        self.encoder, self.src_lang = encoder, src_lang
        if src_lang == getattr(encoder, "native_lang", "en"):
            raise ConfigError(
                "the lexicon's source language must be a learnt (non-English) language; its target "
                "is the frozen English table"
            )
        self.is_mla = hasattr(encoder, "embedding") and hasattr(encoder, "non_native")
        if not self.is_mla and not hasattr(encoder, "table"):
            raise ConfigError(
                f"{type(encoder).__name__} has no trainable token table (an MLA or CLL-CLIP checkpoint has one)"
            )

    @property
    def parameter(self) -> nn.Parameter:
        """The trainable tensor the source vectors read (a stage must train it for the alignment to act)."""
        return self.encoder.embedding.table.weight if self.is_mla else self.encoder.table

    @property
    def device(self) -> torch.device:
        return self.parameter.device

    def source_ids(self, words: list[str]) -> WordIds:
        tokens = self.encoder.tokenize(list(words), self.src_lang)
        if self.is_mla:
            _, lengths = trim_to_lengths(tokens, self.encoder.non_native.end_token_id)
        else:
            lengths = self.encoder.tower.lengths(tokens)
        return content_tokens(tokens, lengths)

    def english_ids(self, words: list[str]) -> WordIds:
        tokens, lengths = self.encoder.tower.tokenize(list(words))
        return content_tokens(tokens, lengths)

    def source_vectors(self, words: WordIds) -> torch.Tensor:
        """[n, W], differentiable in the trainable table."""
        ids, mask = words.ids.to(self.device), words.mask.to(self.device)
        rows = self.encoder.embedding(ids) if self.is_mla else F.embedding(ids, self.encoder.table)
        return mean_rows(rows.float(), mask)

    def english_vectors(self, words: WordIds) -> torch.Tensor:
        """[n, W], frozen."""
        ids, mask = words.ids.to(self.device), words.mask.to(self.device)
        with torch.no_grad():
            return mean_rows(self.encoder.tower.token_embedding(ids).float(), mask)
