"""Put a complete directory in the place of another in one step, so that a reader (or a kill) never finds
nothing at the path.

Linux swaps two directories atomically (``renameat2`` with ``RENAME_EXCHANGE``): after the call the path holds the
new directory and the other name the old one, and before it the other way round; there is no moment in between.
Where the call is missing (another OS, an old C library) or the file system does not support it, the swap falls
back to two renames; the caller then puts the old directory back after a crash between them (it is under a name
of its own)."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 2
UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV)


def _renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


def exchange(first: Path, second: Path) -> bool:
    """Swap the directories at ``first`` and ``second`` atomically; False (nothing changed) where the system
    cannot, an ``OSError`` for any other failure."""
    function = _renameat2()
    if function is None:
        return False
    if function(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(first))


def replace_directory(new: Path, path: Path, old: Path) -> Path:
    """Put the directory ``new`` at ``path``; returns where the replaced directory now is, for the caller to
    remove: ``new``'s name (swapped atomically) or, where the system cannot swap, ``old`` (two renames; after a
    crash between them the caller finds the replaced directory at ``old`` and puts it back)."""
    if exchange(new, path):
        return new
    os.replace(path, old)
    os.replace(new, path)
    return old
