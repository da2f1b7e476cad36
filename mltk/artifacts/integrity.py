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
    return {name: {"size": (directory / name).stat().st_size, "sha256": sha256_file(directory / name)}
            for name in names}


def check_sizes(artifact: Path, manifest: dict) -> None:
    """Every named file is inside the artifact, exists, and (when recorded) has the size the manifest says."""
    files = manifest.get("files")
    if not isinstance(files, list):
        raise ArtifactError("manifest.json: 'files' is not a list", artifact)
    recorded = manifest.get("checksums")
    if recorded is not None and not isinstance(recorded, dict):
        raise ArtifactError("manifest.json: 'checksums' is not an object", artifact)
    for name in files:
        path = member(artifact, name)
        if not path.is_file():
            raise ArtifactError(f"file {name} listed in the manifest is missing", artifact)
        if recorded is not None:
            expected = recorded.get(name, {}).get("size") if isinstance(recorded.get(name), dict) else None
            if not isinstance(expected, int):
                raise ArtifactError(f"manifest.json records no size for {name}", artifact)
            size = path.stat().st_size
            if size != expected:
                raise ArtifactError(f"{name} has {size} bytes, the manifest says {expected} (truncated or replaced)",
                                    artifact)


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
    except Exception as exc:  # noqa: BLE001 - every decoder has its own exception types; all mean "damaged"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ArtifactError(f"cannot decode ({first})", path) from None
