"""Ranking (hinge) losses: the bidirectional pairwise ranking loss of VSE and MLMME, which builds on it."""

from __future__ import annotations

import torch
import torch.nn as nn

from mltk.core.errors import ConfigError
from mltk.core.scorers import SIMILARITIES
from mltk.losses.base import LossOutput, check_multilingual, check_pair, zero_with_graph

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


def order_violation_scores(specific: torch.Tensor, general: torch.Tensor, block_mb: float = 64.0) -> torch.Tensor:
    """``order_violation_similarity`` for galleries of any size: specific [N, D], general [M, D] -> [N, M], computed
    in blocks of rows and columns so that the [n, m, D] difference of one block stays under ``block_mb`` MiB (the
    whole [N, M, D] tensor would be N * M * D * 4 bytes). Used to rank by order similarity (``mltk evaluate``)."""
    dim = max(specific.shape[1], 1)
    budget = max(1, int(block_mb * 2**20) // (4 * dim))  # entries n * m of one block
    columns = max(1, min(general.shape[0], budget))
    rows = max(1, budget // columns)
    out = torch.empty(specific.shape[0], general.shape[0], dtype=torch.float32, device=specific.device)
    for start in range(0, specific.shape[0], rows):
        for c_start in range(0, general.shape[0], columns):
            out[start : start + rows, c_start : c_start + columns] = order_violation_similarity(
                specific[start : start + rows], general[c_start : c_start + columns]
            )
    return out


def ranking_scores(
    image_features: torch.Tensor, text_features: torch.Tensor, similarity: str = "cosine"
) -> torch.Tensor:
    """[B, D] x [B, D] -> [B, B] scores of ``pairwise_ranking_hinge``: dot products (cosine on normalised features)
    or ``order_violation_similarity(image, text)``."""
    if similarity == "cosine":
        return image_features @ text_features.T
    if similarity == "order":
        return order_violation_similarity(image_features, text_features)
    raise ConfigError(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {similarity!r}")


def retrieval_scorer(similarity: str):
    """The scorer ``mltk.metrics.rank_both_directions`` ranks with: None for cosine (its chunked dot product),
    blocked order violation (images specific, captions general, as AME trains and tests) for ``order``."""
    if similarity == "cosine":
        return None
    if similarity == "order":
        return order_violation_scores
    raise ConfigError(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {similarity!r}")


def pairwise_ranking_hinge(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    margin: float,
    max_violation: bool = False,
    similarity: str = "cosine",
) -> torch.Tensor:
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
    cost_text = (margin - positive.unsqueeze(1) + scores).clamp(min=0) * negatives  # row i: x_i vs y_j
    cost_image = (margin - positive.unsqueeze(0) + scores).clamp(min=0) * negatives  # column i: y_i vs x_j
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

    def __init__(self, margin: float, max_violation: bool = False, similarity: str = "cosine"):
        super().__init__()
        self.margin, self.max_violation, self.similarity = margin, max_violation, similarity

    def forward(
        self, image_features: torch.Tensor, text_features: torch.Tensor, text_mask: torch.Tensor | None = None
    ) -> LossOutput:
        mask = check_multilingual(image_features, text_features, text_mask)
        terms = [
            pairwise_ranking_hinge(
                image_features[mask[:, k]],
                text_features[mask[:, k], k],
                self.margin,
                self.max_violation,
                self.similarity,
            )
            for k in range(text_features.shape[1])
            if int(mask[:, k].sum()) >= 2
        ]
        loss = torch.stack(terms).mean() if terms else zero_with_graph(text_features)
        return LossOutput(loss, {"hinge": loss})


MLMME_FORMS = ("paper", "english-pivot")  # K > 2: every language and pair summed, or English pivoting each


class MLMMELoss(nn.Module):
    """Multilingual multimodal embedding loss (MLMME, Calixto, Liu and Campbell 2017; AME uses the same terms):
    image-sentence ranking and sentence-sentence ranking, traded off by beta as the paper writes it::

        S_I = sum_k H(image, text_k)        S_S = sum_{k < l} H(text_k, text_l)        (form "paper")
        loss = beta * S_I + (1 - beta) * S_S

    each H over the images that have the caption(s) it needs (a term with fewer than two has no negatives and is
    left out); for K = 2 this is the paper's pair. ``form="english-pivot"`` is mltk's earlier reading for K > 2:
    English (``english_index``) pivots each other language k, ``S_I(k) = H(image, en) + H(image, k)``,
    ``S_S(k) = H(en, k)``, and S_I, S_S are their means over k. beta = 1 is the image-sentence term alone, beta = 0
    the sentence-sentence term alone. ``H = pairwise_ranking_hinge`` (``margin`` None: AME's cosine margin). The
    loss is 0 (with a graph) when no term has two images. forward(image [B, D], text [B, K, D] (L2-normalised),
    text_mask [B, K] bool or None) -> ``LossOutput(loss, {"mlmme_image_sentence": S_I,
    "mlmme_sentence_sentence": S_S})`` (before beta).
    """

    def __init__(
        self,
        margin: float | None,
        beta: float,
        english_index: int | None = 0,
        max_violation: bool = False,
        form: str = "paper",
    ):
        super().__init__()
        if not 0.0 <= beta <= 1.0:
            raise ConfigError(f"MLMME's beta weighs beta * S_I + (1 - beta) * S_S and must lie in [0, 1], got {beta}")
        if form not in MLMME_FORMS:
            raise ConfigError(f"--mlmme-form must be one of {', '.join(MLMME_FORMS)}, got {form!r}")
        if form == "english-pivot" and english_index is None:
            raise ConfigError("--mlmme-form english-pivot pivots on English: include en in --lang")
        self.margin = AME_MARGINS["cosine"] if margin is None else margin  # None: AME's margin (cosine similarity)
        self.beta, self.english_index, self.max_violation = beta, english_index, max_violation
        self.form = form

    def hinge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return pairwise_ranking_hinge(a, b, self.margin, self.max_violation)

    def pair_terms(
        self, image: torch.Tensor, english: torch.Tensor, other: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(S_I(k), S_S(k))`` of one language pair: image, english, other [b, D], row i the same image."""
        check_pair(image, english, "image_features", "english")
        check_pair(english, other, "english", "other")
        return self.hinge(image, english) + self.hinge(image, other), self.hinge(english, other)

    def all_pairs_terms(
        self, image: torch.Tensor, text: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The paper's sums over every language (S_I) and every pair of languages (S_S)."""
        image_sentence = sentence_sentence = zero_with_graph(text)
        slots = text.shape[1]
        for k in range(slots):
            if int(mask[:, k].sum()) >= 2:
                image_sentence = image_sentence + self.hinge(image[mask[:, k]], text[mask[:, k], k])
            for other in range(k + 1, slots):
                both = mask[:, k] & mask[:, other]
                if int(both.sum()) >= 2:
                    sentence_sentence = sentence_sentence + self.hinge(text[both, k], text[both, other])
        return image_sentence, sentence_sentence

    def pivot_terms(
        self, image: torch.Tensor, text: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """English pivoting each other language; the means of S_I(k) and S_S(k) over the languages."""
        en = self.english_index
        parts = [
            self.pair_terms(image[both], text[both, en], text[both, k])
            for k in range(text.shape[1])
            for both in [mask[:, k] & mask[:, en]]
            if k != en and int(both.sum()) >= 2
        ]
        if not parts:
            zero = zero_with_graph(text)
            return zero, zero
        return tuple(torch.stack(column).mean() for column in zip(*parts))

    def forward(
        self, image_features: torch.Tensor, text_features: torch.Tensor, text_mask: torch.Tensor | None = None
    ) -> LossOutput:
        mask = check_multilingual(image_features, text_features, text_mask)
        terms = self.all_pairs_terms if self.form == "paper" else self.pivot_terms
        s_i, s_s = terms(image_features, text_features, mask)
        loss = self.beta * s_i + (1.0 - self.beta) * s_s
        return LossOutput(loss, {"mlmme_image_sentence": s_i, "mlmme_sentence_sentence": s_s})
