"""Decoding for ``mltk encode-images`` in DataLoader workers: a row of an image source becomes its pixels or the
error that kept it from being read (``DecodedImages``), and a batch keeps both apart (``collate_decoded``)."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from PIL import Image
from torch.utils.data import Dataset, default_collate

from mltk.data.image_sources import ImageRecords
from mltk.encode.frozen_tower import decode_image


class DecodedImages(Dataset):
    """Row ``i`` -> ``(i, pixels [3, H, W] or None, error or None)``. Never raises for a bad image: the error
    travels with the row so that the main process can skip, count and report it."""

    def __init__(self, records: ImageRecords, preprocess: Callable):
        self.records = records
        self.preprocess = preprocess

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor | None, str | None]:
        return index, *decode_image(lambda: self._open(index), self.preprocess)

    def _open(self, index: int) -> Image.Image:
        if self.records.blobs is not None:
            data = self.records.blobs[index].as_py()
            if data is None:
                raise ValueError("image bytes are null")
            return Image.open(io.BytesIO(data))
        path = self.records.paths[index]
        if "://" in path:
            raise ValueError(f"{path} is a URL; mltk does not download images (fetch them, then pass local paths)")
        return Image.open(path)


@dataclass
class DecodedBatch:
    indices: list[int]  # source rows of the images in ``pixels``
    pixels: torch.Tensor | None  # [B, 3, H, W], None when no image of the batch could be read
    failures: list[tuple[int, str]]  # (source row, error)


def collate_decoded(items: list[tuple[int, torch.Tensor | None, str | None]]) -> DecodedBatch:
    good = [(index, pixels) for index, pixels, _ in items if pixels is not None]
    failures = [(index, error) for index, pixels, error in items if pixels is None]
    # default_collate stacks straight into shared memory inside a worker, saving a copy per batch
    pixels = default_collate([p for _, p in good]) if good else None
    return DecodedBatch([index for index, _ in good], pixels, failures)


def default_workers() -> int:
    """One worker per spare core, at most 8: decoding overlaps with the forward pass on the main process."""
    return max(0, min(8, (os.cpu_count() or 1) - 1))
