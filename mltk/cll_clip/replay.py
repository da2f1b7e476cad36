"""Rehearsal baselines: Experience Replay and Dark Experience Replay with a reservoir memory.

- Reservoir sampling (Vitter 1985, algorithm R): the n-th example of the stream (1-based) enters a full memory of
  capacity M with probability M / n, replacing a uniformly chosen slot, so at any time the memory is a uniform
  sample of everything seen. After task t its training pairs (image, caption, language) are streamed into the
  memory in a random order; during task t + 1 the memory holds a uniform sample of tasks 0..t (8K in the paper).
- ER (Chaudhry et al. 2019), as the CLL-CLIP authors ran it (CLFM, ``double_batch_size``): each step draws as many
  examples from the memory as the batch holds (captions in their own languages, re-tokenised with the current
  vocabulary, with their images and stored labels) and puts them into the batch, so InfoNCE runs over both
  together (2 x 128 pairs). The distillation is two means: the MSE to the English teacher over the current task's
  rows, and a separate MSE of the memory rows to their stored label, the teacher embedding, weighted like the
  first (gamma2; ``replay_loss=clfm``, logged as ``replay_mse``). ``replay_loss=joint`` (mltk's previous form)
  runs one MSE over all 256 rows, so distillation weighs half as much against InfoNCE; ``replay_loss=separate``
  adds the CLL-CLIP loss of the replayed batch on its own instead (a second 128-pair InfoNCE and MSE).
- DER (Buzzega et al. 2020) stores the model's output with each example and regresses to it:
  ``alpha * MSE(f(x_mem), z_mem)`` with alpha 1 (the CLL-CLIP authors' setting). CLL-CLIP has no class logits,
  so z is the text feature [D] of the caption: the authors replace a memory item's label by the student's own
  output when they store it (``reservoir_sampling``), here with the final weights of the task that inserted it
  (insertion happens when the task ends, after its best epoch is restored). With ``replay_loss=clfm`` the replayed
  examples join the batch's InfoNCE as in ER, never see the teacher, and their one MSE is the regression to z,
  read from that same forward pass. ``joint`` (mltk's previous form) also pulls them to the English teacher
  inside the batch's MSE; ``separate``: the regression alone, the replayed examples outside InfoNCE.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mltk.cll_clip.base import ContinualMethod, TaskContext
from mltk.cll_clip.options import DerOptions, ReplayOptions


class Reservoir:
    """A uniform sample of at most ``capacity`` items (int64 rows) of a stream; ``seen`` counts the stream."""

    def __init__(self, capacity: int, width: int = 2):
        if capacity < 1:
            raise ValueError(f"reservoir capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.items = np.zeros((0, width), dtype=np.int64)
        self.seen = 0

    def __len__(self) -> int:
        return len(self.items)

    def add(self, items: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stream ``items`` [n, width] in order; returns the memory slots written (those whose item changed)."""
        items = np.asarray(items, dtype=np.int64).reshape(len(items), -1)
        free = min(self.capacity - len(self.items), len(items))
        written = list(range(len(self.items), len(self.items) + free))
        self.items = np.concatenate([self.items, items[:free]])
        self.seen += free
        for item in items[free:]:
            slot = int(rng.integers(0, self.seen + 1))  # item number seen+1 enters with probability M / (seen+1)
            self.seen += 1
            if slot < self.capacity:
                self.items[slot] = item
                written.append(slot)
        return np.unique(np.asarray(written, dtype=np.int64))


