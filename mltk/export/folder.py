"""Where an export is written: a plain folder (the format's own files, no mltk manifest, so the other tool reads it
as its own), built beside its final place and renamed into it when complete, under the rules every artifact
follows (``docs/safety.md``).

- What made it: ``mltk_export.json`` (``made_by: "mltk export"``, the source checkpoint and its fingerprint) is
  the export's marker. An existing ``--out`` is replaced (``--overwrite``, ``policy.OVERWRITE``) only when it is an
  earlier export or an empty folder; never the checkpoint, a folder holding it or inside it, one of its
  dependencies (base model, tokenizer), the current directory or anything else.
- One writer per output: the lock of every artifact (``mltk.artifacts.locks``), held from the first look at
  ``--out`` under it to the rename.
- mltk's own names beside ``--out``: ``.OUT.export-partial-RANDOM`` (the folder being built, holding
  ``.mltk-export-partial`` until it is complete) and ``.OUT.export-old-PID-RANDOM`` (the export being replaced).
  Those a killed run left are removed (or, for a replaced export the new one never took the place of, put back)
  by the next run, under the lock. For a long ``--out`` name the part before the suffix is shortened with a hash,
  so that these names stay within the file system's 255 bytes.
- A full disk or a permission error is exit 2 naming the file being written; the previous export stays.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from mltk.artifacts import locks
from mltk.artifacts.loose import enclosing_artifact
from mltk.artifacts.ownership import EXPORT_INFO, MADE_BY, is_export  # the export's marker
from mltk.artifacts.writer import check_writable, disk_full
from mltk.core import policy
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.file_modes import give_normal_modes
from mltk.core.names import check_output_path
from mltk.core.names import sibling_stem as stem

PARTIAL_MARKER = ".mltk-export-partial"  # inside a folder being built, until it is complete


def _refuse_overlap(out: Path, protected: Iterable[tuple[Path, str]]) -> None:
    """Refuse an ``out`` that is, holds or lies inside the checkpoint or one of its dependencies, or holds the
    current directory."""
    for path, role in protected:
        path = Path(path).resolve()
        if out == path or out in path.parents or path in out.parents:
            relation = "is" if out == path else "holds" if out in path.parents else "lies inside"
            raise ConfigError(f"{relation} the {role} {path}; write the export elsewhere", out)
    here = Path.cwd().resolve()
    if out == here or out in here.parents:
        raise ConfigError("is the current directory (or holds it); write the export into a folder of its own", out)


def check_out(out: Path, protected: Iterable[tuple[Path, str]] = ()) -> None:
    """Refuse ``out`` before any work: a control character, an mltk artifact (or inside one), an overlap with
    ``protected`` (``(path, role)``: the checkpoint, its dependencies) or the current directory, a symlink, an
    existing file or folder that is no earlier export and not empty, an earlier export without --overwrite, an
    output another process is writing, an unwritable parent."""
    check_output_path(out)
    if Path(out).is_symlink():
        raise ConfigError("is a symlink; name the folder itself", out)
    out = Path(out).resolve()
    inside = enclosing_artifact(out)
    if inside is not None:
        raise ConfigError(f"lies inside the mltk artifact {inside} (or is one); write the export elsewhere", out)
    _refuse_overlap(out, protected)
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder; refusing to replace it", out)
    if out.is_dir() and any(out.iterdir()):
        if not is_export(out):
            raise ConfigError(
                f"exists and is not an mltk export (no {EXPORT_INFO} made by {MADE_BY}); refusing to replace it", out
            )
        if not policy.OVERWRITE.get():
            raise ConfigError("exists; pass --overwrite to replace it with the export", out)
    locks.refuse_if_held(out)
    check_writable(out, "the export")


def _ours(folder: Path, *marks: str) -> bool:
    """A real folder (not a symlink) that is empty or holds one of ``marks``."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    return not any(folder.iterdir()) or any((folder / mark).is_file() for mark in marks)


