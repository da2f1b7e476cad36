"""English teacher embeddings, computed for the rows a step asks for and kept on disk as they arrive.

NLT and CLL-CLIP regress non-native text onto the frozen English CLIP text embedding of its source sentence. That
target never changes, so each English sentence is encoded once per frozen model and reused by every step, epoch,
resume, rerun and stage after it (``train-nlt``, ``train-nlt-le``, the continual stages). It is computed on demand:
a run of 500 steps of 64 pairs encodes at most 32,000 sentences whatever the corpus holds, and its first step
waits for one batch, not for the whole corpus.

The cache of one frozen model (its spec, the content of its local weights, the precision) is a folder
``teacher-rows-KEY`` of chunks: ``CHUNK.npy`` (the vectors [n, D]) and ``CHUNK.parquet`` (the SHA-256 of each
sentence, row-aligned), written under temporary names and renamed, vectors first, so that a chunk whose Parquet
exists is complete. Runs side by side add their own chunks; a sentence both encoded is kept twice, harmlessly.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts import locks
from mltk.core.cache import cache_root
from mltk.core.errors import ArtifactError
from mltk.core.runtime import Runtime, log
from mltk.encode.texts import encode_texts

KEY = "sha256"


class TeacherRows:
    """The frozen model's unnormalised English embeddings of sentences, computed the first time a sentence is
    asked for (``rows(texts) -> [N, D]``), and from the disk cache after that."""

    def __init__(
        self, encoder, model_spec: dict, runtime: Runtime, cache_dir: Path | None = None, batch_size: int = 256
    ):
        identity = [model_spec, _local_weights_fingerprints(model_spec), runtime.precision]
        key = hashlib.sha256(json.dumps(identity, ensure_ascii=False).encode()).hexdigest()[:20]
        self.dir = (cache_dir or cache_root()) / f"teacher-rows-{key}"
        self.encoder, self.runtime, self.batch_size = encoder, runtime, batch_size
        self.where: dict[bytes, tuple[int, int]] = {}  # sentence digest -> (chunk, row)
        self.chunks: list[np.ndarray] = []  # [n_chunk, D] each, memory-mapped
        self.read_files: set[str] = set()
        self.listed = None  # the folder's modification time when it was last listed (a new chunk changes it)
        self.encoded = 0  # sentences this process encoded (the others came from the cache)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """[N, D] float32: row i is the teacher embedding of ``texts[i]``."""
        keys = [hashlib.sha256(text.encode()).digest() for text in texts]
        missing = self._missing(keys)
        if missing:
            self._read_new_chunks()  # another run may have written them meanwhile
            missing = self._missing(keys)
        if missing:
            self._encode([texts[i] for i in missing], [keys[i] for i in missing])
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.chunks[c][r] for c, r in (self.where[k] for k in keys)]).astype(np.float32)

    def _missing(self, keys: list[bytes]) -> list[int]:
        """Positions of the first occurrence of each key not known yet."""
        seen: set[bytes] = set()
        missing = []
        for i, key in enumerate(keys):
            if key not in self.where and key not in seen:
                seen.add(key)
                missing.append(i)
        return missing

    def _read_new_chunks(self) -> None:
        """Read the chunks written since the folder was last listed (listing it only when it changed: a long run
        asks on every step that draws a new sentence)."""
        try:
            changed = os.stat(self.dir).st_mtime_ns
        except OSError:
            return
        if changed == self.listed:
            return
        self.listed = changed
        for rows_file in sorted(self.dir.glob("*.parquet")):
            if rows_file.name in self.read_files:
                continue
            try:
                digests = artifacts.read_table(rows_file, [KEY]).column(KEY).to_pylist()
                vectors = artifacts.load_array(rows_file.with_suffix(".npy"), mmap=True)
            except ArtifactError as exc:  # a damaged chunk is left out (its sentences are encoded again)
                log(f"teacher embeddings: {exc}; not used")
                continue
            if vectors.ndim != 2 or len(vectors) != len(digests):
                continue
            self._add_chunk(rows_file.name, digests, vectors)

    def _add_chunk(self, name: str, digests: list[bytes], vectors: np.ndarray) -> None:
        self.read_files.add(name)
        self.chunks.append(vectors)
        chunk = len(self.chunks) - 1
        for row, digest in enumerate(digests):
            self.where.setdefault(digest, (chunk, row))

    def _encode(self, texts: list[str], keys: list[bytes]) -> None:
        vectors = encode_texts(
            self.encoder, texts, "en", self.runtime, self.batch_size, normalize=False, description="teacher"
        )  # [n, D]
        self.encoded += len(texts)
        name = self._store(keys, vectors)
        self._add_chunk(name or f"memory-{len(self.chunks)}", keys, vectors)
        if name is not None and self.listed is not None:  # our own chunk needs no listing (another run's written
            self.listed = os.stat(self.dir).st_mtime_ns  # meanwhile waits for the next change: re-encoded at worst)

    def _store(self, keys: list[bytes], vectors: np.ndarray) -> str | None:
        """Write one chunk (vectors, then the digests that make it complete); the chunk's name, or None when the
        cache cannot take it (the run goes on with its own copy)."""
        if locks.holder(self.dir) is not None:
            log(f"teacher embeddings: another run holds the cache entry {self.dir}; using this run's own")
            return None
        name = uuid.uuid4().hex
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            artifacts.save_array(self.dir / f"{name}.npy", vectors)
            artifacts.write_table(self.dir / f"{name}.parquet", pa.table({KEY: pa.array(keys, pa.binary(32))}))
        except OSError as exc:
            log(f"teacher embeddings: not cached ({exc}); using this run's own")
            for suffix in (".npy", ".parquet"):
                (self.dir / f"{name}{suffix}").unlink(missing_ok=True)
            return None
        return f"{name}.parquet"


def teacher_embeddings(
    encoder,
    model_spec: dict,
    caption_ids: list[str],
    texts: list[str],
    runtime: Runtime,
    cache_dir: Path | None = None,
    batch_size: int = 256,
) -> np.ndarray:
    """Unnormalised English text embeddings [N, D] of ``texts`` (row i belongs to ``caption_ids[i]``; the
    embedding depends on the text only), through the disk cache of ``TeacherRows``.

    ``encoder`` is any ``mltk.encode.texts`` text encoder whose ``en`` path is the frozen CLIP.
    """
    teacher = TeacherRows(encoder, model_spec, runtime, cache_dir, batch_size)
    vectors = teacher.rows(list(texts))
    cached = len(set(texts)) - teacher.encoded
    log(
        f"teacher embeddings: {len(caption_ids)} captions, {teacher.encoded} encoded, {cached} from the cache "
        f"{teacher.dir}"
    )
    return vectors


def _local_weights_fingerprints(model_spec: dict) -> list[str]:
    """Content fingerprints of the local files or artifacts a model spec names.

    A spec names weights by path; the same path can hold other weights later (``mltk pretrain --out runs/native``
    run again), and a cache keyed by the path alone would then serve the old model's embeddings."""
    paths = [model_spec.get(key) for key in ("model", "pretrained")]
    return [artifacts.fingerprint(path) for path in paths if isinstance(path, str) and Path(path).exists()]
