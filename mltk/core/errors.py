"""The one error hierarchy of mltk.

Library code raises these; the CLI maps every ``MltkError`` to exit code 2 and a single line, and any other
exception to exit code 1 (``MLTK_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import errno
from pathlib import Path


class MltkError(Exception):
    """Bad input or usage that the user can fix. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None):
        self.path = str(path) if path is not None else None
        super().__init__(f"{self.path}: {message}" if self.path else message)


class ArtifactError(MltkError):
    """An artifact is missing, of the wrong kind, or inconsistent."""


class SchemaError(ArtifactError):
    """A table lacks required columns or has the wrong types."""


class ConfigError(MltkError):
    """An option or configuration value is invalid."""


class ModelDownloadError(ConfigError):
    """A named model (open_clip tag, ``hf-hub:`` repository, Hugging Face id) could not be fetched."""


# a write the user's machine refused, which the user fixes (space, permissions, a name's length), not mltk
USER_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "file name too long",
}


def user_os_error(exc: BaseException) -> MltkError | None:
    """An ``OSError`` the user's machine raised (a full disk, a refused write, a name too long) as a one-line
    ``MltkError`` naming the file, wherever in a command it happened; None for any other exception."""
    if not isinstance(exc, OSError) or exc.errno not in USER_ERRNOS:
        return None
    return MltkError(USER_ERRNOS[exc.errno], exc.filename)
