"""``AlignmentConfig``: the settings of AME's alignment term (``mltk.ame.rcsls``) in a training stage, kept apart from
RCSLS so that ``mltk --help`` can read its fields without importing torch.

Every setting but the lexicon comes from the stage's recipe (its ``alignment`` section: ``weight``, ``k``, ``form``,
``every``, ``lr``, ``orthogonal``) unless given; a recipe that leaves one out is refused naming the key and the
file (``mltk.settings.resolve``). Each field's ``metadata`` generates its option (``mltk.cli.config_options``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE

ALIGN_BATCH = 1024  # lexicon pairs per step
ALIGN_FORMS = ("map", "table")


@dataclass(frozen=True)
class AlignmentConfig:
    """``--lexicon L --align-form F --align-every T --align-lr R --align-weight W --align-k K`` of a training
    stage (no lexicon: no alignment)."""

    lexicon: Path | None = field(
        default=None,
        metadata={
            "option": "--lexicon",
            "help": "A lexicon artifact (mltk import-data lexicon / synth-lexicon, mltk "
            "induce-lexicon): adds AME's RCSLS term aligning the trained token rows of its source words with the "
            "frozen English rows of their translations.",
        },
    )
    weight: float = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--align-weight",
            "help": "Weight of the RCSLS term (with --lexicon; --align-form table).",
            "min": 0.0,
        },
    )
    k: int = field(
        default=FROM_RECIPE,
        metadata={"option": "--align-k", "help": "RCSLS's k nearest neighbours (RCSLS's paper: 10).", "min": 1},
    )
    batch: int = ALIGN_BATCH
    form: str = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--align-form",
            "choices": ALIGN_FORMS,
            "help": "map (AME: a linear map of the source words, "
            "learnt by RCSLS apart from the table and folded into MLA's projection) or table (RCSLS added to the loss, "
            "into the token table; CLL-CLIP).",
        },
    )
    every: int = field(
        default=FROM_RECIPE,
        metadata={"option": "--align-every", "help": "--align-form map: steps between map updates (AME's T)."},
    )
    lr: float = field(
        default=FROM_RECIPE,
        metadata={"option": "--align-lr", "help": "--align-form map: the map's rate (AME: 5 on COCO)."},
    )
    orthogonal: bool = field(
        default=FROM_RECIPE,
        metadata={
            "option": "--align-orthogonal/--align-free",
            "help": "--align-form map: keep the map orthogonal, or leave it free (AME's).",
        },
    )

    def __post_init__(self) -> None:
        if self.form is not FROM_RECIPE and self.form not in ALIGN_FORMS:
            raise ConfigError(f"--align-form must be one of {', '.join(ALIGN_FORMS)}, got {self.form!r}")
        every, lr = (None if value is FROM_RECIPE else value for value in (self.every, self.lr))
        if (every is not None and every < 1) or (lr is not None and not lr > 0):
            raise ConfigError(f"--align-every must be >= 1 and --align-lr > 0, got {self.every} and {self.lr}")

    def check_form(self, takes_map: bool, encoder: str) -> None:
        """Refuse, before any training, a lexicon aligned by the map form on an ``encoder`` whose source words have
        no projection of their own to fold the map into (a CLL-CLIP table: English reads the same rows)."""
        if self.lexicon is not None and self.form == "map" and not takes_map:
            raise ConfigError(
                f"alignment form 'map' (--align-form, recipe key alignment.form) folds AME's map into "
                f"MLA's non-native projection, which {encoder} does not have: use --align-form table"
            )
