"""Online EWC on the token-embedding table (Schwarz et al. 2018, "Progress & Compress"; Kirkpatrick et al. 2017).

After task t the diagonal Fisher information F_t of the table is estimated at the task's final weights theta*_t
and folded into a running estimate, earlier tasks decayed by gamma::

    F~_t = gamma * F~_{t-1} + F_t
    penalty(theta) = lambda * sum_j F~_t[j] * (theta[j] - theta*_t[j])^2           (while training task t + 1)

as the CLL-CLIP authors' code computes it (no 1/2; ``half=true`` gives the papers' ``lambda / 2``, mltk's earlier
form). CLL-CLIP's setting: lambda = 1000, gamma = 1. The table grows with every task; rows that did not exist
when the Fisher was estimated have no information (their F is 0), so only the first V_t rows are anchored.

Fisher estimate: the empirical Fisher, the mean of the squared gradient of the batch's CLL-CLIP loss over every
training batch of the task (one pass over its data, as the authors' code averages over the whole task;
``fisher_batches=N`` uses the first N batches, mltk's earlier 32). A per-example Fisher is undefined here, because
the contrastive term of a single pair is constant; batch gradients are the usual approximation and make F smaller
than a per-example estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from mltk.cll_clip.base import ContinualMethod, TaskContext
from mltk.cll_clip.options import EwcOptions


def empirical_fisher(
    param: torch.nn.Parameter, loss_of_batch: Callable[[int], torch.Tensor], batches: Iterable[int]
) -> torch.Tensor:
    """Mean over ``batches`` of grad(loss_of_batch(b), param)^2, same shape as ``param``."""
    total = torch.zeros_like(param, dtype=torch.float32)
    count = 0
    for batch in batches:
        (grad,) = torch.autograd.grad(loss_of_batch(batch).float(), [param])
        total += grad.float() ** 2
        count += 1
    return total / max(count, 1)


def ewc_penalty(
    table: torch.Tensor, fisher: torch.Tensor, anchor: torch.Tensor, weight: float, half: bool = False
) -> torch.Tensor:
    """weight * sum(fisher * (table[:R] - anchor)^2) (times 1/2 when ``half``), R = rows of the anchor (rows added
    later are free)."""
    rows = anchor.shape[0]
    difference = table[:rows].float() - anchor
    return (0.5 if half else 1.0) * weight * (fisher * difference * difference).sum()


def accumulate_fisher(previous: torch.Tensor | None, current: torch.Tensor, gamma: float) -> torch.Tensor:
    """gamma * previous (zero-padded to the current rows) + current."""
    if previous is None:
        return current.clone()
    padded = torch.zeros_like(current)
    padded[: previous.shape[0]] = previous
    return gamma * padded + current


class OnlineEWC(ContinualMethod):
    name = "oewc"
    description = "online EWC on the table (lambda, gamma; Fisher from each finished task, accumulated)"
    Options = EwcOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fisher: torch.Tensor | None = None  # [R, W]
        self.anchor: torch.Tensor | None = None  # [R, W]: the table after the last finished task

    def extra_loss(self, task: TaskContext, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """The penalty, and as its logged term ``ewc_penalty`` the penalty at lambda = 1."""
        if self.fisher is None:
            return None
        table = task.encoder.table
        if self.fisher.device != table.device:  # plain tensors (their shape grows), moved on first use
            self.fisher, self.anchor = self.fisher.to(table.device), self.anchor.to(table.device)
        term = ewc_penalty(task.encoder.table, self.fisher, self.anchor, 1.0, self.options.half)
        return self.options.penalty * term, {"ewc_penalty": term}

    def end_task(self, task: TaskContext) -> None:
        steps = min(self.options.fisher_batches or task.steps_per_epoch, task.steps)
        fisher = empirical_fisher(task.encoder.table, task.data_loss, range(steps))
        self.fisher = accumulate_fisher(self.fisher, fisher, self.options.gamma)
        self.anchor = task.encoder.table.detach().float().clone()

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        if self.fisher is None:
            return {}, {}
        return {"fisher": self.fisher, "anchor": self.anchor}, {}

    def load_training_state(self, tensors: dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        self.fisher, self.anchor = tensors.get("fisher"), tensors.get("anchor")
