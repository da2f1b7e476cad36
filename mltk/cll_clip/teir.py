"""TEIR: Token Embedding Initialisation and Regularisation (CLL-CLIP, Yang et al. 2024).

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning"
(AAAI 2024). Only the token-embedding table of a frozen CLIP text tower is trained, one language (task) at a
time, and the table grows with every task's vocabulary (``mltk.vocab``). TEIR has two halves, usable apart for
the paper's ablation:

- **Initialisation** (``init_new_rows``): the rows of the new tokens are drawn from N(mu, sigma), with mu and
  sigma single scalars over all entries of the previous table, so new rows live where the frozen encoder expects
  its inputs. Plain CLL-CLIP draws them from N(0, 0.02).
- **Regularisation** (``token_lambdas`` + ``TeirAdamW``): a per-token scale

      lambda_j = 1 / (1 + c_j)   for tokens j present in the current task's tokenised training text,
      lambda_j = 0               for absent tokens and the special tokens (frozen: no update, no decay),

  where c_j counts the earlier tasks whose text contained j, CLIP's original vocabulary counting as one (so a
  brand-new token gets 1, a CLIP token seen by no later task 1/2). Inside AdamW, lambda_j scales the gradient of
  row j *before* the moment estimates and scales row j's decoupled weight decay:

      g_j <- lambda_j * g_j
      m_j <- b1 m_j + (1 - b1) g_j ;  v_j <- b2 v_j + (1 - b2) g_j^2
      w_j <- w_j * (1 - lr * wd * lambda_j) - lr * m_hat_j / (sqrt(v_hat_j) + eps)

  Gradient clipping is the caller's job and comes first (``clip_grad_norm_`` on the raw gradients, then
  ``optimizer.step()``), as in the authors' training loop, where the scaling lives inside the optimizer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from mltk.core.errors import ConfigError

INIT_MODES = ("teir", "normal")
PLAIN_INIT_STD = 0.02  # plain CLL-CLIP: new rows ~ N(0, 0.02)


# ----------------------------------------------------------------------------------------------------------------
# Per-token lambdas
# ----------------------------------------------------------------------------------------------------------------


def token_lambdas(
    present_ids: Iterable[int] | np.ndarray | torch.Tensor,
    prior_counts: np.ndarray | torch.Tensor,
    special_ids: Sequence[int] = (),
) -> torch.Tensor:
    """lambda [V] (float32): 1 / (1 + c_j) for tokens present in the current task, 0 for absent and special tokens.

    ``prior_counts[j]`` = c_j, the number of earlier tasks whose tokenised text contained token j, with CLIP's
    original vocabulary counted as one (``mltk.vocab.Vocabulary.prior_task_counts``).
    """
    counts = torch.as_tensor(np.asarray(prior_counts), dtype=torch.float64)
    if counts.ndim != 1:
        raise ConfigError(f"prior_counts must be 1-D [V], got shape {tuple(counts.shape)}")
    if (counts < 0).any():
        raise ConfigError("prior_counts must not be negative")
    if isinstance(present_ids, torch.Tensor):
        present = present_ids.detach().cpu().long().reshape(-1)
    else:
        present = torch.as_tensor(
            np.fromiter((int(i) for i in present_ids), np.int64)
            if not isinstance(present_ids, np.ndarray)
            else present_ids.astype(np.int64)
        )
    size = counts.numel()
    for name, ids in (("present_ids", present), ("special_ids", torch.as_tensor(list(special_ids), dtype=torch.long))):
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
            raise ConfigError(f"{name} must lie in [0, {size}), got ids from {int(ids.min())} to {int(ids.max())}")
    lambdas = torch.zeros(size, dtype=torch.float64)
    lambdas[present] = 1.0 / (1.0 + counts[present])
    lambdas[list(special_ids)] = 0.0
    return lambdas.float()


# ----------------------------------------------------------------------------------------------------------------
# Initialising the rows of new tokens
# ----------------------------------------------------------------------------------------------------------------


def init_new_rows(
    old_table: torch.Tensor,
    n_new: int,
    generator: torch.Generator | None = None,
    mode: str = "teir",
    std: float = PLAIN_INIT_STD,
) -> torch.Tensor:
    """Rows [n_new, D] for the new tokens (same dtype and device as ``old_table`` [V_old, D]).

    ``teir``: N(mu, sigma) with mu = old_table.mean(), sigma = old_table.std() over all its entries;
    ``normal``: N(0, ``std``) as plain CLL-CLIP. Draws with ``generator`` (on its own device) for reproducibility.
    """
    if mode not in INIT_MODES:
        raise ConfigError(f"init mode must be one of {', '.join(INIT_MODES)}, got {mode!r}")
    if old_table.ndim != 2:
        raise ConfigError(f"old_table must be 2-D [V, D], got shape {tuple(old_table.shape)}")
    if n_new < 0:
        raise ConfigError(f"n_new must not be negative, got {n_new}")
    old = old_table.detach()
    if mode == "teir":
        mean, sigma = float(old.double().mean()), float(old.double().std())
    else:
        mean, sigma = 0.0, float(std)
    device = generator.device if generator is not None else old.device
    rows = torch.randn(n_new, old.shape[1], generator=generator, device=device, dtype=torch.float32)
    return (rows * sigma + mean).to(device=old.device, dtype=old.dtype)


def expand_table(
    old_table: torch.Tensor,
    n_new: int,
    generator: torch.Generator | None = None,
    mode: str = "teir",
    std: float = PLAIN_INIT_STD,
) -> torch.Tensor:
    """The grown table [V_old + n_new, D]: old rows unchanged, new rows from ``init_new_rows``."""
    return torch.cat([old_table.detach(), init_new_rows(old_table, n_new, generator, mode, std)], dim=0)


# ----------------------------------------------------------------------------------------------------------------
# AdamW with per-row lambda
# ----------------------------------------------------------------------------------------------------------------


class TeirAdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay, Loshchilov & Hutter 2019) with TEIR's per-row lambda for registered tables.

    For a parameter registered with ``set_row_scale(param, lambdas)`` (``param`` [V, D], ``lambdas`` [V]):

    - ``scale_gradients``: row j's gradient is multiplied by lambda_j before the moment estimates;
    - ``scale_weight_decay``: row j's decoupled decay is ``lr * weight_decay * lambda_j``;
    - with both on (TEIR), rows with lambda_j = 0 are skipped outright: parameter, first and second moments stay
      bit-identical. Only the rows with lambda > 0 are gathered and updated, which is cheaper than a dense step
      when a task touches a fraction of the vocabulary.

    Other parameters (and all of them when nothing is registered) follow ``torch.optim.AdamW`` exactly
    (non-amsgrad, non-maximize). Clip gradients *before* ``step()``; the lambdas act on the clipped gradients.
    Dense gradients only (``nn.Embedding(sparse=False)``, the default). ``state_dict()`` holds the moments and
    steps like torch's; the lambdas are configuration, not state: register them again after ``load_state_dict``.
    """

    def __init__(
        self,
        params,
        *,
        lr: float,
        betas: tuple[float, float],
        eps: float,
        weight_decay: float,
        scale_gradients: bool = True,
        scale_weight_decay: bool = True,
        row_scales: Mapping[torch.Tensor, torch.Tensor] | None = None,
    ):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ConfigError(f"invalid AdamW settings: lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        self.scale_gradients = scale_gradients
        self.scale_weight_decay = scale_weight_decay
        self._row_scales: dict[torch.Tensor, torch.Tensor] = {}
        self._active_rows: dict[torch.Tensor, torch.Tensor | None] = {}
        for param, lambdas in (row_scales or {}).items():
            self.set_row_scale(param, lambdas)

    def set_row_scale(self, param: torch.Tensor, lambdas: torch.Tensor | None) -> None:
        """Register (or, with None, remove) the per-row lambda [V] of a 2-D parameter [V, D] of this optimizer."""
        if not any(param is p for group in self.param_groups for p in group["params"]):
            raise ConfigError("set_row_scale: the parameter is not optimised by this optimizer")
        if lambdas is None:
            self._row_scales.pop(param, None)
            self._active_rows.pop(param, None)
            return
        lambdas = torch.as_tensor(lambdas).detach()
        if param.ndim != 2 or lambdas.shape != (param.shape[0],):
            raise ConfigError(
                f"lambdas must have shape ({param.shape[0]},) for a [V, D] table, got "
                f"{tuple(lambdas.shape)} for a parameter of shape {tuple(param.shape)}"
            )
        if not torch.isfinite(lambdas).all() or (lambdas < 0).any():
            raise ConfigError("lambdas must be finite and non-negative")
        lambdas = lambdas.to(device=param.device, dtype=torch.float32)
        self._row_scales[param] = lambdas
        active = torch.nonzero(lambdas > 0).squeeze(1)
        # None = every row is active: the dense path, no gather/scatter.
        self._active_rows[param] = None if active.numel() == lambdas.numel() else active

    def row_scale(self, param: torch.Tensor) -> torch.Tensor | None:
        return self._row_scales.get(param)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise ConfigError("TeirAdamW does not support sparse gradients")
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["step"] += 1
                step = float(state["step"])
                settings = (group["lr"], beta1, beta2, group["eps"], group["weight_decay"], step)
                lambdas = self._row_scales.get(param)
                if lambdas is None:
                    _adamw_update(param, param.grad, state["exp_avg"], state["exp_avg_sq"], None, None, *settings)
                else:
                    self._scaled_update(param, lambdas, state, settings)
        return loss

    def _scaled_update(self, param: torch.Tensor, lambdas: torch.Tensor, state: dict, settings: tuple) -> None:
        column = lambdas.to(param.dtype).unsqueeze(1)  # [V, 1]
        grad_scale = column if self.scale_gradients else None
        decay_scale = column if self.scale_weight_decay else None
        active = self._active_rows[param]
        if active is None or not (self.scale_gradients and self.scale_weight_decay):
            # Dense: every row active, or one half of the regularisation switched off (ablation).
            _adamw_update(param, param.grad, state["exp_avg"], state["exp_avg_sq"], grad_scale, decay_scale, *settings)
            return
        if active.numel() == 0:
            return
        rows = param.index_select(0, active)  # [A, D]
        exp_avg = state["exp_avg"].index_select(0, active)
        exp_avg_sq = state["exp_avg_sq"].index_select(0, active)
        scale = column.index_select(0, active)  # [A, 1]
        _adamw_update(rows, param.grad.index_select(0, active), exp_avg, exp_avg_sq, scale, scale, *settings)
        param.index_copy_(0, active, rows)
        state["exp_avg"].index_copy_(0, active, exp_avg)
        state["exp_avg_sq"].index_copy_(0, active, exp_avg_sq)


def _adamw_update(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    grad_scale: torch.Tensor | None,
    decay_scale: torch.Tensor | None,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: float,
) -> None:
    """One AdamW step in place, in the operation order of ``torch.optim.AdamW`` (single-tensor path), with
    optional per-row scales [V, 1] of the gradient and of the decoupled weight decay."""
    if grad_scale is not None:
        grad = grad * grad_scale
    if weight_decay:
        if decay_scale is None:
            param.mul_(1 - lr * weight_decay)
        else:
            param.mul_(1 - lr * weight_decay * decay_scale)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = math.sqrt(1 - beta2**step)
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
