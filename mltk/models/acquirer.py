"""MLA's language acquirers (Zhang et al., "Generalizing Multimodal Pre-training into Multilingual via Language
Acquisition").

An acquirer is a residual bottleneck MLP inserted after each block of the frozen text transformer (after both of
the block's residual adds), one stack per language:

    h' = h + W_up(ReLU(W_down(h)))          W_down: width -> 256, W_up: 256 -> width

For ViT-B/32 (width 512, 12 blocks) that is 12 x (512*256 + 256 + 256*512 + 512) = 3,154,944 parameters per language,
the paper's "3.14 MB". ``W_up`` starts at zero, so an untrained acquirer is the identity and training starts from the
frozen tower's own behaviour.

MLA's ablations of the acquirer (``ACQUIRER_KINDS``, recorded as ``acquirer`` in the checkpoint config):

- ``mlp`` (default): the bottleneck above;
- ``linear``: the same bottleneck without the ReLU, ``h' = h + W_up(W_down(h))`` (same parameter count, so the
  comparison isolates the non-linearity);
- ``none``: no acquirer at all; only the non-native embedding is learned (the "embedding only" row).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mltk.core.errors import ConfigError

ACQUIRER_HIDDEN = 256
ACQUIRER_KINDS = ("mlp", "linear", "none")


def check_acquirer_kind(kind: str) -> None:
    if kind not in ACQUIRER_KINDS:
        raise ConfigError(f"--acquirer must be one of {', '.join(ACQUIRER_KINDS)}, got {kind!r}")


class Acquirer(nn.Module):
    def __init__(self, width: int, hidden: int = ACQUIRER_HIDDEN, nonlinear: bool = True):
        super().__init__()
        self.c_fc = nn.Linear(width, hidden)  # W_down
        self.c_proj = nn.Linear(hidden, width)  # W_up
        self.nonlinear = nonlinear
        nn.init.zeros_(self.c_proj.weight)
        nn.init.zeros_(self.c_proj.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # [..., width] -> [..., width]
        down = self.c_fc(h)
        return h + self.c_proj(torch.relu(down) if self.nonlinear else down)


class AcquirerStack(nn.ModuleList):
    """One acquirer per transformer block for one language; ``stack(i, h)`` applies the acquirer of block i.
    ``kind`` "none" holds no acquirer and passes ``h`` through."""

    def __init__(self, width: int, num_blocks: int, hidden: int = ACQUIRER_HIDDEN, kind: str = "mlp"):
        check_acquirer_kind(kind)
        count = 0 if kind == "none" else num_blocks
        super().__init__([Acquirer(width, hidden, nonlinear=kind == "mlp") for _ in range(count)])
        self.kind = kind

    def __call__(self, index: int, h: torch.Tensor) -> torch.Tensor:  # the TextTower after_block hook
        return self[index](h) if len(self) else h


def acquirer_parameter_count(width: int, num_blocks: int, hidden: int = ACQUIRER_HIDDEN) -> int:
    return num_blocks * (width * hidden + hidden + hidden * width + width)
