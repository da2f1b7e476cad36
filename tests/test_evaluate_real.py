"""``mltk evaluate`` on the real test sets' layouts (imported from the small fixtures, with embeddings drawn near
their image): what one MRV or c2c instance is, how many there are, protocols, output formats and the overlap
warning. The instance counts asserted here are the ones quoted in the notes for each set."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.data.importers import import_dataset, merge_captions

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
runner = CliRunner()


def embed(imported: Path, out: Path, seed: int = 0, dim: int = 16) -> tuple[Path, Path]:
    """Image embeddings for every image of an import and text embeddings for every caption, each caption near
    its image (so recall is high but not perfect)."""
    rng = np.random.default_rng(seed)
    image_ids = artifacts.load_images(imported / "images").column("image_id").to_pylist()
    images = rng.standard_normal((len(image_ids), dim)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    image_path = artifacts.write_embeddings(out / "img", image_ids, images)
    captions = artifacts.load_captions(imported / "captions")
    row_of = {image_id: row for row, image_id in enumerate(image_ids)}
    image_of = captions.column("image_id").to_pylist()
    vectors = images[[row_of[i] for i in image_of]] + 0.6 * rng.standard_normal((len(image_of), dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    ids = [
        f"{lang}/{cid}"
        for lang, cid in zip(captions.column("lang").to_pylist(), captions.column("caption_id").to_pylist())
    ]
    text_path = artifacts.write_embeddings(
        out / "txt",
        ids,
        vectors,
        inputs=[imported / "captions"],
        **{c: captions.column(c).to_pylist() for c in ("image_id", "lang", "caption_id", "split")},
    )
    return image_path, text_path


def evaluate(tmp_path, images, texts, *options, name="m"):
    args = [
        "evaluate",
        *(["--images", str(images)] if images else []),
        "--texts",
        str(texts),
        "--out",
        str(tmp_path / name),
        *options,
    ]
    return runner.invoke(app, args)


def test_xflickrco_mrv_instance_is_the_image(tmp_path):
    """Each language has its own caption_ids; the image is the instance (2 images have a de and a ja caption)."""
    imported = import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf")
    images, texts = embed(imported, tmp_path)
    result = evaluate(tmp_path, images, texts, "--metric", "mrv")
    assert result.exit_code == 0, result.stderr
    mrv = artifacts.load_metrics(tmp_path / "m")["mrv"]
    assert mrv["instance"] == {"i2t": "image", "t2i": "image"}
    assert mrv["instances"] == {"i2t": 2, "t2i": 2} and mrv["excluded_instances"] == {"i2t": 1, "t2i": 1}
    assert mrv["t2i"] is not None
    assert "instance" in result.stderr and "image" in result.stderr


def test_xtd10_mrv_over_all_seven_languages_including_independent_japanese(tmp_path):
    imported = import_dataset("xtd10", FIXTURES / "xtd10", tmp_path / "xtd")
    images, texts = embed(imported, tmp_path)
    result = evaluate(
        tmp_path, images, texts, "--metric", "mrv", "--metric", "c2c", "--c2c-pair", "en:de", "--c2c-pair", "en:ja"
    )
    assert result.exit_code == 0, result.stderr
    metrics = artifacts.load_metrics(tmp_path / "m")
    assert metrics["mrv"]["K"] == 7 and metrics["mrv"]["instance"]["t2i"] == "image"
    assert metrics["mrv"]["instances"] == {"i2t": 2, "t2i": 2}  # the Russian line of image 2 is empty
    assert metrics["c2c"]["en-de"]["queries"] == {"en->de": 3, "de->en": 3}
    assert metrics["c2c"]["en-ja"]["relevance"] == "image"


def test_multi30k_task2_c2c_by_image_from_text_embeddings_alone(tmp_path):
    """Five independent descriptions per image and language: a hit is a caption of the same image (AME)."""
    imported = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "m30k", splits=["test"], task="task2")
    _, texts = embed(imported, tmp_path)
    result = evaluate(tmp_path, None, texts, "--metric", "c2c", "--c2c-pair", "en:de", "--lang", "en,de")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'm').resolve()}\n"
    metrics = artifacts.load_metrics(tmp_path / "m")
    pair = metrics["c2c"]["en-de"]
    assert pair["relevance"] == "image" and pair["instances"] == 2
    assert pair["queries"] == {"en->de": 10, "de->en": 9}  # 5 en and 5 de per image, one de line empty
    assert "per_language" not in metrics and metrics["settings"]["counts"]["images"] is None
    by_id = evaluate(
        tmp_path, None, texts, "--metric", "c2c", "--c2c-pair", "en:de", "--c2c-relevance", "caption_id", name="by-id"
    )
    assert by_id.exit_code == 2 and "share no caption_id" in by_id.stderr  # no description translates another
    no_images = evaluate(tmp_path, None, texts, "--metric", "mrv", name="x")
    assert no_images.exit_code == 2 and "image embeddings" in no_images.stderr


def test_c2c_refuses_translations_mixed_with_independent_descriptions(tmp_path):
    """Multi30K's two tasks in one test split (as an earlier import-data merged them): by image, the translations'
    near-certain hits and the descriptions' frequent misses would make one number that is neither benchmark."""
    task1 = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "task1", splits=["test"])
    task2 = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "task2", task="task2")
    merged = merge_captions([task1 / "captions", task2 / "captions"], tmp_path / "both" / "captions").parent
    shutil.copytree(task1 / "images", merged / "images")
    _, texts = embed(merged, tmp_path)
    mixed = evaluate(tmp_path, None, texts, "--metric", "c2c", "--c2c-pair", "en:de")
    assert mixed.exit_code == 2 and mixed.stdout == "" and mixed.stderr.count("\n") == 1
    assert "10 of 12 en captions have no translation partner in de" in mixed.stderr  # 2 task 1, 10 task 2
    assert "--c2c-relevance caption_id" in mixed.stderr and "--task" in mixed.stderr
    by_id = evaluate(
        tmp_path, None, texts, "--metric", "c2c", "--c2c-pair", "en:de", "--c2c-relevance", "caption_id", name="by-id"
    )
    assert by_id.exit_code == 0, by_id.stderr  # task 1's translations alone
    assert artifacts.load_metrics(tmp_path / "by-id")["c2c"]["en-de"]["queries"] == {"en->de": 2, "de->en": 2}


