"""Run by ``tests/test_scale_flat.py`` in a process of its own: the data stages on a corpus, with small blocks, row
groups, batches, hash bounds and join partitions; prints each stage's peak memory (Arrow's pool, and what
tracemalloc sees: numpy and Python), in bytes."""

from __future__ import annotations

import importlib
import json
import sys
import tracemalloc
from pathlib import Path

import pyarrow as pa

SMALL = {
    "mltk.data.importers.common": {"LINE_BLOCK_BYTES": 2048},
    "mltk.artifacts.table_stream": {"ROW_GROUP_ROWS": 256},
    "mltk.artifacts.caption_stream": {"READ_BATCH_ROWS": 256},
    "mltk.artifacts.key_hashes": {"SPILL_VALUES": 2500},  # below the smaller run's 2,948 German rows
    "mltk.artifacts.integrity": {"HASH_BLOCK": 4096},
    "mltk.data.importers.parent_join": {"PARTITION_ROWS": 1024},
}


def main() -> None:
    from helpers_scale import write_corpus

    from mltk.data.importers import import_dataset, merge_captions
    from mltk.data.overlap import run_check_overlap

    for name, values in SMALL.items():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for key, value in values.items():
            setattr(module, key, value)
    images, work = int(sys.argv[1]), Path(sys.argv[2])
    corpus = write_corpus(work / "corpus", images, seed=11, repeat_an_image=False)
    common = {"image_list": corpus["images"], "splits": ["train"], "images_root": "/images"}
    stages = {
        "import en": lambda: import_dataset("lines", corpus["en"], work / "en", lang="en", **common),
        "import de": lambda: import_dataset(
            "lines", corpus["de"], work / "de", lang="de", translation_of="en", parent=work / "en/captions", **common
        ),
        "merge": lambda: merge_captions([work / "en/captions", work / "de/captions"], work / "merged"),
        "check-overlap": lambda: run_check_overlap(work / "merged", work / "de/images", work / "overlap"),
    }
    base = pa.default_memory_pool()
    tracemalloc.start()
    peaks, pools = {}, []  # every proxy pool lives to the end: buffers it gave out may outlive the stage
    for stage, run in stages.items():
        pool = pa.proxy_memory_pool(base)
        pools.append(pool)
        pa.set_memory_pool(pool)
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        run()
        peaks[stage] = (pool.max_memory(), tracemalloc.get_traced_memory()[1] - before)
        pa.set_memory_pool(base)
    print(json.dumps(peaks))


if __name__ == "__main__":
    main()
