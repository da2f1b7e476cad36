"""The loss family of every mltk training stage: one class per loss, each ``forward`` returning a ``LossOutput``
(the loss and its named, unweighted terms, which become columns of the stage's ``steps.csv``), and the functional
forms the classes are built on.

=====================  ==========================================  ===========================================
class                  loss                                        used by
=====================  ==========================================  ===========================================
``InfoNCELoss``        symmetric InfoNCE (CLIP)                    train-le (MLA LE), pretrain-clip
``OneToKLoss``         1-to-K contrastive (CCR_k)                  train-ccrk ``--loss one-to-k``
``OneToOneLoss``       1-to-1 contrastive baseline (CCR_k)         train-ccrk ``--loss one-to-one``
``EnglishBridgeLoss``  MSE of each language to English             train-ccrk ``--loss english-bridge``
``PairwiseRankingLoss``  bidirectional ranking hinge (VSE)         train-ccrk ``--loss hinge``
``MLMMELoss``          MLMME (image-sentence + sentence-sentence)  train-ccrk ``--loss mlmme``
``MSEDistillLoss``     MSE to a frozen teacher                     train-nlt (MLA NLT)
``CLLCLIPLoss``        InfoNCE + MSE distillation (CLL-CLIP)       train-continual (and its replay baselines)
=====================  ==========================================  ===========================================

Conventions shared by all of them:

- ``B`` is the batch (images or sentences), ``D`` the embedding width, ``K`` the number of language slots.
- Contrastive losses and the ranking losses expect L2-normalised features: their scores are plain dot products
  (cosine similarities). ``CLLCLIPLoss`` is the one exception and normalises inside, because its MSE term needs the
  raw embeddings.
- MSE losses default to torch's ``F.mse_loss`` reduction, the mean over every element (rows x D), which both
  authors' code uses and their hyper-parameters were tuned with; ``form="sum"`` gives the papers' written form
  (squared distance summed over D, averaged over rows: D times larger).
- ``text_mask [B, K]`` (bool, True = present) marks which languages an image really has. Masked slots may hold
  anything (even NaN): they are zeroed before any arithmetic, take no part in any softmax, get zero gradient.
- A temperature ``T`` and a logit scale ``s`` are the same thing: ``s = 1 / T``. Learnable ones are stored as
  ``log(1/T)`` and clamped at ``s <= 100``, as open_clip does (``LogitScale``), or as T itself clamped to a range,
  as CLL-CLIP's authors do (``Temperature``; ``make_temperature`` picks the form).

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

Each loss is an entry of the registry (``mltk.losses.registry.LOSSES``): its class and its options dataclass
(``mltk.losses.options``, torch-free, no defaults: the values are the recipe's). The package imports its modules
when one of its names is first used, so ``mltk.losses.options`` is read without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "base": ("MAX_LOGIT_SCALE", "LogitScale", "LossOutput", "Scalar", "Temperature", "make_temperature"),
    "options": ("AME_MARGINS", "MLMME_FORMS", "MSE_FORMS", "ONE_TO_K_WEIGHTINGS", "TEMPERATURE_FORMS"),
    "contrastive": (
        "InfoNCELoss",
        "OneToKLoss",
        "OneToOneLoss",
        "info_nce",
        "one_to_k_contrastive",
        "one_to_one_contrastive",
        "sample_one_language",
    ),
    "distill": ("CLLCLIPLoss", "EnglishBridgeLoss", "MSEDistillLoss", "english_bridge_mse", "mse_distill"),
    "ranking": (
        "SIMILARITIES",
        "MLMMELoss",
        "PairwiseRankingLoss",
        "order_violation_similarity",
        "pairwise_ranking_hinge",
        "ranking_scores",
    ),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (the options and forms need no torch)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
