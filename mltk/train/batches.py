"""Deterministic single-language batches: the batch of a step is a pure function of (seed, step).

MLA draws the language of each step uniformly and fills the batch from that language only. Each language walks
through its own examples in a fresh random order every epoch. Because the batch of step s depends only on the seed
and s, resuming at step s needs no saved data-loader state.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


class LanguageBatches:
    def __init__(self, sizes: dict[str, int], batch_size: int, steps: int, seed: int):
        self.languages = [lang for lang in sizes if sizes[lang] > 0]
        if not self.languages:
            raise ValueError("no language has any examples")
        self.sizes = sizes
        self.batch_size = batch_size
        self.seed = seed
        choice = np.random.default_rng([seed, 0x1A6]).integers(len(self.languages), size=steps)
        self._lang_of_step = choice
        # how many earlier steps drew the same language = this step's position in that language's stream
        self._position = np.zeros(steps, dtype=np.int64)
        seen = np.zeros(len(self.languages), dtype=np.int64)
        for step, lang_index in enumerate(choice):
            self._position[step] = seen[lang_index]
            seen[lang_index] += 1

    def batch(self, step: int) -> tuple[str, np.ndarray]:
        """(language, example indices) of ``step``: ``batch_size`` distinct examples of one language (all of them
        when the language has fewer). Each epoch yields ``n // batch_size`` full batches; the remainder of the
        epoch's order is dropped, so no example appears twice in a batch."""
        lang_index = int(self._lang_of_step[step])
        lang = self.languages[lang_index]
        n = self.sizes[lang]
        per_epoch = max(n // self.batch_size, 1)
        position = int(self._position[step])
        epoch, offset = divmod(position, per_epoch)
        order = self._permutation(lang_index, epoch)
        return lang, order[offset * self.batch_size : (offset + 1) * self.batch_size]

    @lru_cache(maxsize=64)
    def _permutation(self, lang_index: int, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, lang_index, epoch]).permutation(self.sizes[self.languages[lang_index]])

    def steps_per_epoch(self) -> float:
        """Steps for every language to see all its examples once, on average."""
        return sum(self.sizes[lang] for lang in self.languages) / self.batch_size


def group_by_image(image_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Captions sorted by image row -> (distinct image rows [n], captions per image [n], first caption [n])."""
    rows, counts = np.unique(np.asarray(image_rows), return_counts=True)
    return rows, counts, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def draw_captions(
    seed: int, step: int, salt: int, images: np.ndarray, offsets: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """One caption per image of the batch of ``step``: index ``offsets[i] + floor(u * counts[i])`` with ``u``
    uniform from ``(seed, step, salt)``. Drawn for the global batch before sharding, so every rank agrees."""
    draw = np.random.default_rng([seed, step, salt]).random(len(images))
    return offsets[images] + (draw * counts[images]).astype(np.int64)
