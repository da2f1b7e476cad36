"""The only reader and writer of mltk artifacts.

An artifact is a directory with data files and ``manifest.json``. Writes are atomic: the directory is built
under a hidden ``.NAME.partial`` sibling, the manifest is written last, and the directory is renamed into
place, so an interrupted run never leaves something that looks complete. Stages that resume (shards,
training state) keep their partial directory between runs and pick up what is already there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mltk import __version__, integrity, locks, policy, schema
from mltk.errors import ArtifactError, MltkError, SchemaError

PathLike = str | os.PathLike


# ----------------------------------------------------------------------------------------------------------------
# Manifests
# ----------------------------------------------------------------------------------------------------------------


def is_artifact(path: PathLike) -> bool:
    return (Path(path) / schema.MANIFEST).is_file()


def read_manifest(path: PathLike, kind: str | None = None) -> dict:
    """Read and validate ``path/manifest.json``; with ``kind``, insist on that artifact kind.

    Every file the manifest names must lie inside the artifact, exist, and have its recorded size."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError("no such file or directory", path)
    manifest_path = path / schema.MANIFEST
    if not manifest_path.is_file():
        raise ArtifactError("not an mltk artifact (no manifest.json)", path)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"manifest.json is not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})", path)
    except OSError as exc:
        raise ArtifactError(f"cannot read manifest.json ({exc.strerror or exc})", path)
    if not isinstance(manifest, dict):
        raise ArtifactError("manifest.json is not a JSON object", path)
    missing = [f for f in schema.MANIFEST_FIELDS if f not in manifest]
    if missing:
        raise ArtifactError(f"manifest.json lacks {', '.join(missing)}", path)
    if manifest["schema_version"] != schema.SCHEMA_VERSION:
        raise ArtifactError(
            f"schema_version {manifest['schema_version']!r} is not supported (this mltk reads "
            f"{schema.SCHEMA_VERSION})",
            path,
        )
    if manifest["kind"] not in schema.KINDS:
        raise ArtifactError(f"manifest.json: unknown kind {str(manifest['kind'])[:40]!r}", path)
    if kind is not None and manifest["kind"] != kind:
        raise ArtifactError(f"is a {manifest['kind']} artifact, expected {kind}", path)
    if not isinstance(manifest["created_by"], dict) or not isinstance(manifest["inputs"], list) or not all(
            isinstance(entry, dict) for entry in manifest["inputs"]):
        raise ArtifactError("manifest.json: 'created_by' or 'inputs' is malformed", path)
    integrity.check_sizes(path, manifest)
    return manifest


