"""What a continual-learning method may add to CLL-CLIP training, and the options of all of them.

Every method trains CLL-CLIP's token-embedding table (with or without TEIR) and its temperature; a baseline adds
its own mechanism through the hooks of ``ContinualMethod``, which plain CLL-CLIP leaves empty:

- ``begin_task(task)``: before training task t (add a language's adapter, a task's prompt; build replay data);
- ``trainable()``: its tensors that train in the current task, besides the table and the temperature;
- ``encode(encoder, x, lengths, lang)``: the text forward from word embeddings [B, L, W] to features [B, D];
- ``joint_batch(task, step)``: examples that join the task's batch, as ``(images [b, D], text features [b, D],
  teachers [b, D] or None)``, so that CLL-CLIP's loss runs over both together (replay, as the CLL-CLIP authors
  doubled the batch); with teachers None they join InfoNCE only (the method distils them in ``extra_loss``);
- ``extra_loss(task, step)``: a term added to the task loss (EWC penalty, replay), as a tensor or as
  ``(tensor, {name: unweighted term})`` whose terms become columns of the task's steps CSV
  (``mltk.train.step_log``); ``encode`` may leave one the same way in ``auxiliary_loss`` (prompt-key matching);
- ``end_task(task)``: after the best epoch of task t is restored (Fisher information, reservoir update).

``task`` is a ``TaskContext``: what the hooks may use of the task being trained (the train-continual stage,
``mltk.train.continual.task.CllClipTask``, builds it).

A method's state has two parts: ``state_tensors()`` (what encoding needs; saved in the checkpoint, rebuilt from
``structure()``) and ``training_state()`` (what later tasks need, such as a Fisher matrix or a replay buffer;
saved at each task boundary so a run resumes there).

Hyper-parameters: each method's ``Options`` dataclass (``mltk.cll_clip.options``), its values the recipe's
``methods`` section (the CLL-CLIP authors' configuration files), set with ``--set method.KEY=VALUE``. Methods with
``needs_task_identity`` keep one set of tensors per task (language) and pick it by the caption's language at
evaluation; the report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
import torch.nn as nn

from mltk.cll_clip.options import NoOptions

Loss = torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]  # a loss, or a loss with its named terms


class TaskEncoder(Protocol):
    """What the hooks use of the text encoder being trained (``mltk.cll_clip.model.ContinualTextEncoder``, which
    holds the method: a Protocol, so that this module does not import it)."""

    table: nn.Parameter  # [V, W] token embeddings
    tokenizer: Any  # its ``eot_token_id`` ends a text
    tower: Any  # the frozen tower: ``forward_embeddings(x [B, L, W], lengths [B])`` -> [B, D]
    training: bool

    def encode_tokens(self, tokens: torch.Tensor, lang: str | None) -> torch.Tensor: ...  # [B, L] -> [B, D]

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


class ExampleSource(Protocol):
    """Every training example of every task language, addressed by key ``(language index, row)``
    (``mltk.train.continual.data.Corpus``)."""

    def keys(self, lang: str) -> np.ndarray: ...  # [n, 2]: the keys of one language's examples

    def examples(self, keys: np.ndarray, encoder: TaskEncoder) -> Any: ...  # .tokens [n, L], .images [n, D]


@dataclass(frozen=True)
class TaskContext:
    """What a method's hooks see of the task being trained (task ``index`` of the run, language ``lang``)."""

    encoder: TaskEncoder
    corpus: ExampleSource
    index: int
    lang: str
    steps: int  # the task's training steps
    steps_per_epoch: int
    batch_size: int
    # CLL-CLIP's loss of one batch with its terms: (image [b, D] normalised or None, text [b, D], teacher [b, D]);
    # without an image, gamma2 x MSE alone
    pair_terms: Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
    data_loss: Callable[[int], torch.Tensor]  # CLL-CLIP's loss of the task's batch of a step
    sample_tokens: Callable[[int], torch.Tensor]  # tokens [<= count, L] of the task's training captions


