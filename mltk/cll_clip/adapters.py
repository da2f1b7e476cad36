"""MLA adapters per language inside CLL-CLIP: each task language gets its own stack of bottleneck adapters.

As the CLL-CLIP authors ran the MLA baseline (their ``adapters/configs/MLA.json``: an output adapter, ReLU,
reduction factor 2): in every block of the frozen tower the MLP's output m = MLP(LN_2(x)) passes through

    m' = m + W_up(ReLU(W_down(m)))          W_down: width -> width / reduction, W_up: back to width

before the block's residual add (``position=mlp``, the design notes' "after the MLP"). ``position=block`` puts the
adapter after the block's residual add instead (MLA's own acquirer placement, ``mltk.models.acquirer``; it is also
what adapter-transformers computes for an output adapter with ``original_ln_before`` and no layer norm to pass).
W_up starts at zero, so a new adapter is the identity.

Task t trains its own stack together with the table; the stacks of earlier languages are frozen, so they never
change again. At test time a caption goes through the stack of its language: the method needs the task identity
(the language), and says so in its checkpoint and in ``continual.json``. A language without a stack (never
trained) goes through the tower alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn

from mltk.cll_clip.base import PerLanguageMethod
from mltk.cll_clip.blocks import forward_text
from mltk.models.acquirer import AcquirerStack


@dataclass(frozen=True)
class AdapterOptions:
    reduction: int = 2  # bottleneck = width / reduction (MLA.json: reduction_factor 2)
    position: Literal["mlp", "block"] = "mlp"  # on the MLP's output, or after the block's residual add

    def check(self) -> str | None:
        return "reduction must be at least 1" if self.reduction < 1 else None


class LanguageAdapters(PerLanguageMethod):
    name = "mla"
    description = "MLA adapters, one stack per language, chosen by the caption's language (task identity)"
    Options = AdapterOptions
    modules_name = "adapters"

    @property
    def hidden(self) -> int:
        return max(self.width // self.options.reduction, 1)

    def new_module(self, lang: str) -> nn.Module:
        return AcquirerStack(self.width, self.num_blocks, self.hidden)

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        stack = self.adapters[lang] if lang in self.adapters else None
        if stack is None or self.options.position == "block":
            return encoder.tower.forward_embeddings(x, lengths, after_block=stack)
        return forward_text(encoder.tower, x, lengths, after_mlp=stack)
