"""``ContinualTrainConfig``: the options of ``mltk train-continual`` (``mltk.train.continual``), kept apart from
the stage so that ``mltk --help`` can generate its options from the fields without importing torch (the checks that
need the methods, losses and vocabularies import them when the stage resolves or checks). The fields left at
``FROM_RECIPE`` and ``loop`` come from ``recipe`` (default: ``cll-clip``; on a Hugging Face text tower
``teir-minilm``); a field's ``metadata`` is its option (``mltk.cli.config_options``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mltk.ame.alignment_config import AlignmentConfig
from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE
from mltk.settings.fields import ALIGNMENT, BATCH_SIZE, MSE_FORM, VAL_IMAGES
from mltk.settings.loop import LoopConfig

EPOCH_UNITS = ("captions", "images")
METRIC_PATTERN = re.compile(r"AR|(i2t|t2i|x2en|en2x)\.R@(1|5|10)")
IMAGE_METRIC, TEXT_ONLY_METRIC = "t2i.R@1", "x2en.R@1"  # the default a_{j,i} with images, and text-only


def completed(config: ContinualTrainConfig, unset: frozenset[str]) -> ContinualTrainConfig:
    """``config`` once its recipe is read (``mltk.settings.resolve``), with the values that follow from the run
    filled in so that the manifest records the values used: gamma1 0 on a text-only run (no images: no InfoNCE
    term) unless given, and the default metric of the run's kind (the method's options come from the recipe's
    ``methods`` section, ``mltk.settings.methods``)."""
    derived: dict[str, Any] = {}
    if config.images is None and "gamma1" in unset:
        derived["gamma1"] = 0.0
    if config.metric is None:
        derived["metric"] = IMAGE_METRIC if config.images is not None else TEXT_ONLY_METRIC
    return dataclasses.replace(config, **derived) if derived else config


def temperature_range_option(text: str | None) -> tuple[float, float] | None:
    """``--temperature-range LOW,HIGH`` as two floats (None when not given: the recipe's)."""
    if text is None:
        return None
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"--temperature-range expects two numbers LOW,HIGH (e.g. 0.001,0.5), got {text!r}") from None
    return low, high


