"""Parquet tables, captions artifacts and embeddings artifacts (NPY shards row-aligned with id tables)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk.artifacts import integrity, schema
from mltk.artifacts.caption_rules import apply_caption_rules
from mltk.artifacts.manifest import PathLike, jsonable, read_manifest
from mltk.artifacts.sharded import ShardedVectors
from mltk.artifacts.writer import ArtifactWriter
from mltk.core.errors import ArtifactError, SchemaError
from mltk.core.names import check_names

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
        table = pq.read_table(path, columns=list(columns) if columns else None)
        table.validate(full=True)  # string columns must be valid UTF-8 (Parquet does not promise it)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"cannot read Parquet ({str(exc).splitlines()[0]})", path)
    return table


def require_columns(table: pa.Table, columns: Iterable[str], path: PathLike) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise SchemaError(f"missing column(s) {', '.join(missing)} (has {', '.join(table.column_names)})", path)


TEXT_ONLY_COLUMNS = ("lang", "caption", "split")  # names and sentences: a number there is a wrong column, not a name


def as_string_columns(table: pa.Table, columns: Iterable[str], path: PathLike) -> pa.Table:
    """Cast id-like columns to string (ids may arrive as ints) and reject nulls; a language, a caption or a split
    of another type is refused as such (cast, ``lang`` 0 would read as "no captions in language de")."""
    for name in columns:
        column = table.column(name)
        if column.null_count:
            raise SchemaError(f"column {name} has {column.null_count} null value(s)", path)
        if not pa.types.is_string(column.type):
            integer_id = pa.types.is_integer(column.type) and name not in TEXT_ONLY_COLUMNS
            if pa.types.is_large_string(column.type) or integer_id:
                table = table.set_column(table.schema.get_field_index(name), name, column.cast(pa.string()))
            else:
                raise SchemaError(f"column {name} has type {column.type}, expected string", path)
    return table


# ----------------------------------------------------------------------------------------------------------------
# Captions
# ----------------------------------------------------------------------------------------------------------------


def validate_captions(table: pa.Table, path: PathLike = "<captions>", *, drop_empty: bool = False) -> pa.Table:
    """Check the captions schema; returns the table with the required columns first, all as strings, after the
    rules of ``mltk.artifacts.caption_rules`` (control characters replaced with a space, a caption_id on two
    images refused; with ``drop_empty``, empty or whitespace captions dropped with a warning)."""
    require_columns(table, schema.CAPTION_COLUMNS, path)
    table = as_string_columns(table, schema.CAPTION_COLUMNS, path)
    check_names(pc.unique(table.column("lang")).to_pylist(), "caption lang", path)  # each may name a file
    table = apply_caption_rules(table, path, drop_empty)
    extra = [c for c in table.column_names if c not in schema.CAPTION_COLUMNS]
    return table.select(list(schema.CAPTION_COLUMNS) + extra)


def write_captions(
    out_dir: PathLike,
    table: pa.Table,
    *,
    stage: str = "captions",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    **manifest_fields: Any,
) -> Path:
    """Write a captions artifact (one row per caption; see ``schema.CAPTION_COLUMNS``)."""
    table = validate_captions(table, out_dir)
    with ArtifactWriter(out_dir, "captions", stage=stage, config=config, inputs=inputs) as writer:
        write_table(writer.dir / schema.CAPTIONS_FILE, table)
        writer.manifest["rows"] = table.num_rows
        writer.manifest["languages"] = sorted(pc.unique(table.column("lang")).to_pylist())
        writer.manifest.update(jsonable(manifest_fields))
    return writer.path


def load_captions(path: PathLike, *, drop_empty: bool = False) -> pa.Table:
    """Read a captions artifact, or a plain Parquet file that follows the captions schema. ``drop_empty``: leave
    out empty or whitespace captions, with a warning (every stage that encodes or learns from the text)."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return validate_captions(read_table(path), path, drop_empty=drop_empty)
    read_manifest(path, "captions")
    return validate_captions(read_table(path / schema.CAPTIONS_FILE), path, drop_empty=drop_empty)


# ----------------------------------------------------------------------------------------------------------------
# Embeddings
# ----------------------------------------------------------------------------------------------------------------


def _check_vectors(vectors: np.ndarray, path: PathLike) -> None:
    if vectors.ndim != 2:
        raise ArtifactError(f"vectors must be 2-D, got shape {tuple(vectors.shape)}", path)
    for start in range(0, len(vectors), 65536):
        if not np.isfinite(vectors[start : start + 65536]).all():
            raise ArtifactError("vectors contain NaN or infinite values", path)


def write_embedding_shard(
    directory: PathLike, index: int, ids: Sequence, vectors: np.ndarray, dtype: str = "float32", **columns: Sequence
) -> dict:
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
    stored = _cast_vectors(vectors, dtype, directory)
    with open(tmp_vectors, "wb") as handle:
        np.save(handle, stored)
    os.replace(tmp_vectors, directory / vectors_name)
    write_table(directory / rows_name, pa.table(data))
    return {"vectors": vectors_name, "rows": rows_name, "count": len(ids)}


