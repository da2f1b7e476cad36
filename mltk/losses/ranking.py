"""Ranking (hinge) losses: the bidirectional pairwise ranking loss of VSE and MLMME, which builds on it."""

from __future__ import annotations

import torch
import torch.nn as nn

from mltk.core.errors import ConfigError
from mltk.losses.base import LossOutput, check_multilingual, check_pair, zero_with_graph


SIMILARITIES = ("cosine", "order")
AME_MARGINS = {"cosine": 0.2, "order": 0.05}  # AME's margins: symmetric (cosine) 0.2, asymmetric (order) 0.05


def order_violation_similarity(specific: torch.Tensor, general: torch.Tensor) -> torch.Tensor:
    """Asymmetric order-violation similarity (Vendrov et al. 2016, "Order-Embeddings of Images and Language"; AME's
    asymmetric similarity): ``S(a, b) = -||max(0, b - a)||^2``, zero when b lies below a in every coordinate
    (``a`` the specific item, an image; ``b`` the general one, its caption), negative otherwise.

    specific [B, D], general [M, D] -> [B, M], entry (i, j) = S(specific_i, general_j). The squared form of the
    paper (VSE++'s code takes the square root; Vendrov also keeps embeddings non-negative with an absolute value,
    which mltk leaves to the caller).
    """
    violation = (general.unsqueeze(0) - specific.unsqueeze(1)).clamp(min=0)  # [B, M, D]
    return -violation.pow(2).sum(-1)


def ranking_scores(image_features: torch.Tensor, text_features: torch.Tensor, similarity: str = "cosine"
                   ) -> torch.Tensor:
    """[B, D] x [B, D] -> [B, B] scores of ``pairwise_ranking_hinge``: dot products (cosine on normalised features)
    or ``order_violation_similarity(image, text)``."""
    if similarity == "cosine":
        return image_features @ text_features.T
    if similarity == "order":
        return order_violation_similarity(image_features, text_features)
    raise ConfigError(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {similarity!r}")


def pairwise_ranking_hinge(image_features: torch.Tensor, text_features: torch.Tensor, margin: float = 0.2,
                           max_violation: bool = False, similarity: str = "cosine") -> torch.Tensor:
    """Bidirectional pairwise ranking (hinge) loss over in-batch negatives (Kiros et al. 2014; VSE++).

    With ``s(i, j)`` the similarity of x_i and y_j (``similarity``: ``cosine``, ``<x_i, y_j>`` on L2-normalised
    features; ``order``, AME's asymmetric ``-||max(0, y_j - x_i)||^2``) and pairs on the diagonal::

        loss = sum_i sum_{j != i} [margin - s(i,i) + s(i,j)]_+      (x_i against the wrong y_j)
             + sum_i sum_{j != i} [margin - s(i,i) + s(j,i)]_+      (y_i against the wrong x_j)

    A sum, not a mean, as VSE/VSE++/AME use it (so it grows with B^2; pick the learning rate with that in mind).
    AME's margins: 0.2 with cosine, 0.05 with order (``AME_MARGINS``). ``max_violation=True`` keeps only the
    hardest negative of each anchor (VSE++). Works for any two aligned sets (image-sentence or sentence-sentence).
    x, y: [B, D]. Returns a scalar.
    """
    check_pair(image_features, text_features, "image_features", "text_features")
    scores = ranking_scores(image_features, text_features, similarity)  # [B, B]
    positive = scores.diagonal()
    negatives = ~torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    cost_text = ((margin - positive.unsqueeze(1) + scores).clamp(min=0) * negatives)  # row i: x_i vs y_j
    cost_image = ((margin - positive.unsqueeze(0) + scores).clamp(min=0) * negatives)  # column i: y_i vs x_j
    if max_violation:
        return cost_text.max(dim=1).values.sum() + cost_image.max(dim=0).values.sum()
    return cost_text.sum() + cost_image.sum()


class PairwiseRankingLoss(nn.Module):
    """The pairwise ranking hinge (``pairwise_ranking_hinge``: Kiros et al. 2014, VSE++ with ``max_violation``)
    between the images and their captions in each language, averaged over the languages::

        loss = mean_{k : >= 2 images have language k} H(v[present_k], t[present_k, k])

    (a language needs two images in the batch to have a negative). Returns 0 with a graph when none has.
    forward(image [B, D], text [B, K, D] (L2-normalised), text_mask [B, K] bool or None) ->
    ``LossOutput(loss, {"hinge": loss})``.
    """

    def __init__(self, margin: float = 0.2, max_violation: bool = False, similarity: str = "cosine"):
        super().__init__()
        self.margin, self.max_violation, self.similarity = margin, max_violation, similarity

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                text_mask: torch.Tensor | None = None) -> LossOutput:
        mask = check_multilingual(image_features, text_features, text_mask)
        terms = [pairwise_ranking_hinge(image_features[mask[:, k]], text_features[mask[:, k], k], self.margin,
                                        self.max_violation, self.similarity)
                 for k in range(text_features.shape[1]) if int(mask[:, k].sum()) >= 2]
        loss = torch.stack(terms).mean() if terms else zero_with_graph(text_features)
        return LossOutput(loss, {"hinge": loss})


