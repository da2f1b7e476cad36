"""The gradient of a large embedding table, written into one buffer kept from step to step.

A step reads a few hundred rows of a table such as all-MiniLM-L6-v2's 30,522 x 384 copy, but torch's embedding
backward builds the dense gradient afresh every step: a new 47 MB tensor of zeros, which the CPU's allocator maps
and the kernel zero-fills page by page (45 ms a step in the profile of an NLT step on a 2-core Ice Lake under load,
as much as the fused AdamW's update of the whole table), then adds the rows in. ``lookup`` is the same lookup, but
its backward adds the rows' gradients into a buffer that persists: it zeroes the rows the previous step wrote and
adds this step's. The table's ``weight.grad`` is the same value (the rows of tokens seen more than once are summed
in another order, a difference of float rounding); only its memory is reused. The optimizer and the clipping read
it as before.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class TableGradient:
    """The persistent gradient buffer of one table and the rows it holds (None: not known, zero it all)."""

    def __init__(self):
        self.buffer: torch.Tensor | None = None
        self.rows: torch.Tensor | None = None

    def add(self, weight: torch.Tensor, ids: torch.Tensor, grad: torch.Tensor) -> None:
        """Add ``grad`` [N, E] to the rows ``ids`` [N] of ``weight.grad``, as autograd's accumulation would."""
        current = weight.grad
        if current is None:  # the first backward since zero_grad(set_to_none=True): the buffer, this step's rows only
            current = self._buffer(weight)
            if self.rows is None:
                current.zero_()
            else:  # the rows the last step wrote: the rest is zero
                current.index_fill_(0, self.rows, 0)
            self.rows = ids
            weight.grad = current
        elif current is self.buffer and self.rows is not None:  # another backward before the update
            self.rows = torch.cat([self.rows, ids])
        elif current is not self.buffer:  # a gradient tensor this object does not own
            self.rows = None
        current.index_add_(0, ids, grad.to(current.dtype))

    def _buffer(self, weight: torch.Tensor) -> torch.Tensor:
        buffer = self.buffer
        if buffer is None or (buffer.shape, buffer.dtype, buffer.device) != (weight.shape, weight.dtype, weight.device):
            self.buffer = torch.zeros_like(weight)
            self.rows = torch.empty(0, dtype=torch.long, device=weight.device)  # all zero already
        return self.buffer


class _Lookup(torch.autograd.Function):
    """``F.embedding(ids, weight)`` whose backward hands the weight's gradient to a ``TableGradient``."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, ids: torch.Tensor, gradient: TableGradient) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.gradient = weight, gradient
        return F.embedding(ids, weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        ctx.gradient.add(ctx.weight, ids.flatten(), grad.reshape(-1, grad.shape[-1]))
        return None, None, None


def lookup(table: torch.nn.Embedding, ids: torch.Tensor, gradient: TableGradient | None) -> torch.Tensor:
    """``table(ids)`` [..., E]; when the table trains, its gradient accumulates in ``gradient``'s buffer (a plain
    table only: no padding row, max_norm or sparse gradient, which torch's own lookup handles; ``gradient`` None:
    torch's own lookup too, as benchmarks compare)."""
    weight = table.weight
    plain = gradient is not None and table.padding_idx is None and table.max_norm is None and not table.sparse
    if plain and weight.requires_grad and torch.is_grad_enabled():
        return _Lookup.apply(weight, ids, gradient)
    return table(ids)
