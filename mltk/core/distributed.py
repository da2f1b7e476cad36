"""Data-parallel training under ``torchrun``, in four small functions.

Launch any training stage with ``torchrun --nproc_per_node N -m mltk ...`` (or ``--standalone`` on one machine):

- the stage calls ``init_from_env(runtime)`` once, before it builds its task;
- the task reads ``world()`` and computes only its rank's ``shard`` of each global batch;
- contrastive losses ``gather_with_grad`` the features of every rank, so each rank sees the whole global batch
  in its logits, as open_clip's ``gather_features(..., gather_with_grad=True, local_loss=False)`` does;
- ``fit`` calls ``average_gradients`` after backward: the sum of every gradient over ranks divided by the world
  size, which is exactly what ``DistributedDataParallel`` does.

Why no DDP module wrapper: mltk's tasks own several small modules (acquirers per language, an embedding table, a
logit scale) rather than one ``nn.Module`` called once per step, and they train a changing subset of them (the
language of the step). DDP's bucketed, overlapped all-reduce pays off for large models; here one all-reduce per
trained tensor after backward is the same arithmetic with nothing to wrap.

Why the gathered loss gives the right gradient: every rank computes the same global loss L. The backward of
``all_gather`` sums over ranks the gradients that arrive for a rank's own rows, so rank r's parameters receive
``world_size * dL/dtheta`` restricted to the rows it encoded; summing over ranks and dividing by the world size
(``average_gradients``) leaves exactly ``dL/dtheta``, the gradient of a one-process run on the same global batch.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import TypeVar

import torch
import torch.distributed as dist

from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime

T = TypeVar("T")


def world() -> tuple[int, int]:
    """``(rank, world_size)``: ``(0, 1)`` when torch.distributed is not initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """Rank 0 writes state and artifacts and logs; the other ranks only compute."""
    return world()[0] == 0


def init_from_env(runtime: Runtime) -> Runtime:
    """Initialise torch.distributed from torchrun's environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
    ``MASTER_ADDR``/``MASTER_PORT``) when ``WORLD_SIZE > 1``: gloo on the CPU, NCCL on CUDA. A no-op otherwise,
    and when already initialised.

    On CUDA each process is pinned to GPU ``LOCAL_RANK`` (``torch.cuda.set_device``), so ``"cuda"`` means that
    GPU from then on; the returned runtime names it explicitly.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1 or not dist.is_available():
        return runtime
    if runtime.device.type == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        runtime = dataclasses.replace(runtime, device=torch.device("cuda", local_rank))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if runtime.device.type == "cuda" else "gloo")
        atexit.register(_destroy_process_group)
    return runtime


def _destroy_process_group() -> None:
    """Tear the process group down while the interpreter is still whole: a gloo group left to interpreter
    finalisation can abort the process (SIGABRT) after the stage's work is done."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard(global_batch_indices: Sequence[T] | torch.Tensor) -> Sequence[T] | torch.Tensor:
    """This rank's contiguous slice of a global batch (a list, tuple, numpy array or tensor; same type back).

    Rank r gets items ``[r * B/W, (r + 1) * B/W)``, so gathering the ranks' features in rank order restores the
    global batch order. B must be divisible by the world size W: ``all_gather`` needs equal shapes, and equal
    shards make the mean of per-rank mean losses equal to the global mean.
    """
    rank, world_size = world()
    if world_size == 1:
        return global_batch_indices
    size = len(global_batch_indices)
    if size % world_size:
        raise ConfigError(
            f"the global batch of {size} cannot be split evenly over {world_size} processes; "
            f"use a batch size divisible by {world_size}"
        )
    per_rank = size // world_size
    return global_batch_indices[rank * per_rank : (rank + 1) * per_rank]


def gather_with_grad(features: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's ``features`` [B/W, D] into [B, D] in rank order, keeping the autograd graph
    (``torch.distributed.nn.functional.all_gather``, whose backward sums each rank's gradient over ranks).
    The identity when not distributed."""
    rank, world_size = world()
    if world_size == 1:
        return features
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(features), dim=0)


def average_gradients(parameters: Iterable[torch.Tensor]) -> None:
    """After backward: replace each gradient by its mean over ranks (all_reduce SUM / world size), as DDP does.

    Every rank must hold gradients for the same tensors (tasks pick the step's language from ``(seed, step)``,
    so they agree); tensors without a gradient are skipped on all ranks alike.
    """
    rank, world_size = world()
    if world_size == 1:
        return
    for param in parameters:
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad.div_(world_size)


def same_on_all_ranks(value: int) -> bool:
    """Whether an integer (such as the step a run resumes from) is equal on every rank."""
    rank, world_size = world()
    if world_size == 1:
        return True
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    low = torch.tensor([value], dtype=torch.int64, device=device)
    high = low.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    return int(low) == int(high)
