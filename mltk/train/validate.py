"""Validation scores for training stages: retrieval on a held-out split, computed in-process."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk.core.runtime import Runtime
from mltk.encode.texts import encode_captions
from mltk.metrics.retrieval import evaluate_retrieval


class RetrievalValidator:
    """Mean AR (average of R@1/5/10 in both directions) over ``languages`` on the validation captions.

    Ranks by ``similarity`` (cosine, or AME's order violation for a model trained with it). Image embeddings are
    computed once (``encode-images``); only the text side is re-encoded at each call.
    """

    def __init__(
        self,
        encoder,
        captions: pa.Table,
        image_table: pa.Table,
        image_vectors: np.ndarray,
        languages: list[str],
        runtime: Runtime,
        max_images: int | None = None,
        similarity: str = "cosine",
    ):
        image_ids = image_table.column("id").to_pylist()
        if max_images is not None:
            image_ids = image_ids[:max_images]
        keep = pc.is_in(captions.column("image_id"), pa.array(image_ids, pa.string()))
        keep = pc.and_(keep, pc.is_in(captions.column("lang"), pa.array(languages, pa.string())))
        self.captions = captions.filter(keep)
        self.image_table = image_table.slice(0, len(image_ids))
        self.image_vectors = np.asarray(image_vectors[: len(image_ids)], dtype=np.float32)
        self.encoder = encoder
        self.languages = [lang for lang in languages if lang in set(self.captions.column("lang").to_pylist())]
        self.runtime = runtime
        self.similarity = similarity  # the one the model trains with (AME validates with it)

    def __call__(self) -> dict[str, float]:
        was_training = self.encoder.training
        self.encoder.eval()
        table, vectors = encode_captions(self.encoder, self.captions, self.runtime, languages=self.languages)
        self.encoder.train(was_training)
        result = evaluate_retrieval(self.image_table, self.image_vectors, table, vectors, similarity=self.similarity)
        scores = {f"AR_{lang}": result["per_language"][lang]["AR"] for lang in self.languages}
        scores["score"] = float(np.mean(list(scores.values())))
        return scores