class ExperienceReplay(ContinualMethod):
    name = "er"
    description = "experience replay from a reservoir memory of earlier tasks' (image, caption, language)"
    Options = ReplayOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.memory = Reservoir(self.options.memory_size)
        self.replay = None  # examples of the memory, tokenised with the current vocabulary
        self.joined: tuple[np.ndarray, torch.Tensor] | None = None  # rows and features that joined this step's batch

    def begin_task(self, task: TaskContext) -> None:
        self.replay = task.corpus.examples(self.memory.items, task.encoder) if len(self.memory) else None

    def memory_tokens(self) -> torch.Tensor | None:
        """The memory's captions [n, L], tokenised with the current vocabulary (None before the first memory)."""
        return None if self.replay is None else self.replay.tokens

    def replay_indices(self, task: TaskContext, step: int) -> np.ndarray:
        """The memory rows replayed at ``step`` (distinct; a pure function of (seed, task, step))."""
        size = min(self.options.replay_batch or task.batch_size, len(self.memory))
        rng = np.random.default_rng([self.seed, task.index, step, 0xE2])
        return np.sort(rng.choice(len(self.memory), size=size, replace=False))

    def replayed_features(self, task: TaskContext, rows: np.ndarray) -> torch.Tensor:
        device = task.encoder.table.device
        return task.encoder.encode_tokens(self.replay.tokens[rows].to(device), None).float()

    def replayed_batch(self, task: TaskContext, rows: np.ndarray, features: torch.Tensor):
        """(images, features, teachers) of the memory rows ``rows`` (images None in a text-only task)."""
        device = task.encoder.table.device
        images = None if self.replay.images is None else self.replay.images[rows].to(device)
        return images, features, self.replay.teacher[rows].to(device)

    def joint_batch(self, task: TaskContext, step: int):
        """The replayed examples that join the task's batch (``replay_loss`` clfm or joint): (images, features,
        teachers), the teachers None under clfm (the memory rows join InfoNCE only; ``extra_loss`` distils them)."""
        if self.replay is None or self.options.replay_loss == "separate":
            return None
        rows = self.replay_indices(task, step)
        self.joined = (rows, self.replayed_features(task, rows))
        images, features, teachers = self.replayed_batch(task, rows, self.joined[1])
        return images, features, None if self.options.replay_loss == "clfm" else teachers

    def take_joined(self) -> tuple[np.ndarray, torch.Tensor]:
        """The memory rows [r] and their features [r, D] that joined this step's batch (read once)."""
        joined, self.joined = self.joined, None
        return joined

    def extra_loss(self, task: TaskContext, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """clfm: ``gamma2 * replay_mse``, the memory rows' own MSE to their stored teacher embeddings; separate:
        CLL-CLIP's loss of a replayed batch on its own, its terms logged as ``replay_infonce`` and ``replay_mse``
        (joint: nothing more, the batch already holds them)."""
        if self.replay is None:
            return None
        if self.options.replay_loss == "clfm":
            rows, features = self.take_joined()
            teachers = self.replay.teacher[rows].to(features.device)
            loss, terms = task.pair_terms(None, features, teachers)  # without images: gamma2 x MSE alone
            return loss, {"replay_mse": terms["mse"]}
        if self.options.replay_loss != "separate":
            self.joined = None
            return None
        rows = self.replay_indices(task, step)
        loss, terms = task.pair_terms(*self.replayed_batch(task, rows, self.replayed_features(task, rows)))
        return loss, {"replay_infonce": terms["infonce"], "replay_mse": terms["mse"]}

    def end_task(self, task: TaskContext) -> None:
        keys = task.corpus.keys(task.lang)  # [n, 2]: (language index, example index)
        order = np.random.default_rng([self.seed, task.index, 0x5E]).permutation(len(keys))
        written = self.memory.add(keys[order], np.random.default_rng([self.seed, task.index, 0x5A]))
        self.record(task, written)
        self.replay = None

    def record(self, task: TaskContext, written: np.ndarray) -> None:
        """What a subclass stores beside the memory slots just written."""

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return {"memory": torch.from_numpy(self.memory.items.copy())}, {"seen": self.memory.seen}

    def load_training_state(self, tensors: dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        if "memory" in tensors:
            self.memory.items = tensors["memory"].numpy().astype(np.int64)
            self.memory.seen = int(info["seen"])


class DarkExperienceReplay(ExperienceReplay):
    name = "der"
    description = "dark experience replay: regress the text features stored with each memory example"
    Options = DerOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.features = torch.zeros(0, self.output_dim)  # [len(memory), D], row-aligned with the memory

    def extra_loss(self, task: TaskContext, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """``alpha * der_mse``, the regression to the stored features (logged unweighted as ``der_mse``), of the
        replayed examples that joined the batch (clfm, joint) or of a replayed batch of their own (separate)."""
        if self.replay is None:
            return None
        if self.options.replay_loss != "separate":
            rows, features = self.take_joined()
        else:
            rows = self.replay_indices(task, step)
            features = self.replayed_features(task, rows)
        stored = self.features[torch.from_numpy(rows)].to(task.encoder.table.device)
        mse = F.mse_loss(features, stored)
        return self.options.alpha * mse, {"der_mse": mse}

    @torch.no_grad()
    def record(self, task: TaskContext, written: np.ndarray) -> None:
        if len(self.features) < len(self.memory):
            grown = torch.zeros(len(self.memory), self.output_dim)
            grown[: len(self.features)] = self.features
            self.features = grown
        if not len(written):
            return
        examples = task.corpus.examples(self.memory.items[written], task.encoder)
        was_training = task.encoder.training
        task.encoder.eval()
        device = task.encoder.table.device
        for start in range(0, len(written), 256):
            chunk = examples.tokens[start : start + 256].to(device)
            self.features[written[start : start + 256]] = task.encoder.encode_tokens(chunk, None).float().cpu()
        task.encoder.train(was_training)

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        tensors, info = super().training_state()
        return {**tensors, "features": self.features}, info

    def load_training_state(self, tensors: dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        super().load_training_state(tensors, info)
        if "features" in tensors:
            self.features = tensors["features"].float()
