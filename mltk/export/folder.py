"""Where an export is written: a plain folder (the format's own files, no mltk manifest, so the other tool reads it
as its own), built beside its final place and renamed into it when complete.

An existing ``--out`` is refused unless ``--overwrite`` (``policy.OVERWRITE``); the old folder is replaced only
once the new one is complete."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from mltk.core import policy
from mltk.core.errors import ConfigError

EXPORT_INFO = "mltk_export.json"  # what was exported from what, and what the folder keeps (read by no loader)


def check_out(out: Path) -> None:
    """Refuse an existing ``out`` (unless --overwrite) before any work."""
    if out.exists() and not policy.OVERWRITE.get():
        raise ConfigError("exists; pass --overwrite to replace it with the export", out)
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", out)


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """Yield an empty folder to write into; on success it becomes ``out`` (an absolute path)."""
    out = Path(out).resolve()
    check_out(out)
    staging = out.parent / f".{out.name}.export-partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = out.parent / f".{out.name}.export-old"
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)
