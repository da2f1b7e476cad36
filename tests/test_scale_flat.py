"""import-data lines (with and without ``--translation-of``) and merge-captions hold a batch, not the rows: with
small line blocks, row groups, read batches, hash bounds, hash blocks and join partitions
(``helpers_flat_memory.SMALL``), four times the rows peak at the same memory, Arrow's pool and what tracemalloc sees
(numpy, Python) alike, each measured in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers_scale import write_corpus

from mltk import artifacts
from mltk.artifacts import caption_stream, key_hashes, table_stream
from mltk.data import overlap
from mltk.data.importers import common, import_dataset, lines
from mltk.data.overlap import check_overlap

TESTS = Path(__file__).resolve().parent
FLAT_STAGES = ("import en", "import de", "merge")


def _peaks(images: int, work: Path) -> dict[str, list[int]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    done = subprocess.run(
        [sys.executable, str(TESTS / "helpers_flat_memory.py"), str(images), str(work)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def peaks(tmp_path_factory) -> tuple[dict, dict]:
    work = tmp_path_factory.mktemp("flat")
    return _peaks(1500, work / "small"), _peaks(6000, work / "large")


@pytest.mark.parametrize("stage", FLAT_STAGES)
def test_peak_memory_does_not_follow_the_rows(peaks, stage):
    """``import de`` is the translated import (``--translation-of en --parent``): its join with the parent's
    caption_ids is partitioned on disk (``parent_join.PARTITION_ROWS``), where it held them all."""
    small, large = peaks
    for kind, (low, high) in zip(("Arrow pool", "tracemalloc"), zip(small[stage], large[stage])):
        assert high <= 1.1 * low + 32_768, f"{stage}: {kind} peak {low} bytes at 1,500 images, {high} at 6,000"


def _colliding(column):
    """Every string hashes to the same number: the image list looks repeated, so it is read whole."""
    return np.zeros(len(column), np.uint64)


def _import_pair(root: Path, corpus: dict, split: str = "train") -> dict[str, bytes]:
    common = {"image_list": corpus["images"], "splits": [split], "images_root": "/images"}
    en = import_dataset("lines", corpus["en"], root / "en", lang="en", **common)
    de = import_dataset(
        "lines", corpus["de"], root / "de", lang="de", translation_of="en", parent=en / "captions", **common
    )
    files = [en / "captions/captions.parquet", en / "images/images.parquet", de / "captions/captions.parquet"]
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in files}


@pytest.mark.parametrize("flickr", [True, False])
def test_a_list_without_repeats_is_streamed_and_writes_what_the_whole_list_writes(tmp_path, monkeypatch, flickr):
    corpus = write_corpus(tmp_path / "corpus", 300, seed=12, flickr_names=flickr, repeat_an_image=False)
    with monkeypatch.context() as patch:
        patch.setattr(key_hashes, "string_hashes", _colliding)
        whole = _import_pair(tmp_path / "whole", corpus)
    monkeypatch.setattr(lines, "read_lines_array", None)  # the streamed import never reads the list whole
    monkeypatch.setattr(common, "LINE_BLOCK_BYTES", 256)
    monkeypatch.setattr(table_stream, "ROW_GROUP_ROWS", 1000)  # above the rows: one row group, the same bytes
    assert _import_pair(tmp_path / "streamed", corpus) == whole


def test_a_name_past_the_first_blocks_that_is_no_flickr_id_drops_the_namespace(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus", 200, seed=13, repeat_an_image=False)
    names = corpus["images"].read_text().splitlines()
    names[-1] = "photo_a.jpg"
    corpus["images"].write_text("\n".join(names) + "\n")
    with monkeypatch.context() as patch:
        patch.setattr(key_hashes, "string_hashes", _colliding)
        whole = _import_pair(tmp_path / "whole", corpus)
    monkeypatch.setattr(common, "LINE_BLOCK_BYTES", 64)
    streamed = _import_pair(tmp_path / "streamed", corpus)
    assert streamed == whole
    ids = artifacts.load_images(tmp_path / "streamed" / "en" / "images").column("image_id").to_pylist()
    assert ids[0] == "1000" and ids[-1] == "photo_a"


def test_distinct_counter_spills_to_files_and_counts_the_same(monkeypatch):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 5000, size=20_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    monkeypatch.setattr(key_hashes, "SPILL_VALUES", 300)
    counter = key_hashes.DistinctCounter()
    for start in range(0, len(values), 700):
        counter.add(values[start : start + 700])
    folder = Path(counter._folder.name)
    assert len(list(folder.iterdir())) > 10  # one sorted run per spill
    assert counter.distinct() == len(np.unique(values))
    assert not folder.exists()
    repeats = key_hashes.DistinctCounter()
    repeats.add(np.arange(1000, dtype=np.uint64))
    spilled = Path(repeats._folder.name)
    assert repeats.all_distinct() and not spilled.exists()
    dropped = key_hashes.DistinctCounter()
    dropped.add(np.arange(1000, dtype=np.uint64))
    spilled = Path(dropped._folder.name)
    dropped.discard()  # a scan that starts again leaves no files
    assert not spilled.exists()


def test_check_overlap_reads_captions_a_batch_at_a_time(tmp_path, monkeypatch):
    """Training rows that only appear in a late batch still restrict the training ids to them."""
    rows = 400
    table = pa.table(
        {
            "image_id": [f"img{i}" for i in range(rows)],
            "lang": ["en"] * rows,
            "caption": ["a caption"] * rows,
            "caption_id": [f"c{i}" for i in range(rows)],
            "split": ["test"] * 300 + ["train"] * 100,
        }
    )
    train = artifacts.write_captions(tmp_path / "train", table)
    test = artifacts.write_captions(tmp_path / "test", table.slice(250, 100))
    expected = check_overlap([train], [test])
    monkeypatch.setattr(caption_stream, "READ_BATCH_ROWS", 64)
    monkeypatch.setattr(overlap.artifacts, "load_captions", None)  # no whole table is read
    streamed = check_overlap([train], [test])
    assert streamed == expected and (streamed.train_images, streamed.overlapping) == (100, 50)
