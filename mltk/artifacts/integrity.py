"""What an artifact may name, and whether its files are what its manifest says.

A manifest names files relative to its artifact; a name that is absolute, climbs out with ``..``, or reaches a
symlink leading out would let a crafted artifact make mltk read (or index, or copy) files it was never given, so
every such name is refused. The manifest records each file's size and sha256 (``checksums``): readers compare
sizes (one ``stat`` per file, catching truncated or replaced files before a decoder trips over them), and
``mltk inspect`` compares hashes and decodes every file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath

from mltk.core.errors import ArtifactError

HASH_BLOCK = 1 << 20  # streamed in 1 MiB blocks, so a large shard never sits in memory whole


def member(artifact: Path, name: object) -> Path:
    """``artifact / name`` for a file the manifest names, refusing anything that resolves outside the artifact."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ArtifactError(f"manifest names an invalid file {name!r}", artifact)
    relative = PurePosixPath(name)
    if relative.is_absolute() or os.path.isabs(name) or ".." in relative.parts or "\\" in name:
        raise ArtifactError(f"manifest names {name!r}, which lies outside the artifact", artifact)
    path = Path(artifact) / relative
    root = os.path.realpath(artifact)
    if not os.path.realpath(path).startswith(root + os.sep):
        raise ArtifactError(f"{name} is a symlink leading outside the artifact", artifact)
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def checksums(directory: Path, names: list[str]) -> dict[str, dict]:
    """The manifest's ``checksums`` field: ``{name: {"size": bytes, "sha256": hex}}`` for each file."""
    return {
        name: {"size": (directory / name).stat().st_size, "sha256": sha256_file(directory / name)} for name in names
    }


def check_sizes(artifact: Path, manifest: dict) -> None:
    """Every file of the artifact is a regular file (no symlink, FIFO or device), named in the manifest with its
    size and sha256, and has that size; every named file is inside the artifact and exists."""
    files = manifest.get("files")
    if not isinstance(files, list):
        raise ArtifactError("manifest.json: 'files' is not a list", artifact)
    recorded = manifest.get("checksums")
    if not isinstance(recorded, dict):
        raise ArtifactError(
            "manifest.json records no checksums (sizes and sha256 of its files); an artifact "
            "from an older mltk or edited by hand: rebuild it",
            artifact,
        )
    on_disk = contents(artifact)
    unlisted = sorted(
        name for name in set(on_disk) - set(files) if PurePosixPath(name).name != MANIFEST_NAME
    )  # its own, and those of nested artifacts
    if unlisted:
        raise ArtifactError(
            f"{unlisted[0]} is not listed in the manifest ({len(unlisted)} unlisted file(s)); an "
            f"artifact lists every file it holds",
            artifact,
        )
    for name in files:
        path = member(artifact, name)
        if name not in on_disk:
            raise ArtifactError(f"file {name} listed in the manifest is missing", artifact)
        entry = recorded.get(name)
        expected = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(expected, int) or not isinstance(entry.get("sha256"), str):
            raise ArtifactError(f"manifest.json records no size and sha256 for {name}", artifact)
        size = path.stat().st_size
        if size != expected:
            raise ArtifactError(
                f"{name} has {size} bytes, the manifest says {expected} (truncated or replaced)", artifact
            )


MANIFEST_NAME = "manifest.json"


def contents(artifact: Path) -> set[str]:
    """The relative names of the regular files under ``artifact``, never following a link; a symlink or a special
    file (FIFO, socket, device) anywhere inside is refused, since reading it would leave the artifact or block."""
    found: set[str] = set()
    pending = [(Path(artifact), "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            raise ArtifactError(f"cannot list {prefix or '.'} ({exc.strerror or exc})", artifact) from None
        for entry in entries:
            name = prefix + entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                outside = not os.path.realpath(entry.path).startswith(os.path.realpath(artifact) + os.sep)
                raise ArtifactError(
                    f"{name} is a symlink{' leading outside the artifact' if outside else ''}; an "
                    f"artifact holds only its own regular files",
                    artifact,
                )
            if stat.S_ISDIR(mode):
                pending.append((Path(entry.path), name + "/"))
            elif stat.S_ISREG(mode):
                found.add(name)
            else:
                raise ArtifactError(
                    f"{name} is not a regular file (a FIFO, socket or device); refusing to read it", artifact
                )
    return found


def verify_hashes(artifact: Path, manifest: dict) -> None:
    """Compare every file's sha256 with the manifest (after ``check_sizes``); legacy artifacts have none."""
    for name, entry in (manifest.get("checksums") or {}).items():
        path = member(artifact, name)
        if not path.is_file():
            raise ArtifactError(f"file {name} recorded in the manifest is missing", artifact)
        if sha256_file(path) != entry.get("sha256"):
            raise ArtifactError(f"{name} does not match its sha256 in the manifest (modified or corrupt)", artifact)


def decode_file(path: Path) -> None:
    """Read a file the way its stage's reader would, so ``inspect`` finds damage that sizes and hashes of a
    consistently rewritten artifact cannot; raises ArtifactError naming the file."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            import numpy as np

            np.load(path, allow_pickle=False).sum()
        elif suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.read_table(path)
        elif suffix == ".safetensors":
            from safetensors.torch import load_file

            load_file(str(path))
        elif suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif suffix == ".faiss":
            import faiss

            faiss.read_index(str(path))
        elif suffix == ".png":
            from PIL import Image

            with Image.open(path) as image:
                image.load()
    except ArtifactError:
        raise
    except Exception as exc:  # every decoder has its own exception types; all mean "damaged"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ArtifactError(f"cannot decode ({first})", path) from None
