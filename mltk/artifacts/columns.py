"""Counting and matching rows of Arrow columns without a Python object per row: what the importers, merge and
check-overlap need to stay at Arrow's speed on tens of millions of captions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def value_counts(column: pa.Array | pa.ChunkedArray) -> dict:
    """``dict(Counter(column.to_pylist()))``: each value's count, values in order of first appearance."""
    counts = pc.value_counts(column)
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))


def key_codes(*columns: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """[rows] int64: one number per distinct combination of the columns' values (numbered by first appearance of
    each column's value, so equal keys get equal numbers)."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.unify_dictionaries() if encoded.num_chunks > 1 else encoded
            indices = np.concatenate(
                [chunk.indices.to_numpy(zero_copy_only=False) for chunk in encoded.chunks] or [np.zeros(0, np.int64)]
            )
            size = len(encoded.chunk(0).dictionary) if encoded.num_chunks else 0
        else:
            indices, size = encoded.indices.to_numpy(zero_copy_only=False), len(encoded.dictionary)
        combined = combined * max(size, 1) + indices.astype(np.int64)
        if len(columns) > 1:  # renumber densely so that the product of sizes never overflows
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64).reshape(-1)
    return combined


def first_rows(*columns: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """[rows] int64: for each row, the index of the first row with the same values in ``columns``."""
    codes = key_codes(*columns)
    if len(codes) == 0:
        return codes
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)].astype(np.int64)


def later_repeats(*columns: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Indices (ascending) of the rows whose key in ``columns`` an earlier row already has."""
    first = first_rows(*columns)
    return np.flatnonzero(first != np.arange(len(first)))
