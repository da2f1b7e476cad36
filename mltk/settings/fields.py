"""The metadata of config fields that several training stages share, written once: each stage's config declares
``batch_size: int = field(default=FROM_RECIPE, metadata=BATCH_SIZE)`` and the option, its help and its bounds
follow (``mltk.cli.config_options``). ``only(metadata, *stages)``: the same field offered as an option by some of
the commands that share one config (``MlaConfig``: train-nlt, train-le, train-nlt-le).

Torch-free: ``mltk --help`` reads it.
"""

from __future__ import annotations

from typing import Any

BATCH_SIZE = {"help": "Examples per step.", "min": 2}
VAL_IMAGES = {"help": "At most this many validation images.", "min": 1}
ALIGNMENT = {
    "help": "AME's RCSLS term over a lexicon and its map: weight, k, form, every, lr, orthogonal (set with "
    "--align-*; a lexicon turns it on)."
}
MSE_FORM = {
    "help": "The MSE to the English teacher: mean over elements (the authors' code) or sum (over D, the written form)."
}


def only(metadata: dict[str, Any], *stages: str) -> dict[str, Any]:
    """``metadata`` offered as an option by ``stages`` alone (a recipe and ``--set`` key for every stage)."""
    return {**metadata, "stages": stages}


def read_by(metadata: dict[str, Any], *stages: str) -> dict[str, Any]:
    """``metadata`` of a key that ``stages`` alone read: their option, their recipe and ``--set`` key; the other
    stages sharing the config refuse it (``mltk.settings.resolve.unread_by``) and record it as None."""
    return {**metadata, "stages": stages, "read_by": stages}
