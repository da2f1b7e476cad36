"""Where an export is written: a plain folder (the format's own files, no mltk manifest, so the other tool reads it
as its own), built beside its final place and renamed into it when complete.

An existing ``--out`` is refused unless ``--overwrite`` (``policy.OVERWRITE``); the old folder is replaced only
once the new one is complete."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mltk.artifacts.loose import enclosing_artifact
from mltk.core import policy
from mltk.core.names import check_output_path
from mltk.core.errors import ConfigError

EXPORT_INFO = "mltk_export.json"  # what was exported from what, and what the folder keeps (read by no loader)


def check_out(out: Path) -> None:
    """Refuse an existing ``out`` (unless --overwrite) before any work; an ``out`` inside (or being) an mltk
    artifact, or holding a control character, always."""
    check_output_path(out)
    inside = enclosing_artifact(Path(out).resolve())
    if inside is not None:
        raise ConfigError(f"lies inside the mltk artifact {inside} (or is one); write the export elsewhere", out)
    if out.exists() and not policy.OVERWRITE.get():
        raise ConfigError("exists; pass --overwrite to replace it with the export", out)
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", out)


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """Yield an empty folder to write into; on success it becomes ``out`` (an absolute path)."""
    out = Path(out).resolve()
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-partial-", dir=out.parent))  # a fresh name of its own
    mask = os.umask(0)
    os.umask(mask)
    staging.chmod(0o777 & ~mask)  # as mkdir would make it (mkdtemp makes it private)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = out.parent / f".{out.name}.export-old-{os.getpid()}-{secrets.token_hex(6)}"  # never a user's folder
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)
