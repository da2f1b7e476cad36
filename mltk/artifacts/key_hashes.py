"""64-bit hashes of Arrow string columns, computed in numpy on Arrow's own buffers (no Python object per row).

What lets merge-captions, import-data and the streamed captions writer check that a key is unique, or that a key
has one value, with 8 bytes per row instead of the strings, while the rows themselves pass through a batch at a
time. A hash is a tabulated polynomial over the bytes (a random 64-bit number per byte value, times a fixed odd
multiplier to the power of the byte's position, summed modulo 2**64), plus the length, through splitmix64's
finaliser. Equal strings always hash equal, so a repeat is never missed; two different strings hash equal with a
chance of about 2**-64 per pair, so a caller that finds a repeat confirms it on the strings before refusing.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_BYTE_VALUES = np.random.default_rng(0x6D6C746B).integers(0, 2**63, size=256, dtype=np.uint64) * np.uint64(2) + 1
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_LENGTH = np.uint64(0xD6E8FEB86659FD93)
_SLICE_BYTES = 1 << 18  # bytes hashed at once: the temporaries stay a few MB whatever the batch
SPILL_VALUES = 1 << 18  # hashes a ``DistinctCounter`` holds in memory (2 MB) before it moves them to disk
SPILL_BUCKETS = 256  # ranges of values (by their top 8 bits) a spilled counter sorts one at a time


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64), in place."""
    values ^= values >> np.uint64(30)
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def _inverse(odd: int) -> int:
    """The inverse of an odd number modulo 2**64 (Newton's iteration doubles the correct bits each step)."""
    inverse = odd
    for _ in range(6):
        inverse = inverse * (2 - odd * inverse) % 2**64
    return inverse


_POWERS: list[np.ndarray] = []


def _power_tables() -> tuple[np.ndarray, np.ndarray]:
    """[_SLICE_BYTES + 1] uint64 each: the multiplier to the powers 0, 1, ... and its inverse to the same powers."""
    if not _POWERS:
        for base in (int(_MULTIPLIER), _inverse(int(_MULTIPLIER))):
            powers = np.full(_SLICE_BYTES + 1, base, dtype=np.uint64)
            powers[0] = 1
            _POWERS.append(np.cumprod(powers, dtype=np.uint64))
    return _POWERS[0], _POWERS[1]


