"""One writer per output: a lock file beside an artifact's ``.partial`` directory.

Two runs with the same ``--out`` would otherwise build in the same partial directory and the survivor could be a
mix of both. The lock is a held ``fcntl.flock`` on ``.NAME.lock``: the kernel grants it to exactly one open file at
a time and drops it when its process ends, so a killed run never blocks a rerun and a stale file is no lock at all
(whatever pid it names: a reused pid, pid 1, is never trusted). The taker checks that the file it locked is still
the one at the lock path (a releasing writer unlinks it while holding it), so two takers cannot both win. The file
names the holder (pid and process start time, from ``/proc/PID/stat``), for the message a second writer gets.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from pathlib import Path

from mltk.core.errors import ArtifactError
from mltk.core.names import sibling_stem

LOCK_TEXT = re.compile(r"(\d+( \S+)?)?")  # what a lock file holds: "PID START_TIME", or nothing yet


def lock_path(out_dir: Path) -> Path:
    out_dir = Path(out_dir).resolve()
    return out_dir.parent / f".{sibling_stem(out_dir)}.lock"


def _other_rank_of_a_job() -> bool:
    """Under torchrun the job's ranks write one output together (each its own shards, ordered by barriers): rank 0
    holds the lock for the job, and the other ranks neither take it nor take rank 0 for a second writer."""
    return "WORLD_SIZE" in os.environ and os.environ.get("RANK", "0") not in ("", "0")


def process_start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/PID/stat`` (start time in clock ticks since boot): with the pid it names one process
    (a pid is reused, a pid and its start time are not). None where there is no ``/proc``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()[19] if ")" in text else None  # after "pid (comm)": field 3 is index 0


def _open_lock_file(path: Path) -> int:
    """Open (creating) the lock file without following a symlink; anything but a regular file is refused."""
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ArtifactError(
            f"cannot open the output lock {path.name} ({exc.strerror or exc}); if it is not mltk's, move it away", path
        ) from None
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise ArtifactError(f"the output lock {path.name} is not a regular file; move it away", path)
    return handle


def _try_flock(handle: int) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder_text(handle: int) -> str:
    os.lseek(handle, 0, os.SEEK_SET)
    return os.read(handle, 200).decode("ascii", "replace").strip()


def holder(out_dir: Path) -> int | None:
    """The pid of another live process writing ``out_dir`` (it holds the lock), or None."""
    if _other_rank_of_a_job():
        return None
    path = lock_path(out_dir)
    if not path.is_file() or path.is_symlink():
        return None
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _try_flock(handle):
            return None  # nobody holds it: a stale file, whatever it says
        text = _holder_text(handle).split()
    finally:
        os.close(handle)
    pid = int(text[0]) if text and text[0].isdigit() else -1
    return None if pid == os.getpid() else pid


def refuse_if_held(out_dir: Path) -> None:
    pid = holder(out_dir)
    if pid is not None:
        shown = f"pid {pid}" if pid > 0 else "pid unknown"
        raise ArtifactError(
            f"is being written by another mltk process ({shown}); wait for it to finish or stop it",
            Path(out_dir).resolve(),
        )


class OutputLock:
    """``acquire()`` or refuse; ``release()`` unlinks the lock file while still holding it, then lets go."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir).resolve()
        self.path = lock_path(self.out_dir)
        self.held = False
        self._handle: int | None = None

    def acquire(self) -> None:
        if _other_rank_of_a_job():
            return
        for _ in range(20):
            handle = _open_lock_file(self.path)
            if not _try_flock(handle):
                os.close(handle)
                refuse_if_held(self.out_dir)
                continue  # released between our try and the look: try again
            if not self._still_at_path(handle):
                os.close(handle)  # the holder unlinked this file on release; lock the one at the path now
                continue
            if not LOCK_TEXT.fullmatch(_holder_text(handle)):
                os.close(handle)  # a user's own file of that name: never overwritten or removed
                raise ArtifactError(
                    f"{self.path.name} beside it is not an mltk lock; mltk locks the output there, so move it away",
                    self.out_dir,
                )
            self._handle, self.held = handle, True
            self._write_holder()
            return
        refuse_if_held(self.out_dir)
        raise ArtifactError("could not take the output lock (another writer keeps racing for it)", self.out_dir)

    def _write_holder(self) -> None:
        """Name this process in the held lock file; a full disk or a refused write there is one line (exit 2), the
        lock given back, like any other write of a command."""
        try:
            os.ftruncate(self._handle, 0)
            os.lseek(self._handle, 0, os.SEEK_SET)
            os.write(self._handle, f"{os.getpid()} {process_start_time(os.getpid()) or '-'}\n".encode("ascii"))
        except OSError as exc:
            self.release()
            reason = (
                "no space left on device"
                if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                else f"cannot write ({exc.strerror or exc})"
            )
            raise ArtifactError(
                f"{reason} while writing its lock {self.path.name}; nothing was changed", self.out_dir
            ) from None

    def _still_at_path(self, handle: int) -> bool:
        try:
            on_disk = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        opened = os.fstat(handle)
        return (on_disk.st_dev, on_disk.st_ino) == (opened.st_dev, opened.st_ino)

    def release(self) -> None:
        if not self.held or self._handle is None:
            return
        self.held = False
        try:
            if self._still_at_path(self._handle):
                self.path.unlink(missing_ok=True)
        except OSError:
            pass  # unreadable or gone: nothing of ours to remove
        finally:
            os.close(self._handle)
            self._handle = None
