"""The frozen CLIP text tower run block by block, with the two changes some baselines make inside attention.

``OpenClipTextTower.forward_embeddings`` runs open_clip's own blocks (``nn.MultiheadAttention``), which cannot be
reached inside. Two baselines need that:

- LoRA (Hu et al. 2022) adds a low-rank term to the query and value projections (or the key's too):
  ``q = W_q h + s B_q A_q h``, ``v = W_v h + s B_v A_v h``;
- prefix-tuning prompts (DualPrompt, Wang et al. 2022; CODA-Prompt, Smith et al. 2023) prepend learned keys and
  values to every head's attention of a block: ``K = [P_k; W_k h]``, ``V = [P_v; W_v h]``, visible to every
  position (the causal mask gains zero columns for them). They add no positions, so the pooled index is unchanged.

``forward_text`` is the same computation as open_clip's ``ResidualAttentionBlock`` (pre-norm attention then MLP,
each with its residual add and layer scale) written with ``F.scaled_dot_product_attention``; without LoRA and
prefixes it equals the tower's own forward up to float rounding (tested).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.models.text import OpenClipTextTower

# qv_delta(block_index, h [B, L, W]) -> (delta_q, delta_v) or (delta_q, delta_k, delta_v), each [B, L, W] or None
QvDelta = Callable[[int, torch.Tensor], tuple[torch.Tensor | None, ...]]
# prefix(block_index) -> (keys [B, P, W], values [B, P, W]) in the projected key/value space, or None
Prefix = Callable[[int], tuple[torch.Tensor, torch.Tensor] | None]
# after_mlp(block_index, mlp_output [B, L, W]) -> [B, L, W], applied before the MLP's residual add
AfterMlp = Callable[[int, torch.Tensor], torch.Tensor]


def attention_block(
    block: nn.Module,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    index: int,
    qv_delta: QvDelta | None = None,
    prefix: Prefix | None = None,
    after_mlp: AfterMlp | None = None,
) -> torch.Tensor:
    """One open_clip ``ResidualAttentionBlock`` on batch-first ``x`` [B, L, W], with optional LoRA, prefix and an
    adapter on the MLP's output."""
    attn: nn.MultiheadAttention = block.attn
    batch, length, width = x.shape
    heads = attn.num_heads
    h = block.ln_1(x)
    q, k, v = F.linear(h, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)  # each [B, L, W]
    if qv_delta is not None:
        deltas = qv_delta(index, h)
        delta_q, delta_k, delta_v = deltas if len(deltas) == 3 else (deltas[0], None, deltas[1])
        q = q + delta_q if delta_q is not None else q
        k = k + delta_k if delta_k is not None else k
        v = v + delta_v if delta_v is not None else v
    prompt = prefix(index) if prefix is not None else None
    if prompt is not None:
        prefix_k, prefix_v = prompt
        k = torch.cat([prefix_k.to(k.dtype), k], dim=1)  # [B, P + L, W]
        v = torch.cat([prefix_v.to(v.dtype), v], dim=1)
        if mask is not None:
            mask = torch.cat([mask.new_zeros(length, prefix_k.shape[1]), mask], dim=1)  # [L, P + L]
    q, k, v = (t.reshape(batch, t.shape[1], heads, width // heads).transpose(1, 2) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype) if mask is not None else None)
    out = out.transpose(1, 2).reshape(batch, length, width)
    x = x + block.ls_1(F.linear(out, attn.out_proj.weight, attn.out_proj.bias))
    hidden = block.mlp(block.ln_2(x))
    if after_mlp is not None:
        hidden = after_mlp(index, hidden)
    return x + block.ls_2(hidden)


def forward_text(
    tower: OpenClipTextTower,
    x: torch.Tensor,
    lengths: torch.Tensor,
    *,
    qv_delta: QvDelta | None = None,
    prefix: Prefix | None = None,
    after_mlp: AfterMlp | None = None,
) -> torch.Tensor:
    """Word embeddings [B, L, W] -> text features [B, D] pooled at position ``lengths - 1`` ([B]; positions added
    here), running every block through ``attention_block``."""
    length = x.shape[1]
    cast_dtype = tower.transformer.get_cast_dtype()
    x = x.to(cast_dtype) + tower.positional_embedding[:length].to(cast_dtype)
    mask = tower.attn_mask[:length, :length] if tower.attn_mask is not None else None
    for index, block in enumerate(tower.blocks):
        x = attention_block(block, x, mask, index, qv_delta, prefix, after_mlp)
    x = tower.ln_final(x[torch.arange(x.shape[0], device=x.device), lengths - 1])  # [B, W]
    proj = tower.text_projection
    return proj(x) if isinstance(proj, nn.Linear) else x @ proj  # [B, D]
