"""train-ccrk's batches: each image with one caption per language slot, as a pure function of ``(seed, step)``.

A missing language is masked out (``NO_CAPTION``), never padded with a made-up caption. The caption of each
(image, language) prefers translations of one sentence: one ``caption_id`` of the image among those present in the
most languages, and only a language lacking it gets another caption of the same image in that language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from mltk.train.batches import LanguageBatches

NO_CAPTION = -1  # a language slot an image has no caption in


# ----------------------------------------------------------------------------------------------------------------
# Captions of each image, per language slot
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageCaptions:
    """The training images and their captions by language slot.

    ``image_rows[i]``: row of image i in the image embeddings. ``options[i]``: int array [C_i, K], one row per
    ``caption_id`` of image i, entry k the index of that caption in ``texts[languages[k]]`` or ``NO_CAPTION``.
    """

    languages: tuple[str, ...]
    image_rows: np.ndarray
    options: tuple[np.ndarray, ...]
    texts: dict[str, list[str]]


def group_captions(captions: pa.Table, split: str, languages: list[str], image_row: dict[str, int]) -> ImageCaptions:
    """Captions of ``split`` in ``languages`` whose image is in the embeddings, grouped by image and caption_id.

    Images without any caption in the languages are left out; an image lacking one language simply has
    ``NO_CAPTION`` in that slot of every option.
    """
    keep = pc.and_(
        pc.equal(captions.column("split"), split), pc.is_in(captions.column("lang"), pa.array(languages, pa.string()))
    )
    rows = captions.filter(keep)
    slot = {lang: k for k, lang in enumerate(languages)}
    texts: dict[str, list[str]] = {lang: [] for lang in languages}
    by_image: dict[str, dict[str, np.ndarray]] = {}
    for image_id, lang, caption_id, caption in zip(
        *(rows.column(c).to_pylist() for c in ("image_id", "lang", "caption_id", "caption"))
    ):
        if image_id not in image_row:
            continue
        entry = by_image.setdefault(image_id, {}).setdefault(caption_id, np.full(len(languages), NO_CAPTION))
        if entry[slot[lang]] == NO_CAPTION:  # a duplicate caption_id within one language keeps its first caption
            entry[slot[lang]] = len(texts[lang])
            texts[lang].append(caption)
    image_ids = sorted(by_image, key=image_row.__getitem__)
    options = tuple(np.stack([by_image[i][c] for c in sorted(by_image[i])]).astype(np.int64) for i in image_ids)
    return ImageCaptions(tuple(languages), np.array([image_row[i] for i in image_ids], dtype=np.int64), options, texts)


def pick_captions(options: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One caption per language slot for one image: ``options`` [C, K] -> [K] (``NO_CAPTION`` where the image
    has none). Takes a caption_id present in the most languages (uniformly among ties), so the captions are
    translations of each other where the data has them; a language lacking that caption_id gets a random
    caption of the image in that language."""
    present = options != NO_CAPTION
    coverage = present.sum(axis=1)
    best = np.flatnonzero(coverage == coverage.max())
    chosen = options[best[rng.integers(len(best))]].copy()
    for k in np.flatnonzero(chosen == NO_CAPTION):
        candidates = options[present[:, k], k]
        if len(candidates):
            chosen[k] = candidates[rng.integers(len(candidates))]
    return chosen


def nearest_images(vectors: torch.Tensor, count: int, chunk: int = 1024) -> np.ndarray:
    """For each row of L2-normalised ``vectors`` [N, D], the ``count`` most similar other rows (cosine), [N, count],
    most similar first. Computed in chunks of rows, so an N x N matrix is never held."""
    count = min(count, len(vectors) - 1)
    out = np.empty((len(vectors), count), dtype=np.int64)
    for start in range(0, len(vectors), chunk):
        scores = vectors[start : start + chunk] @ vectors.T  # [c, N]
        own = torch.arange(start, start + len(scores))
        scores[torch.arange(len(scores)), own] = -math.inf
        out[start : start + len(scores)] = scores.topk(count, dim=1).indices.numpy()
    return out


class MultilingualBatches:
    """Batches of step ``s`` as a pure function of ``(seed, s)``: ``B`` distinct images (indices into
    ``ImageCaptions``) and, for each, one caption per language slot ([B, K], ``NO_CAPTION`` when missing).

    Images walk through the training set in a fresh random order every epoch (``LanguageBatches`` with a single
    stream). With ``neighbours`` [N, n], a batch is ``ceil(B / (n + 1))`` anchors each followed by its neighbours
    (hard negatives), duplicates skipped, topped up with random images. ``one_language`` keeps one present
    language per image (uniform), the 1-to-1 baseline's sampling, done before encoding so nothing is wasted.
    """

    def __init__(
        self,
        data: ImageCaptions,
        batch_size: int,
        steps: int,
        seed: int,
        neighbours: np.ndarray | None = None,
        one_language: bool = False,
    ):
        self.data, self.seed, self.one_language = data, seed, one_language
        self.size = min(batch_size, len(data.image_rows))
        self.neighbours = neighbours
        anchors = self.size if neighbours is None else math.ceil(self.size / (neighbours.shape[1] + 1))
        self.walk = LanguageBatches({"images": len(data.image_rows)}, anchors, steps, seed)

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        _, images = self.walk.batch(step)
        rng = np.random.default_rng([self.seed, step, 0xCC4])
        if self.neighbours is not None:
            images = self._with_hard_negatives(images, rng)
        captions = np.stack([pick_captions(self.data.options[i], rng) for i in images])  # [B, K]
        if self.one_language:
            captions = keep_one_language(captions, rng)
        return images, captions

    def _with_hard_negatives(self, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        chosen = dict.fromkeys(
            int(i) for anchor in anchors for i in (anchor, *self.neighbours[anchor])
        )  # ordered, no duplicates
        images = list(chosen)[: self.size]
        if len(images) < self.size:
            rest = np.setdiff1d(np.arange(len(self.data.image_rows)), images)
            images += rng.permutation(rest)[: self.size - len(images)].tolist()
        return np.array(images, dtype=np.int64)


def keep_one_language(captions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[B, K] captions -> the same with one present slot per row kept (uniform over the present ones)."""
    out = np.full_like(captions, NO_CAPTION)
    for row, options in enumerate(captions):
        present = np.flatnonzero(options != NO_CAPTION)
        k = present[rng.integers(len(present))]
        out[row, k] = options[k]
    return out
