"""What a continual-learning method may add to CLL-CLIP training, and the options of all of them.

Every method trains CLL-CLIP's token-embedding table (with or without TEIR) and its temperature; a baseline adds
its own mechanism through the hooks of ``ContinualMethod``, which plain CLL-CLIP leaves empty:

- ``begin_task(run)``: before training task t (add a language's adapter, a task's prompt; build replay data);
- ``trainable()``: its tensors that train in the current task, besides the table and the temperature;
- ``encode(encoder, x, lengths, lang)``: the text forward from word embeddings [B, L, W] to features [B, D];
- ``extra_loss(run, step)``: a term added to the task loss (EWC penalty, replay, prompt-key matching);
- ``end_task(run)``: after the best epoch of task t is restored (Fisher information, reservoir update).

``run`` is the task being trained (``mltk.train.continual.task.CllClipTask``): it exposes ``encoder``, ``index``,
``lang``, ``corpus`` (every training example of every task language), ``pair_loss`` and ``data_loss``.

A method's state has two parts: ``state_tensors()`` (what encoding needs; saved in the checkpoint, rebuilt from
``structure()``) and ``training_state()`` (what later tasks need, such as a Fisher matrix or a replay buffer;
saved at each task boundary so a run resumes there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn as nn


@dataclass(frozen=True)
class MethodOptions:
    """Hyperparameters of the baselines (defaults: the CLL-CLIP paper's where it gives them)."""

    ewc_lambda: float = 1000.0  # oEWC penalty weight (paper)
    ewc_gamma: float = 1.0  # oEWC decay of earlier tasks' Fisher (paper)
    fisher_batches: int = 32  # batches that estimate the Fisher information after a task
    memory_size: int = 8000  # ER/DER reservoir capacity (paper: 8K)
    replay_batch: int | None = None  # replayed examples per step (default: the batch size)
    der_alpha: float = 0.5  # DER weight of the stored-feature regression
    adapter_hidden: int = 256  # MLA acquirer bottleneck (MLA paper)
    lora_rank: int = 8  # LoRA rank on q and v (paper)
    lora_alpha: float = 16.0  # LoRA scale alpha / rank
    ptuning_length: int = 30  # P-Tuning prompt length (paper: prefix 30)
    dual_g_length: int = 5  # DualPrompt general prompt length (DualPrompt paper)
    dual_e_length: int = 5  # DualPrompt expert prompt length (DualPrompt paper)
    dual_g_layers: tuple[int, ...] = (0, 1)  # DualPrompt: blocks with the general prompt
    dual_e_layers: tuple[int, ...] = (2, 3, 4)  # DualPrompt: blocks with the expert prompt
    pull_weight: float = 1.0  # DualPrompt key-query matching loss weight
    coda_components: int = 10  # CODA-Prompt components added per task (paper: 100 for 10 tasks)
    coda_length: int = 8  # CODA-Prompt prompt length (paper)
    coda_layers: tuple[int, ...] = (0, 1, 2, 3, 4)  # CODA-Prompt blocks with prompts (paper)


class ContinualMethod(nn.Module):
    """Plain CLL-CLIP: the table alone; every hook does nothing. Baselines override what they need."""

    name: ClassVar[str] = "cll-clip"
    needs_task_identity: ClassVar[bool] = False
    description: ClassVar[str] = "plain CLL-CLIP: only the token-embedding table (and the temperature) trains"

    def __init__(self, options: MethodOptions, width: int, num_blocks: int, output_dim: int, seed: int = 0):
        super().__init__()
        self.options = options
        self.width, self.num_blocks, self.output_dim, self.seed = width, num_blocks, output_dim, seed
        self.auxiliary_loss: torch.Tensor | None = None  # set by ``encode`` in training mode (prompt matching)

    # --- structure: what is needed to rebuild the method's modules from a checkpoint -----------------------------

    @property
    def reserved_positions(self) -> int:
        """Context positions the method takes from the text (P-Tuning's prompt)."""
        return 0

    def structure(self) -> dict[str, Any]:
        return {}

    def build(self, structure: dict[str, Any]) -> None:
        """Recreate the modules described by ``structure`` (before ``load_state_tensors``)."""

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach() for name, tensor in self.state_dict().items()}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        self.load_state_dict(tensors, strict=True)

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return {}, {}

    def load_training_state(self, tensors: dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        """Restore what ``training_state`` saved."""

    # --- hooks ----------------------------------------------------------------------------------------------------

    def begin_task(self, run) -> None:
        """Called before task ``run.index`` trains."""

    def trainable(self) -> dict[str, nn.Parameter]:
        return {}

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        """Word embeddings [B, L, W] -> text features [B, D]."""
        return encoder.tower.forward_embeddings(x, lengths)

    def extra_loss(self, run, step: int) -> torch.Tensor | None:
        return None

    def end_task(self, run) -> None:
        """Called after the best epoch of task ``run.index`` has been restored."""

    def pop_auxiliary_loss(self) -> torch.Tensor | None:
        loss, self.auxiliary_loss = self.auxiliary_loss, None
        return loss
