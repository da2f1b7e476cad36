"""Distillation losses: MSE to a frozen teacher (MLA NLT), CLL-CLIP's InfoNCE + MSE, and the English bridge."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.core.errors import ConfigError
from mltk.losses.base import LossOutput, Scalar, check_multilingual, check_pair, zero_masked, zero_with_graph
from mltk.losses.contrastive import info_nce

MSE_FORMS = ("mean", "sum")


class MSEDistillLoss(nn.Module):
    """MLA's NLT loss (Zhang et al. 2023) and CLL-CLIP's cross-lingual term: MSE between the student's embedding
    of a translation and the frozen English CLIP text embedding of its source sentence, both UNnormalised::

        form "mean" (default):  loss = mean_{i, d} (student_{i,d} - teacher_{i,d})^2
        form "sum":             loss = mean_i sum_d (student_{i,d} - teacher_{i,d})^2     (= D x "mean")

    "mean" is ``F.mse_loss``'s default, what both authors' code computes and what their published learning rates
    were tuned with, hence the default; "sum" is the per-sample squared distance the papers write. The teacher is
    detached. forward(student [B, D], teacher [B, D]) -> ``LossOutput(loss, {"mse": loss})``.
    """

    def __init__(self, form: str = "mean"):
        super().__init__()
        _check_form(form)
        self.form = form

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> LossOutput:
        loss = mse_distill(student, teacher, self.form)
        return LossOutput(loss, {"mse": loss})


def _check_form(form: str) -> None:
    if form not in MSE_FORMS:
        raise ConfigError(f"the MSE form must be one of {', '.join(MSE_FORMS)}, got {form!r}")


def mse_distill(student: torch.Tensor, teacher: torch.Tensor, form: str = "mean") -> torch.Tensor:
    """The functional form of ``MSEDistillLoss`` (formula there): student, teacher [B, D] -> a scalar."""
    check_pair(student, teacher, "student", "teacher")
    _check_form(form)
    if form == "mean":
        return F.mse_loss(student, teacher.detach())
    return (student - teacher.detach()).pow(2).sum(dim=-1).mean()


class CLLCLIPLoss(nn.Module):
    """CLL-CLIP's objective (Yang et al. 2024): cross-modal InfoNCE plus cross-lingual distillation::

        loss = gamma1 * InfoNCE(norm(image), norm(text), s) + gamma2 * MSE(text, sg(teacher))

    Normalisation convention: all three inputs are RAW embeddings. The InfoNCE term L2-normalises image and
    foreign text inside (cosine similarities, as CLIP; ``InfoNCELoss``); the MSE term compares the raw foreign text
    embedding with the raw frozen English CLIP text embedding of the parallel English caption
    (``MSEDistillLoss``: the authors' mean over elements by default, ``form="sum"`` for the written per-sample
    sum), so it also matches their norms. gamma1 = 0.01, gamma2 = 1 in the paper; ``s = 1/T`` with T learnable
    from 0.07 belongs to the model (``ContinualTextEncoder.logit_scale``) and is given to ``forward``.

    A text-only run (``image`` None: no image tower) trains the MSE term alone: ``loss = gamma2 * MSE``.

    ``teacher`` may hold fewer rows than ``text`` ([B' <= B, D]): the MSE then runs over text's first B' rows and
    the rows after them take part in InfoNCE only (replayed memory rows, distilled by a term of their own: the
    CLL-CLIP authors' ER and DER).

    forward(image [B, D] or None, text [B, D], teacher [B, D] or [B', D], logit_scale) ->
    ``LossOutput(loss, {"infonce": InfoNCE, "mse": MSE})`` (terms unweighted; ``{"mse"}`` alone without images).
    """

    def __init__(self, gamma1: float, gamma2: float, form: str = "mean"):
        super().__init__()
        _check_form(form)
        self.gamma1, self.gamma2, self.form = gamma1, gamma2, form

    def forward(
        self,
        image_features: torch.Tensor | None,
        text_features: torch.Tensor,
        teacher_features: torch.Tensor,
        logit_scale: Scalar | None = None,
    ) -> LossOutput:
        if image_features is None:
            mse = mse_distill(text_features, teacher_features, self.form)
            return LossOutput(self.gamma2 * mse, {"mse": mse})
        check_pair(image_features, text_features, "image_features", "text_features")
        contrastive = info_nce(F.normalize(image_features, dim=-1), F.normalize(text_features, dim=-1), logit_scale)
        if teacher_features.shape[0] > text_features.shape[0]:
            raise ValueError(
                f"teacher has more rows ({teacher_features.shape[0]}) than text ({text_features.shape[0]})"
            )
        mse = mse_distill(text_features[: teacher_features.shape[0]], teacher_features, self.form)
        return LossOutput(self.gamma1 * contrastive + self.gamma2 * mse, {"infonce": contrastive, "mse": mse})


class EnglishBridgeLoss(nn.Module):
    """English-bridge alignment, the cross-lingual style that CCR_k (Nie et al. 2024) argues against: pull every
    non-English caption towards the English caption of the same image::

        loss = mean over (j, k != en present, d) of (t_{j,k,d} - sg(t_{j,en,d}))^2

    (F.mse_loss's mean over elements), over images whose English caption is present. English is detached (``sg``,
    a stop-gradient): it is the teacher, as in MLA's NLT where the English tower is frozen. Without it the loss
    could also be lowered by moving English towards the translations, dragging the one language the image side
    was trained with. Returns 0 (with a graph) when no pair is present.

    Given ``teacher [B, D]`` (the frozen CLIP's English features, when English trains: CLL-CLIP's table), the
    bridge targets the teacher instead, and the trained English slot is pulled to it like the other languages.

    forward(text [B, K, D] (train-ccrk passes L2-normalised features), text_mask [B, K] bool or None, teacher) ->
    ``LossOutput(loss, {"english_bridge_mse": loss})``.
    """

    def __init__(self, english_index: int = 0):
        super().__init__()
        self.english_index = english_index

    def forward(
        self, text_features: torch.Tensor, text_mask: torch.Tensor | None = None, teacher: torch.Tensor | None = None
    ) -> LossOutput:
        if teacher is None:
            loss = english_bridge_mse(text_features, self.english_index, text_mask)
        else:
            mask = check_multilingual(None, text_features, text_mask)
            english = mask[:, self.english_index : self.english_index + 1]
            loss = english_bridge_mse(
                torch.cat([teacher.unsqueeze(1), text_features], dim=1), 0, torch.cat([english, mask], 1)
            )
        return LossOutput(loss, {"english_bridge_mse": loss})


def english_bridge_mse(
    text_features: torch.Tensor, english_index: int = 0, text_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The functional form of ``EnglishBridgeLoss`` without a teacher (formula there): text [B, K, D]."""
    mask = check_multilingual(None, text_features, text_mask)
    batch, slots, dim = text_features.shape
    if not -slots <= english_index < slots:
        raise ValueError(f"english_index {english_index} out of range for K = {slots}")
    english_index %= slots
    text = zero_masked(text_features, mask)
    english = text[:, english_index].detach().unsqueeze(1)  # [B, 1, D]
    pairs = mask & mask[:, english_index : english_index + 1]  # [B, K]: language and English both present
    pairs[:, english_index] = False
    squared = ((text - english) ** 2).sum(dim=-1)  # [B, K]
    pair_count = int(pairs.sum())
    if pair_count == 0:
        return zero_with_graph(text)
    return squared[pairs].sum() / (pair_count * dim)
