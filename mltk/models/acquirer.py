"""MLA's language acquirers (Zhang et al., "Generalizing Multimodal Pre-training into Multilingual via Language
Acquisition").

An acquirer is a residual bottleneck MLP inserted after each block of the frozen text transformer (after both of
the block's residual adds), one stack per language:

    h' = h + W_up(ReLU(W_down(h)))          W_down: width -> 256, W_up: 256 -> width

For ViT-B/32 (width 512, 12 blocks) that is 12 x (512*256 + 256 + 256*512 + 512) = 3,154,944 parameters per language,
the paper's "3.14 MB". ``W_up`` starts at zero, so an untrained acquirer is the identity and training starts from the
frozen tower's own behaviour.
"""

from __future__ import annotations

import torch
import torch.nn as nn

ACQUIRER_HIDDEN = 256


class Acquirer(nn.Module):
    def __init__(self, width: int, hidden: int = ACQUIRER_HIDDEN):
        super().__init__()
        self.c_fc = nn.Linear(width, hidden)  # W_down
        self.c_proj = nn.Linear(hidden, width)  # W_up
        nn.init.zeros_(self.c_proj.weight)
        nn.init.zeros_(self.c_proj.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # [..., width] -> [..., width]
        return h + self.c_proj(torch.relu(self.c_fc(h)))


class AcquirerStack(nn.ModuleList):
    """One acquirer per transformer block for one language; ``stack(i, h)`` applies the acquirer of block i."""

    def __init__(self, width: int, num_blocks: int, hidden: int = ACQUIRER_HIDDEN):
        super().__init__([Acquirer(width, hidden) for _ in range(num_blocks)])

    def __call__(self, index: int, h: torch.Tensor) -> torch.Tensor:  # the TextTower after_block hook
        return self[index](h)


def acquirer_parameter_count(width: int, num_blocks: int, hidden: int = ACQUIRER_HIDDEN) -> int:
    return num_blocks * (width * hidden + hidden + hidden * width + width)
