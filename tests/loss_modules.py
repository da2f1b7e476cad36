"""Thin ``nn.Module`` wrappers of the loss functions of ``mltk.losses``, used by tests only (the stages call the
functions directly)."""

from __future__ import annotations

import torch
import torch.nn as nn

from mltk.losses import (LogitScale, cll_clip_loss, english_bridge_mse, info_nce, mlmme_loss, mse_distill,
                         pairwise_ranking_hinge)


class InfoNCELoss(nn.Module):
    """``info_nce`` with its logit scale: fixed (MLA LE: ``learnable=False, init_temperature=0.01``) or learnable
    (CLL-CLIP: ``learnable=True, init_temperature=0.07``), stored as log(1/T) and clamped at 100."""

    def __init__(self, learnable: bool = False, init_temperature: float = 0.01):
        super().__init__()
        self.logit_scale = LogitScale(init_temperature, learnable)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return info_nce(a, b, self.logit_scale())


class EnglishBridgeLoss(nn.Module):
    """``english_bridge_mse`` with a fixed English slot."""

    def __init__(self, english_index: int = 0):
        super().__init__()
        self.english_index = english_index

    def forward(self, text_features: torch.Tensor, text_mask: torch.Tensor | None = None) -> torch.Tensor:
        return english_bridge_mse(text_features, self.english_index, text_mask)


class PairwiseRankingLoss(nn.Module):
    """``pairwise_ranking_hinge`` with its margin and hard-negative choice."""

    def __init__(self, margin: float = 0.2, max_violation: bool = False):
        super().__init__()
        self.margin, self.max_violation = margin, max_violation

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor) -> torch.Tensor:
        return pairwise_ranking_hinge(image_features, text_features, self.margin, self.max_violation)


class MLMMELoss(nn.Module):
    """``mlmme_loss`` with its margin and beta."""

    def __init__(self, margin: float = 0.2, beta: float = 0.5, max_violation: bool = False):
        super().__init__()
        self.margin, self.beta, self.max_violation = margin, beta, max_violation

    def forward(self, image_features: torch.Tensor, text_a: torch.Tensor, text_b: torch.Tensor) -> torch.Tensor:
        return mlmme_loss(image_features, text_a, text_b, self.margin, self.beta, self.max_violation)


class MSEDistillLoss(nn.Module):
    """``mse_distill`` as a module."""

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        return mse_distill(student, teacher)


class CLLCLIPLoss(nn.Module):
    """``cll_clip_loss`` with its learnable temperature (from 0.07, log(1/T), clamped at 100)."""

    def __init__(self, gamma1: float = 0.01, gamma2: float = 1.0, init_temperature: float = 0.07,
                 learnable: bool = True):
        super().__init__()
        self.gamma1, self.gamma2 = gamma1, gamma2
        self.logit_scale = LogitScale(init_temperature, learnable)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                teacher_features: torch.Tensor) -> torch.Tensor:
        return cll_clip_loss(image_features, text_features, teacher_features, self.logit_scale(), self.gamma1,
                             self.gamma2)
