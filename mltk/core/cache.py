"""Where mltk keeps what it can recompute: one root for every cache (teacher embeddings, translations)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MLTK_CACHE_DIR"


def cache_root() -> Path:
    """``$MLTK_CACHE_DIR``, else ``$XDG_CACHE_HOME/mltk``, else ``~/.cache/mltk``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mltk"
