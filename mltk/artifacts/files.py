"""Images, checkpoints (safetensors plus the checkpoint config), metrics, NPY arrays, vocab files and FAISS
indexes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mltk.artifacts import dependencies, integrity, schema
from mltk.artifacts.checkpoint_fields import check_checkpoint_fields
from mltk.artifacts.local_names import check_names_stay_local
from mltk.artifacts.manifest import PathLike, fingerprint, jsonable, read_json, read_manifest, write_json
from mltk.artifacts.tables import (
    as_string_columns,
    load_array,
    load_embeddings,
    read_table,
    require_columns,
    save_array,
    write_table,
)
from mltk.artifacts.writer import ArtifactWriter
from mltk.core.errors import ArtifactError, SchemaError
from mltk.core.file_modes import give_normal_mode

# ----------------------------------------------------------------------------------------------------------------
# Images (encoded bytes or paths), checkpoints (safetensors + config.json), metrics (JSON)
# ----------------------------------------------------------------------------------------------------------------


def write_images(
    out_dir: PathLike,
    table: pa.Table,
    *,
    stage: str = "images",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    **manifest_fields: Any,
) -> Path:
    """Write an images artifact: ``image_id``, ``split`` and either ``image`` (encoded bytes, e.g. PNG) or
    ``path`` (absolute, or relative to the artifact directory)."""
    table = validate_images(table, out_dir)
    with ArtifactWriter(out_dir, "images", stage=stage, config=config, inputs=inputs) as writer:
        write_table(writer.dir / schema.IMAGES_FILE, table)
        writer.manifest["rows"] = table.num_rows
        writer.manifest.update(jsonable(manifest_fields))
    return writer.path


def validate_images(table: pa.Table, path: PathLike = "<images>") -> pa.Table:
    require_columns(table, schema.IMAGE_COLUMNS, path)
    sources = [c for c in schema.IMAGE_SOURCE_COLUMNS if c in table.column_names]
    if len(sources) != 1:
        raise SchemaError("an images table needs exactly one of the columns 'image' (bytes) or 'path'", path)
    return as_string_columns(table, schema.IMAGE_COLUMNS, path)


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
        resolved = [
            p if os.path.isabs(p) or "://" in p else str((base / p).resolve()) for p in table.column("path").to_pylist()
        ]
        table = table.set_column(table.schema.get_field_index("path"), "path", pa.array(resolved, pa.string()))
    return table


def save_tensors(path: PathLike, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Save a flat dict of tensors as safetensors, atomically (never pickle). A failed write is an ``OSError``
    naming the file (safetensors reports a full disk as its own error, which no caller would take for one)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
            str(tmp),
            metadata=dict(metadata) if metadata else None,
        )
    except SafetensorError as exc:
        code = re.search(r"\(os error (\d+)\)", str(exc))
        if code is None:
            raise
        raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(tmp)) from exc
    give_normal_mode(tmp)  # safetensors writes 0600; the umask's mode, as every other file of the artifact
    os.replace(tmp, path)


def load_tensors(path: PathLike, device: str = "cpu") -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError) as exc:
        raise ArtifactError(f"cannot read safetensors ({exc})", path)


def write_checkpoint(
    out_dir: PathLike,
    tensors: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    stage: str = "checkpoint",
    run_config: Any = None,
    inputs: Iterable[PathLike] = (),
    extra_files: Mapping[str, Any] | None = None,
    **manifest_fields: Any,
) -> Path:
    """Write a checkpoint artifact: the trained tensors (``model.safetensors``) plus ``config.json`` that names the
    frozen base model and everything needed to rebuild the module. ``extra_files`` maps file names to JSON
    objects written beside them."""
    with ArtifactWriter(out_dir, "checkpoint", stage=stage, config=run_config, inputs=inputs) as writer:
        save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, tensors)
        write_json(writer.dir / schema.CHECKPOINT_CONFIG, config)
        for name, obj in (extra_files or {}).items():
            write_json(writer.dir / name, obj)
        writer.manifest.update(jsonable(manifest_fields))
    return writer.path


def load_checkpoint(path: PathLike, device: str = "cpu") -> tuple[dict, dict]:
    """Read a checkpoint artifact: ``(tensors, config)``."""
    path = Path(path)
    read_manifest(path, "checkpoint")
    config = read_checkpoint_config(path)
    return load_tensors(path / schema.CHECKPOINT_WEIGHTS, device=device), config


def read_checkpoint_config(path: PathLike, resolve: bool = True) -> dict:
    """The ``config.json`` of a checkpoint artifact (its ``format`` names how to rebuild it). With ``resolve``
    its base model and tokenizer are where their pinned content now lies (``mltk.artifacts.dependencies``: a
    changed or missing one is refused); without, the config as recorded."""
    path = Path(path)
    read_manifest(path, "checkpoint")
    config = read_json(path / schema.CHECKPOINT_CONFIG)
    if not isinstance(config, dict):
        raise ArtifactError("config.json is not a JSON object", path / schema.CHECKPOINT_CONFIG)
    config = check_checkpoint_fields(config, path)
    return check_names_stay_local(dependencies.resolve(config, path), path) if resolve else config


def checkpoint_format(path: PathLike) -> str | None:
    """The ``format`` of a checkpoint artifact's config.json; None when ``path`` is no checkpoint artifact."""
    path = Path(path)
    if not (path / schema.MANIFEST).is_file() or not (path / schema.CHECKPOINT_CONFIG).is_file():
        return None
    try:
        return read_checkpoint_config(path, resolve=False).get("format")
    except ArtifactError:
        return None