def _clean_leftovers(out: Path) -> None:
    """Under the lock: remove the folders a killed export left beside ``out``, and put back an export that a run
    killed between its two renames moved away."""
    if not out.parent.is_dir():
        return
    name = re.escape(f".{stem(out)}")
    partial = re.compile(name + r"\.export-partial-[0-9a-z_]{8,12}")
    old = re.compile(name + r"\.export-old-[0-9]+-[0-9a-f]{12}")
    olds = []
    for entry in out.parent.iterdir():
        if partial.fullmatch(entry.name) and _ours(entry, PARTIAL_MARKER):
            shutil.rmtree(entry, ignore_errors=True)
        elif old.fullmatch(entry.name) and (_ours(entry) or is_export(entry)):
            olds.append(entry)
    olds.sort(key=lambda p: p.stat().st_mtime)
    if olds and not out.exists() and not out.is_symlink():
        os.replace(olds.pop(), out)
    for entry in olds:
        shutil.rmtree(entry, ignore_errors=True)


def _user_error(exc: BaseException, out: Path, staging: Path) -> ArtifactError | None:
    """A full disk or a refused write as exit 2 naming the file being written (None for any other error; a full
    disk is also safetensors' own error, which is no OSError)."""
    full = disk_full(exc) or (isinstance(exc, Exception) and "no space left on device" in str(exc).lower())
    if not full and not isinstance(exc, OSError):
        return None
    if not full and getattr(exc, "errno", None) not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG):
        return None
    name = getattr(exc, "filename", None)
    if name is None:
        written = [p for p in staging.rglob("*") if p.is_file()] if staging.is_dir() else []
        name = max(written, key=lambda p: p.stat().st_mtime_ns) if written else out
    name = str(name)
    shown = str(out / Path(name).relative_to(staging)) if name.startswith(str(staging) + os.sep) else name
    shown = shown.removesuffix(".tmp")
    reason = "no space left on device" if full else f"cannot write ({exc.strerror or exc})"
    return ArtifactError(f"{reason} while writing {shown}; nothing was replaced", out)


def _swap(staging: Path, out: Path) -> None:
    """Put the complete ``staging`` in ``out``'s place; the export it replaces is removed only after the rename."""
    (staging / PARTIAL_MARKER).unlink(missing_ok=True)
    if out.exists():
        old = out.parent / f".{stem(out)}.export-old-{os.getpid()}-{secrets.token_hex(6)}"  # never a user's folder
        os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)


def _take_lock(out: Path) -> locks.OutputLock:
    lock = locks.OutputLock(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError as exc:
        raise ArtifactError(f"cannot create the export ({exc.strerror or exc})", out) from None
    return lock


def tidy(out: Path) -> None:
    """Clean what a killed export left beside ``out`` (see ``_clean_leftovers``), under the lock, unless another
    process holds it (then it is not left over). Done before ``check_out`` looks at ``out``, so that a run that is
    refused still tidies."""
    check_output_path(out)
    out = Path(out).resolve()
    if locks.holder(out) is not None or not out.parent.is_dir() or not os.access(out.parent, os.W_OK | os.X_OK):
        return
    lock = _take_lock(out)
    try:
        _clean_leftovers(out)
    finally:
        lock.release()


@contextlib.contextmanager
def staged_folder(out: Path, protected: Iterable[tuple[Path, str]] = ()) -> Iterator[Path]:
    """Yield an empty folder to write into; on success it becomes ``out`` (an absolute path), under the lock of
    ``out`` and the policy of ``check_out`` (asked again once the lock is held)."""
    protected = list(protected)
    check_out(Path(out), protected)
    out = Path(out).resolve()
    lock = _take_lock(out)
    try:
        _clean_leftovers(out)  # first: an export a killed run moved away is back before the policy looks
        check_out(out, protected)
        staging = out.parent / f".{stem(out)}.export-partial-{secrets.token_hex(6)}"  # a fresh name of its own
        try:
            staging.mkdir()  # the umask's mode, as any folder the user makes
            (staging / PARTIAL_MARKER).write_text("mltk export in progress\n", encoding="utf-8")
            yield staging
            give_normal_modes(staging)  # safetensors writes its files private (0600)
            _swap(staging, out)
        except BaseException as exc:
            error = _user_error(exc, out, staging)
            shutil.rmtree(staging, ignore_errors=True)
            if error is not None:
                raise error from None
            raise
    finally:
        lock.release()
