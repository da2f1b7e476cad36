"""The mode a file mltk writes should have: what ``open()`` would give it under the user's umask.

Some writers create files private to their owner (0600): ``tempfile.mkstemp`` always, and safetensors' ``save_file``
(also behind transformers' ``save_pretrained``). Weights, pictures and contact sheets would then be unreadable
to colleagues on a shared server while the manifests beside them are readable; every file mltk writes is given the
umask's normal mode instead (0644 under umask 022).
"""

from __future__ import annotations

import os
from pathlib import Path


def normal_file_mode() -> int:
    """``0o666`` less the process umask (0o644 under umask 022)."""
    mask = os.umask(0)  # the only way to read the umask is to set it; put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def give_normal_mode(path: str | os.PathLike) -> None:
    """Give the file at ``path`` the umask's normal mode (a no-op when it already has it)."""
    mode = normal_file_mode()
    if (os.stat(path).st_mode & 0o777) != mode:
        os.chmod(path, mode)


def give_normal_modes(folder: Path) -> None:
    """Every regular file under ``folder`` (symlinks left alone) with the umask's normal mode."""
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            give_normal_mode(path)
