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
from typing import Any, Literal

import torch
import torch.nn as nn

from mltk.continual.base import ContinualMethod
from mltk.continual.blocks import forward_text
from mltk.models.acquirer import AcquirerStack


@dataclass(frozen=True)
class AdapterOptions:
    reduction: int = 2  # bottleneck = width / reduction (MLA.json: reduction_factor 2)
    position: Literal["mlp", "block"] = "mlp"  # on the MLP's output, or after the block's residual add

    def check(self) -> str | None:
        return "reduction must be at least 1" if self.reduction < 1 else None


class LanguageAdapters(ContinualMethod):
    name = "mla"
    needs_task_identity = True
    description = "MLA adapters, one stack per language, chosen by the caption's language (task identity)"
    Options = AdapterOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.adapters = nn.ModuleDict()
        self.current: str | None = None

    @property
    def hidden(self) -> int:
        return max(self.width // self.options.reduction, 1)

    def add_language(self, lang: str) -> None:
        if lang not in self.adapters:
            device = next(self.parameters(), torch.zeros(())).device
            self.adapters[lang] = AcquirerStack(self.width, self.num_blocks, self.hidden).to(device)

    def structure(self) -> dict[str, Any]:
        return {"languages": list(self.adapters)}

    def build(self, structure: dict[str, Any]) -> None:
        for lang in structure.get("languages", []):
            self.add_language(lang)

    def begin_task(self, run) -> None:
        self.add_language(run.lang)
        self.current = run.lang
        for lang, stack in self.adapters.items():
            stack.requires_grad_(lang == run.lang)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {}
        return {f"adapters.{self.current}.{k}": p for k, p in self.adapters[self.current].named_parameters()}

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        stack = self.adapters[lang] if lang in self.adapters else None
        if stack is None or self.options.position == "block":
            return encoder.tower.forward_embeddings(x, lengths, after_block=stack)
        return forward_text(encoder.tower, x, lengths, after_mlp=stack)
