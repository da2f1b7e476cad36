"""``CcrkConfig``: the options of ``mltk train-ccrk`` (``mltk.train.ccrk``), kept apart from the stage so that
``mltk --help`` can generate its options from the fields without importing torch (the checks that need the losses'
names import them when the stage resolves). ``FROM_RECIPE`` fields and ``loop`` come from ``recipe``
(``mltk.recipes``; default ccrk); a field's ``metadata`` is its option (``mltk.cli.config_options``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
            "sentence-sentence ranking of every language pair; --recipe mlmme sets it with its beta)."
        },
    )
    weighting: str = field(
        default=FROM_RECIPE,
        metadata={"help": "1-to-K weighting: paper (both directions equal) or code (the authors' code: divided by K)."},
    )
    temperature: float = field(default=FROM_RECIPE, metadata={"help": "Initial temperature of the contrastive losses."})
    learn_temperature: bool = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--fixed-temperature",
            "flag_value": False,
            "help": "Keep the temperature fixed instead of learning it.",
        },
    )
    margin: float | None = field(
        default=None,
        metadata={
            "help": "Margin of the hinge and mlmme losses (default: AME's margin of --similarity, "
            "mltk.losses.AME_MARGINS)."
        },
    )
    similarity: str = "cosine"  # --loss hinge: cosine (symmetric) or order (AME's asymmetric order-violation)
    alignment: AlignmentConfig = field(default=AlignmentConfig(), metadata=ALIGNMENT)  # options: its fields'
    beta: float = field(
        default=FROM_RECIPE,
        metadata={
            "help": "mlmme: beta * S_I + (1 - beta) * S_S (Calixto et al. 2017); 1 = the image-sentence terms alone."
        },
    )
    mlmme_form: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "mlmme with K > 2 languages: paper (sum over every language and every language pair) or "
            "english-pivot (each language paired with English, averaged over the languages)."
        },
    )
    max_violation: bool = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--max-violation/--sum-violations",
            "help": "hinge, mlmme: keep only each anchor's hardest "
            "in-batch negative (VSE++; AME's option), or sum over every negative.",
        },
    )
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
    temperature_range: tuple[float, float] | None = field(
        default=FROM_RECIPE, metadata={"help": "The clamp of the learnt temperature.", "cli": False}
    )
    temperature_form: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "How the learnt temperature trains: temperature (T itself, clamped to temperature_range: the "
            "authors') or log (log(1/T), open_clip's).",
            "choices": ("temperature", "log"),
            "cli": False,
        },
    )
    temperature_lr_scale: float = field(
        default=FROM_RECIPE,
        metadata={
            "help": "The learnt temperature's learning rate as a multiple of --lr (CCR_k's code: 2).",
            "min": 0.0,
            "cli": False,
        },
    )
    temperature_weight_decay: float = field(
        default=FROM_RECIPE,
        metadata={
            "help": "Decoupled weight decay on the learnt temperature (CCR_k's code: 0.01, the run's decay).",
            "min": 0.0,
            "cli": False,
        },
    )
    loop: LoopConfig | dict | None = None  # steps, lr, warm-up, decay, clipping, eval_every, seed
    recipe: str | None = None  # the recipe's name or file (None: ccrk)


def checked(config: CcrkConfig, unset: frozenset[str] = frozenset()) -> CcrkConfig:
    """``config`` once resolved (``mltk.settings.resolve``), or ConfigError naming each wrong value."""
    problems = ccrk_problems(config)
    if problems:
        raise ConfigError("; ".join(problems))
    return config


def ccrk_problems(config: CcrkConfig) -> list[str]:
    """What is wrong with ``config``'s values, each as one phrase."""
    from mltk.losses import MLMME_FORMS, ONE_TO_K_WEIGHTINGS, SIMILARITIES, TEMPERATURE_FORMS
    from mltk.losses.registry import LOSSES

    problems = []
    if config.loss not in LOSSES:
        problems.append(f"--loss must be one of {', '.join(LOSSES)}, got {config.loss!r}")
    if config.weighting not in ONE_TO_K_WEIGHTINGS:
        problems.append(f"--weighting must be one of {', '.join(ONE_TO_K_WEIGHTINGS)}, got {config.weighting!r}")
    if config.batch_size < 2:
        problems.append(f"--batch-size must be at least 2 (in-batch negatives), got {config.batch_size}")
    if config.hard_negatives < 0:
        problems.append(f"--hard-negatives must be >= 0, got {config.hard_negatives}")
    low, high = config.temperature_range or (None, None)
    if not config.temperature > 0:
        problems.append(f"--temperature must be positive, got {config.temperature}")
    elif config.temperature_range and not low <= config.temperature <= high:
        problems.append(f"--temperature must lie in the clamp range [{low}, {high}], got {config.temperature}")
    if config.temperature_form not in TEMPERATURE_FORMS:
        problems.append(
            f"temperature_form must be one of {', '.join(TEMPERATURE_FORMS)}, got {config.temperature_form!r}"
        )
    elif config.temperature_form == "temperature" and config.learn_temperature and not config.temperature_range:
        problems.append("temperature_form temperature trains T itself inside temperature_range; give the range")
    if config.mlmme_form not in MLMME_FORMS:
        problems.append(f"--mlmme-form must be one of {', '.join(MLMME_FORMS)}, got {config.mlmme_form!r}")
    if config.max_violation and config.loss not in ("hinge", "mlmme"):
        problems.append(f"--max-violation goes with --loss hinge or mlmme, not {config.loss}")
    if config.similarity not in SIMILARITIES:
        problems.append(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {config.similarity!r}")
    elif config.similarity != "cosine" and config.loss != "hinge":
        problems.append(f"--similarity {config.similarity} goes with --loss hinge, not {config.loss}")
    if (config.margin is not None and config.margin < 0) or not 0 <= config.beta <= 1:
        problems.append(f"--margin must be >= 0 and --beta in [0, 1], got {config.margin} and {config.beta}")
    if config.val_images is not None and config.val_images < 1:
        problems.append(f"--val-images must be at least 1, got {config.val_images}")
    return problems