def _cast_vectors(vectors: np.ndarray, dtype: str, path: PathLike) -> np.ndarray:
    """``vectors`` as ``dtype``; values that overflow it (float16 holds at most 65504) are refused, naming
    ``path``, not stored as inf (which every reader then refuses, or scores as nothing)."""
    with np.errstate(over="ignore"):
        stored = vectors.astype(dtype, copy=False)
    if stored is not vectors:
        for start in range(0, len(stored), 65536):
            if not np.isfinite(stored[start : start + 65536]).all():
                raise ArtifactError(
                    f"vectors overflow {dtype} (largest |value| {float(np.abs(vectors).max()):.4g}, "
                    f"{dtype} holds at most {float(np.finfo(dtype).max):.4g}); write float32 or "
                    "normalise first",
                    path,
                )
    return stored


def _looks_like_ids(values: Sequence) -> bool:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return False
    sample = values[0] if len(values) else ""
    return isinstance(sample, (str, np.str_))


def finish_embeddings(
    writer: ArtifactWriter, shards: list[dict], *, dim: int, dtype: str, normalized: bool = True, **manifest_fields: Any
) -> None:
    """Record the shards of an embeddings artifact in its manifest (call inside the writer's ``with``)."""
    writer.manifest.update(
        shards=shards,
        count=sum(s["count"] for s in shards),
        dim=dim,
        dtype=dtype,
        normalized=normalized,
        **jsonable(manifest_fields),
    )


def write_embeddings(
    out_dir: PathLike,
    ids: Sequence,
    vectors: np.ndarray,
    *,
    dtype: str = "float32",
    normalized: bool = True,
    stage: str = "embeddings",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    shard_size: int = 1 << 20,
    manifest_fields: Mapping[str, Any] | None = None,
    **columns: Sequence,
) -> Path:
    """Write an embeddings artifact: ``vectors[i]`` belongs to ``ids[i]`` and to row i of each extra column.

    ``columns`` are extra per-row columns such as ``lang``, ``image_id`` or ``caption_id``.
    """
    vectors = np.asarray(vectors)
    _check_vectors(vectors, out_dir)
    if len(ids) != len(vectors):
        raise ArtifactError(f"{len(ids)} ids but {len(vectors)} vectors", out_dir)
    if len(set(map(str, ids))) != len(ids):
        raise ArtifactError("ids are not unique", out_dir)
    if dtype != vectors.dtype:
        _cast_vectors(vectors, dtype, out_dir)  # an overflow names the artifact, not its temporary folder
    with ArtifactWriter(out_dir, "embeddings", stage=stage, config=config, inputs=inputs) as writer:
        shards = []
        for index, start in enumerate(range(0, max(len(ids), 1), shard_size)):
            stop = start + shard_size
            shard_columns = {name: values[start:stop] for name, values in columns.items()}
            shards.append(
                write_embedding_shard(writer.dir, index, ids[start:stop], vectors[start:stop], dtype, **shard_columns)
            )
        finish_embeddings(
            writer, shards, dim=int(vectors.shape[1]), dtype=dtype, normalized=normalized, **dict(manifest_fields or {})
        )
    return writer.path


def load_embeddings(
    path: PathLike, *, check_finite: bool = True, lazy: bool = False
) -> tuple[pa.Table, np.ndarray | ShardedVectors]:
    """Read an embeddings artifact: ``(table, vectors)`` row-aligned; ``table`` holds ``id`` and extra columns.

    A single-shard artifact is memory-mapped; several shards are concatenated in manifest order, or with ``lazy``
    kept memory-mapped behind one ``ShardedVectors`` view (no concatenated copy; ``np.asarray`` makes one where a
    reader needs an array). Every reader of embeddings comes here, so ids are checked once: unique, non-null, one
    per vector.
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
    table = as_string_columns(table, [schema.EMBEDDING_ID_COLUMN], path)
    _check_unique_ids(table.column(schema.EMBEDDING_ID_COLUMN), path)
    if len(arrays) == 1:
        vectors = arrays[0]
    else:
        vectors = ShardedVectors(arrays) if lazy else np.concatenate(arrays)
    if check_finite:
        _check_vectors(vectors, path)
    return table, vectors


def _check_unique_ids(ids: pa.ChunkedArray, path: PathLike) -> None:
    import pyarrow.compute as pc

    if pc.count_distinct(ids).as_py() != len(ids):
        counts = pc.value_counts(ids)
        repeated = [item["values"] for item in counts.to_pylist() if item["counts"] > 1]
        raise ArtifactError(f"{len(repeated)} id(s) occur more than once (e.g. {repeated[0]!r})", path)


def save_array(path: PathLike, array: np.ndarray) -> None:
    """Save one NPY array atomically (never pickled)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def load_array(path: PathLike, mmap: bool = False) -> np.ndarray:
    """Load one NPY array (no pickle); a missing or damaged file is an ArtifactError naming it.

    ``mmap``: mapped copy-on-write, so the array is writable (torch takes it without a warning) while a write
    stays in the process's own pages and never reaches the artifact."""
    try:
        return np.load(path, allow_pickle=False, mmap_mode="c" if mmap else None)
    except FileNotFoundError:
        raise ArtifactError("missing file", path)
    except (OSError, ValueError, EOFError) as exc:
        raise ArtifactError(f"cannot read NPY ({exc})", path)