class ContinualMethod(nn.Module):
    """Plain CLL-CLIP: the table alone; every hook does nothing. Baselines override what they need."""

    name: ClassVar[str] = "cll-clip"
    needs_task_identity: ClassVar[bool] = False
    description: ClassVar[str] = "plain CLL-CLIP: only the token-embedding table (and the temperature) trains"
    Options: ClassVar[type] = NoOptions  # the method's hyper-parameters (``mltk.cll_clip.options``)

    def __init__(self, options, width: int, num_blocks: int, output_dim: int, seed: int = 0):
        super().__init__()
        if not isinstance(options, self.Options):
            raise TypeError(f"method {self.name} takes {self.Options.__name__}, got {type(options).__name__}")
        self.options = options
        self.width, self.num_blocks, self.output_dim, self.seed = width, num_blocks, output_dim, seed
        self.auxiliary_loss: Loss | None = None  # set by ``encode`` in training mode (prompt matching)

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

    def memory_tokens(self) -> torch.Tensor | None:
        """Token rows [n, L] of the examples this method replays during the current task (a rehearsal memory,
        tokenised with the current vocabulary), or None: TEIR counts their tokens as the task's own."""
        return None

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return {}, {}

    def load_training_state(self, tensors: dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        """Restore what ``training_state`` saved."""

    # --- hooks ----------------------------------------------------------------------------------------------------

    def begin_task(self, task: TaskContext) -> None:
        """Called before task ``task.index`` trains."""

    def trainable(self) -> dict[str, nn.Parameter]:
        return {}

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        """Word embeddings [B, L, W] -> text features [B, D]."""
        return encoder.tower.forward_embeddings(x, lengths)

    def joint_batch(
        self, task: TaskContext, step: int
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None] | None:
        return None

    def extra_loss(self, task: TaskContext, step: int) -> Loss | None:
        return None

    def end_task(self, task: TaskContext) -> None:
        """Called after the best epoch of task ``task.index`` has been restored."""

    def pop_auxiliary_loss(self) -> Loss | None:
        loss, self.auxiliary_loss = self.auxiliary_loss, None
        return loss


class PerLanguageMethod(ContinualMethod):
    """A method with one module per language (task identity): created when its task begins, the only one that
    trains in that task, and chosen by the caption's language at encoding (MLA adapters, P-Tuning, LoRA).

    Subclasses name the ``nn.ModuleDict`` that holds the modules (``modules_name``: the prefix of their tensors in
    checkpoints) and build one language's module in ``new_module``.
    """

    needs_task_identity: ClassVar[bool] = True
    modules_name: ClassVar[str] = "modules"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.new_module is PerLanguageMethod.new_module:
            raise TypeError(f"{cls.__name__} must define new_module(lang): the module one language trains")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        setattr(self, self.modules_name, nn.ModuleDict())  # registered under its own name: checkpoint keys keep it
        self.current: str | None = None

    @property
    def per_language(self) -> nn.ModuleDict:
        return getattr(self, self.modules_name)

    def new_module(self, lang: str) -> nn.Module:
        """The module of a language not seen before (``len(self.per_language)`` counts those made earlier); every
        subclass defines it (checked when the subclass is defined)."""

    def add_language(self, lang: str) -> None:
        if lang not in self.per_language:
            device = next(self.parameters(), torch.zeros(())).device
            self.per_language[lang] = self.new_module(lang).to(device)

    def structure(self) -> dict[str, Any]:
        return {"languages": list(self.per_language)}

    def build(self, structure: dict[str, Any]) -> None:
        for lang in structure.get("languages", []):
            self.add_language(lang)

    def begin_task(self, task: TaskContext) -> None:
        self.add_language(task.lang)
        self.current = task.lang
        for lang, module in self.per_language.items():
            module.requires_grad_(lang == task.lang)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {}
        module = self.per_language[self.current]
        return {f"{self.modules_name}.{self.current}.{k}": p for k, p in module.named_parameters()}