class MLMMELoss(nn.Module):
    """Multilingual multimodal embedding loss (MLMME, Calixto, Liu and Campbell 2017; AME uses the same terms):
    image-sentence ranking for both languages of a parallel pair and sentence-sentence ranking between them,
    traded off by beta as the paper writes it. The image pivots English (``english_index``) and each other
    language k, over the images that have both::

        S_I(k) = H(image, text_en) + H(image, text_k)        S_S(k) = H(text_en, text_k)
        S_I = mean_k S_I(k)      S_S = mean_k S_S(k)         loss = beta * S_I + (1 - beta) * S_S

    so beta = 1 is the image-sentence term alone and beta = 0 the sentence-sentence term alone; beta = 0.5 weights
    them equally. ``H = pairwise_ranking_hinge`` (margin 0.2). A language needs two images with both captions in
    the batch; the loss is 0 (with a graph) when none has. forward(image [B, D], text [B, K, D] (L2-normalised),
    text_mask [B, K] bool or None) -> ``LossOutput(loss, {"mlmme_image_sentence": S_I,
    "mlmme_sentence_sentence": S_S})`` (the terms before beta weighs them).
    """

    def __init__(self, margin: float = 0.2, beta: float = 0.5, english_index: int = 0, max_violation: bool = False):
        super().__init__()
        if not 0.0 <= beta <= 1.0:
            raise ConfigError(f"MLMME's beta weighs beta * S_I + (1 - beta) * S_S and must lie in [0, 1], got {beta}")
        self.margin, self.beta, self.english_index, self.max_violation = margin, beta, english_index, max_violation

    def pair_terms(self, image: torch.Tensor, english: torch.Tensor, other: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(S_I(k), S_S(k))`` of one language pair: image, english, other [b, D], row i the same image."""
        check_pair(image, english, "image_features", "english")
        check_pair(english, other, "english", "other")
        margin, hardest = self.margin, self.max_violation
        image_sentence = (pairwise_ranking_hinge(image, english, margin, hardest)
                          + pairwise_ranking_hinge(image, other, margin, hardest))
        return image_sentence, pairwise_ranking_hinge(english, other, margin, hardest)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                text_mask: torch.Tensor | None = None) -> LossOutput:
        mask = check_multilingual(image_features, text_features, text_mask)
        en = self.english_index
        parts = []  # per language: (S_I(k), S_S(k))
        for k in range(text_features.shape[1]):
            both = mask[:, k] & mask[:, en]
            if k != en and int(both.sum()) >= 2:
                parts.append(self.pair_terms(image_features[both], text_features[both, en], text_features[both, k]))
        if not parts:
            zero = zero_with_graph(text_features)
            return LossOutput(zero, {"mlmme_image_sentence": zero, "mlmme_sentence_sentence": zero})
        s_i, s_s = (torch.stack(column).mean() for column in zip(*parts))
        loss = self.beta * s_i + (1.0 - self.beta) * s_s
        return LossOutput(loss, {"mlmme_image_sentence": s_i, "mlmme_sentence_sentence": s_s})