def fingerprint(path: PathLike) -> str:
    """A content fingerprint of an input: the bytes of a file; for an artifact whose manifest records each file's
    sha256, the manifest itself (it pins every byte, and a copy of the artifact keeps it); for an older artifact
    its manifest plus the name, size and modification time of each of its files; the listing of a plain
    directory (names and sizes)."""
    path = Path(path)
    digest = hashlib.sha256()
    if is_artifact(path):
        manifest_bytes = (path / schema.MANIFEST).read_bytes()
        digest.update(manifest_bytes)
        if not _records_checksums(manifest_bytes):
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                stat = child.stat()
                digest.update(f"{child.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    elif path.is_file():
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    elif path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{child.relative_to(path)}\0{child.stat().st_size}\n".encode())
    else:
        raise ArtifactError("no such file or directory", path)
    return "sha256:" + digest.hexdigest()


def verify_artifact(path: PathLike, *, decode: bool = True) -> dict:
    """What ``mltk inspect`` checks: the manifest, containment and sizes (``read_manifest``), every file's sha256,
    and (``decode``) that every file decodes, including an embeddings artifact's shards as its reader sees them.
    Raises ArtifactError naming the first problem; returns ``{"manifest", "verified", "changed_inputs"}`` where
    ``changed_inputs`` lists inputs whose fingerprint is no longer the recorded one (or that are gone)."""
    path = Path(path)
    manifest = read_manifest(path)
    integrity.verify_hashes(path, manifest)
    verified = "sha256" if manifest.get("checksums") else "sizes only (no checksums recorded)"
    if decode:
        for name in manifest["files"]:
            integrity.decode_file(integrity.member(path, name))
        if manifest["kind"] == "embeddings":
            load_embeddings(path)
        verified += " and decoded"
    changed = []
    for entry in manifest["inputs"]:
        source = Path(str(entry.get("path")))
        if not source.exists():
            changed.append({"path": str(source), "change": "is gone"})
        elif fingerprint(source) != entry.get("fingerprint"):
            changed.append({"path": str(source), "change": "changed"})
    return {"manifest": manifest, "verified": verified, "changed_inputs": changed}


def _records_checksums(manifest_bytes: bytes) -> bool:
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError:
        return False
    return isinstance(manifest, dict) and isinstance(manifest.get("checksums"), dict)


def describe_input(path: PathLike) -> dict:
    path = Path(path).resolve()
    entry = {"path": str(path), "fingerprint": fingerprint(path)}
    if is_artifact(path):
        try:
            entry["kind"] = json.loads((path / schema.MANIFEST).read_text(encoding="utf-8"))["kind"]
        except (ValueError, TypeError, KeyError):
            raise ArtifactError("manifest.json is not valid", path) from None
    return entry


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable({f: getattr(value, f) for f in value.__dataclass_fields__})
    return value


def write_json(path: PathLike, obj: Any) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_jsonable(obj), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------------------
# Atomic artifact directories, and what happens to an existing one
# ----------------------------------------------------------------------------------------------------------------

PARTIAL_SETTINGS = ".mltk-settings.json"  # inside a partial directory: the settings that started it


def partial_dir(out_dir: PathLike) -> Path:
    """Where an artifact is built before it is renamed into place (stable, so a rerun can resume)."""
    out_dir = Path(out_dir).resolve()
    return out_dir.parent / f".{out_dir.name}.partial"


def _trash_dir(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.old"


def _plain(value: Any) -> Any:
    """The value as it reads back from a manifest (tuples become lists, paths strings)."""
    return json.loads(json.dumps(_jsonable(value), ensure_ascii=False, default=str))


class ArtifactWriter:
    """Build an artifact atomically, under one policy for an existing one::

        writer = ArtifactWriter(out, "metrics", stage="evaluate", config=cfg, inputs=[a, b])
        if writer.existing:                     # made by the same stage, settings and inputs: reuse it
            return writer.existing
        with writer:
            write_json(writer.dir / "metrics.json", numbers)
            writer.manifest["summary"] = {...}  # extra manifest fields
        writer.path                             # the final absolute path

    The policy, decided on construction (so a stage can ask before its expensive work; ``reusable()`` is the same
    question without a writer): ``out`` overlapping an input is refused; a complete artifact made by the same
    stage, configuration and input fingerprints is ``existing`` (a stage returns it instead of building; entering
    the writer anyway builds and replaces it, since data handed to the writer directly is not in the settings);
    one made otherwise, or damaged, is refused unless ``--overwrite`` (``policy.OVERWRITE``); a
    directory that is no artifact is never replaced. One writer per output holds a lock beside the partial
    directory. On success the manifest (with each file's size and sha256) is written last and the directory
    renamed to ``out``; the old artifact stays until the new one is complete. On an exception the partial
    directory is kept when ``resume`` is true (so the next run continues from it), except after bad input
    (``MltkError``) in a run that started it; otherwise it is removed.
    """

    def __init__(
        self,
        out_dir: PathLike,
        kind: str,
        *,
        stage: str | None = None,
        config: Any = None,
        inputs: Iterable[PathLike] = (),
        resume: bool = False,
        overwrite: bool | None = None,
    ):
        if kind not in schema.KINDS:
            raise ValueError(f"unknown artifact kind {kind!r}")
        self.path = Path(out_dir).resolve()
        self.kind = kind
        self.resume = resume
        self.overwrite = policy.OVERWRITE.get() if overwrite is None else overwrite
        self.dir = partial_dir(self.path)
        self.manifest: dict[str, Any] = {
            "kind": kind,
            "schema_version": schema.SCHEMA_VERSION,
            "created_by": {"stage": stage or kind, "config": _jsonable(config)},
            "mltk_version": __version__,
            "inputs": [describe_input(p) for p in inputs],
        }
        self._lock = locks.OutputLock(self.path)
        self._started_partial = False
        self.existing: Path | None = self._existing_policy()

    # -- the policy -------------------------------------------------------------------------------------------

    def _settings(self) -> dict:
        return {"kind": self.kind, "created_by": _plain(self.manifest["created_by"]),
                "inputs": [entry["fingerprint"] for entry in self.manifest["inputs"]]}

    def _existing_policy(self) -> Path | None:
        for entry in self.manifest["inputs"]:
            source = Path(entry["path"])
            if source == self.path or source in self.path.parents or self.path in source.parents:
                raise ArtifactError("is an input of this command; write the result elsewhere", self.path)
        _check_writable(self.path)
        locks.refuse_if_held(self.path)
        if not self.path.exists() and not self.path.is_symlink():
            return None
        if not self.path.is_dir() or not (is_artifact(self.path) or _is_empty_dir(self.path)):
            raise ArtifactError("exists and is not an mltk artifact; refusing to overwrite it", self.path)
        if _is_empty_dir(self.path):
            return None
        try:
            manifest = read_manifest(self.path)
            made = {"kind": manifest["kind"], "created_by": manifest["created_by"],
                    "inputs": [entry.get("fingerprint") for entry in manifest["inputs"]]}
        except (ArtifactError, TypeError, AttributeError) as exc:
            if self.overwrite:
                return None
            raise ArtifactError(f"exists but is damaged ({_reason(exc)}); pass --overwrite to replace it", self.path)
        if self.overwrite:
            return None
        difference = _difference(made, self._settings())
        if difference is None:
            return self.path
        raise ArtifactError(f"exists, made {difference}; pass --overwrite to replace it", self.path)

    def reuse(self) -> Path | None:
        """``existing``, saying on stderr that it is reused."""
        if self.existing is not None:
            print(f"{self.existing} is up to date (same command, settings and inputs); reusing it (--overwrite "
                  "rebuilds it)", file=sys.stderr)
        return self.existing

    # -- building -----------------------------------------------------------------------------------------------

    def __enter__(self) -> ArtifactWriter:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except OSError as exc:
            raise ArtifactError(f"cannot create the output ({exc.strerror or exc})", self.path) from None
        try:
            self._restore_interrupted_swap()
            self._prepare_partial()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _restore_interrupted_swap(self) -> None:
        """A crash between the two renames of a replacement leaves the old artifact in ``.NAME.old``."""
        trash = _trash_dir(self.path)
        if trash.exists() and not self.path.exists():
            os.replace(trash, self.path)
        shutil.rmtree(trash, ignore_errors=True)

    def _prepare_partial(self) -> None:
        record = self.dir / PARTIAL_SETTINGS
        if self.dir.exists() and self.resume and self.overwrite:
            try:
                same = json.loads(record.read_text(encoding="utf-8")) == self._settings()
            except (OSError, ValueError):
                same = False
            if not same:
                print(f"--overwrite: discarding the interrupted run in {self.dir}, started with other settings", file=sys.stderr)
                shutil.rmtree(self.dir)
        if self.dir.exists() and not self.resume:
            shutil.rmtree(self.dir)
        self._started_partial = not self.dir.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(record, self._settings())

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None:
                if not self.resume or (isinstance(exc, MltkError) and self._started_partial):
                    shutil.rmtree(self.dir, ignore_errors=True)
                return
            self.commit()
        finally:
            self._lock.release()

    def commit(self) -> Path:
        (self.dir / PARTIAL_SETTINGS).unlink(missing_ok=True)
        files = sorted(
            p.relative_to(self.dir).as_posix() for p in self.dir.rglob("*")
            if p.is_file() and p.name != schema.MANIFEST
        )
        self.manifest["files"] = files
        self.manifest["checksums"] = integrity.checksums(self.dir, files)
        self.manifest["created_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_json(self.dir / schema.MANIFEST, self.manifest)
        if self.path.exists():
            trash = _trash_dir(self.path)
            shutil.rmtree(trash, ignore_errors=True)
            os.replace(self.path, trash)
            os.replace(self.dir, self.path)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(self.dir, self.path)
        return self.path


def reusable(out_dir: PathLike, kind: str, *, stage: str | None = None, config: Any = None,
             inputs: Iterable[PathLike] = ()) -> Path | None:
    """Ask the existing-artifact policy before expensive work: the path of a complete artifact at ``out_dir`` made
    by the same stage, settings and inputs (the stage should return it and do nothing), or None to build; raises
    when the output is refused (an input, made otherwise without --overwrite, locked by another writer)."""
    return ArtifactWriter(out_dir, kind, stage=stage, config=config, inputs=inputs).reuse()


def _difference(made: dict, now: dict) -> str | None:
    """How an existing artifact's making differs from this run, in a few words; None when it does not."""
    if made["kind"] != now["kind"] or made["created_by"].get("stage") != now["created_by"]["stage"]:
        return f"by {made['created_by'].get('stage')} ({made['kind']})"
    old, new = made["created_by"].get("config"), now["created_by"]["config"]
    if old != new:
        if isinstance(old, dict) and isinstance(new, dict):
            keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
            shown = ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys[:3])
            more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
            return f"with other settings ({shown}{more})"
        return "with other settings"
    if made["inputs"] != now["inputs"]:
        return "from other inputs (or inputs that changed since)"
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return text.split(": ", 1)[1] if isinstance(exc, MltkError) and exc.path and ": " in text else text


def _check_writable(path: Path) -> None:
    """Refuse an output whose nearest existing ancestor cannot be written, before anything is created."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ArtifactError(f"cannot create the output: {ancestor} is not a directory", path)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ArtifactError(f"cannot create the output: {ancestor} is not writable", path)


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


# ----------------------------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------------------------


def write_table(path: PathLike, table: pa.Table) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_table(path: PathLike, columns: Sequence[str] | None = None) -> pa.Table:
    try:
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"cannot read Parquet ({str(exc).splitlines()[0]})", path)


def require_columns(table: pa.Table, columns: Iterable[str], path: PathLike) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise SchemaError(f"missing column(s) {', '.join(missing)} (has {', '.join(table.column_names)})", path)


def _as_string_columns(table: pa.Table, columns: Iterable[str], path: PathLike) -> pa.Table:
    """Cast id-like columns to string (ids may arrive as ints) and reject nulls."""
    for name in columns:
        column = table.column(name)
        if column.null_count:
            raise SchemaError(f"column {name} has {column.null_count} null value(s)", path)
        if not pa.types.is_string(column.type):
            if pa.types.is_large_string(column.type) or pa.types.is_integer(column.type):
                table = table.set_column(table.schema.get_field_index(name), name, column.cast(pa.string()))
            else:
                raise SchemaError(f"column {name} has type {column.type}, expected string", path)
    return table


# ----------------------------------------------------------------------------------------------------------------
# Captions
# ----------------------------------------------------------------------------------------------------------------


def validate_captions(table: pa.Table, path: PathLike = "<captions>") -> pa.Table:
    """Check the captions schema; returns the table with the required columns first, all as strings."""
    require_columns(table, schema.CAPTION_COLUMNS, path)
    table = _as_string_columns(table, schema.CAPTION_COLUMNS, path)
    extra = [c for c in table.column_names if c not in schema.CAPTION_COLUMNS]
    return table.select(list(schema.CAPTION_COLUMNS) + extra)


def write_captions(out_dir: PathLike, table: pa.Table, *, stage: str = "captions", config: Any = None,
                   inputs: Iterable[PathLike] = (), **manifest_fields: Any) -> Path:
    """Write a captions artifact (one row per caption; see ``schema.CAPTION_COLUMNS``)."""
    table = validate_captions(table, out_dir)
    with ArtifactWriter(out_dir, "captions", stage=stage, config=config, inputs=inputs) as writer:
        write_table(writer.dir / schema.CAPTIONS_FILE, table)
        writer.manifest["rows"] = table.num_rows
        writer.manifest["languages"] = sorted(set(table.column("lang").to_pylist()))
        writer.manifest.update(_jsonable(manifest_fields))
    return writer.path


def load_captions(path: PathLike) -> pa.Table:
    """Read a captions artifact, or a plain Parquet file that follows the captions schema."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return validate_captions(read_table(path), path)
    read_manifest(path, "captions")
    return validate_captions(read_table(path / schema.CAPTIONS_FILE), path)


# ----------------------------------------------------------------------------------------------------------------
# Embeddings
# ----------------------------------------------------------------------------------------------------------------


def _check_vectors(vectors: np.ndarray, path: PathLike) -> None:
    if vectors.ndim != 2:
        raise ArtifactError(f"vectors must be 2-D, got shape {tuple(vectors.shape)}", path)
    for start in range(0, len(vectors), 65536):
        if not np.isfinite(vectors[start:start + 65536]).all():
            raise ArtifactError("vectors contain NaN or infinite values", path)


def write_embedding_shard(directory: PathLike, index: int, ids: Sequence, vectors: np.ndarray,
                          dtype: str = "float32", **columns: Sequence) -> dict:
    """Write shard ``index`` (vectors NPY + rows Parquet with ``id`` and extra columns) into ``directory``.

    Both files are written under temporary names and renamed, vectors first, so a shard whose rows file exists
    is complete. Returns the shard's manifest entry.
    """
    directory = Path(directory)
    if dtype not in schema.EMBEDDING_DTYPES:
        raise ValueError(f"dtype must be one of {schema.EMBEDDING_DTYPES}")
    vectors = np.asarray(vectors)
    _check_vectors(vectors, directory)
    ids = [str(i) for i in ids]
    if len(ids) != len(vectors):
        raise ArtifactError(f"{len(ids)} ids but {len(vectors)} vectors", directory)
    data = {schema.EMBEDDING_ID_COLUMN: pa.array(ids, pa.string())}
    for name, values in columns.items():
        if len(values) != len(ids):
            raise ArtifactError(f"column {name} has {len(values)} rows, expected {len(ids)}", directory)
        data[name] = pa.array([str(v) for v in values], pa.string()) if _looks_like_ids(values) else pa.array(values)
    vectors_name, rows_name = schema.embedding_shard_names(index)
    tmp_vectors = directory / (vectors_name + ".tmp")
    with open(tmp_vectors, "wb") as handle:
        np.save(handle, vectors.astype(dtype, copy=False))
    os.replace(tmp_vectors, directory / vectors_name)
    write_table(directory / rows_name, pa.table(data))
    return {"vectors": vectors_name, "rows": rows_name, "count": len(ids)}


def _looks_like_ids(values: Sequence) -> bool:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return False
    sample = values[0] if len(values) else ""
    return isinstance(sample, (str, np.str_))


def finish_embeddings(writer: ArtifactWriter, shards: list[dict], *, dim: int, dtype: str,
                      normalized: bool = True, **manifest_fields: Any) -> None:
    """Record the shards of an embeddings artifact in its manifest (call inside the writer's ``with``)."""
    writer.manifest.update(
        shards=shards,
        count=sum(s["count"] for s in shards),
        dim=dim,
        dtype=dtype,
        normalized=normalized,
        **_jsonable(manifest_fields),
    )


def write_embeddings(out_dir: PathLike, ids: Sequence, vectors: np.ndarray, *, dtype: str = "float32",
                     normalized: bool = True, stage: str = "embeddings", config: Any = None,
                     inputs: Iterable[PathLike] = (), shard_size: int = 1 << 20,
                     manifest_fields: Mapping[str, Any] | None = None, **columns: Sequence) -> Path:
    """Write an embeddings artifact: ``vectors[i]`` belongs to ``ids[i]`` and to row i of each extra column.

    ``columns`` are extra per-row columns such as ``lang``, ``image_id`` or ``caption_id``.
    """
    vectors = np.asarray(vectors)
    _check_vectors(vectors, out_dir)
    if len(ids) != len(vectors):
        raise ArtifactError(f"{len(ids)} ids but {len(vectors)} vectors", out_dir)
    if len(set(map(str, ids))) != len(ids):
        raise ArtifactError("ids are not unique", out_dir)
    with ArtifactWriter(out_dir, "embeddings", stage=stage, config=config, inputs=inputs) as writer:
        shards = []
        for index, start in enumerate(range(0, max(len(ids), 1), shard_size)):
            stop = start + shard_size
            shard_columns = {name: values[start:stop] for name, values in columns.items()}
            shards.append(write_embedding_shard(writer.dir, index, ids[start:stop], vectors[start:stop],
                                                dtype, **shard_columns))
        finish_embeddings(writer, shards, dim=int(vectors.shape[1]), dtype=dtype, normalized=normalized,
                          **dict(manifest_fields or {}))
    return writer.path


def load_embeddings(path: PathLike, *, check_finite: bool = True) -> tuple[pa.Table, np.ndarray]:
    """Read an embeddings artifact: ``(table, vectors)`` row-aligned; ``table`` holds ``id`` and extra columns.

    A single-shard artifact is memory-mapped; several shards are concatenated in manifest order. Every reader of
    embeddings comes here, so ids are checked once: unique, non-null, one per vector.
    """
    path = Path(path)
    manifest = read_manifest(path, "embeddings")
    shards, dim = manifest.get("shards"), manifest.get("dim")
    if not isinstance(shards, list) or not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ArtifactError("manifest.json: 'shards' must be a list and 'dim' a positive integer", path)
    tables, arrays = [], []
    for shard in shards:
        if not isinstance(shard, dict) or not isinstance(shard.get("count"), int):
            raise ArtifactError(f"manifest.json: malformed shard entry {str(shard)[:80]}", path)
        vectors_path = integrity.member(path, shard.get("vectors"))
        rows_path = integrity.member(path, shard.get("rows"))
        vectors = load_array(vectors_path, mmap=True)
        if vectors.dtype.kind != "f":
            raise ArtifactError(f"has dtype {vectors.dtype}, expected float16 or float32", vectors_path)
        table = read_table(rows_path)
        require_columns(table, [schema.EMBEDDING_ID_COLUMN], rows_path)
        if vectors.ndim != 2 or vectors.shape[1] != dim:
            raise ArtifactError(f"{shard['vectors']} has shape {vectors.shape}, expected dim {dim}", path)
        if table.num_rows != len(vectors) or table.num_rows != shard["count"]:
            raise ArtifactError(
                f"ids do not line up with vectors in {shard['rows']}: {table.num_rows} rows, "
                f"{len(vectors)} vectors, manifest says {shard['count']}",
                path,
            )
        tables.append(table)
        arrays.append(vectors)
    if not arrays:
        raise ArtifactError("embeddings artifact has no shards", path)
    try:
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    except pa.ArrowInvalid as exc:
        raise ArtifactError(f"shards have different columns ({str(exc).splitlines()[0]})", path) from None
    table = _as_string_columns(table, [schema.EMBEDDING_ID_COLUMN], path)
    _check_unique_ids(table.column(schema.EMBEDDING_ID_COLUMN), path)
    vectors = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
    if check_finite:
        _check_vectors(vectors, path)
    return table, vectors


def _check_unique_ids(ids: pa.ChunkedArray, path: PathLike) -> None:
    import pyarrow.compute as pc

    if pc.count_distinct(ids).as_py() != len(ids):
        counts = pc.value_counts(ids)
        repeated = [item["values"] for item in counts.to_pylist() if item["counts"] > 1]
        raise ArtifactError(f"{len(repeated)} id(s) occur more than once (e.g. {repeated[0]!r})", path)


# ----------------------------------------------------------------------------------------------------------------
# Images (encoded bytes or paths), checkpoints (safetensors + config.json), metrics (JSON)
# ----------------------------------------------------------------------------------------------------------------


def write_images(out_dir: PathLike, table: pa.Table, *, stage: str = "images", config: Any = None,
                 inputs: Iterable[PathLike] = (), **manifest_fields: Any) -> Path:
    """Write an images artifact: ``image_id``, ``split`` and either ``image`` (encoded bytes, e.g. PNG) or
    ``path`` (absolute, or relative to the artifact directory)."""
    table = validate_images(table, out_dir)
    with ArtifactWriter(out_dir, "images", stage=stage, config=config, inputs=inputs) as writer:
        write_table(writer.dir / schema.IMAGES_FILE, table)
        writer.manifest["rows"] = table.num_rows
        writer.manifest.update(_jsonable(manifest_fields))
    return writer.path


def validate_images(table: pa.Table, path: PathLike = "<images>") -> pa.Table:
    require_columns(table, schema.IMAGE_COLUMNS, path)
    sources = [c for c in schema.IMAGE_SOURCE_COLUMNS if c in table.column_names]
    if len(sources) != 1:
        raise SchemaError("an images table needs exactly one of the columns 'image' (bytes) or 'path'", path)
    return _as_string_columns(table, schema.IMAGE_COLUMNS, path)


def load_images(path: PathLike) -> pa.Table:
    """Read an images artifact (or a Parquet file of ``image_id``, ``split``, ``path``/``image``).

    Relative ``path`` values are resolved against the artifact directory (or the Parquet file's folder); URLs
    (``scheme://...``, e.g. Conceptual Captions) are kept as they are."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        table, base = validate_images(read_table(path), path), path.parent
    else:
        read_manifest(path, "images")
        table, base = validate_images(read_table(path / schema.IMAGES_FILE), path), path
    if "path" in table.column_names:
        resolved = [p if os.path.isabs(p) or "://" in p else str((base / p).resolve())
                    for p in table.column("path").to_pylist()]
        table = table.set_column(table.schema.get_field_index("path"), "path", pa.array(resolved, pa.string()))
    return table


def save_tensors(path: PathLike, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Save a flat dict of tensors as safetensors, atomically (never pickle)."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp),
              metadata=dict(metadata) if metadata else None)
    os.replace(tmp, path)


def load_tensors(path: PathLike, device: str = "cpu") -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError) as exc:
        raise ArtifactError(f"cannot read safetensors ({exc})", path)


def write_checkpoint(out_dir: PathLike, tensors: Mapping[str, Any], config: Mapping[str, Any], *,
                     stage: str = "checkpoint", run_config: Any = None, inputs: Iterable[PathLike] = (),
                     extra_files: Mapping[str, Any] | None = None, **manifest_fields: Any) -> Path:
    """Write a checkpoint artifact: the trained tensors (``model.safetensors``) plus ``config.json`` that names the
    frozen base model and everything needed to rebuild the module. ``extra_files`` maps file names to JSON
    objects written beside them."""
    with ArtifactWriter(out_dir, "checkpoint", stage=stage, config=run_config, inputs=inputs) as writer:
        save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, tensors)
        write_json(writer.dir / schema.CHECKPOINT_CONFIG, config)
        for name, obj in (extra_files or {}).items():
            write_json(writer.dir / name, obj)
        writer.manifest.update(_jsonable(manifest_fields))
    return writer.path


def load_checkpoint(path: PathLike, device: str = "cpu") -> tuple[dict, dict]:
    """Read a checkpoint artifact: ``(tensors, config)``."""
    path = Path(path)
    read_manifest(path, "checkpoint")
    config = read_checkpoint_config(path)
    return load_tensors(path / schema.CHECKPOINT_WEIGHTS, device=device), config


def read_json(path: PathLike) -> Any:
    """A JSON file inside an artifact; a missing or malformed file is an ArtifactError naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError("missing file", path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"cannot read JSON ({exc})", path)


def read_checkpoint_config(path: PathLike) -> dict:
    """The ``config.json`` of a checkpoint artifact (its ``format`` names how to rebuild it)."""
    path = Path(path)
    read_manifest(path, "checkpoint")
    config = read_json(path / schema.CHECKPOINT_CONFIG)
    if not isinstance(config, dict):
        raise ArtifactError("config.json is not a JSON object", path / schema.CHECKPOINT_CONFIG)
    return config


def checkpoint_format(path: PathLike) -> str | None:
    """The ``format`` of a checkpoint artifact's config.json; None when ``path`` is no checkpoint artifact."""
    path = Path(path)
    if not (path / schema.MANIFEST).is_file() or not (path / schema.CHECKPOINT_CONFIG).is_file():
        return None
    try:
        return read_checkpoint_config(path).get("format")
    except ArtifactError:
        return None


def save_array(path: PathLike, array: np.ndarray) -> None:
    """Save one NPY array atomically (never pickled)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def load_array(path: PathLike, mmap: bool = False) -> np.ndarray:
    """Load one NPY array (no pickle); a missing or damaged file is an ArtifactError naming it."""
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except FileNotFoundError:
        raise ArtifactError("missing file", path)
    except (OSError, ValueError, EOFError) as exc:
        raise ArtifactError(f"cannot read NPY ({exc})", path)


def write_metrics(out_dir: PathLike, metrics: Mapping[str, Any], *, stage: str = "evaluate", config: Any = None,
                  inputs: Iterable[PathLike] = (), extra_files: Mapping[str, bytes] | None = None) -> Path:
    """Write a metrics artifact (``metrics.json``; ``extra_files`` are raw bytes such as a PNG or a CSV)."""
    with ArtifactWriter(out_dir, "metrics", stage=stage, config=config, inputs=inputs) as writer:
        write_json(writer.dir / schema.METRICS_FILE, metrics)
        for name, data in (extra_files or {}).items():
            (writer.dir / name).write_bytes(data)
    return writer.path


def load_metrics(path: PathLike) -> dict:
    path = Path(path)
    read_manifest(path, "metrics")
    metrics = read_json(path / schema.METRICS_FILE)
    if not isinstance(metrics, dict):
        raise ArtifactError(f"{schema.METRICS_FILE} is not a JSON object", path)
    return metrics


# ----------------------------------------------------------------------------------------------------------------
# Vocabularies (kind ``vocab``: CLIP-style BPE merges, token ids, TEIR's per-token task counts)
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VocabFiles:
    """The contents of a vocab artifact's files, checked against each other."""

    tokens: list[str]  # token of id i at position i
    merges: list[tuple[str, str]]  # highest priority first
    prior_task_counts: np.ndarray  # int64 [V]
    task_token_freq: np.ndarray  # int64 [V]


def write_vocab_files(directory: PathLike, tokens: Sequence[str], merges: Sequence[tuple[str, str]],
                      prior_task_counts: np.ndarray, task_token_freq: np.ndarray) -> None:
    """Write the files of a vocab artifact into ``directory`` (a writer's partial directory)."""
    directory = Path(directory)
    lines = [schema.VOCAB_MERGES_HEADER] + [f"{a} {b}" for a, b in merges]
    merges_path = directory / schema.VOCAB_MERGES_FILE
    tmp = merges_path.with_name(merges_path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, merges_path)
    write_json(directory / schema.VOCAB_TOKENS_FILE, {token: index for index, token in enumerate(tokens)})
    save_array(directory / schema.VOCAB_PRIOR_COUNTS_FILE, np.asarray(prior_task_counts, dtype=np.int64))
    save_array(directory / schema.VOCAB_TASK_FREQ_FILE, np.asarray(task_token_freq, dtype=np.int64))


def read_vocab_files(path: PathLike) -> VocabFiles:
    """Read and cross-check the files of the vocab artifact at ``path``: ids are 0..V-1, every merge joins two
    symbols into a token of the vocabulary, and both count arrays are integers of shape [V]."""
    path = Path(path)
    merges_path = path / schema.VOCAB_MERGES_FILE
    try:
        lines = merges_path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"cannot read the vocabulary files ({exc})", path)
    encoder = read_json(path / schema.VOCAB_TOKENS_FILE)
    if not isinstance(encoder, dict):
        raise SchemaError(f"{schema.VOCAB_TOKENS_FILE} is not a JSON object of token ids", path)
    prior = load_array(path / schema.VOCAB_PRIOR_COUNTS_FILE)
    freq = load_array(path / schema.VOCAB_TASK_FREQ_FILE)
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    tokens = sorted(encoder, key=encoder.__getitem__)
    if [encoder[t] for t in tokens] != list(range(len(tokens))):
        raise SchemaError(f"{schema.VOCAB_TOKENS_FILE} ids are not 0..{len(tokens) - 1}", path)
    bad = next((m for m in merges if len(m) != 2 or m[0] + m[1] not in encoder), None)
    if bad is not None:
        raise SchemaError(f"{schema.VOCAB_MERGES_FILE} has a merge whose result is not in the vocabulary: "
                          f"{' '.join(bad)!r}", path)
    for name, array in ((schema.VOCAB_PRIOR_COUNTS_FILE, prior), (schema.VOCAB_TASK_FREQ_FILE, freq)):
        if array.shape != (len(tokens),) or not np.issubdtype(array.dtype, np.integer):
            raise SchemaError(f"{name} has shape {array.shape} and dtype {array.dtype}, expected "
                              f"integers of shape ({len(tokens)},)", path)
    return VocabFiles(tokens, merges, prior.astype(np.int64), freq.astype(np.int64))


# ----------------------------------------------------------------------------------------------------------------
# FAISS indexes (kind ``index``: the index file plus the id rows of its vectors)
# ----------------------------------------------------------------------------------------------------------------


def write_index_files(directory: PathLike, index: Any, ids: pa.Table) -> None:
    """Write a FAISS index (``faiss.write_index``, never pickle) and the id rows of its vectors into
    ``directory`` (a writer's partial directory); row i of ``ids`` belongs to the index's vector i."""
    import faiss  # imported only where an index is touched (a slow import the other commands skip)

    if ids.num_rows != index.ntotal:
        raise ArtifactError(f"{ids.num_rows} id rows for {index.ntotal} indexed vectors", directory)
    directory = Path(directory)
    tmp = directory / (schema.INDEX_FILE + ".tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, directory / schema.INDEX_FILE)
    write_table(directory / schema.INDEX_IDS_FILE, ids)


def read_index(path: PathLike) -> tuple[dict, Any, pa.Table]:
    """Read an index artifact: ``(manifest, faiss index, id rows)``, the rows checked against the index."""
    import faiss

    path = Path(path)
    manifest = read_manifest(path, "index")
    try:
        index = faiss.read_index(str(path / schema.INDEX_FILE))
    except RuntimeError as exc:
        raise ArtifactError(f"cannot read {schema.INDEX_FILE} ({str(exc).splitlines()[0]})", path)
    table = read_table(path / schema.INDEX_IDS_FILE)
    require_columns(table, [schema.EMBEDDING_ID_COLUMN], path / schema.INDEX_IDS_FILE)
    if table.num_rows != index.ntotal:
        raise ArtifactError(f"{schema.INDEX_IDS_FILE} has {table.num_rows} rows but the index holds "
                            f"{index.ntotal} vectors", path)
    return manifest, index, table
