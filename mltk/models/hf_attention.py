"""Attention forms ``HFTextTower`` registers with transformers' attention interface, each for the duration of a
forward only (the model's config names plain SDPA again afterwards, so nothing saved from it names mltk's forms).

- ``FP32_SDPA``: transformers' own SDPA attention with query, key and value in fp32 and autocast off. Under CPU
  autocast the layers' matrix products run in bf16 but attention in fp32: PyTorch's CPU flash attention is about
  10x slower backward in bf16 than in fp32 (measured on all-MiniLM-L6-v2, batch 64 x 30 tokens).
- ``PACKED_SDPA``: the real tokens of a batch packed end to end. Everything a BERT-style layer does but attention
  treats tokens one by one (the dense layers, GELU, the residual adds, LayerNorm; MLA's acquirers after a layer
  too), so a batch can run its layers as one sequence ``[1, T, W]`` of its ``T`` real tokens, with no padding at
  all. Attention alone needs the rows apart: ``PackedRows`` orders the rows by length, so each length group's
  tokens are one stretch of the sequence, and ``packed_sdpa`` unpacks each group to its own longest row, runs SDPA
  with the group's padding mask (in fp32 under CPU autocast, as ``FP32_SDPA``) and packs the output back. The
  ``attention_mask`` the layers pass through to it is the ``PackedRows`` itself. On all-MiniLM-L6-v2's NLT step
  (batch 64 of Multi30K German, four length groups) the groups still padded 23% of the tokens the layers ran on;
  packed, none.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F

FP32_SDPA = "mltk_fp32_sdpa"
PACKED_SDPA = "mltk_packed_sdpa"


class PackedRows:
    """A batch of rows of ``lengths`` [B] real tokens, packed end to end in order of length (shortest first), and
    the same rows as ``groups`` length groups (one when the batch has fewer than ``2 * groups`` rows), each padded
    to its own longest row, for attention: ``P`` padded slots in all."""

    def __init__(self, lengths: torch.Tensor, groups: int):
        self.batch = len(lengths)
        self.order = torch.argsort(lengths, stable=True)  # [B] the packed order of the rows
        self.inverse = torch.argsort(self.order)
        ordered = lengths[self.order]
        self.length = int(ordered[-1])  # the longest row
        self.index = _real_slots(ordered, self.length)  # [T] positions of the real tokens in [B * L]
        parts = ordered.tensor_split(groups if self.batch >= 2 * groups else 1)
        longest = torch.stack([part[-1] for part in parts]).tolist()  # one host sync for all groups
        self.shapes = [(len(part), length) for part, length in zip(parts, longest)]  # (rows, longest) per group
        starts = torch.cumsum(ordered, 0) - ordered  # [B] first token of each row in the packed sequence
        gather, real, offset = [], [], 0
        for part, first, length in zip(parts, starts.tensor_split(len(parts)), longest):
            position = torch.arange(length, device=lengths.device)[None, :]  # [1, L_g]
            inside = position < part[:, None]  # [b, L_g]
            gather.append(torch.where(inside, first[:, None] + position, first[:1, None]).flatten())
            real.append(inside.flatten().nonzero().squeeze(1) + offset)
            offset += inside.numel()
        # each group slot reads its token, a padded slot any token of the group (a masked key, a dropped query)
        self.gather = torch.cat(gather)  # [P] packed token of each slot of the groups
        self.scatter = torch.cat(real)  # [T] the slot of each packed token
        self.masks = [
            (torch.arange(length, device=lengths.device)[None, :] < part[:, None])[:, None, None, :]
            for part, length in zip(parts, longest)
        ]  # [b, 1, 1, L_g] True where a key is a real token

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L', ...] in batch order (L' >= the longest row) -> [T, ...], the real tokens in packed order."""
        return x[self.order, : self.length].flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """[T, ...] -> [B, L, ...] in batch order, zeros at padding."""
        padded = x.new_zeros(self.batch * self.length, *x.shape[1:]).index_copy(0, self.index, x)
        return padded.view(self.batch, self.length, *x.shape[1:])[self.inverse]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float | None) -> torch.Tensor:
        """Packed [T, H, d] query, key and value -> attention output [T, H, d], each row attending within itself."""
        sizes = [rows * length for rows, length in self.shapes]
        grouped = [t.index_select(0, self.gather).split(sizes) for t in (q, k, v)]  # per group [b * L_g, H, d]
        out = []
        for (rows, length), mask, *qkv in zip(self.shapes, self.masks, *grouped):
            qkv = [t.view(rows, length, *t.shape[1:]).transpose(1, 2) for t in qkv]  # [b, H, L_g, d]
            attended = F.scaled_dot_product_attention(*qkv, attn_mask=mask, scale=scaling)
            out.append(attended.transpose(1, 2).flatten(0, 1))  # [b * L_g, H, d]
        return torch.cat(out).index_select(0, self.scatter)


def _real_slots(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """Positions of the real tokens of rows of ``lengths`` in their padded layout [B * length]."""
    return (torch.arange(length, device=lengths.device)[None, :] < lengths[:, None]).flatten().nonzero().squeeze(1)


def packed_sdpa(module, query, key, value, attention_mask: PackedRows, dropout: float = 0.0, scaling=None, **kwargs):
    """Attention of a packed sequence: query, key and value [1, H, T, d] -> output [1, T, H, d], each length group
    of ``attention_mask`` (a ``PackedRows``) attending within its rows only. fp32 under CPU autocast."""
    if dropout:
        raise ValueError("packed attention runs without dropout (a frozen tower in eval mode)")
    upcast = query.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", enabled=False) if upcast else contextlib.nullcontext():
        q, k, v = (t[0].transpose(0, 1).float() if upcast else t[0].transpose(0, 1) for t in (query, key, value))
        out = attention_mask.attend(q, k, v, scaling)  # [T, H, d]
    return out[None].to(query.dtype), None


def _fp32_sdpa(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention with query, key and value [B, H, L, d] in fp32 and autocast off; the output
    returns in the query's dtype."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    with torch.autocast("cpu", enabled=False):
        out, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return out.to(query.dtype), weights


@functools.cache
def register_attention() -> bool:
    """Registers ``FP32_SDPA`` and ``PACKED_SDPA`` with transformers (with SDPA's mask); False on a transformers
    without the attention registry, where the layers keep their own attention and batches their padding."""
    try:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
    except ImportError:
        return False
    AttentionInterface.register(FP32_SDPA, _fp32_sdpa)
    AttentionMaskInterface.register(FP32_SDPA, sdpa_mask)
    AttentionInterface.register(PACKED_SDPA, packed_sdpa)
    return True


@contextlib.contextmanager
def attention_named(config, name: str):
    """The layers of ``config``'s model attend by the registered form ``name`` for the duration."""
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