@dataclass(frozen=True)
class ContinualTrainConfig:
    """Options of ``mltk train-continual`` (built by the CLI, received by ``train_continual``). The fields left at
    ``FROM_RECIPE`` and ``loop`` (None, or a dict of the LoopConfig fields given) come from ``recipe`` (default:
    ``cll-clip``; on a Hugging Face text tower ``teir-minilm``)."""

    images: Path | None  # image embeddings (encode-images) of the captions' images; None: text-only (see below)
    captions: Path
    out: Path
    model: str | None = None  # the frozen base (a checkpoint, an open_clip name with ``pretrained``, a HF folder)
    pretrained: str | None = None
    languages: tuple[str, ...] = ()  # task order; default English first, then the captions' other languages
    method: str = "cll-clip"
    teir_init: bool = False  # TEIR initialisation of new rows (else N(0, 0.02))
    teir_reg: bool = False  # TEIR regularisation (per-token lambda in AdamW), with its parts:
    teir_reg_grad: bool = True  # lambda scales each row's gradient (before the moment estimates)
    teir_reg_decay: bool = True  # lambda scales each row's decoupled weight decay
    token_sets: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "TEIR's token sets: occurrence (tokens in the task's text, the authors' code) or vocabulary "
            "(tokens of the task's new vocabulary, the paper's wording)."
        },
    )
    teir_memory_tokens: bool = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--teir-memory-tokens/--teir-task-tokens",
            "help": "Under ER/DER, TEIR's occurrence token set "
            "holds the replay memory's tokens as well as the task's (CLFM's prepare_token_mapping), so replayed "
            "captions train their tokens; or the task's text alone (mltk's earlier form).",
        },
    )
    joint: bool = False  # the upper bound: one task over every language at once (with the oracle vocabulary)
    oracle_vocab: bool = False  # one vocabulary built from every task's text up front (implied by joint)
    vocab_dir: Path | None = None  # prebuilt vocab artifacts at vocab_dir/<lang>; built on the fly otherwise
    vocab_size: int = field(default=FROM_RECIPE, metadata={"help": "Tokens of each task's new vocabulary V̂."})
    vocab_min_frequency: int = field(
        default=FROM_RECIPE,
        metadata={
            "help": "The fewest occurrences in a task's text of a merge that its new vocabulary learns.",
            "cli": False,
            "min": 1,
        },
    )
    protect_lang: str | None = None  # keep this language's parent ids when vocabularies are built (off: paper)
    wordpiece_growth: str = "keep"  # WordPiece: keep earlier tasks' word segmentation, or "resegment"
    epochs: int = field(
        default=FROM_RECIPE,
        metadata={
            "help": "Epochs per task (an epoch = one pass over its captions, or over its images with --epoch-unit "
            "images)."
        },
    )
    epoch_unit: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "captions (the authors': every caption once per epoch) or images (every image once, one of its "
            "captions drawn)."
        },
    )
    steps: int | None = field(default=None, metadata={"help": "Updates per task (overrides --epochs).", "min": 1})
    eval_every: int | None = field(
        default=None,
        metadata={
            "help": "Validate every N steps of a task (default: every epoch); the best validation state is kept.",
            "min": 0,
        },
    )
    batch_size: int = field(default=FROM_RECIPE, metadata=BATCH_SIZE)
    method_lr: float | None = field(
        default=FROM_RECIPE,
        metadata={
            "help": "Learning rate of the method's own tensors (adapters, LoRA, prompts); none: --lr, as the paper "
            "trains everything at one rate."
        },
    )
    gamma1: float = field(
        default=FROM_RECIPE,
        metadata={"help": "Weight of the image-text InfoNCE term (0 and off in a text-only run, which has no images)."},
    )
    gamma2: float = field(default=FROM_RECIPE, metadata={"help": "Weight of the MSE to the English teacher."})
    mse_form: str = field(default=FROM_RECIPE, metadata=MSE_FORM)
    temperature: float = field(
        default=FROM_RECIPE,
        metadata={"help": "Initial temperature of the InfoNCE term (trained with it).", "cli": False},
    )
    temperature_form: str = field(
        default=FROM_RECIPE,
        metadata={
            "help": "How the temperature trains: temperature (T itself, clamped to --temperature-range each step, "
            "reset at each task: the authors' code) or log (log 1/T, T >= 0.01, carried across tasks: mltk's earlier "
            "form)."
        },
    )
    temperature_range: tuple[float, float] = field(
        default=FROM_RECIPE,
        metadata={
            "help": "The clamp of T in the temperature form.",
            "metavar": "LOW,HIGH",
            "parse": temperature_range_option,
        },
    )
    metric: str | None = None  # a_{j,i}: AR or <i2t|t2i>.R@<K>; text-only <x2en|en2x>.R@<K> (None: R@1 t2i / x2en)
    split: str = "train"
    val_split: str = "val"
    test_split: str = "test"
    val_images: int | None = field(default=FROM_RECIPE, metadata=VAL_IMAGES)
    options: Any = field(default=None, metadata={"recipe_section": "methods"})  # the method's options
    #   (mltk.cll_clip.options), from the recipe's methods section; None or a mapping of those given over it
    keep_task_checkpoints: bool = False
    device: str = "auto"
    precision: str = "auto"
    cache_dir: Path | None = None
    alignment: AlignmentConfig = field(default=AlignmentConfig(), metadata=ALIGNMENT)  # in its language's task;
    #                                                 its options are its fields'
    loop: LoopConfig | dict | None = None  # lr, warm-up, AdamW settings, clipping, save_every, seed of every task
    recipe: str | None = None  # the recipe's name or file (None: cll-clip, or teir-minilm on a text tower)

    @property
    def variant(self) -> str:
        """plain, init-only, reg-only or teir; a regularisation of the gradient or the decay alone adds -grad or
        -decay; joint runs and the oracle vocabulary say so."""
        name = {(False, False): "plain", (True, False): "init-only", (False, True): "reg-only", (True, True): "teir"}[
            (self.teir_init, self.teir_reg)
        ]
        if self.teir_reg and not (self.teir_reg_grad and self.teir_reg_decay):
            name += "-grad" if self.teir_reg_grad else "-decay"
        if self.joint:
            return f"joint-{name}"
        return f"oracle-{name}" if self.oracle_vocab else name

    @property
    def text_only(self) -> bool:
        """No image embeddings: the base is a text-only tower, the loss the MSE term alone and a_{j,i}
        caption-to-caption retrieval against the frozen tower's English (``mltk.train.continual.judges``)."""
        return self.images is None

    @property
    def uses_oracle_vocab(self) -> bool:
        return self.oracle_vocab or self.joint

    def check(self) -> None:
        from mltk.cll_clip.options import METHOD_OPTIONS as METHODS
        from mltk.losses import MSE_FORMS, TEMPERATURE_FORMS
        from mltk.vocab import TOKEN_SETS, vocabulary_size_problem
        from mltk.vocab.wordpiece_protect import WORDPIECE_GROWTH

        problems = []
        if self.method not in METHODS:
            problems.append(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.epochs < 1 or (self.steps is not None and self.steps < 1) or self.batch_size < 1:
            problems.append(
                f"epochs, steps and batch size must be positive (got {self.epochs}, {self.steps}, {self.batch_size})"
            )
        if not self.text_only and (problem := vocabulary_size_problem(self.vocab_size, "--vocab-size")):
            problems.append(problem)  # CLIP's BPE; a WordPiece vocabulary needs only a positive size
        if self.vocab_size < 1:
            problems.append(f"--vocab-size must be positive, got {self.vocab_size}")
        if len(set(self.languages)) != len(self.languages):
            problems.append(f"a language appears twice in the task order {','.join(self.languages)}")
        if self.temperature_form not in TEMPERATURE_FORMS:
            problems.append(
                f"--temperature-form must be one of {', '.join(TEMPERATURE_FORMS)}, got {self.temperature_form!r}"
            )
        if not (
            len(self.temperature_range) == 2
            and 0 < self.temperature_range[0] <= self.temperature <= self.temperature_range[1]
        ):
            problems.append(
                f"--temperature-range must be two numbers low,high with 0 < low <= the initial "
                f"temperature ({self.temperature}) <= high, got {list(self.temperature_range)}"
            )
        if self.mse_form not in MSE_FORMS:
            problems.append(f"--mse-form must be one of {', '.join(MSE_FORMS)}, got {self.mse_form!r}")
        if self.wordpiece_growth not in WORDPIECE_GROWTH:
            problems.append(
                f"--wordpiece-growth must be one of {', '.join(WORDPIECE_GROWTH)}, got {self.wordpiece_growth!r}"
            )
        if self.epoch_unit not in EPOCH_UNITS:
            problems.append(f"--epoch-unit must be one of {', '.join(EPOCH_UNITS)}, got {self.epoch_unit!r}")
        if self.token_sets not in TOKEN_SETS:
            problems.append(f"--token-sets must be one of {', '.join(TOKEN_SETS)}, got {self.token_sets!r}")
        if self.teir_reg and not (self.teir_reg_grad or self.teir_reg_decay):
            problems.append("TEIR's regularisation needs its gradient part, its decay part or both")
        if self.joint and self.method != "cll-clip":
            problems.append(
                f"--joint trains every language at once, the upper bound of plain CLL-CLIP; it takes "
                f"no continual method (got --method {self.method})"
            )
        if self.uses_oracle_vocab and self.vocab_dir is not None:
            problems.append("--oracle-vocab builds its one vocabulary itself; leave out --vocab-dir")
        if not METRIC_PATTERN.fullmatch(self.metric):
            problems.append(
                f"--continual-metric must be AR or <i2t|t2i>.R@<1|5|10> (text-only: "
                f"<x2en|en2x>.R@<1|5|10>), got {self.metric!r}"
            )
        problems += (
            self._text_only_problems()
            if self.text_only
            else (
                [
                    f"--continual-metric {self.metric} is caption-to-caption retrieval of a text-only run (no image "
                    f"embeddings); with images use AR or <i2t|t2i>.R@<1|5|10>"
                ]
                if self.metric[:4] in ("x2en", "en2x")
                else []
            )
        )
        if problems:
            raise ConfigError("; ".join(problems))

    def _text_only_problems(self) -> list[str]:
        """What a text-only run (no image embeddings) cannot do."""
        from mltk.artifacts.schema import NATIVE_LANG

        problems = []
        if self.gamma1:
            problems.append(
                f"the InfoNCE term (--gamma1 {self.gamma1}) needs image embeddings; a text-only run trains "
                f"the MSE-to-English term alone (leave out --gamma1)"
            )
        if self.metric.split(".")[0] in ("i2t", "t2i", "AR"):
            problems.append(
                f"--continual-metric {self.metric} needs image embeddings; a text-only run is scored by "
                f"caption-to-caption retrieval against English: <x2en|en2x>.R@<1|5|10>"
            )
        if NATIVE_LANG in self.languages:
            problems.append(
                f"{NATIVE_LANG} is the teacher of a text-only run (the frozen tower); leave it out of --lang"
            )
        if self.method != "cll-clip":
            problems.append(f"a text-only run trains plain CLL-CLIP's table (--method cll-clip), not {self.method}")
        if self.uses_oracle_vocab:
            problems.append(
                "a text-only run grows its vocabulary task by task: --joint and --oracle-vocab need "
                "a CLIP with image embeddings"
            )
        return problems
