"""A persistent translation cache: (model, source language, target language, source text) -> translation.

Stored in SQLite (one file, safe for concurrent readers, no pickle). ``model`` is the model key of the backend:
its name (plus a fingerprint of the files for a local directory) and the decoding settings, because beam size
and length limit change the output. Precision is not part of the key: the same model and decoding give the same
translation up to rounding.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mltk.core.cache import cache_root
from mltk.core.errors import ConfigError

CACHE_FILE = "translations.sqlite"
_LOOKUP_CHUNK = 500  # below SQLite's limit on bound parameters


def default_cache_dir() -> Path:
    """``translate/`` under ``mltk.core.cache.cache_root()`` (``$MLTK_CACHE_DIR``, else the XDG cache)."""
    return cache_root() / "translate"


class TranslationCache:
    """``lookup`` and ``store`` translations of one (model, source, target) at a time."""

    def __init__(self, directory: str | os.PathLike):
        self.path = Path(directory).expanduser().resolve() / CACHE_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS translations (model TEXT NOT NULL, source_lang TEXT NOT NULL, "
                "target_lang TEXT NOT NULL, source TEXT NOT NULL, translation TEXT NOT NULL, "
                "PRIMARY KEY (model, source_lang, target_lang, source)) WITHOUT ROWID"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the translation cache ({exc})", self.path) from exc

    def lookup(self, model: str, source_lang: str, target_lang: str, texts: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(texts), _LOOKUP_CHUNK):
            chunk = list(texts[start : start + _LOOKUP_CHUNK])
            placeholders = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT source, translation FROM translations WHERE model = ? AND source_lang = ? AND "
                f"target_lang = ? AND source IN ({placeholders})",
                [model, source_lang, target_lang, *chunk],
            )
            found.update(rows)
        return found

    def store(self, model: str, source_lang: str, target_lang: str, pairs: Mapping[str, str] | Iterable) -> None:
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO translations VALUES (?, ?, ?, ?, ?)",
                [(model, source_lang, target_lang, source, translation) for source, translation in items],
            )

    def close(self) -> None:
        self._db.close()


class NoCache:
    """Stands in for ``TranslationCache`` with ``--no-cache``."""

    path = None

    def lookup(self, model: str, source_lang: str, target_lang: str, texts: Sequence[str]) -> dict[str, str]:
        return {}

    def store(self, model: str, source_lang: str, target_lang: str, pairs) -> None:
        pass

    def close(self) -> None:
        pass
