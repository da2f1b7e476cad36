"""``mltk evaluate`` through the CLI: the artifact it writes, stdout/stderr, report formats, stdin, continual
metrics, and bad input (exit 2, one line naming the file)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


@pytest.fixture
def embeddings(tmp_path):
    """12 images with 2 captions each in en and de (de lacks image 11), captions near their image."""
    rng = np.random.default_rng(0)
    images = rng.standard_normal((12, 8)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    image_ids = [f"img{i}" for i in range(12)]
    image_path = artifacts.write_embeddings(tmp_path / "img", image_ids, images, split=["test"] * 12)
    rows, vectors = [], []
    for lang in ("en", "de"):
        for i in range(12 if lang == "en" else 11):
            for c in range(2):
                vector = images[i] + 0.5 * rng.standard_normal(8)
                vectors.append(vector / np.linalg.norm(vector))
                rows.append((f"{lang}/{i}/{c}", f"img{i}", lang, f"s{i}.{c}"))
    ids, image_of, langs, caption_ids = map(list, zip(*rows))
    text_path = artifacts.write_embeddings(tmp_path / "txt", ids, np.array(vectors, np.float32), image_id=image_of,
                                           lang=langs, caption_id=caption_ids)
    return image_path, text_path


def test_evaluate_writes_a_metrics_artifact_and_prints_only_its_path(tmp_path, embeddings):
    image_path, text_path = embeddings
    out = tmp_path / "metrics"
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--texts", str(text_path),
                                 "--metric", "recall", "--metric", "mrv", "--metric", "c2c", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    metrics = artifacts.load_metrics(out)
    assert set(metrics["per_language"]) == {"en", "de"}
    for entry in metrics["per_language"].values():
        assert set(entry) == {"i2t", "t2i", "AR"}
        assert set(entry["i2t"]) == {"R@1", "R@5", "R@10", "median_rank", "mean_rank"}
        recalls = [entry[d][f"R@{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)]
        assert entry["AR"] == pytest.approx(sum(recalls) / 6)
    assert metrics["mrv"]["instances"] == {"i2t": 11, "t2i": 22}
    assert metrics["mrv"]["excluded_instances"] == {"i2t": 1, "t2i": 2}
    assert set(metrics["c2c"]["de-en"]) >= {"de->en", "en->de"}
    assert metrics["settings"]["counts"]["per_language"]["de"] == {"i2t_queries": 11, "t2i_queries": 22}
    assert "Retrieval per language" in result.stderr and "MRV" in result.stderr
    assert artifacts.read_manifest(out)["inputs"][0]["path"] == str(image_path)


@pytest.mark.parametrize("report_format, name, marker", [("markdown", "metrics.md", "| lang |"),
                                                          ("csv", "metrics.csv", "Retrieval per language: lang")])
def test_report_formats_are_written_into_the_artifact_and_shown(tmp_path, embeddings, report_format, name, marker):
    image_path, text_path = embeddings
    out = tmp_path / "m"
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--texts", str(text_path),
                                 "--format", report_format, "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    text = (out / name).read_text(encoding="utf-8")
    assert marker in text and marker in result.stderr
    en = artifacts.load_metrics(out)["per_language"]["en"]
    assert f"{en['AR']:.2f}" in text if report_format == "markdown" else str(round(en["AR"], 6)) in text


def test_images_path_from_stdin_and_split_and_language_selection(tmp_path, embeddings):
    image_path, text_path = embeddings
    out = tmp_path / "m"
    result = runner.invoke(app, ["evaluate", "--images", "-", "--texts", str(text_path), "--split", "test",
                                 "--lang", "de", "--out", str(out), "--json"], input=f"{image_path}\n")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["path"] == str(out.resolve())
    metrics = artifacts.load_metrics(out)
    assert list(metrics["per_language"]) == ["de"] and metrics["settings"]["split"] == "test"


def test_continual_metrics_from_a_sequence_of_metrics_artifacts(tmp_path):
    runs = []
    for j, row in enumerate([{"fr": 50.0}, {"fr": 40.0, "de": 60.0}]):
        per_language = {lang: {"i2t": {"R@1": 0.0}, "t2i": {"R@1": value}, "AR": 0.0} for lang, value in row.items()}
        runs.append(artifacts.write_metrics(tmp_path / f"run{j}", {"per_language": per_language}))
    out = tmp_path / "continual"
    result = runner.invoke(app, ["evaluate", "--continual", str(runs[0]), "--continual", str(runs[1]),
                                 "--task", "fr,de", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    continual = artifacts.load_metrics(out)["continual"]
    assert continual["matrix"] == [[50.0, None], [40.0, 60.0]]
    assert continual["AR"] == [50.0, 50.0] and continual["F"] == [None, 10.0]
    assert "Continual" in result.stderr


def _one_error_line(result, *fragments):
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def test_missing_file_is_exit_2_naming_it(tmp_path, embeddings):
    image_path, _ = embeddings
    missing = tmp_path / "nope"
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--texts", str(missing),
                                 "--out", str(tmp_path / "m")])
    _one_error_line(result, str(missing), "no such file")


def test_wrong_artifact_kind_is_exit_2_naming_it(tmp_path, embeddings):
    image_path, text_path = embeddings
    metrics_path = artifacts.write_metrics(tmp_path / "not-embeddings", {"per_language": {}})
    result = runner.invoke(app, ["evaluate", "--images", str(metrics_path), "--texts", str(text_path),
                                 "--out", str(tmp_path / "m")])
    _one_error_line(result, str(metrics_path), "expected embeddings")
    assert not (tmp_path / "m").exists()


def test_text_embeddings_without_caption_columns_are_exit_2(tmp_path, embeddings):
    image_path, _ = embeddings
    bare = artifacts.write_embeddings(tmp_path / "bare", ["a", "b"], np.eye(2, 8, dtype=np.float32))
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--texts", str(bare),
                                 "--out", str(tmp_path / "m")])
    _one_error_line(result, str(bare), "image_id")


@pytest.mark.parametrize("options, fragment", [
    (["--metric", "ndcg"], "unknown --metric ndcg"),
    (["--mrv-variant", "median", "--metric", "mrv"], "--mrv-variant"),
    (["--format", "latex"], "--format"),
    (["--split", "train"], "--split train"),
    (["--c2c-pair", "en", "--metric", "c2c"], "--c2c-pair"),
])
def test_bad_option_values_are_exit_2(tmp_path, embeddings, options, fragment):
    image_path, text_path = embeddings
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--texts", str(text_path),
                                 "--out", str(tmp_path / "m"), *options])
    _one_error_line(result, fragment)


def test_texts_option_is_required(tmp_path, embeddings):
    image_path, _ = embeddings
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--out", str(tmp_path / "m")])
    _one_error_line(result, "--texts")