def test_c2c_refuses_multi30k_tasks_merged_on_the_shared_data(shared_data, tmp_path):
    src = shared_data / "multi30k"
    if not (src / "task2").is_dir():
        pytest.skip(f"Multi30K task 2 not found at {src}")
    task1 = import_dataset("multi30k", src, tmp_path / "task1", splits=["test"])
    task2 = import_dataset("multi30k", src, tmp_path / "task2", task="task2")
    merged = merge_captions([task1 / "captions", task2 / "captions"], tmp_path / "both" / "captions").parent
    shutil.copytree(task1 / "images", merged / "images")
    _, texts = embed(merged, tmp_path)
    mixed = evaluate(tmp_path, None, texts, "--metric", "c2c", "--c2c-pair", "de:en")
    assert mixed.exit_code == 2 and "5000 of 6000 de captions have no translation partner in en" in mixed.stderr


def test_multi30k_task2_mrv_needs_one_caption_per_language_or_first_caption(tmp_path):
    imported = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "m30k", task="task2")
    images, texts = embed(imported, tmp_path)
    result = evaluate(tmp_path, images, texts, "--metric", "mrv")
    assert result.exit_code == 2 and result.stdout == ""
    assert "0 instances" in result.stderr and "--protocol first-caption" in result.stderr
    assert result.stderr.count("\n") == 1
    first = evaluate(tmp_path, images, texts, "--metric", "mrv", "--protocol", "first-caption", name="first")
    assert first.exit_code == 0, first.stderr
    metrics = artifacts.load_metrics(tmp_path / "first")
    assert metrics["mrv"]["instance"]["t2i"] == "image" and metrics["mrv"]["instances"] == {"i2t": 2, "t2i": 2}
    assert metrics["settings"]["counts"]["per_language"]["en"]["t2i_queries"] == 2
    assert metrics["settings"]["protocol"] == "first-caption"


def test_crossmodal3600_protocols_differ_in_queries(tmp_path):
    imported = import_dataset("crossmodal3600", FIXTURES / "crossmodal3600", tmp_path / "xm")
    images, texts = embed(imported, tmp_path)
    counts = {}
    for protocol in ("all-captions", "first-caption"):
        result = evaluate(tmp_path, images, texts, "--protocol", protocol, "--lang", "en", name=protocol)
        assert result.exit_code == 0, result.stderr
        counts[protocol] = artifacts.load_metrics(tmp_path / protocol)["settings"]["counts"]["per_language"]["en"]
    assert counts["all-captions"]["t2i_queries"] == 3 and counts["first-caption"]["t2i_queries"] == 2


