"""The training pairs of every task language, each with its image and its English teacher."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from mltk.artifacts.schema import NATIVE_LANG
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.core.errors import ConfigError
from mltk.train.batches import group_by_image

# ----------------------------------------------------------------------------------------------------------------
# Data: every training pair of every task language, with its English teacher
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Examples:
    tokens: torch.Tensor  # [n, L] with the current vocabulary
    images: torch.Tensor | None  # [n, D] L2-normalised image embeddings (None: a text-only run)
    teacher: torch.Tensor  # [n, D] unnormalised English teacher embeddings


class Corpus:
    """The training pairs (caption, image, English teacher) of each task language; an example is addressed by
    the key (language index in the task order, row within that language). A text-only run has no image vectors
    (None): ``image_row`` then numbers the captions' image ids, which still group captions by image."""

    def __init__(
        self,
        captions: pa.Table,
        split: str,
        languages: list[str],
        image_row: dict[str, int],
        image_vectors: torch.Tensor | None,
        teacher_of: Callable[[list[str], list[str]], np.ndarray],
        source: Path,
    ):
        rows = captions.filter(pc.equal(captions.column("split"), split))
        english = rows.filter(pc.equal(rows.column("lang"), NATIVE_LANG))
        english_caption = dict(zip(english.column("caption_id").to_pylist(), english.column("caption").to_pylist()))
        self.languages = languages
        self.image_vectors = image_vectors
        self.texts: dict[str, list[str]] = {}
        self.image_rows: dict[str, np.ndarray] = {}
        self.caption_ids: dict[str, list[str]] = {}
        for lang in languages:
            part = rows.filter(pc.equal(rows.column("lang"), lang))
            kept = [
                (cid, text, image_row[image])
                for cid, text, image in zip(
                    part.column("caption_id").to_pylist(),
                    part.column("caption").to_pylist(),
                    part.column("image_id").to_pylist(),
                )
                if image in image_row and cid in english_caption
            ]
            if not kept:
                raise ConfigError(
                    f"no {lang} captions of split {split!r} have an image in the image embeddings "
                    f"and an English caption with the same caption_id (the teacher)",
                    source,
                )
            self.caption_ids[lang] = [cid for cid, _, _ in kept]
            self.texts[lang] = [text for _, text, _ in kept]
            self.image_rows[lang] = np.array([row for _, _, row in kept], dtype=np.int64)
        needed = sorted({cid for ids in self.caption_ids.values() for cid in ids})
        self.teacher = torch.from_numpy(
            np.array(teacher_of(needed, [english_caption[c] for c in needed]), dtype=np.float32)
        )
        teacher_row = {cid: i for i, cid in enumerate(needed)}
        self.teacher_rows = {
            lang: np.array([teacher_row[c] for c in ids], dtype=np.int64) for lang, ids in self.caption_ids.items()
        }

    def size(self, lang: str) -> int:
        return len(self.texts[lang])

    def keys(self, lang: str) -> np.ndarray:
        """[n, 2]: (language index, row) of every training pair of ``lang``."""
        rows = np.arange(self.size(lang), dtype=np.int64)
        return np.stack([np.full_like(rows, self.languages.index(lang)), rows], axis=1)

    def examples(self, keys: np.ndarray, encoder: ContinualTextEncoder) -> Examples:
        """The examples of ``keys`` [n, 2], tokenised with the encoder's current vocabulary."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 2)
        texts = [self.texts[self.languages[lang]][row] for lang, row in keys]
        image_rows = np.array([self.image_rows[self.languages[lang]][row] for lang, row in keys], dtype=np.int64)
        teacher_rows = np.array([self.teacher_rows[self.languages[lang]][row] for lang, row in keys], dtype=np.int64)
        images = None if self.image_vectors is None else self.image_vectors[torch.from_numpy(image_rows)]
        return Examples(encoder.tokenize(texts), images, self.teacher[torch.from_numpy(teacher_rows)])


def caption_image_rows(captions: pa.Table) -> dict[str, int]:
    """A text-only run's ``image_row``: each image id of the captions numbered in order of appearance."""
    return {image: row for row, image in enumerate(dict.fromkeys(captions.column("image_id").to_pylist()))}


@dataclass
class TaskData:
    """One language's training pairs grouped by image (batches hold distinct images)."""

    image_rows: np.ndarray  # [n_images] rows of the image embeddings
    offsets: np.ndarray  # [n_images] first caption of each image
    counts: np.ndarray  # [n_images] captions of each image
    tokens: torch.Tensor  # [N, L]
    teacher: torch.Tensor  # [N, D]


def task_data(corpus: Corpus, lang: str | list[str], encoder: ContinualTextEncoder) -> TaskData:
    """The training pairs of ``lang`` (or of several languages together, for the joint run) grouped by image."""
    languages = [lang] if isinstance(lang, str) else list(lang)
    keys = np.concatenate([corpus.keys(name) for name in languages])
    rows = np.concatenate([corpus.image_rows[name] for name in languages])
    order = np.argsort(rows, kind="stable")
    examples = corpus.examples(keys[order], encoder)
    image_rows, counts, offsets = group_by_image(rows[order])
    return TaskData(image_rows, offsets, counts, examples.tokens, examples.teacher)
