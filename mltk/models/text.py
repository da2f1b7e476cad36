"""Text towers with the per-block loop exposed and batches trimmed to their longest sequence.

CLIP's text tower uses a causal mask and reads one position (the end token), so positions after the longest
end token in a batch never influence the result: cutting the batch to ``max(end position) + 1`` tokens instead of
the full context of 77 gives the same embeddings (up to float rounding) at a fraction of the cost.

One long caption still makes a whole batch long, so a batch runs as ``LENGTH_BUCKETS`` groups of captions of
similar length, each cut to its own longest caption. Each caption's forward is independent of the others, so the
features, and hence losses and gradients, are those of one batch, for fewer padded tokens.

``TextTower`` is the one interface every stage and text encoder uses to reach a text tower: a batch is token ids
``[B, L]`` (padded on the right) plus ``lengths [B]``, the real tokens of each row with the special tokens (CLIP:
end position + 1), so causal and bidirectional towers alike can trim a batch and know where padding starts. MLA
inserts acquirers through ``after_block``; CLL-CLIP grows the table behind ``embed_tokens``; prompt and LoRA
methods that change attention inside a block reach the blocks through ``blocks``. ``OpenClipTextTower`` is the
open_clip implementation; ``mltk.models.towers`` builds a tower from a ``--model`` string.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch
import torch.nn as nn

# after_block(block_index, hidden [B, L, W]) -> hidden [B, L, W], token by token: a frozen Hugging Face tower hands it
# the batch's real tokens packed end to end, [1, T, W] (``HFTextTower.forward_embeddings``)
AfterBlock = Callable[[int, torch.Tensor], torch.Tensor]

LENGTH_BUCKETS = 4  # a batch of at least 2 * LENGTH_BUCKETS captions runs as this many groups of similar length
POOLINGS = ("end", "mean", "cls")


class TextTower(Protocol):
    width: int  # hidden width W of the blocks
    output_dim: int  # D, the feature size
    num_blocks: int
    context_length: int  # most tokens a row may have
    pooling: str  # "end" (at the end token), "mean" (over the real tokens) or "cls"
    token_embedding: nn.Embedding  # the word-embedding table only (no positions, no token types)

    @property
    def blocks(self) -> nn.ModuleList: ...

    def tokenize(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]: ...  # (tokens [B, L], lengths [B])

    def lengths(self, tokens: torch.Tensor) -> torch.Tensor: ...  # lengths [B] of rows this tower's tokenize gave

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor: ...  # [B, L] -> [B, L, W]

    def forward_embeddings(
        self, x: torch.Tensor, lengths: torch.Tensor, after_block: AfterBlock | None = None
    ) -> torch.Tensor: ...  # [B, L, W] -> [B, D]

    def encode(
        self, tokens: torch.Tensor, lengths: torch.Tensor, after_block: AfterBlock | None = None
    ) -> torch.Tensor: ...  # [B, L] -> [B, D]


def end_positions(tokens: torch.Tensor, end_token_id: int) -> torch.Tensor:
    """Index of the FIRST end token in each row ([B, L] -> [B]).

    Not argmax of the ids: after a vocabulary is expanded, the end token is no longer the largest id.
    Rows without an end token (truncated input) pool at their last position.
    """
    is_end = tokens == end_token_id
    first = is_end.int().argmax(dim=-1)
    return torch.where(is_end.any(dim=-1), first, torch.full_like(first, tokens.shape[1] - 1))


class OpenClipTextTower(nn.Module):
    """The text half of an open_clip ``CLIP``, sharing (not copying) its parameters. Causal, pooled at the end
    token (position ``length - 1``); ``tokenizer`` (open_clip's, ``list[str] -> [B, context]``) serves
    ``tokenize``."""

    pooling = "end"

    def __init__(self, clip: nn.Module, end_token_id: int = 49407, tokenizer: Callable | None = None):
        super().__init__()
        self.token_embedding = clip.token_embedding
        self.positional_embedding = clip.positional_embedding
        self.transformer = clip.transformer
        self.ln_final = clip.ln_final
        self.text_projection = clip.text_projection
        self.register_buffer("attn_mask", clip.attn_mask, persistent=False)
        self.end_token_id = end_token_id
        self.tokenizer = tokenizer
        self.width = clip.transformer.width
        self.context_length = clip.positional_embedding.shape[0]
        self.num_blocks = len(clip.transformer.resblocks)
        proj = clip.text_projection
        self.output_dim = proj.out_features if isinstance(proj, nn.Linear) else proj.shape[1]
        self._batch_first = getattr(clip.transformer, "batch_first", False)

    @property
    def blocks(self) -> nn.ModuleList:
        return self.transformer.resblocks

    def tokenize(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Texts -> (tokens [B, L], lengths [B]) with CLIP's tokenizer, cut to the longest row."""
        if self.tokenizer is None:
            raise ValueError("this OpenClipTextTower was built without a tokenizer")
        return trim_to_lengths(self.tokenizer(list(texts)), self.end_token_id)

    def lengths(self, tokens: torch.Tensor) -> torch.Tensor:
        """Lengths [B] of CLIP token rows [B, L]: the first end token's position + 1."""
        return end_positions(tokens, self.end_token_id) + 1

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids [B, L] -> word embeddings [B, L, W] (no positions)."""
        return self.token_embedding(tokens)

    def forward_embeddings(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor,
        after_block: AfterBlock | None = None,
        buckets: int = LENGTH_BUCKETS,
    ) -> torch.Tensor:
        """Word embeddings [B, L, W] -> text features [B, D], pooled at position ``lengths - 1`` ([B]).

        Positions are added here. ``after_block(i, h)`` runs after block i (after both of its residual adds) and
        must treat rows independently: it sees one length group of the batch at a time.
        """
        pool_index = lengths - 1
        if buckets <= 1 or len(x) < 2 * buckets:
            return self._forward_trimmed(x, pool_index, after_block)
        order = torch.argsort(pool_index, stable=True)  # [B], shortest first
        groups = order.tensor_split(buckets)
        longest = torch.stack([pool_index[group[-1]] for group in groups])  # sorted: a group's last is its longest
        group_lengths = (longest + 1).tolist()  # one host sync for all groups
        features = torch.cat(
            [
                self._forward_trimmed(x[group], pool_index[group], after_block, length)
                for group, length in zip(groups, group_lengths)
            ]
        )
        return features[torch.argsort(order)]  # back to batch order

    def _forward_trimmed(
        self, x: torch.Tensor, pool_index: torch.Tensor, after_block: AfterBlock | None, length: int | None = None
    ) -> torch.Tensor:
        """``forward_embeddings`` on one group, cut to its longest sequence (``length``, computed when not
        given): [B, L, W] -> [B, D]."""
        if length is None:
            length = int(pool_index.max().item()) + 1
        x = x[:, :length]
        cast_dtype = self.transformer.get_cast_dtype()
        x = x.to(cast_dtype) + self.positional_embedding[:length].to(cast_dtype)
        mask = self.attn_mask[:length, :length] if self.attn_mask is not None else None
        if not self._batch_first:
            x = x.transpose(0, 1)  # [B, L, W] -> [L, B, W]
        for index, block in enumerate(self.transformer.resblocks):
            x = block(x, attn_mask=mask)
            if after_block is not None:
                x = after_block(index, x)
        if not self._batch_first:
            x = x.transpose(0, 1)
        x = x[torch.arange(x.shape[0], device=x.device), pool_index]  # [B, W]
        x = self.ln_final(x)  # layer norm is per position: pooling first is exact and cheaper
        proj = self.text_projection
        return proj(x) if isinstance(proj, nn.Linear) else x @ proj  # [B, D]

    def encode(
        self, tokens: torch.Tensor, lengths: torch.Tensor | None = None, after_block: AfterBlock | None = None
    ) -> torch.Tensor:
        """Token ids [B, L] -> text features [B, D], each length group trimmed to its longest sequence.
        ``lengths`` None: found from the first end token of each row."""
        if lengths is None:
            lengths = self.lengths(tokens)
        longest = int(lengths.max().item())
        return self.forward_embeddings(self.embed_tokens(tokens[:, :longest]), lengths, after_block)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encode(tokens)


def trim_tokens(tokens: torch.Tensor, end_token_id: int = 49407) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut a token batch to its longest sequence: returns (tokens [B, L'], end positions [B])."""
    pool_index = end_positions(tokens, end_token_id)
    return tokens[:, : int(pool_index.max().item()) + 1], pool_index


def trim_to_lengths(tokens: torch.Tensor, end_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut a token batch to its longest sequence: returns (tokens [B, L'], lengths [B] = end position + 1), the
    ``TextTower`` description of a batch whose rows end at their first ``end_token_id``."""
    trimmed, pool_index = trim_tokens(tokens, end_token_id)
    return trimmed, pool_index + 1
