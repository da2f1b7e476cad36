"""A multi-shard embeddings artifact read without a concatenated copy: ``load_embeddings(..., lazy=True)`` keeps
each shard memory-mapped behind one ``ShardedVectors`` view that indexes like the concatenated array."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mltk import artifacts
from mltk.artifacts.sharded import ShardedVectors


@pytest.fixture
def sharded(tmp_path):
    vectors = np.random.default_rng(3).standard_normal((23, 4)).astype(np.float32)
    path = artifacts.write_embeddings(tmp_path / "e", [f"r{i}" for i in range(23)], vectors, shard_size=5)
    return path, vectors


def test_lazy_load_keeps_the_shards_mapped_and_indexes_like_the_whole_array(sharded):
    path, vectors = sharded
    table, view = artifacts.load_embeddings(path, lazy=True)
    assert isinstance(view, ShardedVectors) and len(view.parts) == 5
    assert all(isinstance(part, np.memmap) for part in view.parts)  # nothing copied on load
    assert (len(view), view.shape, view.ndim, view.dtype) == (23, (23, 4), 2, np.float32)
    assert table.column("id").to_pylist() == [f"r{i}" for i in range(23)]
    mask = np.arange(23) % 3 == 0
    for key in (0, 7, -1, slice(None), slice(3, 17), slice(4, 5), slice(20, 40), slice(None, None, 4), [22, 0, 5, 5]):
        assert np.array_equal(view[key], vectors[key]), key
    assert np.array_equal(view[mask], vectors[mask])
    assert np.array_equal(view[np.array([1, 9]), 2], vectors[np.array([1, 9]), 2])
    assert np.array_equal(view[2:9, :2], vectors[2:9, :2])
    assert np.array_equal(np.asarray(view, dtype=np.float16), vectors.astype(np.float16))
    assert np.array_equal(np.concatenate(list(view.chunks(3))), vectors)
    with pytest.raises(IndexError):
        view[23]


def test_the_default_load_and_the_lazy_load_give_the_same_rows(sharded):
    path, vectors = sharded
    _, whole = artifacts.load_embeddings(path)
    _, lazy = artifacts.load_embeddings(path, lazy=True)
    assert isinstance(whole, np.ndarray) and np.array_equal(np.asarray(lazy), whole)
    assert np.array_equal(whole, vectors)


def test_a_lazily_loaded_single_shard_goes_to_torch_without_a_warning_and_a_write_never_reaches_the_file(tmp_path):
    torch = pytest.importorskip("torch")
    vectors = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = artifacts.write_embeddings(tmp_path / "e", ["a", "b", "c"], vectors)
    before = {f.name: f.read_bytes() for f in path.iterdir()}
    _, view = artifacts.load_embeddings(path, lazy=True)
    array = np.asarray(view, dtype=np.float32)  # as the training stages take it: one float32 shard, not copied
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = torch.from_numpy(array)
    tensor[0, 0] = 99.0
    assert array[0, 0] == 99.0  # the process's own page
    assert {f.name: f.read_bytes() for f in path.iterdir()} == before
    _, again = artifacts.load_embeddings(path)
    assert np.array_equal(again, vectors)
