"""Files mltk writes outside an artifact (a contact sheet, evaluation pictures), under the artifact policy.

Such a file is refused inside any mltk artifact (an input of the command or not: a stray file breaks its
manifest), never replaces a file mltk did not write (``mltk.artifacts.ownership``: not even with
``--overwrite``), and replaces one it wrote only with ``--overwrite`` (``policy.OVERWRITE``); it is written
under a temporary name of its own and renamed into place, so a reader never sees half a picture, and a full disk
says which file could not be written and leaves the previous one intact.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from mltk.artifacts.manifest import is_artifact
from mltk.artifacts.ownership import made_by_mltk, remember_written
from mltk.artifacts.writer import disk_full
from mltk.core import policy
from mltk.core.errors import ArtifactError
from mltk.core.file_modes import give_normal_mode
from mltk.core.names import check_output_path, sibling_stem


def enclosing_artifact(path: Path) -> Path | None:
    """The artifact directory ``path`` lies in (or is), if any."""
    for folder in [path, *path.parents]:
        if is_artifact(folder):
            return folder
    return None


def check_target(
    path: str | Path,
    inputs: Iterable[str | Path] = (),
    *,
    what: str = "output",
    directory: bool = False,
    overwrite: bool | None = None,
) -> Path:
    """``path`` resolved, when writing it is allowed: not an input nor inside one or any artifact, not an
    existing file unless mltk wrote it and the user lets it be replaced, and not a directory where a file goes
    (or a file where a folder goes)."""
    check_output_path(path, what)
    if Path(path).is_symlink():  # never write through a link: it may lead anywhere
        raise ArtifactError(f"{what} is a symlink; refusing to write through it", path)
    target = Path(path).parent.resolve() / Path(path).name
    for source in inputs:
        source = Path(source).resolve()
        if source == target or source in target.parents:  # a folder holding an input is fine: files go beside it
            raise ArtifactError(f"{what} would be written into the input {source}; write it elsewhere", target)
    inside = enclosing_artifact(target)
    if inside is not None:
        raise ArtifactError(f"{what} lies inside the mltk artifact {inside}; writing there would damage it", target)
    if directory:
        if target.exists() and not target.is_dir():
            raise ArtifactError(f"{what} exists and is not a directory", target)
        return target
    overwrite = policy.OVERWRITE.get() if overwrite is None else overwrite
    if target.exists() and not target.is_file():
        raise ArtifactError(f"{what} exists and is not a regular file; refusing to replace it", target)
    if target.exists() and not made_by_mltk(target):
        raise ArtifactError(
            f"{what} exists and mltk did not write it (or it changed since); refusing to replace it, "
            "even with --overwrite: move it away or choose another name",
            target,
        )
    if target.exists() and not overwrite:
        raise ArtifactError(f"{what} exists; pass --overwrite to replace it", target)
    return target


def write_file(
    path: str | Path,
    data: bytes,
    inputs: Iterable[str | Path] = (),
    *,
    what: str = "output",
    overwrite: bool | None = None,
) -> Path:
    """Write ``data`` to ``path`` atomically under ``check_target``'s policy; returns the resolved path."""
    target = check_target(path, inputs, what=what, overwrite=overwrite)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{sibling_stem(target)}.", suffix=".mltk-tmp", dir=target.parent)
    except OSError as exc:
        raise ArtifactError(f"cannot write the {what} ({exc.strerror or exc})", target) from None
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        give_normal_mode(temporary)  # mkstemp makes it private (0600); the umask's mode, as open() would
        os.replace(temporary, target)
        remember_written(target, data)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        full = disk_full(exc)
        raise ArtifactError(
            "no space left on device; the previous file is intact"
            if full
            else f"cannot write the {what} ({exc.strerror or exc})",
            target,
        ) from None
    return target


def write_files(
    directory: str | Path,
    files: Mapping[str, bytes],
    inputs: Iterable[str | Path] = (),
    *,
    what: str = "output",
    overwrite: bool | None = None,
) -> list[Path]:
    """Several files into one folder: every target is checked before the first is written."""
    folder = check_target(directory, inputs, what=what, directory=True)
    for name in files:
        check_target(folder / name, inputs, what=what, overwrite=overwrite)
    return [write_file(folder / name, data, inputs, what=what, overwrite=overwrite) for name, data in files.items()]
