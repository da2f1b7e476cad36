"""Whether mltk made what it is about to replace: the one rule of every writer, ``--overwrite`` or not.

``--overwrite`` (and ``MLTK_OVERWRITE=1``, which the example Makefiles export) allows replacing an earlier output
of mltk; it never allows replacing a user's own file that happens to sit where an output goes (a text file named
``sheet.png``, an edited recipe copy). So every writer asks ``made_by_mltk`` first:

- an artifact folder carries its ``manifest.json``, and an export folder its ``mltk_export.json`` marker;
- a single file (a contact sheet, an evaluation picture, a recipe copy) carries no marker of its own (a PNG or a
  recipe has no place for one that every reader ignores), so the writer records the sha256 and size of each file
  it writes in a small record under mltk's cache root, keyed by the file's absolute path; the file is mltk's while
  it still holds exactly those bytes. A file edited since, one written by mltk on another machine (or with another
  cache root) reads as the user's, and is refused: refusing is the safe side of not knowing.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path

from mltk.artifacts.manifest import is_artifact
from mltk.core.cache import cache_root

RECORD_FILE = "written-files.json"
MAX_ENTRIES = 4096  # the files written most recently are kept; an older one then reads as the user's
EXPORT_INFO = "mltk_export.json"  # what was exported from what, and what the folder keeps (read by no loader)
MADE_BY = "mltk export"  # EXPORT_INFO's "made_by": the marker of a folder ``mltk export`` wrote
MAX_INFO_BYTES = 1 << 20  # an EXPORT_INFO is a few hundred bytes


def is_export(folder: Path) -> bool:
    """Whether ``folder`` is a folder ``mltk export`` wrote: its ``mltk_export.json`` says so (``made_by``; an
    export made before the marker by its ``format``, ``from`` and ``fingerprint``)."""
    info = folder / EXPORT_INFO
    if folder.is_symlink() or not folder.is_dir() or info.is_symlink() or not info.is_file():
        return False
    try:
        if info.stat().st_size > MAX_INFO_BYTES:
            return False
        record = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    return record.get("made_by") == MADE_BY or all(
        isinstance(record.get(key), str) for key in ("format", "from", "fingerprint")
    )


def _record_path() -> Path:
    return cache_root() / RECORD_FILE


def _read_record() -> dict:
    try:
        record = json.loads(_record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return record if isinstance(record, dict) else {}


def _key(path: Path) -> str:
    return str(Path(path).parent.resolve() / Path(path).name)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def remember_written(path: Path, data: bytes) -> None:
    """Record that mltk wrote ``data`` to ``path``. A record that cannot be written only means the file will later
    read as the user's (and be refused, not replaced)."""
    record = _read_record()
    record[_key(path)] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "seen": time.time()}
    entries = sorted(record.items(), key=lambda item: item[1].get("seen", 0) if isinstance(item[1], dict) else 0)
    target = _record_path()
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(dict(entries[-MAX_ENTRIES:])), encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)


def made_by_mltk(path: str | os.PathLike) -> bool:
    """Whether ``path`` is something mltk wrote and nobody changed since: an artifact, an export, or a single file
    whose bytes are those mltk recorded writing there. A symlink or a special file never is."""
    path = Path(path)
    if path.is_symlink():
        return False
    if path.is_dir():
        return is_artifact(path) or is_export(path)
    if not path.is_file():
        return False
    entry = _read_record().get(_key(path))
    if not isinstance(entry, dict) or entry.get("size") != path.stat().st_size:
        return False
    try:
        return _sha256(path) == entry.get("sha256")
    except OSError:
        return False
