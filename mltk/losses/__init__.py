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
"""

from mltk.losses.base import (
    MAX_LOGIT_SCALE,
    TEMPERATURE_FORMS,
    LogitScale,
    LossOutput,
    Scalar,
    Temperature,
    make_temperature,
)
from mltk.losses.contrastive import (
    ONE_TO_K_WEIGHTINGS,
    InfoNCELoss,
    OneToKLoss,
    OneToOneLoss,
    info_nce,
    one_to_k_contrastive,
    one_to_one_contrastive,
    sample_one_language,
)
from mltk.losses.distill import (
    MSE_FORMS,
    CLLCLIPLoss,
    EnglishBridgeLoss,
    MSEDistillLoss,
    english_bridge_mse,
    mse_distill,
)
from mltk.losses.ranking import (
    AME_MARGINS,
    MLMME_FORMS,
    SIMILARITIES,
    MLMMELoss,
    PairwiseRankingLoss,
    order_violation_similarity,
    pairwise_ranking_hinge,
    ranking_scores,
)

__all__ = [
    "AME_MARGINS",
    "MLMME_FORMS",
    "SIMILARITIES",
    "order_violation_similarity",
    "ranking_scores",
    "MAX_LOGIT_SCALE",
    "MSE_FORMS",
    "ONE_TO_K_WEIGHTINGS",
    "CLLCLIPLoss",
    "EnglishBridgeLoss",
    "InfoNCELoss",
    "LogitScale",
    "LossOutput",
    "MLMMELoss",
    "MSEDistillLoss",
    "OneToKLoss",
    "OneToOneLoss",
    "PairwiseRankingLoss",
    "Scalar",
    "TEMPERATURE_FORMS",
    "Temperature",
    "make_temperature",
    "english_bridge_mse",
    "info_nce",
    "mse_distill",
    "one_to_k_contrastive",
    "one_to_one_contrastive",
    "pairwise_ranking_hinge",
    "sample_one_language",
]
