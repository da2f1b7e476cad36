"""The caption side of a retrieval evaluation, as arrays in one row order (shared by per-language retrieval and
caption-to-caption retrieval)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TextRows:
    image_ids: np.ndarray  # [M] str
    lang: np.ndarray  # [M] str
    caption_ids: np.ndarray  # [M] str
    vectors: np.ndarray  # [M, d]
    split: np.ndarray | None
    source: str = field(default="<texts>")
