"""``evaluate --format clip-benchmark`` read back by CLIP_benchmark's own reader (``clip_benchmark build``): the
CSV it writes holds mltk's numbers. Skipped when the ``clip_benchmark`` package is not installed."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


def _clip_benchmark_command() -> list[str] | None:
    """The installed ``clip_benchmark`` console script (beside this interpreter, or on PATH), or None."""
    beside = os.path.join(os.path.dirname(sys.executable), "clip_benchmark")
    found = beside if os.path.exists(beside) else shutil.which("clip_benchmark")
    return [found] if found else None


def _main_build():
    """CLIP_benchmark's ``build`` command as a function (``main_build(args)``), or None when not importable."""
    try:
        from clip_benchmark.cli import main_build
    except ImportError:
        return None
    return main_build


CLIP_BENCHMARK = _clip_benchmark_command()
MAIN_BUILD = _main_build()
needs_reader = pytest.mark.skipif(
    MAIN_BUILD is None,
    reason="clip_benchmark is not installed (pip install clip-benchmark; its import also needs requests)",
)


def _build(files: list[str], output) -> None:
    MAIN_BUILD(argparse.Namespace(files=files, output=str(output)))


def _embeddings(tmp_path):
    """10 images with one caption each in en and de, captions near their image (unit vectors)."""
    rng = np.random.default_rng(3)
    images = rng.standard_normal((10, 8)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    ids = [f"img{i}" for i in range(10)]
    image_path = artifacts.write_embeddings(tmp_path / "img", ids, images)
    vectors = np.vstack([images + 0.6 * rng.standard_normal((10, 8)) for _ in ("en", "de")]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    text_path = artifacts.write_embeddings(
        tmp_path / "texts",
        [f"{lang}{i}" for lang in ("en", "de") for i in range(10)],
        vectors,
        image_id=ids * 2,
        lang=["en"] * 10 + ["de"] * 10,
        caption_id=[f"s{i}" for i in range(10)] * 2,
    )
    return image_path, text_path


def _evaluate(tmp_path):
    image_path, text_path = _embeddings(tmp_path)
    out = tmp_path / "m"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--format",
            "clip-benchmark",
            "--dataset",
            "toy",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    return out


def test_the_results_folder_holds_only_result_files_with_string_names(tmp_path):
    out = _evaluate(tmp_path)
    folder = out / "clip_benchmark"
    assert sorted(p.name for p in folder.iterdir()) == ["de.json", "en.json"]
    for path in folder.iterdir():
        record = json.loads(path.read_text())
        assert set(record) == {"dataset", "model", "pretrained", "task", "metrics", "language"}
        assert all(isinstance(record[key], str) for key in ("dataset", "model", "pretrained", "task", "language"))
    assert not list(out.glob("clip_benchmark_*.json"))  # nothing beside manifest.json for the reader to trip on
    assert artifacts.read_manifest(out)["kind"] == "metrics"  # the subfolder is listed and checked like any file


@needs_reader
@pytest.mark.parametrize("given", ["folder", "files"])
def test_clip_benchmark_build_reads_mltk_output_into_its_csv(tmp_path, given):
    out = _evaluate(tmp_path)
    folder = out / "clip_benchmark"
    files = [str(folder)] if given == "folder" else sorted(str(p) for p in folder.glob("*.json"))
    _build(files, tmp_path / "benchmark.csv")
    _assert_csv_holds_mltk_numbers(tmp_path / "benchmark.csv", out)


def _assert_csv_holds_mltk_numbers(csv_path, out) -> None:
    rows = {row["language"]: row for row in csv.DictReader(csv_path.open())}
    assert set(rows) == {"en", "de"}
    metrics = artifacts.load_metrics(out)
    for lang, row in rows.items():
        entry = metrics["per_language"][lang]
        assert row["dataset"] == "toy" and row["task"] == "zeroshot_retrieval"
        assert row["model_fullname"] == f"{row['model']} {row['pretrained']}"
        for k in (1, 5, 10):
            assert float(row[f"image_retrieval_recall@{k}"]) == pytest.approx(entry["t2i"][f"R@{k}"] / 100)
            assert float(row[f"text_retrieval_recall@{k}"]) == pytest.approx(entry["i2t"][f"R@{k}"] / 100)


@needs_reader
def test_the_artifact_folder_itself_is_not_a_results_folder(tmp_path):
    """What the issue saw: the reader given the artifact fails on mltk's own manifest.json / metrics.json. The
    results live in the subfolder for that reason."""
    out = _evaluate(tmp_path)
    with pytest.raises(KeyError, match="metrics"):
        _build([str(out)], tmp_path / "x.csv")


@pytest.mark.slow
@pytest.mark.skipif(CLIP_BENCHMARK is None, reason="the clip_benchmark command is not installed")
def test_the_clip_benchmark_command_in_a_subprocess(tmp_path):
    out = _evaluate(tmp_path)
    csv_path = tmp_path / "benchmark.csv"
    done = subprocess.run(
        [*CLIP_BENCHMARK, "build", str(out / "clip_benchmark"), "--output", str(csv_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _assert_csv_holds_mltk_numbers(csv_path, out)
