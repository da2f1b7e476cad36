"""Benchmark ``mltk index`` query throughput against raw FAISS on the same vectors.

50,000 random L2-normalised 512-d vectors are written as an embeddings artifact and indexed with
``mltk index build`` (``mltk.index.faiss_index.build_index``); raw FAISS builds its own ``IndexFlatIP`` over the same
normalised vectors. 1,000 query vectors are searched for their top 10, alternating mltk
(``OpenIndex.search``: normalise the queries, search, map positions to ids) and raw ``index.search``;
medians are reported. The exact index must return the same top-K ids as raw FAISS. An HNSW index is timed the
same way (mltk's loaded index against raw ``search`` on that same FAISS object).

    .venv/bin/python benchmarks/index.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from mltk import artifacts
from mltk.index.faiss_index import IndexConfig, build_index, open_index


def timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    return time.perf_counter() - start, value


def compare(name: str, mltk_search, raw_search, queries: np.ndarray, k: int, repeats: int):
    """Alternate mltk and raw searches; print throughput and return both results of the last run."""
    mltk_times, raw_times = [], []
    normalised = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    for _ in range(repeats):
        seconds, ours = timed(mltk_search, queries, k)
        mltk_times.append(seconds)
        seconds, raw = timed(raw_search, normalised, k)
        raw_times.append(seconds)
    mltk_qps = len(queries) / statistics.median(mltk_times)
    raw_qps = len(queries) / statistics.median(raw_times)
    print(
        f"  {name:5s}: mltk {mltk_qps:10.0f} queries/s, raw FAISS {raw_qps:10.0f} queries/s, "
        f"ratio {mltk_qps / raw_qps:.3f} (target >= 0.9)"
    )
    return ours, raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.count, args.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    ids = [f"v{i}" for i in range(args.count)]
    print(
        f"{args.count:,} vectors, {args.queries:,} queries, dim {args.dim}, top {args.k}, faiss threads "
        f"{faiss.omp_get_max_threads()}, {args.repeats} alternating runs each"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        embeddings = artifacts.write_embeddings(tmp / "emb", ids, vectors)
        flat = open_index(build_index(IndexConfig(embeddings=embeddings, out=tmp / "flat")))
        raw = faiss.IndexFlatIP(args.dim)
        raw.add(vectors)

        def raw_flat(q, k):
            return raw.search(q, k)

        ours, (raw_scores, raw_positions) = compare("flat", flat.search, raw_flat, queries, args.k, args.repeats)
        same_ids = all(result_ids == [ids[p] for p in row] for (result_ids, _), row in zip(ours, raw_positions))
        score_gap = max(float(np.abs(np.float32(scores) - row).max()) for (_, scores), row in zip(ours, raw_scores))
        print(
            f"  exact index: identical top-{args.k} ids {same_ids}; largest score difference {score_gap:.1e} "
            "(queries and vectors normalised by faiss.normalize_L2 in mltk, by numpy here)"
        )

        hnsw = open_index(build_index(IndexConfig(embeddings=embeddings, out=tmp / "hnsw", kind="hnsw")))

        def raw_hnsw(q, k):
            return hnsw.index.search(q, k)

        compare("hnsw", hnsw.search, raw_hnsw, queries, args.k, args.repeats)
    if not same_ids or score_gap > 1e-5:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
