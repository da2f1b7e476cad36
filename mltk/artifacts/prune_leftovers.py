"""What a killed ``mltk prune`` leaves beside a checkpoint, and who puts it right.

Prune builds the pruned copy in ``.NAME.prune-RANDOM`` and, where the system cannot swap two directories in one
step, moves the original to ``.NAME.pruned-original-PID-RANDOM`` for a moment (``mltk.artifacts.swap``). A kill
leaves one of them: the next prune puts the original back (when nothing is at the path) and removes the rest; so
does every writer of the artifact after its commit (a retrain leaves nothing beside it), and a reader that finds
nothing at the path says where the complete checkpoint is (``mltk.artifacts.manifest.missing_reason``). This module
imports nothing of the artifact readers and writers, which all use it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from mltk.artifacts import schema
from mltk.core.names import sibling_stem

PARTIAL_MARKER = ".mltk-prune-partial"  # inside a staging directory until it is complete


def _is_artifact(path: Path) -> bool:
    return (path / schema.MANIFEST).is_file()


def interrupted_originals(artifact: Path) -> list[Path]:
    """The complete originals a killed prune moved beside ``artifact`` (oldest first)."""
    original = re.compile(re.escape(f".{sibling_stem(artifact)}") + r"\.pruned-original-[0-9]+-[0-9a-f]{12}")
    if not artifact.parent.is_dir():
        return []
    return sorted(
        (p for p in artifact.parent.iterdir() if original.fullmatch(p.name) and not p.is_symlink() and _is_artifact(p)),
        key=lambda p: p.stat().st_mtime,
    )


def clean_leftovers(artifact: Path) -> None:
    """Under the lock: put back an original that a run killed between two renames moved away, and remove what
    killed runs left beside the artifact (staging directories, replaced originals). Every writer of the artifact
    calls it after its commit too, so that a retrain after a killed prune leaves nothing beside it."""
    staging = re.compile(re.escape(f".{sibling_stem(artifact)}") + r"\.prune-[0-9a-f]{12}")
    entries = [p for p in artifact.parent.iterdir() if not p.is_symlink() and p.is_dir()]
    originals = interrupted_originals(artifact)
    if originals and not artifact.exists() and not artifact.is_symlink():
        os.replace(originals.pop(), artifact)
        print(f"{artifact}: put back the checkpoint an interrupted prune had moved aside", file=sys.stderr)
    if not _is_artifact(artifact):
        return  # nothing complete at the path: leave everything else as it is
    for entry in originals:
        shutil.rmtree(entry, ignore_errors=True)
    for entry in entries:
        if staging.fullmatch(entry.name) and (
            (entry / PARTIAL_MARKER).is_file() or _is_artifact(entry) or not any(entry.iterdir())
        ):
            shutil.rmtree(entry, ignore_errors=True)
