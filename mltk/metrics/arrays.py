"""The array library the ranking engine computes with: numpy on the CPU, torch on CUDA or for a torch scorer.

Ranking precomputed embeddings on the CPU needs matrix products, comparisons and counts, all of which numpy does
as fast as torch (both call a BLAS for the product); importing torch alone costs seconds, several times the
ranking of a 5,000-image gallery. So ``mltk evaluate`` on embeddings artifacts imports no torch on the CPU. The
ranking code is written once against ``ArrayOps``; ``NumpyOps`` and ``TorchOps`` are its two implementations.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np


def is_torch_tensor(values: Any) -> bool:
    """Whether ``values`` is a torch tensor, without importing torch to ask."""
    return type(values).__module__.split(".")[0] == "torch"


def device_type(device: Any) -> str:
    """``"cpu"``, ``"cuda"``, ...: the type of a device name (``"cuda:1"``) or a ``torch.device``."""
    return getattr(device, "type", None) or str(device).split(":")[0]


def array_ops(device: Any = "cpu", *arrays: Any, torch_scorer: bool = False) -> NumpyOps | TorchOps:
    """numpy on the CPU; torch on another device, for a torch scorer, or when an input already is a tensor."""
    if device_type(device) == "cpu" and not torch_scorer and not any(is_torch_tensor(a) for a in arrays):
        return NumpyOps()
    return TorchOps(device)


class NumpyOps:
    """The ranking engine's operations on numpy arrays (the CPU)."""

    is_cpu = True

    def float32(self, values: Any) -> np.ndarray:
        return np.ascontiguousarray(values, dtype=np.float32)

    def int64(self, values: Any) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    def zeros(self, shape: int | tuple[int, ...], dtype: str) -> np.ndarray:
        return np.zeros(shape, dtype=dtype)

    def full(self, shape: int | tuple[int, ...], value: float, dtype: str = "float32") -> np.ndarray:
        return np.full(shape, value, dtype=dtype)

    def empty(self, shape: int | tuple[int, ...], dtype: str = "float32") -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def arange(self, n: int) -> np.ndarray:
        return np.arange(n)

    def stable_argsort(self, values: np.ndarray) -> np.ndarray:
        return np.argsort(values, kind="stable")

    def searchsorted(self, sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(sorted_values, values)

    def mm(self, left: np.ndarray, right: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return np.matmul(left, right, out=out)

    def flatnonzero(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask)

    def scatter_max(self, target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
        np.maximum.at(target, index, values)

    def bincount(self, index: np.ndarray, weights: np.ndarray, length: int) -> np.ndarray:
        return np.bincount(index, weights=weights, minlength=length).astype(np.int64)

    def row_max_where(self, scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The largest score of each row among ``mask`` (-inf where none) [c, 1]."""
        return np.where(mask, scores, -np.inf).max(axis=1, keepdims=True)

    def count_rows(self, mask: np.ndarray) -> np.ndarray:
        return np.count_nonzero(mask, axis=1).astype(np.int64)

    def numpy(self, values: np.ndarray) -> np.ndarray:
        return values

    def one_thread(self) -> contextlib.AbstractContextManager:
        """Run the block's BLAS calls on one thread where ``threadpoolctl`` is installed (the ``fast`` extra): many
        small products on a busy machine otherwise wait at each call's thread barrier (5,000 images x 25,000
        captions, the owner pre-pass on 2 loaded cores: 2.3 s with 2 threads, 0.26 s with 1)."""
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return contextlib.nullcontext()
        return threadpool_limits(1, user_api="blas")


class TorchOps:
    """The same operations on torch tensors on ``device`` (imports torch)."""

    def __init__(self, device: Any = "cpu"):
        import torch

        self.torch, self.device = torch, torch.device(device)
        self.is_cpu = self.device.type == "cpu"

    def float32(self, values: Any):
        """A float32 tensor on the device; a read-only array (a memory-mapped artifact) is copied first, because
        torch must not wrap memory it cannot write."""
        if not is_torch_tensor(values):
            values = np.ascontiguousarray(values)
            if not values.flags.writeable:
                values = values.astype(np.float32, copy=True)
            values = self.torch.from_numpy(values)
        return values.to(device=self.device, dtype=self.torch.float32).contiguous()

    def int64(self, values: Any):
        return self.torch.as_tensor(np.asarray(values, dtype=np.int64), device=self.device)

    def zeros(self, shape, dtype: str):
        return self.torch.zeros(shape, dtype=getattr(self.torch, dtype), device=self.device)

    def full(self, shape, value: float, dtype: str = "float32"):
        return self.torch.full(
            shape if isinstance(shape, tuple) else (shape,), value, dtype=getattr(self.torch, dtype), device=self.device
        )

    def empty(self, shape, dtype: str = "float32"):
        return self.torch.empty(shape, dtype=getattr(self.torch, dtype), device=self.device)

    def arange(self, n: int):
        return self.torch.arange(n, device=self.device)

    def stable_argsort(self, values):
        return self.torch.argsort(values, stable=True)

    def searchsorted(self, sorted_values, values):
        return self.torch.searchsorted(sorted_values, values)

    def mm(self, left, right, out=None):
        return self.torch.mm(left, right, out=out)

    def flatnonzero(self, mask):
        return self.torch.nonzero(mask).flatten()

    def scatter_max(self, target, index, values) -> None:
        target.scatter_reduce_(0, index, values, reduce="amax")

    def bincount(self, index, weights, length: int) -> np.ndarray:
        counts = self.torch.zeros(length, dtype=self.torch.int64, device=self.device)
        return counts.scatter_add_(0, index, weights.long()).cpu().numpy()

    def row_max_where(self, scores, mask):
        return scores.masked_fill(~mask, -float("inf")).amax(dim=1, keepdim=True)

    def count_rows(self, mask) -> np.ndarray:
        return mask.sum(dim=1).cpu().numpy()

    def numpy(self, values) -> np.ndarray:
        return values.cpu().numpy()

    @contextlib.contextmanager
    def one_thread(self):
        """Run the block on one intra-op thread (CPU only), restoring the caller's thread count afterwards."""
        threads = self.torch.get_num_threads()
        if not self.is_cpu or threads == 1:
            yield
            return
        self.torch.set_num_threads(1)
        try:
            yield
        finally:
            self.torch.set_num_threads(threads)
