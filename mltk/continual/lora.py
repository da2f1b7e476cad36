"""LoRA on the query and value projections of the text attention (Hu et al. 2022), trained through all tasks.

In every block, ``q = W_q h + (alpha / r) B_q A_q h`` and ``v = W_v h + (alpha / r) B_v A_v h`` with A [r, W]
initialised like ``nn.Linear`` (Kaiming uniform) and B [W, r] at zero, so training starts from the frozen tower
exactly (the CLL-CLIP paper: r = 8 on q and v). One set of low-rank weights is shared by all languages and keeps
training, task after task, beside the table.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from mltk.continual.base import ContinualMethod
from mltk.continual.blocks import forward_text


class LoraMethod(ContinualMethod):
    name = "lora"
    description = "LoRA (rank r) on the query and value projections of every text block"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rank, width, blocks = self.options.lora_rank, self.width, self.num_blocks
        generator = torch.Generator().manual_seed(self.seed)
        bound = 1.0 / math.sqrt(width)  # kaiming_uniform_(a=sqrt(5)) of an nn.Linear(width, rank)
        self.down = nn.Parameter((torch.rand(blocks, 2, rank, width, generator=generator) * 2 - 1) * bound)  # A
        self.up = nn.Parameter(torch.zeros(blocks, 2, width, rank))  # B; index 0 = query, 1 = value
        self.scale = self.options.lora_alpha / rank

    def trainable(self) -> dict[str, nn.Parameter]:
        return {"down": self.down, "up": self.up}

    def qv_delta(self, index: int, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(delta_q, delta_v) [B, L, W] of block ``index`` for its normalised input ``h`` [B, L, W]."""
        down, up = self.down[index].to(h.dtype), self.up[index].to(h.dtype)  # [2, r, W], [2, W, r]
        low = torch.einsum("blw,krw->kblr", h, down)  # [2, B, L, r]
        delta = torch.einsum("kblr,kwr->kblw", low, up) * self.scale  # [2, B, L, W]
        return delta[0], delta[1]

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        return forward_text(encoder.tower, x, lengths, qv_delta=self.qv_delta)
