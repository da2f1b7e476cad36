"""``LoopConfig``: the settings of the one training loop (``mltk.train.loop.fit``), kept apart from the loop so
that ``mltk --help`` can read its fields without importing torch.

The hyper-parameters (``steps`` to ``clip_mode``) have no default here: their one home is the recipe
(``mltk.recipes``), and a recipe that leaves one out is refused naming the key and the file. The run settings
after them (``eval_every``, ``save_every``, ``seed``) say how a run reports, saves and draws, not what it learns.
How often a run logs is no setting of the loop: ``--log-every`` reaches ``fit`` through
``mltk.train.step_log.step_logging`` alone.

Each field's ``metadata`` is what the training commands' options are generated from (``mltk.cli.config_options``):
``help``, and optionally ``option`` (the option's name when it is not ``--`` + the field's name), ``min``,
``choices`` and ``cli: False`` (a key for ``--set`` and the recipe only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mltk.core.errors import ConfigError
from mltk.core.rates import learning_rate_problem

SCHEDULES = ("constant", "cosine", "linear", "warmup_cosine", "step")
CLIP_MODES = ("per_tensor", "global")
# The largest seed and step count: a stage draws with seed + step (and seed + task) in 32-bit generators.
MAX_SEED = 2**31 - 1
MAX_STEPS = 10**9
LOG_EVERY = 10  # steps between log lines and steps.csv rows when --log-every is not given


@dataclass(frozen=True)
class LoopConfig:
    steps: int = field(
        metadata={
            "help": "Optimizer steps (train-continual: per task, from its own steps or epochs).",
            "min": 1,
            "max": MAX_STEPS,
        }
    )
    lr: float = field(metadata={"help": "Peak learning rate, after a linear warm-up."})
    warmup_fraction: float = field(
        metadata={"help": "Fraction of the steps of linear warm-up.", "option": "--warmup", "min": 0.0, "max": 1.0}
    )
    schedule: str = field(
        metadata={
            "help": "After the warm-up: constant; cosine to 0 over the steps after it; "
            "linear to 0 (CCR_k's create_scheduler); warmup_cosine, "
            "0.5 (1 + cos(pi x)) with x the fraction of all the steps (MLA's "
            "BertAdam); step, lr / 10 from half the steps on (AME).",
            "choices": SCHEDULES,
            "cli": False,
        }
    )
    weight_decay: float = field(
        metadata={"help": "Decoupled (AdamW) weight decay on weight matrices (tensors with ndim >= 2).", "min": 0.0}
    )
    betas: tuple[float, float] = field(metadata={"help": "AdamW's betas.", "cli": False})
    eps: float = field(metadata={"help": "AdamW's eps.", "cli": False, "min": 0.0})
    grad_clip: float | None = field(
        metadata={"help": "Gradient norm clip, per tensor or global as clip_mode says (0: off).", "min": 0.0}
    )
    clip_mode: str = field(
        metadata={
            "help": "per_tensor (the MLA authors' code: each tensor's norm) or global.",
            "choices": CLIP_MODES,
            "cli": False,
        }
    )
    eval_every: int = field(
        default=0,
        metadata={"help": "Validate every N steps (0: at the end only); the best validation state is kept.", "min": 0},
    )
    save_every: int = field(
        default=50,
        metadata={
            "help": "Steps between resumable state saves (0: only at the end or an interrupt).",
            "min": 0,
            "cli": False,
        },
    )
    seed: int = field(
        default=0,
        metadata={"help": "Random seed; the same seed gives the same result on the CPU.", "min": 0, "max": MAX_SEED},
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        problems = []
        if self.steps is not None and self.steps < 1:  # None: set per task (train-continual)
            problems.append(f"steps must be at least 1, got {self.steps}")
        if problem := learning_rate_problem(self.lr, "--lr"):
            problems.append(problem)
        if not 0.0 <= self.warmup_fraction <= 1.0:
            problems.append(f"warmup_fraction must be in [0, 1], got {self.warmup_fraction}")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.clip_mode not in CLIP_MODES:
            problems.append(f"clip_mode must be one of {', '.join(CLIP_MODES)}, got {self.clip_mode!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            problems.append(f"grad_clip must be positive or None, got {self.grad_clip}")
        if self.weight_decay < 0 or self.eps < 0 or len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            problems.append(
                f"invalid AdamW settings: weight_decay={self.weight_decay}, betas={self.betas}, eps={self.eps}"
            )
        if self.eval_every < 0 or self.save_every < 0:
            problems.append(f"eval_every and save_every must be >= 0, got {self.eval_every}, {self.save_every}")
        if problems:
            raise ConfigError("; ".join(problems))
