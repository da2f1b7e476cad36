"""``MlaConfig``: the options of ``mltk train-nlt``, ``train-le`` and ``train-nlt-le`` (``mltk.train.mla``), kept
apart from the stages so that ``mltk --help`` can generate their options from its fields without importing torch.

The hyper-parameters left at ``FROM_RECIPE`` and ``loop`` (None, or a dict of the LoopConfig fields given) come from
``recipe`` (a name or JSON file; default: the stage's), filled in by ``mltk.settings.resolve`` when a ``train_*``
function starts. A field's ``metadata`` is its option (``mltk.cli.config_options``); ``stages`` names the commands
that offer it, ``read_by`` the stages that read it (the others refuse it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mltk.ame.alignment_config import AlignmentConfig
from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE
from mltk.settings.fields import ALIGNMENT, BATCH_SIZE, MSE_FORM, VAL_IMAGES, only, read_by
from mltk.settings.loop import LoopConfig


def temperature_or_clip(text: str) -> float | None:
    """``--temperature`` of LE: a number, or ``clip`` (None: the frozen base CLIP's own, resolved by the stage)."""
    if text.strip().lower() == "clip":
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--temperature must be a number or 'clip', got {text!r}") from None


@dataclass(frozen=True)
class MlaConfig:
    """Options of ``mltk train-nlt``, ``train-le`` and ``train-nlt-le`` (built by the CLI, received by the library):
    ``train_le(MlaConfig(...))`` trains at the LE recipe's lr."""

    captions: Path
    out: Path
    images: Path | None = None  # image embeddings: LE trains on them; NLT validates on them when given
    init: Path | None = None  # an MLA checkpoint to start from (LE: the NLT result)
    model: str | None = None  # frozen text tower when starting fresh (CLIP checkpoint or name, transformers folder)
    pretrained: str | None = None
    tokenizer: str | None = None  # non-native tokenizer: vocab artifact, transformers name, "tower" (None: the
    #                               tower's own on a Hugging Face tower)
    train: str = "acquirers"  # "acquirers" (MLA), "full" (a student copy of the whole tower: the KD baseline) or
    #                           "mkd" (the student reads English too, replacing the English text encoder)
    embedding_lr: float | None = field(
        default=FROM_RECIPE,
        metadata=only({"help": "Peak learning rate of the shared non-native embedding (none: --lr)."}, "train-nlt"),
    )
    init_embeddings: bool = True  # copy the transformers model's word embeddings (M-BERT in the paper)
    languages: tuple[str, ...] = ()  # default: every non-English language of the captions (or of --init)
    batch_size: int = field(default=FROM_RECIPE, metadata=BATCH_SIZE)
    train_embedding: bool | None = field(
        default=None,
        metadata={
            "option": "--train-embedding/--freeze-embedding",
            "help": "Train the shared non-native embedding (default: "
            "yes, unless languages are added to an --init checkpoint, which keeps the other languages bit-identical).",
        },
    )
    temperature: float | None = field(
        default=FROM_RECIPE,
        metadata=read_by(
            {
                "help": "Fixed InfoNCE temperature of LE (the paper's is OpenAI ViT-B/32's own), or 'clip': the "
                "frozen base CLIP's own learned one.",
                "parse": temperature_or_clip,
            },
            "train-le",
            "train-nlt-le",
        ),
    )
    split: str = "train"
    val_split: str = "val"
    val_images: int | None = field(default=FROM_RECIPE, metadata={**VAL_IMAGES, "cli": False})
    device: str = "auto"
    precision: str = "auto"
    cpu_bf16: bool = field(
        default=FROM_RECIPE,
        metadata={
            "help": "With --precision auto on a CPU with bf16 instructions (AMX or AVX512-BF16): bf16 autocast.",
            "cli": False,
        },
    )
    cache_dir: Path | None = None
    acquirer: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "Acquirers of a fresh encoder: mlp (the paper's), linear (the bottleneck without ReLU) or none "
            "(the non-native embedding alone): MLA's ablations. An --init checkpoint keeps its own."
        },
    )
    mse_form: str = field(default=FROM_RECIPE, metadata=read_by(MSE_FORM, "train-nlt", "train-nlt-le"))
    nlt_weight: float = field(
        default=FROM_RECIPE, metadata=read_by({"help": "Weight of the NLT (MSE) term."}, "train-nlt-le")
    )
    le_weight: float = field(
        default=FROM_RECIPE, metadata=read_by({"help": "Weight of the LE (InfoNCE) term."}, "train-nlt-le")
    )
    # AME's RCSLS term over a lexicon (``mltk.ame.rcsls``); its options are its own fields'
    alignment: AlignmentConfig = field(default=AlignmentConfig(), metadata=only(ALIGNMENT, "train-nlt"))
    loop: LoopConfig | dict | None = None  # steps, lr, warm-up, decay, clipping, seed (None / dict: the recipe's)
    recipe: str | None = None  # the recipe's name or file (None: the stage's default)