def string_hashes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """[rows] uint64: the hash of each string of ``column`` (a null hashes as the empty string)."""
    if isinstance(column, pa.ChunkedArray):
        parts = [string_hashes(chunk) for chunk in column.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    if not pa.types.is_large_string(column.type):
        column = column.cast(pa.large_string())
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[column.offset : column.offset + len(column) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    hashes = np.empty(len(column), dtype=np.uint64)
    start = 0
    while start < len(column):
        stop = int(np.searchsorted(offsets, offsets[start] + _SLICE_BYTES, side="right")) - 1
        stop = min(max(stop, start + 1), len(column))
        hashes[start:stop] = _hash_slice(offsets[start : stop + 1], data)
        start = stop
    return hashes


def few_string_hashes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``string_hashes`` of a column of few distinct strings (a language): each distinct string hashed once."""
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks != 1 else encoded.chunk(0)
    if encoded.null_count:
        return string_hashes(column)
    return string_hashes(encoded.dictionary)[encoded.indices.to_numpy(zero_copy_only=False)]


def _hash_slice(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Hashes of the strings ``data[offsets[i]:offsets[i + 1]]`` (at most ``_SLICE_BYTES`` bytes in all, or one
    string): byte j of the slice weighs the multiplier to the power j, and each string's sum is brought back to
    its own first byte by the inverse power of where it starts, so no per-byte position is computed."""
    base = offsets[0]
    text = data[base : offsets[-1]]
    if len(text) > _SLICE_BYTES:  # one string longer than a slice: hashed on its own
        terms = _BYTE_VALUES[text] * _power_series(len(text))
        hashes = np.array([terms.sum(dtype=np.uint64), len(text)], dtype=np.uint64)
        hashes[1:] *= _LENGTH
        return _mix(hashes[:1] + hashes[1:])
    powers, inverse_powers = _power_tables()
    terms = _BYTE_VALUES[text]
    terms *= powers[: len(text)]
    sums = np.zeros(len(text) + 1, np.uint64)
    np.cumsum(terms, dtype=np.uint64, out=sums[1:])
    starts, ends = offsets[:-1] - base, offsets[1:] - base
    hashes = (sums[ends] - sums[starts]) * inverse_powers[starts]
    hashes += (ends - starts).astype(np.uint64) * _LENGTH
    return _mix(hashes)


def _power_series(count: int) -> np.ndarray:
    powers = np.full(count, _MULTIPLIER, dtype=np.uint64)
    powers[0] = 1
    return np.cumprod(powers, dtype=np.uint64)


def combine(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """[rows] uint64: one hash per row for a pair of hashed columns (order matters)."""
    return _mix(first * _MULTIPLIER + second)


def distinct_sorted(values: np.ndarray) -> int:
    """How many distinct values ``values`` holds; sorts it in place (no copy)."""
    if len(values) == 0:
        return 0
    values.sort()
    return 1 + int(np.count_nonzero(values[1:] != values[:-1]))


class DistinctCounter:
    """How many distinct uint64 values arrive in pieces, in memory bounded by ``SPILL_VALUES`` values rather than by
    their number: past that bound the values held are sorted and written to a temporary file (a run), with where
    each of ``SPILL_BUCKETS`` ranges of values (by their top bits) starts in it; ``distinct`` then gathers one
    range from every run at a time, memory-mapped, and sorts it alone (distinct counts add up over disjoint ranges
    of values). On the hashes of 120 million rows that is 2 MB held while adding (and 2 KB per run of
    ``SPILL_VALUES``, 1 MB in all) and about 4 MB per range when counting, where a single array would be 960 MB."""

    def __init__(self) -> None:
        self.total = 0
        self._held: list[np.ndarray] = []
        self._held_values = 0
        self._folder: tempfile.TemporaryDirectory | None = None
        self._runs: list[tuple[str, np.ndarray]] = []  # (file, [SPILL_BUCKETS + 1] where each range starts)

    def add(self, values: np.ndarray) -> None:
        self._held.append(np.asarray(values, dtype=np.uint64))
        self._held_values += len(values)
        self.total += len(values)
        if self._held_values > SPILL_VALUES:
            self._spill()

    def _take_held(self) -> np.ndarray:
        values = np.concatenate(self._held) if self._held else np.zeros(0, np.uint64)
        self._held, self._held_values = [], 0
        return values

    def _spill(self) -> None:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="mltk-hashes-")
        values = self._take_held()
        values.sort()
        bits = int(SPILL_BUCKETS - 1).bit_length()
        edges = np.searchsorted(values >> np.uint64(64 - bits), np.arange(SPILL_BUCKETS + 1, dtype=np.uint64))
        file = os.path.join(self._folder.name, f"run-{len(self._runs):06d}")
        values.tofile(file)
        self._runs.append((file, edges))

    def distinct(self) -> int:
        """The number of distinct values added; the counter is empty afterwards (its files removed)."""
        if self._folder is None:
            return distinct_sorted(self._take_held())
        self._spill()
        try:
            runs = [(np.memmap(file, dtype=np.uint64, mode="r"), edges) for file, edges in self._runs if edges[-1]]
            count = 0
            for bucket in range(SPILL_BUCKETS):
                parts = [run[edges[bucket] : edges[bucket + 1]] for run, edges in runs]
                count += distinct_sorted(np.concatenate(parts)) if parts else 0
            del runs, parts
            return count
        finally:
            self.discard()

    def discard(self) -> None:
        """Forget the values added (and remove their files) without counting them."""
        self._held, self._held_values, self._runs = [], 0, []
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def all_distinct(self) -> bool:
        """No value was added twice (``distinct`` against the count added)."""
        total = self.total
        return self.distinct() == total
