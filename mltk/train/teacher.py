"""English teacher embeddings, computed once per (frozen model, dataset) and cached as an embeddings artifact.

NLT and CLL-CLIP regress non-native text onto the frozen English CLIP text embedding of its source sentence.
That target never changes, so it is computed once, keyed by ``caption_id``, and reused by every step, epoch and
rerun (never recomputed per step).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from mltk import artifacts
from mltk.artifacts import locks
from mltk.core.cache import cache_root
from mltk.core.errors import ArtifactError
from mltk.core.runtime import Runtime, log
from mltk.encode.texts import encode_texts


def teacher_embeddings(encoder, model_spec: dict, caption_ids: list[str], texts: list[str], runtime: Runtime,
                       cache_dir: Path | None = None, batch_size: int = 256) -> np.ndarray:
    """Unnormalised English text embeddings [N, D] of ``texts`` (row i belongs to ``caption_ids[i]``).

    ``encoder`` is any ``mltk.encode.texts`` text encoder whose ``en`` path is the frozen CLIP.
    """
    identity = [model_spec, _local_weights_fingerprints(model_spec), runtime.precision, caption_ids, texts]
    key = hashlib.sha256(json.dumps(identity, ensure_ascii=False).encode()).hexdigest()[:20]
    path = (cache_dir or cache_root()) / f"teacher-{key}"
    if artifacts.is_artifact(path):
        table, vectors = artifacts.load_embeddings(path)
        if table.column("id").to_pylist() == list(caption_ids):
            log(f"teacher embeddings: cached ({len(caption_ids)} captions) at {path}")
            return np.asarray(vectors, dtype=np.float32)
    log(f"teacher embeddings: encoding {len(texts)} English captions once (cache {path})")
    vectors = encode_texts(encoder, texts, "en", runtime, batch_size, normalize=False, description="teacher")
    # Runs side by side (make -j2) may encode the same entry at once: the first to write keeps it, the others use
    # their own copy instead of failing on the lock or on the finished entry.
    if artifacts.is_artifact(path) or locks.holder(path) is not None:
        log(f"teacher embeddings: another run wrote (or is writing) the cache entry {path}; using this run's own")
        return vectors
    try:
        artifacts.write_embeddings(path, caption_ids, vectors, normalized=False, stage="teacher",
                                   config={"model": model_spec})
    except ArtifactError as exc:  # lost the race for the lock after the check
        log(f"teacher embeddings: not cached ({exc}); using this run's own")
    return vectors


def _local_weights_fingerprints(model_spec: dict) -> list[str]:
    """Content fingerprints of the local files or artifacts a model spec names.

    A spec names weights by path; the same path can hold other weights later (``mltk pretrain --out runs/native``
    run again), and a cache keyed by the path alone would then serve the old model's embeddings."""
    paths = [model_spec.get(key) for key in ("model", "pretrained")]
    return [artifacts.fingerprint(path) for path in paths if isinstance(path, str) and Path(path).exists()]
