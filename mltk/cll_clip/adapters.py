"""MLA adapters per language inside CLL-CLIP: each task language gets its own stack of bottleneck adapters.

As the CLL-CLIP authors ran the MLA baseline (their ``adapters/configs/MLA.json``: an output adapter, ReLU,
reduction factor 2, under the ``adapters`` 0.1.0 library they pin): in every block of the frozen tower the
adapter reads the block's output y = x + MLP(LN_2(x)) and adds its bottleneck to it,

    y' = y + W_up(ReLU(W_down(y)))          W_down: width -> width / reduction, W_up: back to width

(``position=block``, the default). That is what ``adapters`` computes for an output adapter with
``original_ln_before`` and ``residual_before_ln`` (their defaults) when the block hands it no layer norm, as CLIP's
does: the adapter's input is MLP(x) + x, its residual MLP(x), and x is added back after it. ``position=mlp`` puts
the adapter on the MLP's output m = MLP(LN_2(x)) before the residual add instead, ``m' = m + W_up(ReLU(W_down(m)))``
(the design notes' "after the MLP", mltk's earlier default).

Initialisation (``init``): ``bert``, AdapterHub's default ``init_weights``: W_down and W_up ~ N(0, 0.02), biases
zero; ``zero``: W_down as ``nn.Linear``'s default and W_up zero, so a new adapter starts as the identity (mltk's
earlier default, AdapterHub's ``mam_adapter`` idea).

Task t trains its own stack together with the table; the stacks of earlier languages are frozen, so they never
change again. At test time a caption goes through the stack of its language: the method needs the task identity
(the language), and says so in its checkpoint and in ``continual.json``. A language without a stack (never
trained) goes through the tower alone.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mltk.cll_clip.base import PerLanguageMethod
from mltk.cll_clip.blocks import forward_text
from mltk.cll_clip.options import AdapterOptions
from mltk.models.acquirer import AcquirerStack


def bert_init(module: nn.Module, generator: torch.Generator, std: float = 0.02) -> None:
    """AdapterHub's ``init_bert_weights``: every linear weight ~ N(0, std), every bias zero."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * std)
                if layer.bias is not None:
                    layer.bias.zero_()


class LanguageAdapters(PerLanguageMethod):
    name = "mla"
    description = "MLA adapters, one stack per language, chosen by the caption's language (task identity)"
    Options = AdapterOptions
    modules_name = "adapters"

    @property
    def hidden(self) -> int:
        return max(self.width // self.options.reduction, 1)

    def new_module(self, lang: str) -> nn.Module:
        stack = AcquirerStack(self.width, self.num_blocks, self.hidden)
        if self.options.init == "bert":
            generator = torch.Generator().manual_seed(self.seed * 7919 + len(self.adapters))
            bert_init(stack, generator)
        return stack

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        stack = self.adapters[lang] if lang in self.adapters else None
        if stack is None or self.options.position == "block":
            return encoder.tower.forward_embeddings(x, lengths, after_block=stack)
        return forward_text(encoder.tower, x, lengths, after_mlp=stack)
