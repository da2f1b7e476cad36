"""LoRA on the query and value projections of the text attention (Hu et al. 2022), one set per task.

In every block, ``q = W_q h + (alpha / r) B_q A_q drop(h)`` and ``v = W_v h + (alpha / r) B_v A_v drop(h)`` with A
[r, W] initialised like ``nn.Linear`` (Kaiming uniform) and B [W, r] at zero, so a new set starts from the frozen
tower exactly. The CLL-CLIP authors' ``adapters/configs/lora.json``: r 8, alpha 8, dropout 0, on q and v (the
default ``targets=q+v``); the paper's appendix says key and value instead (``targets=k+v``; any of q, k, v).

Task-specific, as CLL-CLIP ran it: each task (language) adds its own set, trained with the table in that task and
frozen afterwards; at evaluation a caption goes through the set of its language (the task identity, recorded as
``needs_task_identity`` in the checkpoint and the report). A language without a set goes through the tower alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.cll_clip.base import PerLanguageMethod
from mltk.cll_clip.blocks import forward_text
from mltk.cll_clip.options import LoraOptions


class LoraSet(nn.Module):
    """The low-rank weights of one task: ``down`` (A) [blocks, T, r, W] and ``up`` (B) [blocks, T, W, r], T the
    targets in q, k, v order (q and v: index 0 the query, 1 the value)."""

    def __init__(self, blocks: int, width: int, rank: int, generator: torch.Generator, targets: int = 2):
        super().__init__()
        bound = 1.0 / math.sqrt(width)  # kaiming_uniform_(a=sqrt(5)) of an nn.Linear(width, rank)
        self.down = nn.Parameter((torch.rand(blocks, targets, rank, width, generator=generator) * 2 - 1) * bound)
        self.up = nn.Parameter(torch.zeros(blocks, targets, width, rank))


class LoraMethod(PerLanguageMethod):
    name = "lora"
    description = "LoRA (r 8, alpha 8) on q and v, one set per language chosen by the caption's language"
    Options = LoraOptions
    modules_name = "sets"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scale = self.options.alpha / self.options.rank

    def new_module(self, lang: str) -> nn.Module:
        generator = torch.Generator().manual_seed(self.seed * 7919 + len(self.sets))
        return LoraSet(self.num_blocks, self.width, self.options.rank, generator, len(self.options.projections))

    def qv_delta(self, lora: LoraSet, index: int, h: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """(delta_q, delta_k, delta_v) [B, L, W] of block ``index`` for its normalised input ``h`` [B, L, W]
        (None for a projection without LoRA)."""
        down, up = lora.down[index].to(h.dtype), lora.up[index].to(h.dtype)  # [T, r, W], [T, W, r]
        h = F.dropout(h, self.options.dropout, self.training) if self.options.dropout else h
        low = torch.einsum("blw,krw->kblr", h, down)  # [T, B, L, r]
        delta = torch.einsum("kblr,kwr->kblw", low, up) * self.scale  # [T, B, L, W]
        by_name = dict(zip(self.options.projections, delta))
        return by_name.get("q"), by_name.get("k"), by_name.get("v")

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        if lang not in self.sets:
            return encoder.tower.forward_embeddings(x, lengths)
        lora = self.sets[lang]
        return forward_text(encoder.tower, x, lengths, qv_delta=lambda index, h: self.qv_delta(lora, index, h))
