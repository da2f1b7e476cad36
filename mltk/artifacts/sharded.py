"""The vectors of a multi-shard embeddings artifact as one [rows, dim] array without a concatenated copy.

``ShardedVectors`` keeps each shard's NPY file memory-mapped and answers what readers ask of an array: ``len``,
``shape``, ``dtype``, ``ndim``, and indexing by a row, a slice, an array of rows or a boolean mask (optionally with
a column index), which gathers just those rows from the shards that hold them. ``np.asarray(view, dtype)`` is the
one full copy, made where a reader asks for it (training casts to float32 anyway: one copy in float32 instead of a
concatenation and then a cast). ``chunks`` walks the rows a bounded piece at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

CHUNK_ROWS = 65536


class ShardedVectors:
    """Read-only rows of several [rows_i, dim] arrays (memory-mapped shards), in order, as one array."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = parts
        self.offsets = np.cumsum([0] + [len(part) for part in parts])  # [shards + 1]: the first row of each
        self.dtype = np.result_type(*[part.dtype for part in parts])
        self.shape = (int(self.offsets[-1]), int(parts[0].shape[1]))
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(self.shape, dtype=dtype or self.dtype)
        for start, part in zip(self.offsets[:-1], self.parts):
            out[start : start + len(part)] = part
        return out

    def astype(self, dtype, copy: bool = True) -> np.ndarray:
        return self.__array__(dtype)

    def __getitem__(self, key) -> np.ndarray:
        rows, columns = key if isinstance(key, tuple) else (key, slice(None))
        if isinstance(rows, (int, np.integer)):
            row = int(rows) + (len(self) if rows < 0 else 0)
            if not 0 <= row < len(self):
                raise IndexError(f"row {rows} is out of range for {len(self)} rows")
            shard = int(np.searchsorted(self.offsets, row, side="right")) - 1
            return np.asarray(self.parts[shard][row - self.offsets[shard]][columns])
        return self._gather(self._rows(rows))[:, columns]

    def _rows(self, rows) -> np.ndarray | slice:
        """[n] row numbers (non-negative), or a slice of step 1 (gathered shard by shard, without an index)."""
        if isinstance(rows, slice):
            start, stop, step = rows.indices(len(self))
            return slice(start, max(start, stop)) if step == 1 else np.arange(start, stop, step)
        index = np.asarray(rows)
        if index.dtype == bool:
            if index.shape != (len(self),):
                raise IndexError(f"a boolean index of shape {index.shape} for {len(self)} rows")
            return np.flatnonzero(index)
        index = index.astype(np.int64).ravel()
        if len(index) and (index.min() < -len(self) or index.max() >= len(self)):
            raise IndexError(f"row index out of range for {len(self)} rows")
        return np.where(index < 0, index + len(self), index)

    def _gather(self, rows: np.ndarray | slice) -> np.ndarray:
        if isinstance(rows, slice):
            pieces = [
                part[max(rows.start - start, 0) : max(min(rows.stop - start, len(part)), 0)]
                for start, part in zip(self.offsets[:-1], self.parts)
            ]
            pieces = [piece for piece in pieces if len(piece)]
            if not pieces:
                return np.empty((0, self.shape[1]), dtype=self.dtype)
            return np.concatenate(pieces).astype(self.dtype, copy=False)
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        shard = np.searchsorted(self.offsets, rows, side="right") - 1
        for number in np.unique(shard):
            chosen = shard == number
            out[chosen] = self.parts[number][rows[chosen] - self.offsets[number]]
        return out

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[np.ndarray]:
        """The rows in order, at most ``rows`` at a time (never across a shard boundary)."""
        for part in self.parts:
            for start in range(0, len(part), rows):
                yield part[start : start + rows]