def test_clip_benchmark_json_and_tidy_long_csv(tmp_path):
    imported = import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf")
    images, texts = embed(imported, tmp_path)
    result = evaluate(
        tmp_path, images, texts, "--format", "clip-benchmark", "--dataset", "xflickrco", "--metric", "mrv"
    )
    assert result.exit_code == 0, result.stderr
    metrics = artifacts.load_metrics(tmp_path / "m")
    record = json.loads((tmp_path / "m" / "clip_benchmark" / "ja.json").read_text())
    assert set(record) == {"dataset", "model", "pretrained", "task", "metrics", "language"}
    assert isinstance(record["model"], str) and isinstance(record["pretrained"], str)
    assert record["dataset"] == "xflickrco" and record["language"] == "ja" and record["task"] == "zeroshot_retrieval"
    ja = metrics["per_language"]["ja"]
    for k in (1, 5, 10):
        assert record["metrics"][f"image_retrieval_recall@{k}"] == pytest.approx(ja["t2i"][f"R@{k}"] / 100)
        assert record["metrics"][f"text_retrieval_recall@{k}"] == pytest.approx(ja["i2t"][f"R@{k}"] / 100)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "m" / "metrics_long.csv").read_text())))
    assert list(rows[0]) == ["language", "direction", "metric", "value"]
    value = {(r["language"], r["direction"], r["metric"]): r["value"] for r in rows}
    assert float(value[("de", "t2i", "R@5")]) == pytest.approx(metrics["per_language"]["de"]["t2i"]["R@5"])
    assert int(value[("all", "t2i", "MRV_instances")]) == 2
    assert all(len(r) == 4 and r["value"] != "" for r in rows)  # one tidy table: one read_csv away


def test_check_overlap_and_the_evaluate_warning(tmp_path):
    """About 800 of XTD10's images are COCO train2014 pictures that COCO-based training sets contain."""
    xtd = import_dataset("xtd10", FIXTURES / "xtd10", tmp_path / "xtd")
    tsv = tmp_path / "coco_de_train.tsv"
    tsv.write_text(
        "Ein Flugzeug über einer Straße.\ttrain2014/COCO_train2014_000000000081.jpg\n"
        "Ein Hund.\ttrain2014/COCO_train2014_000000000009.jpg\n",
        encoding="utf-8",
    )
    train = import_dataset("cc", tsv, tmp_path / "train") / "captions"
    result = runner.invoke(app, ["check-overlap", str(train), str(xtd / "captions"), "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["overlapping"] == 1 and report["test_images"] == 3 and report["examples"] == ["coco:000000000081"]
    assert "1 of 3 test images" in result.stderr
    result = runner.invoke(app, ["check-overlap", str(train), str(xtd / "captions"), "--out", str(tmp_path / "o")])
    assert result.stdout == f"{(tmp_path / 'o').resolve()}\n"
    assert artifacts.load_metrics(tmp_path / "o")["overlap"]["shared_image_ids"] == ["coco:000000000081"]
    # a model trained on those captions, whose text embeddings are evaluated on XTD10
    checkpoint = artifacts.write_checkpoint(
        tmp_path / "ckpt", {"w": torch.zeros(1)}, {"base": "x"}, stage="train-le", inputs=[train]
    )
    images, texts = embed(xtd, tmp_path / "e")
    table, vectors = artifacts.load_embeddings(texts)
    texts = artifacts.write_embeddings(
        tmp_path / "t2",
        table.column("id").to_pylist(),
        vectors,
        inputs=[checkpoint, xtd / "captions"],
        **{c: table.column(c).to_pylist() for c in ("image_id", "lang", "caption_id")},
    )
    result = evaluate(tmp_path, images, texts)
    assert result.exit_code == 0, result.stderr
    assert "evaluate: warning: 1 of 3 test images" in result.stderr
    overlap = artifacts.load_metrics(tmp_path / "m")["settings"]["overlap_with_training_data"]
    assert overlap["overlapping"] == 1 and overlap["train"] == [str(train.resolve())]
