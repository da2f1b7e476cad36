"""One writer per output: a lock file beside an artifact's ``.partial`` directory.

Two runs with the same ``--out`` would otherwise build in the same partial directory and the survivor could be a
mix of both. The lock is created with ``O_EXCL`` and holds the writer's pid; a second writer is refused naming
that pid. A lock whose pid is no longer running (a killed run) is stale and taken over, so it never blocks a rerun.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from mltk.core.errors import ArtifactError


def lock_path(out_dir: Path) -> Path:
    out_dir = Path(out_dir).resolve()
    return out_dir.parent / f".{out_dir.name}.lock"


def _other_rank_of_a_job() -> bool:
    """Under torchrun the job's ranks write one output together (each its own shards, ordered by barriers): rank 0
    holds the lock for the job, and the other ranks neither take it nor take rank 0 for a second writer."""
    return "WORLD_SIZE" in os.environ and os.environ.get("RANK", "0") not in ("", "0")


def holder(out_dir: Path) -> int | None:
    """The pid of another live process writing ``out_dir``, or None."""
    if _other_rank_of_a_job():
        return None
    try:
        text = lock_path(out_dir).read_text(encoding="ascii").strip()
        pid = int(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if pid == os.getpid() or not _alive(pid):
        return None
    return pid


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def refuse_if_held(out_dir: Path) -> None:
    pid = holder(out_dir)
    if pid is not None:
        raise ArtifactError(f"is being written by another mltk process (pid {pid}); wait for it to finish or stop it",
                            Path(out_dir).resolve())


class OutputLock:
    """``acquire()`` or refuse; ``release()`` removes the lock only if it is still ours."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir).resolve()
        self.path = lock_path(self.out_dir)
        self.held = False

    def acquire(self) -> None:
        if _other_rank_of_a_job():
            return
        for _ in range(3):
            try:
                handle = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                refuse_if_held(self.out_dir)
                self._remove_stale()
                continue
            with os.fdopen(handle, "w", encoding="ascii") as file:
                file.write(f"{os.getpid()}\n")
            self.held = True
            return
        refuse_if_held(self.out_dir)
        raise ArtifactError("could not take the output lock (another writer keeps racing for it)", self.out_dir)

    def _remove_stale(self) -> None:
        self.path.unlink(missing_ok=True)  # another writer may have removed it first

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(OSError):  # gone or unreadable: nothing of ours to remove
            if self.path.read_text(encoding="ascii").strip() == str(os.getpid()):
                self.path.unlink()