def write_metrics(
    out_dir: PathLike,
    metrics: Mapping[str, Any],
    *,
    stage: str = "evaluate",
    config: Any = None,
    inputs: Iterable[PathLike] = (),
    extra_files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write a metrics artifact (``metrics.json``; ``extra_files`` are raw bytes such as a PNG or a CSV)."""
    with ArtifactWriter(out_dir, "metrics", stage=stage, config=config, inputs=inputs) as writer:
        write_json(writer.dir / schema.METRICS_FILE, metrics)
        for name, data in (extra_files or {}).items():
            (writer.dir / name).parent.mkdir(parents=True, exist_ok=True)  # a name may hold a folder
            (writer.dir / name).write_bytes(data)
    return writer.path


def load_metrics(path: PathLike) -> dict:
    """The ``metrics.json`` of a metrics artifact (per language, MRV, settings, warnings), checked first."""
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


def write_vocab_files(
    directory: PathLike,
    tokens: Sequence[str],
    merges: Sequence[tuple[str, str]],
    prior_task_counts: np.ndarray,
    task_token_freq: np.ndarray,
) -> None:
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
        raise SchemaError(
            f"{schema.VOCAB_MERGES_FILE} has a merge whose result is not in the vocabulary: {' '.join(bad)!r}", path
        )
    for name, array in ((schema.VOCAB_PRIOR_COUNTS_FILE, prior), (schema.VOCAB_TASK_FREQ_FILE, freq)):
        if array.shape != (len(tokens),) or not np.issubdtype(array.dtype, np.integer):
            raise SchemaError(
                f"{name} has shape {array.shape} and dtype {array.dtype}, expected integers of shape ({len(tokens)},)",
                path,
            )
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
        raise ArtifactError(
            f"{schema.INDEX_IDS_FILE} has {table.num_rows} rows but the index holds {index.ntotal} vectors", path
        )
    return manifest, index, table


def moved_with_tree(recorded: Path, artifact: Path, wanted: str | None) -> Path | None:
    """Where an input recorded at ``recorded`` (no longer there) lies now when the tree moved with the artifact, as
    loading finds a checkpoint's base: the same trailing path under one of the artifact's folders, with the
    recorded fingerprint (so a guess is never reported as the input). None when there is no such file."""
    if not wanted:
        return None
    ancestors = list(artifact.resolve().parents)[:12]
    for start in range(1, len(recorded.parts)):  # the longest trailing path first: the most specific match
        tail = Path(*recorded.parts[start:])
        for folder in ancestors:
            candidate = folder / tail
            if candidate.exists() and candidate != recorded and fingerprint(candidate) == wanted:
                return candidate
    return None


def verify_artifact(path: PathLike, *, decode: bool = True) -> dict:
    """What ``mltk inspect`` checks: the manifest, containment and sizes (``read_manifest``), every file's sha256,
    and (``decode``) that every file decodes, including an embeddings artifact's shards as its reader sees them.
    Raises ArtifactError naming the first problem; returns ``{"manifest", "verified", "changed_inputs",
    "dependencies"}`` where ``changed_inputs`` lists inputs whose fingerprint is no longer the recorded one (or that
    are gone) and ``dependencies`` a checkpoint's base model and tokenizer with their state
    (``mltk.artifacts.dependencies.report``)."""
    path = Path(path)
    manifest = read_manifest(path)
    integrity.verify_hashes(path, manifest)
    verified = "sha256" if manifest.get("checksums") else "sizes only (no checksums recorded)"
    if decode:
        for name in manifest["files"]:
            integrity.decode_file(integrity.member(path, name))
        if manifest["kind"] == "embeddings":
            load_embeddings(path, lazy=True)  # every shard checked, none copied
        verified += " and decoded"
    changed = []
    for entry in manifest["inputs"]:
        source = Path(str(entry.get("path")))
        if not source.exists():
            moved = moved_with_tree(source, path, entry.get("fingerprint"))
            changed.append(
                {"path": str(source), "change": "moved with the tree", "now": str(moved)}
                if moved
                else {"path": str(source), "change": "is gone"}
            )
        elif fingerprint(source) != entry.get("fingerprint"):
            changed.append({"path": str(source), "change": "changed"})
    depends = []
    if manifest["kind"] == "checkpoint" and schema.CHECKPOINT_CONFIG in manifest["files"]:
        config = read_json(path / schema.CHECKPOINT_CONFIG)
        depends = dependencies.report(config, path) if isinstance(config, dict) else []
    return {"manifest": manifest, "verified": verified, "changed_inputs": changed, "dependencies": depends}
