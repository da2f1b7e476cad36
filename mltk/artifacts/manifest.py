"""Manifests: reading and validating them, fingerprints of artifacts, integrity checks, JSON files."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mltk.artifacts import integrity, schema
from mltk.core.errors import ArtifactError

PathLike = str | os.PathLike


# ----------------------------------------------------------------------------------------------------------------
# Manifests
# ----------------------------------------------------------------------------------------------------------------


def is_artifact(path: PathLike) -> bool:
    return (Path(path) / schema.MANIFEST).is_file()


def missing_reason(path: Path) -> str:
    """ "no such file or directory", or where a killed ``mltk prune`` left the complete artifact meanwhile."""
    from mltk.artifacts.prune_leftovers import interrupted_originals

    originals = interrupted_originals(Path(path).absolute())
    if originals:
        return (
            f"no such file or directory: a killed mltk prune left the complete checkpoint at {originals[-1]}; "
            f"run mltk prune {path} to put it back"
        )
    return "no such file or directory"


def read_manifest(path: PathLike, kind: str | None = None) -> dict:
    """Read and validate ``path/manifest.json``; with ``kind``, insist on that artifact kind.

    Every file the manifest names must lie inside the artifact, exist, and have its recorded size."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(missing_reason(path), path)
    manifest_path = path / schema.MANIFEST
    if not manifest_path.is_file():
        raise ArtifactError("not an mltk artifact (no manifest.json)", path)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"manifest.json is not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})", path)
    except RecursionError:
        raise ArtifactError("manifest.json is nested too deeply to be a manifest", path) from None
    except OSError as exc:
        raise ArtifactError(f"cannot read manifest.json ({exc.strerror or exc})", path)
    if not isinstance(manifest, dict):
        raise ArtifactError("manifest.json is not a JSON object", path)
    missing = [f for f in schema.MANIFEST_FIELDS if f not in manifest]
    if missing:
        raise ArtifactError(f"manifest.json lacks {', '.join(missing)}", path)
    if manifest["schema_version"] != schema.SCHEMA_VERSION:
        raise ArtifactError(
            f"schema_version {manifest['schema_version']!r} is not supported (this mltk reads {schema.SCHEMA_VERSION})",
            path,
        )
    if manifest["kind"] not in schema.KINDS:
        raise ArtifactError(f"manifest.json: unknown kind {str(manifest['kind'])[:40]!r}", path)
    if kind is not None and manifest["kind"] != kind:
        raise ArtifactError(f"is a {manifest['kind']} artifact, expected {kind}", path)
    if (
        not isinstance(manifest["created_by"], dict)
        or not isinstance(manifest["inputs"], list)
        or not all(isinstance(entry, dict) for entry in manifest["inputs"])
    ):
        raise ArtifactError("manifest.json: 'created_by' or 'inputs' is malformed", path)
    integrity.check_sizes(path, manifest)
    return manifest


def fingerprint(path: PathLike) -> str:
    """A content fingerprint of an input: the bytes of a file; for an artifact whose manifest records each file's
    sha256, the manifest itself (it pins every byte, and a copy of the artifact keeps it; a checkpoint ``mltk
    prune`` rebuilt without its resume state by the manifest it had before, see ``pruned_original``); for an older
    artifact
    its manifest plus the name, size and modification time of each of its files; the listing of a plain
    directory (names and sizes)."""
    path = Path(path)
    digest = hashlib.sha256()
    if is_artifact(path):
        manifest_bytes = (path / schema.MANIFEST).read_bytes()
        digest.update(pruned_original(manifest_bytes) or manifest_bytes)
        if not _records_checksums(manifest_bytes):
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                stat = child.stat()
                digest.update(f"{child.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    elif path.is_file():
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(integrity.HASH_BLOCK), b""):
                digest.update(block)
    elif path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{child.relative_to(path)}\0{child.stat().st_size}\n".encode())
    else:
        from mltk.core.user_files import not_a_file

        raise ArtifactError(not_a_file(path) or "no such file or directory", path)
    return "sha256:" + digest.hexdigest()


def _without_state(names):
    return [name for name in names if name.split("/")[0] != schema.CHECKPOINT_STATE_DIR]


def pruned_original(manifest_bytes: bytes) -> bytes | None:
    """The manifest a checkpoint had before ``mltk prune`` dropped its resume state (kept in the pruned manifest
    as ``pruned.original_manifest``), when it pins exactly the files the pruned one does: the checkpoint is what
    it was for every artifact built on it. None for any other manifest."""
    if b'"original_manifest"' not in manifest_bytes:
        return None
    try:
        current = json.loads(manifest_bytes)
        text = current["pruned"]["original_manifest"]
        original = json.loads(text)
        same = (
            original["kind"] == current["kind"]
            and _without_state(original["files"]) == current["files"]
            and {name: original["checksums"][name] for name in _without_state(original["checksums"])}
            == current["checksums"]
        )
    except (ValueError, RecursionError, KeyError, TypeError):
        return None
    return text.encode("utf-8") if same else None


def _records_checksums(manifest_bytes: bytes) -> bool:
    try:
        manifest = json.loads(manifest_bytes)
    except (ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and isinstance(manifest.get("checksums"), dict)


def describe_input(path: PathLike) -> dict:
    path = Path(path).resolve()
    entry = {"path": str(path), "fingerprint": fingerprint(path)}
    if is_artifact(path):
        try:
            entry["kind"] = json.loads((path / schema.MANIFEST).read_text(encoding="utf-8"))["kind"]
        except (ValueError, TypeError, KeyError, RecursionError):
            raise ArtifactError("manifest.json is not valid", path) from None
    return entry


def jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return jsonable({f: getattr(value, f) for f in value.__dataclass_fields__})
    return value


def settings_without(config: Any, *fields: str) -> dict:
    """A stage config's settings as a manifest records them, without the fields that say where the stage reads and
    writes (``fields``): its input is fingerprinted apart and its output is where the artifact is, so a config
    that carries them (``fn(config)``) records what one passed beside it records."""
    return {name: value for name, value in jsonable(config).items() if name not in fields}


def canonical_settings(config: Any, input_paths: Iterable[str] = ()) -> Any:
    """A stage's settings as a manifest records and compares them: each path by what it is, not how it was spelled
    (``emb``, ``./emb`` and ``/abs/emb`` from a pipe are one setting). A ``Path`` becomes its resolved absolute
    path, and so does a string that resolves to one of the stage's inputs (``input_paths``, resolved; their
    content is compared by fingerprint beside the settings). Other strings stay as they are (a model name)."""
    inputs = set(input_paths)

    def walk(value: Any) -> Any:
        if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
            return {f: walk(getattr(value, f)) for f in value.__dataclass_fields__}
        if isinstance(value, Mapping):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, Path):
            return str(value.resolve())
        if isinstance(value, str) and inputs and value:
            try:
                resolved = str(Path(value).resolve())
            except (OSError, ValueError):  # a NUL byte, a name too long: no path
                return value
            return resolved if resolved in inputs else value
        return value

    return jsonable(walk(config))


def write_json(path: PathLike, obj: Any) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: PathLike) -> Any:
    """A JSON file inside an artifact; a missing or malformed file is an ArtifactError naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError("missing file", path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"cannot read JSON ({exc})", path)
    except RecursionError:
        raise ArtifactError("cannot read JSON (nested too deeply)", path) from None
