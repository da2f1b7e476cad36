"""The non-native side of MLA: a tokenizer for all non-English languages and the shared word embedding.

Three sources, one interface (``NonNativeTokenizer``):

- ``tower``: the frozen tower's own tokenizer and a trainable copy of its own word-embedding table (the natural
  start on a real text tower such as all-MiniLM-L6-v2: the untrained encoder is the frozen tower reading the
  language, and training moves from there);
- a transformers tokenizer by name or path, ``bert-base-multilingual-cased`` as in the paper; its word-embedding
  table can initialise ours (the real download path for users: only the word embeddings are used, no M-BERT
  position or type embeddings);
- a vocabulary artifact built by ``mltk build-vocab`` (CLIP-style BPE), with a randomly initialised table.

Sequences are pooled at the tokenizer's end token (``[SEP]`` for M-BERT, read from the tokenizer, never
hard-coded), at its first occurrence: argmax-of-id pooling would be wrong for these vocabularies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch
import torch.nn as nn

from mltk import artifacts
from mltk.artifacts.content_check import check_content
from mltk.core.download import require_existing_if_local
from mltk.core.errors import ConfigError
from mltk.models.table_gradient import TableGradient, lookup


class NonNativeTokenizer(Protocol):
    kind: str  # "hf" or "vocab"
    source: str  # name or path it was loaded from
    vocab_size: int
    end_token_id: int

    def __call__(self, texts: list[str], context_length: int = 77) -> torch.Tensor: ...  # [B, L] int64


class HFTokenizer:
    """A transformers tokenizer (M-BERT in the paper): ``[CLS] ... [SEP]``, padded to the longest in the batch."""

    kind = "hf"

    def __init__(self, name_or_path: str):
        from transformers import AutoTokenizer

        from mltk.models.hub import from_pretrained

        try:
            self._tok = from_pretrained(AutoTokenizer, name_or_path)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load tokenizer ({str(exc).splitlines()[0]})", name_or_path)
        end = self._tok.sep_token_id if self._tok.sep_token_id is not None else self._tok.eos_token_id
        if end is None:
            raise ConfigError("tokenizer has neither a [SEP] nor an end-of-sequence token", name_or_path)
        self.source = str(name_or_path)
        self.end_token_id = int(end)
        self.vocab_size = len(self._tok)

    @property
    def transformers_tokenizer(self):
        """The transformers tokenizer itself (``mltk export`` saves it beside the model)."""
        return self._tok

    def __call__(self, texts: list[str], context_length: int = 77) -> torch.Tensor:
        encoded = self._tok(
            list(texts), padding="longest", truncation=True, max_length=context_length, return_tensors="pt"
        )
        return encoded["input_ids"].long()

    def word_embeddings(self) -> torch.Tensor:
        """The pretrained word-embedding table of the model that ships with this tokenizer ([V, E])."""
        from transformers import AutoModel

        from mltk.models.hub import from_pretrained

        try:
            model = from_pretrained(AutoModel, self.source)
        except (OSError, ValueError) as error:  # no weights beside the tokenizer, or not downloadable here
            raise ConfigError(
                f"cannot load the word embeddings of {self.source} to initialise the non-native table "
                f"(the paper's M-BERT initialisation, on by default; {type(error).__name__}); pass "
                f"--no-init-embeddings to start from random rows"
            ) from None
        return model.get_input_embeddings().weight.detach().clone()


class VocabTokenizer:
    """An mltk vocabulary artifact (``mltk build-vocab``): CLIP-style BPE grown over languages."""

    kind = "vocab"

    def __init__(self, path: str | Path):
        from mltk.vocab import load_tokenizer

        self.source = str(Path(path).resolve())
        self._tok = load_tokenizer(path)
        self.end_token_id = int(self._tok.eot_token_id)
        self.vocab_size = int(self._tok.vocab_size)

    def __call__(self, texts: list[str], context_length: int = 77) -> torch.Tensor:
        return self._tok(list(texts), context_length=context_length).long()


TOWER_SOURCE = "tower"


class TowerTokenizer:
    """The frozen text tower's own tokenizer; its word-embedding table initialises the non-native one."""

    kind = TOWER_SOURCE
    source = TOWER_SOURCE

    def __init__(self, tower):
        self._tower = [tower]  # a list: not registered as a submodule of whoever holds this tokenizer
        self.vocab_size = int(tower.token_embedding.num_embeddings)
        tokens, lengths = tower.tokenize(["a"])
        self.end_token_id = int(tokens[0, int(lengths[0]) - 1])  # the id every row ends at ([SEP], </s>, CLIP's end)

    def __call__(self, texts: list[str], context_length: int = 77) -> torch.Tensor:
        return self._tower[0].tokenize(list(texts))[0]

    def word_embeddings(self) -> torch.Tensor:
        return self._tower[0].token_embedding.weight.detach().clone().float()


def load_non_native_tokenizer(source: str, tower=None) -> NonNativeTokenizer:
    """``tower`` (the frozen tower's own tokenizer), a vocabulary artifact path, or a transformers tokenizer
    name/path."""
    if source == TOWER_SOURCE:
        if tower is None:
            raise ConfigError("the 'tower' tokenizer needs the frozen text tower")
        return TowerTokenizer(tower)
    if artifacts.is_artifact(source):
        check_content(source, "tokenizer")  # hashed once per file version (mltk.artifacts.content_check)
        return VocabTokenizer(source)
    require_existing_if_local(source, "tokenizer")
    return HFTokenizer(source)


class NonNativeEmbedding(nn.Module):
    """Shared word embedding of all non-native languages, projected to the text width by a linear layer with
    bias; the tower adds its own positions (and token types and embedding LayerNorm) after it.

    ``identity_proj``: the projection starts as the identity (needs ``embed_dim == width``), so a table copied from
    the tower itself reproduces the tower's own word embeddings exactly before training. The table's gradient is
    kept in one buffer from step to step (``mltk.models.table_gradient``)."""

    def __init__(
        self, vocab_size: int, embed_dim: int, width: int, init: torch.Tensor | None = None, identity_proj: bool = False
    ):
        super().__init__()
        self.table = nn.Embedding(vocab_size, embed_dim)
        self.proj = nn.Linear(embed_dim, width)
        self.table_gradient: TableGradient | None = TableGradient()  # None: torch's own embedding backward
        if identity_proj:
            if embed_dim != width:
                raise ConfigError(f"an identity projection needs embed_dim == width ({embed_dim} != {width})")
            with torch.no_grad():
                self.proj.weight.copy_(torch.eye(width))
                self.proj.bias.zero_()
        if init is not None:
            if tuple(init.shape) != (vocab_size, embed_dim):
                raise ConfigError(f"embedding init has shape {tuple(init.shape)}, expected {(vocab_size, embed_dim)}")
            with torch.no_grad():
                self.table.weight.copy_(init)
        else:
            nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids [B, L] -> [B, L, width]. With ``lengths`` [B] (the real tokens of each row) only the real tokens
        are looked up and projected, the padding left at zero: no tower reads a padded position's word embedding
        into a real token's feature, and a batch's padding can outnumber its real tokens (its longest row sets L)."""
        if lengths is None:
            return self.proj(lookup(self.table, tokens, self.table_gradient))
        real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
        words = self.proj(lookup(self.table, tokens[real], self.table_gradient))  # [T, width]
        return words.new_zeros(*tokens.shape, words.shape[-1]).masked_scatter(real[..., None], words)
