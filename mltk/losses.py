"""The loss family of every mltk training stage: pure functions on tensors, plus the
modules that hold a learnable temperature (``LogitScale``, ``OneToKLoss``, ``OneToOneLoss``).

Conventions shared by all functions:

- ``B`` is the batch (images or sentences), ``D`` the embedding width, ``K`` the number of language slots.
- Contrastive losses (``info_nce``, ``one_to_k_contrastive``, ``one_to_one_contrastive``) and the ranking losses
  expect L2-normalised features: their scores are plain dot products (cosine similarities). ``cll_clip_loss`` is
  the one exception and normalises inside, because its MSE term needs the raw embeddings.
- MSE losses default to torch's ``F.mse_loss`` reduction, the mean over every element (rows x D), which both
  authors' code uses and their hyper-parameters were tuned with; ``mse_form="sum"`` gives the papers' written form
  (squared distance summed over D, averaged over rows: D times larger).
- ``text_mask [B, K]`` (bool, True = present) marks which languages an image really has. Masked slots may hold
  anything (even NaN): they are zeroed before any arithmetic, take no part in any softmax, get zero gradient.
- A temperature ``T`` and a logit scale ``s`` are the same thing: ``s = 1 / T``. Learnable ones are stored as
  ``log(1/T)`` and clamped at ``s <= 100``, as open_clip does (``LogitScale``).

Papers:

- InfoNCE, symmetric (CLIP): Radford et al. 2021, "Learning Transferable Visual Models From Natural Language
  Supervision". MLA LE uses it with a fixed scale 100 (Zhang et al. 2023, "Generalizing Multimodal Pre-training
  into Multilingual via Language Acquisition").
- 1-to-K contrastive: Nie et al. 2024, "Improving the Consistency in Cross-Lingual Cross-Modal Retrieval with
  1-to-K Contrastive Learning" (CCR_k).
- CLL-CLIP: Yang et al. 2024, "Embracing Language Inclusivity and Diversity in CLIP through Continual Language
  Learning".
- Pairwise ranking hinge: Kiros et al. 2014 "Unifying Visual-Semantic Embeddings" / Faghri et al. 2018 "VSE++";
  MLMME: Calixto, Liu and Campbell 2017 "Multilingual Multi-modal Embeddings for Natural Language Processing"
  (arXiv:1702.01101; the image-sentence / sentence-sentence weighting by beta);
  AME: Mohammadshahi et al. 2019 "Aligning Multilingual Word Embeddings for Cross-Modal Retrieval Task".
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.core.errors import ConfigError

Scalar = float | torch.Tensor

MAX_LOGIT_SCALE = 100.0  # open_clip clamps exp(logit_scale) at 100 (temperature >= 0.01)
ONE_TO_K_WEIGHTINGS = ("paper", "code")


# ----------------------------------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------------------------------

class LogitScale(nn.Module):
    """A logit scale ``s = 1/T`` stored as ``log(1/T)`` (open_clip's parametrisation), clamped at ``s <= 100``.

    ``learnable=False`` keeps it as a buffer (MLA LE: T = 0.01, s = 100, never trained). The clamp is applied in
    ``forward`` (open_clip clamps the parameter in place after each step; both keep s <= 100, and here the
    gradient is simply zero beyond the bound). ``temperature_range=(low, high)`` clamps T to [low, high] instead
    (CCR_k's code: [0.001, 0.5], i.e. s in [2, 1000]).
    """

    def __init__(self, init_temperature: float = 0.07, learnable: bool = True, max_scale: float = MAX_LOGIT_SCALE,
                 temperature_range: tuple[float, float] | None = None):
        super().__init__()
        if not init_temperature > 0:
            raise ConfigError(f"temperature must be positive, got {init_temperature}")
        log_scale = torch.tensor(math.log(1.0 / init_temperature), dtype=torch.float32)
        if learnable:
            self.log_scale = nn.Parameter(log_scale)
        else:
            self.register_buffer("log_scale", log_scale)
        self.min_scale = 0.0
        self.max_scale = max_scale
        if temperature_range is not None:
            low, high = temperature_range
            if not 0 < low < high:
                raise ConfigError(f"a temperature range needs 0 < low < high, got {temperature_range}")
            self.min_scale, self.max_scale = 1.0 / high, 1.0 / low

    def forward(self) -> torch.Tensor:
        return self.log_scale.exp().clamp(min=self.min_scale, max=self.max_scale)  # 0-dim tensor

    @property
    def temperature(self) -> float:
        return 1.0 / float(self().detach())


def _check_pair(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.dim() != 2 or a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must both be [B, D], got {tuple(a.shape)} and {tuple(b.shape)}")


def _check_multilingual(image: torch.Tensor | None, text: torch.Tensor, text_mask: torch.Tensor | None
                        ) -> torch.Tensor:
    """Validate [B, D] / [B, K, D] / [B, K] shapes and return the mask (all True when None)."""
    if text.dim() != 3:
        raise ValueError(f"text features must be [B, K, D], got {tuple(text.shape)}")
    batch, slots, dim = text.shape
    if image is not None and (image.dim() != 2 or image.shape != (batch, dim)):
        raise ValueError(f"image features must be [B, D] = [{batch}, {dim}], got {tuple(image.shape)}")
    if text_mask is None:
        return torch.ones(batch, slots, dtype=torch.bool, device=text.device)
    if text_mask.shape != (batch, slots):
        raise ValueError(f"text_mask must be [B, K] = [{batch}, {slots}], got {tuple(text_mask.shape)}")
    return text_mask.to(device=text.device, dtype=torch.bool)


def _zero_masked(text: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Replace masked slots of ``text [B, K, D]`` by zeros so that garbage (even NaN) can never leak, forward or
    backward (``torch.where`` passes zero gradient to the unselected branch)."""
    return torch.where(mask.unsqueeze(-1), text, torch.zeros((), dtype=text.dtype, device=text.device))


def _own_block(matrix: torch.Tensor, batch: int, slots: int) -> torch.Tensor:
    """From a [B, B*K] matrix whose column ``i*K + k`` is caption k of image i, take entry (j, j*K + k) for every
    j, k: the scores of each image with its own K captions, shape [B, K]."""
    return matrix.reshape(batch, batch, slots).diagonal(dim1=0, dim2=1).transpose(0, 1)


# ----------------------------------------------------------------------------------------------------------------
# InfoNCE (CLIP, MLA LE)
# ----------------------------------------------------------------------------------------------------------------

def info_nce(a: torch.Tensor, b: torch.Tensor, logit_scale: Scalar) -> torch.Tensor:
    """Symmetric InfoNCE (CLIP) on L2-normalised features, pairs on the diagonal.

    ``logits = s * a @ b.T`` [B, B];
    ``loss = (CE(logits, arange(B)) + CE(logits.T, arange(B))) / 2``, i.e. the mean over rows of
    ``-log softmax_j(s <a_i, b_j>)[i]`` averaged with the same for ``b -> a``.

    a, b: [B, D]; logit_scale: float or 0-dim tensor (``1 / temperature``; MLA LE: 100). Returns a scalar.
    """
    _check_pair(a, b, "a", "b")
    logits = logit_scale * (a @ b.T)  # [B, B]
    targets = torch.arange(a.shape[0], device=a.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


# ----------------------------------------------------------------------------------------------------------------
# 1-to-K and 1-to-1 contrastive (CCR_k)
# ----------------------------------------------------------------------------------------------------------------

def one_to_k_contrastive(image_features: torch.Tensor, text_features: torch.Tensor, temperature: Scalar,
                         text_mask: torch.Tensor | None = None, weighting: str = "paper") -> torch.Tensor:
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

    image_features [B, D], text_features [B, K, D] (both L2-normalised), temperature: float or 0-dim tensor,
    text_mask [B, K] bool or None. Images with no present caption are left out of the image->text mean.
    One [B, B*K] logits matrix serves both directions: memory and time are linear in K.
    """
    if weighting not in ONE_TO_K_WEIGHTINGS:
        raise ConfigError(f"unknown 1-to-K weighting {weighting!r}; expected one of {', '.join(ONE_TO_K_WEIGHTINGS)}")
    mask = _check_multilingual(image_features, text_features, text_mask)
    batch, slots, dim = text_features.shape
    present_per_image = mask.sum(dim=1)  # [B]
    has_caption = present_per_image > 0
    if not bool(has_caption.any()):
        raise ValueError("1-to-K loss needs at least one present caption in the batch")

    text = _zero_masked(text_features, mask).reshape(batch * slots, dim)  # [B*K, D], row i*K + k
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


class OneToKLoss(nn.Module):
    """``one_to_k_contrastive`` with its temperature (learnable from 0.07 in CCR_k, stored as log(1/T))."""

    def __init__(self, init_temperature: float = 0.07, learnable: bool = True, weighting: str = "paper",
                 temperature_range: tuple[float, float] | None = None):
        super().__init__()
        if weighting not in ONE_TO_K_WEIGHTINGS:
            raise ConfigError(f"unknown 1-to-K weighting {weighting!r}; "
                              f"expected one of {', '.join(ONE_TO_K_WEIGHTINGS)}")
        self.logit_scale = LogitScale(init_temperature, learnable, temperature_range=temperature_range)
        self.weighting = weighting

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                text_mask: torch.Tensor | None = None) -> torch.Tensor:
        return one_to_k_contrastive(image_features, text_features, 1.0 / self.logit_scale(), text_mask,
                                    self.weighting)


def sample_one_language(text_mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """For each row of ``text_mask [B, K]`` the index of one present language, uniform over the present ones.

    Sampling runs on the CPU (so a CPU generator works for CUDA masks); returns LongTensor [B] on the mask's
    device. Every row needs at least one present language.
    """
    weights = text_mask.detach().to("cpu", torch.float32)
    if not bool((weights.sum(dim=1) > 0).all()):
        raise ValueError("every row of text_mask needs at least one present language")
    return torch.multinomial(weights, 1, generator=generator).squeeze(1).to(text_mask.device)


def one_to_one_contrastive(image_features: torch.Tensor, text_features: torch.Tensor, temperature: Scalar,
                           text_mask: torch.Tensor | None = None,
                           generator: torch.Generator | None = None) -> torch.Tensor:
    """The 1-to-1 baseline that 1-to-K replaces (CCR_k, Nie et al. 2024): one language is sampled per image,
    uniformly over its present languages (``sample_one_language``), then symmetric InfoNCE (``info_nce``) between
    the images and their sampled captions with scale ``1/T``. Images with no present caption are dropped.

    image_features [B, D], text_features [B, K, D] (L2-normalised), text_mask [B, K] bool or None.
    """
    mask = _check_multilingual(image_features, text_features, text_mask)
    keep = mask.any(dim=1)
    image, text, mask = image_features[keep], text_features[keep], mask[keep]
    if image.shape[0] == 0:
        raise ValueError("1-to-1 loss needs at least one image with a present caption")
    language = sample_one_language(mask, generator)  # [B']
    sampled_text = text[torch.arange(text.shape[0], device=text.device), language]  # [B', D]
    return info_nce(image, sampled_text, 1.0 / temperature)


class OneToOneLoss(nn.Module):
    """``one_to_one_contrastive`` with its temperature (learnable from 0.07, as for 1-to-K)."""

    def __init__(self, init_temperature: float = 0.07, learnable: bool = True,
                 temperature_range: tuple[float, float] | None = None):
        super().__init__()
        self.logit_scale = LogitScale(init_temperature, learnable, temperature_range=temperature_range)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                text_mask: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        return one_to_one_contrastive(image_features, text_features, 1.0 / self.logit_scale(), text_mask,
                                      generator)


# ----------------------------------------------------------------------------------------------------------------
# English bridge (cross-lingual alignment through English)
# ----------------------------------------------------------------------------------------------------------------

def english_bridge_mse(text_features: torch.Tensor, english_index: int = 0,
                       text_mask: torch.Tensor | None = None) -> torch.Tensor:
    """English-bridge alignment, the cross-lingual style that CCR_k argues against: pull every non-English
    caption towards the English caption of the same image.

    ``loss = mean over (j, k != en present, d) of (t_{j,k,d} - sg(t_{j,en,d}))^2`` (F.mse_loss's mean over
    elements), over images whose English caption is present.

    English is detached (``sg``, a stop-gradient): it is the teacher, as in MLA's NLT where the English tower is
    frozen. Without it the loss could also be lowered by moving English towards the translations, dragging the
    one language the image side was trained with. Returns 0 (with a graph) when no pair is present.

    text_features [B, K, D] (as the caller's convention has them; train-ccrk passes L2-normalised features),
    english_index: the English slot, text_mask [B, K] bool or None.
    """
    mask = _check_multilingual(None, text_features, text_mask)
    batch, slots, dim = text_features.shape
    if not -slots <= english_index < slots:
        raise ValueError(f"english_index {english_index} out of range for K = {slots}")
    english_index %= slots
    text = _zero_masked(text_features, mask)
    english = text[:, english_index].detach().unsqueeze(1)  # [B, 1, D]
    pairs = mask & mask[:, english_index:english_index + 1]  # [B, K]: language and English both present
    pairs[:, english_index] = False
    squared = ((text - english) ** 2).sum(dim=-1)  # [B, K]
    pair_count = int(pairs.sum())
    if pair_count == 0:
        return (text * 0).sum()
    return squared[pairs].sum() / (pair_count * dim)


# ----------------------------------------------------------------------------------------------------------------
# Pairwise ranking hinge (VSE, MLMME, AME)
# ----------------------------------------------------------------------------------------------------------------

def pairwise_ranking_hinge(image_features: torch.Tensor, text_features: torch.Tensor, margin: float = 0.2,
                           max_violation: bool = False) -> torch.Tensor:
    """Bidirectional pairwise ranking (hinge) loss over in-batch negatives (Kiros et al. 2014; VSE++).

    With ``s(i, j) = <x_i, y_j>`` on L2-normalised features and pairs on the diagonal::

        loss = sum_i sum_{j != i} [margin - s(i,i) + s(i,j)]_+      (x_i against the wrong y_j)
             + sum_i sum_{j != i} [margin - s(i,i) + s(j,i)]_+      (y_i against the wrong x_j)

    A sum, not a mean, as VSE/VSE++/AME use it (so it grows with B^2; pick the learning rate with that in mind).
    ``max_violation=True`` keeps only the hardest negative of each anchor (VSE++). Works for any two aligned sets
    (image-sentence or sentence-sentence). x, y: [B, D]. Returns a scalar.
    """
    _check_pair(image_features, text_features, "image_features", "text_features")
    scores = image_features @ text_features.T  # [B, B]
    positive = scores.diagonal()
    negatives = ~torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    cost_text = ((margin - positive.unsqueeze(1) + scores).clamp(min=0) * negatives)  # row i: x_i vs y_j
    cost_image = ((margin - positive.unsqueeze(0) + scores).clamp(min=0) * negatives)  # column i: y_i vs x_j
    if max_violation:
        return cost_text.max(dim=1).values.sum() + cost_image.max(dim=0).values.sum()
    return cost_text.sum() + cost_image.sum()


def mlmme_loss(image_features: torch.Tensor, text_a: torch.Tensor, text_b: torch.Tensor, margin: float = 0.2,
               beta: float = 0.5, max_violation: bool = False) -> torch.Tensor:
    """Multilingual multimodal embedding loss (MLMME, Calixto, Liu and Campbell 2017; AME uses the same terms):
    image-sentence ranking for both languages and sentence-sentence ranking between the parallel captions, traded
    off by beta as the paper writes it::

        S_I = H(image, text_a) + H(image, text_b)          S_S = H(text_a, text_b)
        loss = beta * S_I + (1 - beta) * S_S               (beta in [0, 1])

    so beta = 1 is the image-sentence term alone and beta = 0 the sentence-sentence term alone; beta = 0.5 (the
    default) weights them equally. ``H = pairwise_ranking_hinge`` (margin 0.2). All inputs [B, D], L2-normalised,
    row i of each describing the same image.
    """
    return mlmme_weighted(*mlmme_terms(image_features, text_a, text_b, margin, max_violation), beta)


def mlmme_weighted(image_sentence: torch.Tensor, sentence_sentence: torch.Tensor, beta: float) -> torch.Tensor:
    """``beta * S_I + (1 - beta) * S_S``, beta in [0, 1]: MLMME's loss from its two terms."""
    if not 0.0 <= beta <= 1.0:
        raise ConfigError(f"MLMME's beta weighs beta * S_I + (1 - beta) * S_S and must lie in [0, 1], got {beta}")
    return beta * image_sentence + (1.0 - beta) * sentence_sentence


def mlmme_multilingual_terms(image_features: torch.Tensor, text_features: torch.Tensor, text_mask: torch.Tensor,
                             margin: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """MLMME's two terms over K languages, summed as the paper writes them (Calixto, Liu and Campbell 2017)::

        S_I = sum_k H(image, text_k)                 S_S = sum_{k < l} H(text_k, text_l)

    each H (``pairwise_ranking_hinge``) over the images with the caption(s) it needs (``text_mask`` [B, K] bool;
    a term with fewer than two has no negatives and is left out). K = 2: ``mlmme_terms``. image [B, D], text
    [B, K, D], L2-normalised. Returns ``(S_I, S_S)``."""
    image_sentence = sentence_sentence = (text_features * 0).sum()
    slots = text_features.shape[1]
    for k in range(slots):
        rows = text_mask[:, k]
        if int(rows.sum()) >= 2:
            image_sentence = image_sentence + pairwise_ranking_hinge(image_features[rows], text_features[rows, k],
                                                                     margin)
        for other in range(k + 1, slots):
            both = rows & text_mask[:, other]
            if int(both.sum()) >= 2:
                sentence_sentence = sentence_sentence + pairwise_ranking_hinge(
                    text_features[both, k], text_features[both, other], margin)
    return image_sentence, sentence_sentence


def mlmme_pivot_terms(image_features: torch.Tensor, text_features: torch.Tensor, text_mask: torch.Tensor,
                      english: int, margin: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """MLMME over K languages with English as the pivot (mltk's earlier form, ``--mlmme-form english-pivot``): for
    each other language k, ``mlmme_terms(image, text_en, text_k)`` over the images with both captions; ``(S_I,
    S_S)`` are the means of the two terms over those languages. Same shapes as ``mlmme_multilingual_terms``."""
    parts = []  # per language: (S_I, S_S)
    for k in range(text_features.shape[1]):
        both = text_mask[:, k] & text_mask[:, english]
        if k != english and int(both.sum()) >= 2:
            parts.append(mlmme_terms(image_features[both], text_features[both, english], text_features[both, k],
                                     margin))
    if not parts:
        zero = (text_features * 0).sum()
        return zero, zero
    return tuple(torch.stack(column).mean() for column in zip(*parts))  # the loss is linear in both


def mlmme_terms(image_features: torch.Tensor, text_a: torch.Tensor, text_b: torch.Tensor, margin: float = 0.2,
                max_violation: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """MLMME's two terms before beta weighs them: ``(S_I, S_S)`` as ``mlmme_loss`` defines them (the training
    logs show each one)."""
    _check_pair(image_features, text_a, "image_features", "text_a")
    _check_pair(text_a, text_b, "text_a", "text_b")
    image_sentence = (pairwise_ranking_hinge(image_features, text_a, margin, max_violation)
                      + pairwise_ranking_hinge(image_features, text_b, margin, max_violation))
    return image_sentence, pairwise_ranking_hinge(text_a, text_b, margin, max_violation)


# ----------------------------------------------------------------------------------------------------------------
# Distillation (MLA NLT) and CLL-CLIP
# ----------------------------------------------------------------------------------------------------------------

MSE_FORMS = ("mean", "sum")


def mse_distill(student: torch.Tensor, teacher: torch.Tensor, form: str = "mean") -> torch.Tensor:
    """MLA's NLT loss (Zhang et al. 2023) and CLL-CLIP's cross-lingual term: MSE between the student's embedding
    of a translation and the frozen English CLIP text embedding of its source sentence, both UNnormalised::

        form "mean" (default):  loss = mean_{i, d} (student_{i,d} - teacher_{i,d})^2
        form "sum":             loss = mean_i sum_d (student_{i,d} - teacher_{i,d})^2     (= D x "mean")

    "mean" is ``F.mse_loss``'s default, what both authors' code computes and what their published learning rates
    were tuned with, hence the default; "sum" is the per-sample squared distance the papers write. The teacher is
    detached. student, teacher: [B, D]. Returns a scalar.
    """
    _check_pair(student, teacher, "student", "teacher")
    if form == "mean":
        return F.mse_loss(student, teacher.detach())
    if form == "sum":
        return (student - teacher.detach()).pow(2).sum(dim=-1).mean()
    raise ConfigError(f"the MSE form must be one of {', '.join(MSE_FORMS)}, got {form!r}")


def cll_clip_loss(image_features: torch.Tensor, text_features: torch.Tensor, teacher_features: torch.Tensor,
                  logit_scale: Scalar, gamma1: float = 0.01, gamma2: float = 1.0, mse_form: str = "mean"
                  ) -> torch.Tensor:
    """CLL-CLIP's objective (Yang et al. 2024): cross-modal InfoNCE plus cross-lingual distillation::

        loss = gamma1 * info_nce(norm(image), norm(text), s) + gamma2 * mse(text, sg(teacher))

    Normalisation convention: all three inputs are RAW embeddings. The InfoNCE term L2-normalises image and
    foreign text inside (cosine similarities, as CLIP); the MSE term compares the raw foreign text embedding with
    the raw frozen English CLIP text embedding of the parallel English caption (``mse_distill``: the authors'
    mean over elements by default, ``mse_form="sum"`` for the written per-sample sum), so it also matches their
    norms. gamma1 = 0.01, gamma2 = 1 in the paper; ``s = 1/T`` with T
    learnable from 0.07. image, text, teacher: [B, D]. Returns a scalar.
    """
    contrastive, distill = cll_clip_terms(image_features, text_features, teacher_features, logit_scale, mse_form)
    return gamma1 * contrastive + gamma2 * distill


def cll_clip_terms(image_features: torch.Tensor, text_features: torch.Tensor, teacher_features: torch.Tensor,
                   logit_scale: Scalar, mse_form: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """CLL-CLIP's two terms before gamma1 and gamma2 weigh them: ``(info_nce, mse)`` exactly as ``cll_clip_loss``
    computes them (the training logs show each one)."""
    _check_pair(image_features, text_features, "image_features", "text_features")
    contrastive = info_nce(F.normalize(image_features, dim=-1), F.normalize(text_features, dim=-1), logit_scale)
    return contrastive, mse_distill(text_features, teacher_features, mse_form)
