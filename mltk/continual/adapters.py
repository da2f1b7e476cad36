"""MLA adapters per language: each task language gets its own stack of MLA acquirers (Zhang et al. 2023).

An acquirer ``h + W_up(ReLU(W_down(h)))`` follows every block of the frozen tower (``mltk.models.acquirer``; it
starts as the identity because W_up starts at zero). Task t trains its own stack together with the table; the
stacks of earlier languages are frozen, so they never change again. At test time a caption goes through the
stack of its language: the method needs the task identity (the language), and says so in its checkpoint and in
``continual.json``. A language without a stack (never trained) goes through the tower alone.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from mltk.continual.base import ContinualMethod
from mltk.models.acquirer import AcquirerStack


class LanguageAdapters(ContinualMethod):
    name = "mla"
    needs_task_identity = True
    description = "MLA acquirers, one stack per language, chosen by the caption's language (task identity)"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.adapters = nn.ModuleDict()
        self.current: str | None = None

    def add_language(self, lang: str) -> None:
        if lang not in self.adapters:
            device = next(self.parameters(), torch.zeros(())).device
            self.adapters[lang] = AcquirerStack(self.width, self.num_blocks, self.options.adapter_hidden).to(device)

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
        return encoder.tower.forward_embeddings(x, lengths, after_block=stack)
