"""Contrastive losses: symmetric InfoNCE (CLIP, MLA LE) and CCR_k's 1-to-K loss with its 1-to-1 baseline."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.core.errors import ConfigError
from mltk.losses.base import LogitScale, LossOutput, Scalar, check_multilingual, check_pair, zero_masked

ONE_TO_K_WEIGHTINGS = ("paper", "code")


class InfoNCELoss(nn.Module):
    """Symmetric InfoNCE (CLIP; Radford et al. 2021) on L2-normalised features, pairs on the diagonal::

        logits = s * a @ b.T                                                [B, B]
        loss = (CE(logits, arange(B)) + CE(logits.T, arange(B))) / 2

    i.e. the mean over rows of ``-log softmax_j(s <a_i, b_j>)[i]`` averaged with the same for ``b -> a``.

    The logit scale ``s = 1/T`` is given to ``forward``, as open_clip's ``ClipLoss`` takes it: it belongs to the
    model being trained (CLIP's learnable ``logit_scale``, CLL-CLIP's ``LogitScale``), or is a constant (MLA LE: a
    fixed 100, Zhang et al. 2023).

    forward(a [B, D], b [B, D], logit_scale: float or 0-dim tensor) -> ``LossOutput(loss, {"infonce": loss})``.
    """

    def forward(self, a: torch.Tensor, b: torch.Tensor, logit_scale: Scalar) -> LossOutput:
        loss = info_nce(a, b, logit_scale)
        return LossOutput(loss, {"infonce": loss})


def info_nce(a: torch.Tensor, b: torch.Tensor, logit_scale: Scalar) -> torch.Tensor:
    """The functional form of ``InfoNCELoss`` (formula there): a, b [B, D] L2-normalised -> a scalar."""
    check_pair(a, b, "a", "b")
    logits = logit_scale * (a @ b.T)  # [B, B]
    targets = torch.arange(a.shape[0], device=a.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


def _own_block(matrix: torch.Tensor, batch: int, slots: int) -> torch.Tensor:
    """From a [B, B*K] matrix whose column ``i*K + k`` is caption k of image i, take entry (j, j*K + k) for every
    j, k: the scores of each image with its own K captions, shape [B, K]."""
    return matrix.reshape(batch, batch, slots).diagonal(dim1=0, dim2=1).transpose(0, 1)


def _check_weighting(weighting: str) -> None:
    if weighting not in ONE_TO_K_WEIGHTINGS:
        raise ConfigError(f"unknown 1-to-K weighting {weighting!r}; expected one of {', '.join(ONE_TO_K_WEIGHTINGS)}")


class OneToKLoss(nn.Module):
    """1-to-K contrastive loss of CCR_k (Nie et al. 2024): every image is aligned with its captions in all K
    languages at once, so no language bridges the others.

    With ``s_{j,(i,k)} = <v_j, t_{i,k}> / T`` (image j, caption of image i in language k), present captions only:

    - image -> text, per image j with K_j present languages (K_j = K without a mask)::

          L_i2t(j) = -(1/K_j) * sum_k log( exp(s_{j,(j,k)}) / sum_{i,k'} exp(s_{j,(i,k')}) )

      The denominator holds the K_j positives and every other image's captions in every language.
    - text -> image, per caption (j, k): ordinary InfoNCE against all B images::

          L_t2i(j,k) = -log( exp(s_{j,(j,k)}) / sum_i exp(s_{i,(j,k)}) )

    ``weighting="paper"`` (default): ``loss = (mean_j L_i2t(j) + mean_{(j,k)} L_t2i(j,k)) / 2``.

    ``weighting="code"``: the authors' released code (BUAADreamer/CCRK, ``get_unialign_contrastive_loss``) uses
    unit weights on the K positives and divides the mean of both directions by K::

        loss = (mean_j sum_k -log p_i2t(j,k)  +  mean_{(j,k)} L_t2i(j,k)) / (2 K)

    which equals the paper's image->text half plus the text->image half down-weighted by 1/K; K is the number of
    language slots (``text_features.shape[1]``) even when some are masked.

    The temperature is learnable from 0.07 (stored as log(1/T), ``LogitScale``; ``temperature_range`` clamps it).
    forward(image [B, D], text [B, K, D] (both L2-normalised), text_mask [B, K] bool or None) ->
    ``LossOutput(loss, {"one_to_k": loss, "logit_scale": s})``. Images with no present caption are left out of the
    image->text mean. One [B, B*K] logits matrix serves both directions: memory and time are linear in K.
    """

    def __init__(
        self,
        init_temperature: float,
        learnable: bool = True,
        weighting: str = "paper",
        temperature_range: tuple[float, float] | None = None,
    ):
        super().__init__()
        _check_weighting(weighting)
        self.logit_scale = LogitScale(init_temperature, learnable, temperature_range=temperature_range)
        self.weighting = weighting

    def forward(
        self, image_features: torch.Tensor, text_features: torch.Tensor, text_mask: torch.Tensor | None = None
    ) -> LossOutput:
        scale = self.logit_scale()
        loss = one_to_k_contrastive(image_features, text_features, 1.0 / scale, text_mask, self.weighting)
        return LossOutput(loss, {"one_to_k": loss, "logit_scale": scale})


def one_to_k_contrastive(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    temperature: Scalar,
    text_mask: torch.Tensor | None = None,
    weighting: str = "paper",
) -> torch.Tensor:
    """The functional form of ``OneToKLoss`` (formula there) at a given temperature T (float or 0-dim tensor)."""
    _check_weighting(weighting)
    mask = check_multilingual(image_features, text_features, text_mask)
    batch, slots, dim = text_features.shape
    present_per_image = mask.sum(dim=1)  # [B]
    has_caption = present_per_image > 0
    if not bool(has_caption.any()):
        raise ValueError("1-to-K loss needs at least one present caption in the batch")

    text = zero_masked(text_features, mask).reshape(batch * slots, dim)  # [B*K, D], row i*K + k
    logits = (image_features @ text.T) / temperature  # [B, B*K]
    present_columns = mask.reshape(1, batch * slots)

    i2t_log_prob = logits.masked_fill(~present_columns, float("-inf")).log_softmax(dim=1)  # [B, B*K]
    own_i2t = _own_block(i2t_log_prob, batch, slots)  # [B, K]
    i2t_sum = -torch.where(mask, own_i2t, torch.zeros((), dtype=own_i2t.dtype, device=own_i2t.device)).sum(dim=1)

    t2i_log_prob = logits.log_softmax(dim=0)  # each caption column against all B images
    t2i = -_own_block(t2i_log_prob, batch, slots)[mask].mean()

    if weighting == "paper":
        i2t = (i2t_sum[has_caption] / present_per_image[has_caption]).mean()
        return (i2t + t2i) / 2
    return (i2t_sum[has_caption].mean() + t2i) / (2 * slots)


def sample_one_language(text_mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """For each row of ``text_mask [B, K]`` the index of one present language, uniform over the present ones.

    Sampling runs on the CPU (so a CPU generator works for CUDA masks); returns LongTensor [B] on the mask's
    device. Every row needs at least one present language.
    """
    weights = text_mask.detach().to("cpu", torch.float32)
    if not bool((weights.sum(dim=1) > 0).all()):
        raise ValueError("every row of text_mask needs at least one present language")
    return torch.multinomial(weights, 1, generator=generator).squeeze(1).to(text_mask.device)


class OneToOneLoss(nn.Module):
    """The 1-to-1 baseline that 1-to-K replaces (CCR_k, Nie et al. 2024): one language is sampled per image,
    uniformly over its present languages (``sample_one_language``), then symmetric InfoNCE (``InfoNCELoss``)
    between the images and their sampled captions with scale ``s = 1/T``::

        k_j ~ Uniform{k : text_mask[j, k]}          loss = InfoNCE(v, (t_{j,k_j})_j, s)

    Images with no present caption are dropped. The temperature is learnable from 0.07, as for 1-to-K.
    forward(image [B, D], text [B, K, D] (L2-normalised), text_mask [B, K] bool or None, generator) ->
    ``LossOutput(loss, {"one_to_one": loss, "logit_scale": s})``.
    """

    def __init__(
        self, init_temperature: float, learnable: bool = True, temperature_range: tuple[float, float] | None = None
    ):
        super().__init__()
        self.logit_scale = LogitScale(init_temperature, learnable, temperature_range=temperature_range)

    def forward(
        self,
        image_features: torch.Tensor,
        text_features: torch.Tensor,
        text_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> LossOutput:
        scale = self.logit_scale()
        loss = one_to_one_contrastive(image_features, text_features, 1.0 / scale, text_mask, generator)
        return LossOutput(loss, {"one_to_one": loss, "logit_scale": scale})


def one_to_one_contrastive(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    temperature: Scalar,
    text_mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The functional form of ``OneToOneLoss`` (formula there) at a given temperature T."""
    mask = check_multilingual(image_features, text_features, text_mask)
    keep = mask.any(dim=1)
    image, text, mask = image_features[keep], text_features[keep], mask[keep]
    if image.shape[0] == 0:
        raise ValueError("1-to-1 loss needs at least one image with a present caption")
    language = sample_one_language(mask, generator)  # [B']
    sampled_text = text[torch.arange(text.shape[0], device=text.device), language]  # [B', D]
    return info_nce(image, sampled_text, 1.0 / temperature)
