"""The options of ``mltk train-continual``, the task order, and the metric of the continual matrix."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from mltk import artifacts
from mltk.continual import METHODS, MethodOptions
from mltk.errors import ConfigError
from mltk.schema import NATIVE_LANG
from mltk.train.loop import LoopConfig
from mltk.vocab import vocabulary_size_problem

CONTINUAL_FILE = "continual.json"
# The paper's optimizer settings (AdamW lr 5e-5, decay 0.05, 10% warm-up then constant). Each task fits with this
# LoopConfig, its ``steps``, ``eval_every`` and ``seed`` replaced by the task's (``loop_config``): the ``steps``
# here is a placeholder, the per-task count comes from ``ContinualTrainConfig.steps`` or ``epochs``.
CONTINUAL_LOOP = LoopConfig(steps=1, lr=5e-5, weight_decay=0.05, betas=(0.9, 0.999), eps=1e-8)
METRIC_PATTERN = re.compile(r"AR|(i2t|t2i)\.R@(1|5|10)")


@dataclass(frozen=True)
class ContinualTrainConfig:
    """Options of ``mltk train-continual`` (built by the CLI, received by ``train_continual``)."""

    images: Path  # image embeddings (encode-images) of the images the captions describe
    captions: Path
    out: Path
    model: str = "mltk-tiny"  # the frozen base CLIP (open_clip name with ``pretrained``, or a checkpoint)
    pretrained: str | None = None
    languages: tuple[str, ...] = ()  # task order; default English first, then the captions' other languages
    method: str = "cll-clip"
    teir_init: bool = False  # TEIR initialisation of new rows (else N(0, 0.02))
    teir_reg: bool = False  # TEIR regularisation (per-token lambda in AdamW)
    vocab_dir: Path | None = None  # prebuilt vocab artifacts at vocab_dir/<lang>; built on the fly otherwise
    vocab_size: int = 10000
    vocab_min_frequency: int = 2
    protect_lang: str | None = None  # keep this language's parent ids when vocabularies are built (off: paper)
    epochs: int = 3
    steps: int | None = None  # updates per task (default: epochs x steps per epoch)
    eval_every: int | None = None  # validation interval in steps (default: once per epoch)
    batch_size: int = 128
    method_lr: float = 1e-3
    gamma1: float = 0.01
    gamma2: float = 1.0
    temperature: float = 0.07
    metric: str = "t2i.R@1"  # a_{j,i}: AR or <i2t|t2i>.R@<K>
    split: str = "train"
    val_split: str = "val"
    test_split: str = "test"
    val_images: int | None = 1000
    options: MethodOptions = MethodOptions()
    keep_task_checkpoints: bool = False
    device: str = "auto"
    precision: str = "auto"
    cache_dir: Path | None = None
    loop: LoopConfig = CONTINUAL_LOOP  # lr, warm-up, AdamW settings, clipping, save_every, seed of every task

    @property
    def variant(self) -> str:
        """plain, init-only, reg-only or teir."""
        return {(False, False): "plain", (True, False): "init-only", (False, True): "reg-only",
                (True, True): "teir"}[(self.teir_init, self.teir_reg)]

    def check(self) -> None:
        problems = []
        if self.method not in METHODS:
            problems.append(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.epochs < 1 or (self.steps is not None and self.steps < 1) or self.batch_size < 1:
            problems.append(f"epochs, steps and batch size must be positive (got {self.epochs}, {self.steps}, "
                            f"{self.batch_size})")
        if problem := vocabulary_size_problem(self.vocab_size, "--vocab-size"):
            problems.append(problem)
        if len(set(self.languages)) != len(self.languages):
            problems.append(f"a language appears twice in the task order {','.join(self.languages)}")
        if not METRIC_PATTERN.fullmatch(self.metric):
            problems.append(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {self.metric!r}")
        if problems:
            raise ConfigError("; ".join(problems))


def metric_value(result: dict, lang: str, metric: str) -> float | None:
    """``metric`` (``AR`` or ``<i2t|t2i>.R@K``) of ``result["per_language"][lang]``; None when not evaluated."""
    value: Any = result.get("per_language", {}).get(lang)
    if value is None:
        return None
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ConfigError(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
        value = value[part]
    if isinstance(value, dict):
        raise ConfigError(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
    return float(value)


def read_summary(checkpoint: Path) -> dict[str, Any]:
    """The ``continual`` block of a train-continual checkpoint's ``continual.json`` (tasks, metric, matrix, AR, F)."""
    return artifacts.read_json(Path(checkpoint) / CONTINUAL_FILE)["continual"]


def final_summary(checkpoint: Path) -> dict[str, Any]:
    """The task order and the final AR and F of a train-continual checkpoint (``continual.json``)."""
    summary = read_summary(checkpoint)
    return {"tasks": summary["tasks"], "AR": summary["AR"][-1], "F": summary["F"][-1]}


def task_order(config: ContinualTrainConfig, captions: pa.Table) -> list[str]:
    """The task languages: ``config.languages``, or English first and the others in order of appearance."""
    available = list(dict.fromkeys(captions.column("lang").to_pylist()))
    if config.languages:
        missing = [lang for lang in config.languages if lang not in available]
        if missing:
            raise ConfigError(f"no captions in language(s) {', '.join(missing)} (has {', '.join(available)})",
                              config.captions)
        return list(config.languages)
    return ([NATIVE_LANG] if NATIVE_LANG in available else []) + [lang for lang in available if lang != NATIVE_LANG]
