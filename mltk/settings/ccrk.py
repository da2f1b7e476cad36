"""``CcrkConfig``: the options of ``mltk train-ccrk`` (``mltk.train.ccrk``), kept apart from the stage so that
``mltk --help`` can generate its options from the fields without importing torch. ``FROM_RECIPE`` fields and
``loop`` come from ``recipe`` (``mltk.recipes``; default ccrk); a field's ``metadata`` is its option
(``mltk.cli.config_options``). The chosen loss's options (``loss_options``) come from the recipe's ``losses``
section and ``--set loss.KEY=VALUE`` (``mltk.settings.sections``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mltk.ame.alignment_config import AlignmentConfig
from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE
from mltk.settings.fields import ALIGNMENT, BATCH_SIZE, VAL_IMAGES
from mltk.settings.loop import LoopConfig


@dataclass(frozen=True)
class CcrkConfig:
    """Options of ``mltk train-ccrk``."""

    images: Path  # image embeddings (encode-images); frozen
    captions: Path
    out: Path
    init: Path | None = None  # an MLA checkpoint (e.g. the NLT result) or a CLL-CLIP one (train-continual)
    model: str | None = None  # base CLIP when starting fresh (open_clip name or checkpoint artifact)
    pretrained: str | None = None
    tokenizer: str | None = None  # non-native tokenizer when starting fresh: vocab artifact or transformers name
    init_embeddings: bool = True  # copy a transformers tokenizer's model's word embeddings (the paper's M-BERT)
    languages: tuple[str, ...] = ()  # the K language slots; default: en + every language the captions have
    loss: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "one-to-k (CCR_k), one-to-one (one sampled language per image), english-bridge (MSE to English), "
            "hinge (ranking, margin), mlmme (beta x the image-sentence ranking of every language + (1 - beta) x the "
            "sentence-sentence ranking of every language pair; --recipe mlmme sets it with its beta). Its options: "
            "the recipe's losses section, --set loss.KEY=VALUE."
        },
    )
    loss_options: Any = field(default=None, metadata={"recipe_section": "losses"})  # the loss's options
    #   (mltk.losses.options), from the recipe's losses section; None or a mapping of those given over it
    alignment: AlignmentConfig = field(default=AlignmentConfig(), metadata=ALIGNMENT)  # options: its fields'
    hard_negatives: int = field(
        default=FROM_RECIPE,
        metadata={
            "help": "N > 0: batches of anchors each followed by its N most similar training images (by image "
            "embedding), so in-batch negatives are look-alikes."
        },
    )
    train_embedding: bool = True
    batch_size: int = field(default=FROM_RECIPE, metadata=BATCH_SIZE)
    split: str = "train"
    val_split: str = "val"
    val_images: int | None = field(default=FROM_RECIPE, metadata=VAL_IMAGES)
    device: str = "auto"
    precision: str = "auto"
    loop: LoopConfig | dict | None = None  # steps, lr, warm-up, decay, clipping, eval_every, seed
    recipe: str | None = None  # the recipe's name or file (None: ccrk)

    @property
    def similarity(self) -> str:
        """The similarity the loss trains with (the hinge's option; cosine for every other loss), by which the
        run validates and its checkpoint is ranked."""
        return getattr(self.loss_options, "similarity", "cosine")


def checked(config: CcrkConfig, unset: frozenset[str] = frozenset()) -> CcrkConfig:
    """``config`` once resolved (``mltk.settings.resolve``), or ConfigError naming each wrong value."""
    problems = ccrk_problems(config)
    if problems:
        raise ConfigError("; ".join(problems))
    return config


def ccrk_problems(config: CcrkConfig) -> list[str]:
    """What is wrong with ``config``'s values, each as one phrase (the loss's options are checked by their own
    dataclass, ``mltk.losses.options``)."""
    from mltk.losses.options import CCRK_LOSSES

    problems = []
    if config.loss not in CCRK_LOSSES:
        problems.append(f"--loss must be one of {', '.join(CCRK_LOSSES)}, got {config.loss!r}")
    if config.batch_size < 2:
        problems.append(f"--batch-size must be at least 2 (in-batch negatives), got {config.batch_size}")
    if config.hard_negatives < 0:
        problems.append(f"--hard-negatives must be >= 0, got {config.hard_negatives}")
    if config.val_images is not None and config.val_images < 1:
        problems.append(f"--val-images must be at least 1, got {config.val_images}")
    return problems
