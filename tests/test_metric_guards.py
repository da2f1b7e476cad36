"""Metrics that must not be silently wrong: degenerate embeddings (zero, constant, not unit
length under ``normalized: true``, NaN/inf from a float16 overflow) and image and text embeddings from two
models are refused with one line naming the file, or scored with ``--force`` and listed in ``warnings``; ties
count against the ground truth and are counted; empty captions, a caption_id on two images and NUL bytes never
reach an encoder or a vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ArtifactError, SchemaError
from mltk.metrics.retrieval import evaluate_retrieval

runner = CliRunner()
N, D = 12, 8


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def world(tmp_path):
    """Unit image vectors and one English caption per image near it; returns (image artifact, text artifact)."""
    rng = np.random.default_rng(0)
    images = _unit(rng.standard_normal((N, D)))
    ids = [f"img{i}" for i in range(N)]
    image_path = artifacts.write_embeddings(tmp_path / "img", ids, images)
    text_path = _texts(tmp_path / "txt", _unit(images + 0.3 * rng.standard_normal((N, D))))
    return image_path, text_path, images


def _texts(path, vectors, caption_ids=None, **kw):
    ids = [f"img{i}" for i in range(N)]
    return artifacts.write_embeddings(
        path,
        [f"en{i}" for i in range(N)],
        vectors,
        image_id=ids,
        lang=["en"] * N,
        caption_id=caption_ids or [f"s{i}" for i in range(N)],
        **kw,
    )


def _evaluate(tmp_path, images, texts, *extra, name="m"):
    result = runner.invoke(
        app, ["evaluate", "--images", str(images), "--texts", str(texts), "--out", str(tmp_path / name), *extra]
    )
    metrics = artifacts.load_metrics(tmp_path / name) if result.exit_code == 0 else None
    return result, metrics


def _refused(result, path, words):
    assert result.exit_code == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert str(path) in result.stderr and words in result.stderr


def test_all_zero_embeddings_are_refused_and_with_force_rank_last(tmp_path, world):
    _, text_path, _ = world
    zero = artifacts.write_embeddings(tmp_path / "zero", [f"img{i}" for i in range(N)], np.zeros((N, D), np.float32))
    result, _ = _evaluate(tmp_path, zero, text_path)
    _refused(result, zero, "are all zero")
    result, metrics = _evaluate(tmp_path, zero, text_path, "--force", name="forced")
    assert result.exit_code == 0, result.stderr
    en = metrics["per_language"]["en"]
    assert en["AR"] == 0.0 and en["i2t"]["median_rank"] == N and en["t2i"]["median_rank"] == N  # was AR 100
    assert any("are all zero" in w for w in metrics["warnings"])
    assert metrics["ties"]["per_language"]["en"] == {"i2t": N, "t2i": N}


def test_constant_embeddings_are_refused_and_do_not_score_100(tmp_path, world):
    image_path, _, images = world
    same = np.tile(images[:1], (N, 1))
    constant_images = artifacts.write_embeddings(tmp_path / "const_img", [f"img{i}" for i in range(N)], same)
    constant_texts = _texts(tmp_path / "const_txt", same)
    result, _ = _evaluate(tmp_path, constant_images, constant_texts)
    _refused(result, constant_images, "are the same")
    result, _ = _evaluate(tmp_path, image_path, constant_texts, name="texts_only")
    _refused(result, constant_texts, "are the same")
    result, metrics = _evaluate(tmp_path, constant_images, constant_texts, "--force", name="forced")
    assert result.exit_code == 0, result.stderr
    assert metrics["per_language"]["en"]["AR"] == 0.0 and len(metrics["warnings"]) == 2  # was AR 100
    assert metrics["ties"]["total"] == 2 * N and "ground truth(s) score exactly as another" in result.stderr


def test_rows_not_unit_length_under_normalized_true_are_refused(tmp_path, world):
    _, text_path, images = world
    scaled = images * np.linspace(0.2, 5, N, dtype=np.float32)[:, None]
    scaled_path = artifacts.write_embeddings(tmp_path / "scaled", [f"img{i}" for i in range(N)], scaled)
    result, _ = _evaluate(tmp_path, scaled_path, text_path)
    _refused(result, scaled_path, "not unit length")
    result, metrics = _evaluate(tmp_path, scaled_path, text_path, "--force", name="forced")
    assert result.exit_code == 0 and "normalized: true" in metrics["warnings"][0]
    # normalized: false in the manifest: normalised on reading, nothing to warn about
    honest = artifacts.write_embeddings(tmp_path / "honest", [f"img{i}" for i in range(N)], scaled, normalized=False)
    result, metrics = _evaluate(tmp_path, honest, text_path, name="honest_m")
    assert result.exit_code == 0 and metrics["warnings"] == []


def _overflowed_float16_artifact(tmp_path, images):
    """A float16 artifact whose shard holds inf (an overflow written by an older writer): same size, so it
    passes the manifest's size check."""
    path = artifacts.write_embeddings(tmp_path / "fp16", [f"img{i}" for i in range(N)], images, dtype="float16")
    shard = path / artifacts.read_manifest(path)["shards"][0]["vectors"]
    broken = images.astype(np.float16)
    broken[3] = np.inf
    with open(shard, "wb") as handle:
        np.save(handle, broken)
    return path


def test_float16_overflow_is_refused_at_write_and_at_evaluate(tmp_path, world):
    _, text_path, images = world
    with pytest.raises(ArtifactError, match="overflow float16") as caught:
        artifacts.write_embeddings(tmp_path / "big", [f"img{i}" for i in range(N)], images * 1e5, dtype="float16")
    assert str(tmp_path / "big") in str(caught.value) and not (tmp_path / "big").exists()
    overflowed = _overflowed_float16_artifact(tmp_path, images)
    result, _ = _evaluate(tmp_path, overflowed, text_path)
    _refused(result, overflowed, "NaN or infinite")
    result, metrics = _evaluate(tmp_path, overflowed, text_path, "--force", name="forced")
    assert result.exit_code == 0, result.stderr
    assert "NaN or infinite" in metrics["warnings"][0] and "zero vectors" in metrics["warnings"][0]
    assert metrics["per_language"]["en"]["i2t"]["R@10"] < 100  # image 3 scores 0 with every caption: ranked last


def test_image_and_text_embeddings_from_two_models_are_refused(tmp_path, world):
    _, _, images = world
    ids = [f"img{i}" for i in range(N)]
    image_path = artifacts.write_embeddings(
        tmp_path / "img_a", ids, images, stage="encode-images", config={"model": "ViT-B-32", "pretrained": "openai"}
    )
    text_path = artifacts.write_embeddings(
        tmp_path / "txt_b",
        [f"en{i}" for i in range(N)],
        images,
        stage="encode-texts",
        config={"model": "ViT-H-14", "pretrained": "laion"},
        image_id=ids,
        lang=["en"] * N,
        caption_id=[f"s{i}" for i in range(N)],
    )
    result, _ = _evaluate(tmp_path, image_path, text_path)
    _refused(result, image_path, "made by another model than the text embeddings")
    assert "ViT-H-14" in result.stderr and "ViT-B-32" in result.stderr
    result, metrics = _evaluate(tmp_path, image_path, text_path, "--force", name="forced")
    assert result.exit_code == 0 and "ViT-H-14" in metrics["warnings"][0]
    same = artifacts.write_embeddings(
        tmp_path / "txt_a",
        [f"en{i}" for i in range(N)],
        images,
        stage="encode-texts",
        config={"model": "ViT-B-32", "pretrained": "openai"},
        image_id=ids,
        lang=["en"] * N,
        caption_id=[f"s{i}" for i in range(N)],
    )
    result, metrics = _evaluate(tmp_path, image_path, same, name="same")
    assert result.exit_code == 0 and metrics["warnings"] == []


def test_ties_count_against_the_ground_truth_and_are_reported():
    """Two images with the same vector: each one's caption ties with the other image (t2i), and each image's
    caption ties with the other's caption (i2t). The optimistic rule gave R@1 100 for all four."""
    image_vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    text_vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    table = {"id": ["a", "b", "c"], "image_id": ["i0", "i1", "i2"], "lang": ["en"] * 3, "caption_id": ["a", "b", "c"]}
    result = evaluate_retrieval({"id": ["i0", "i1", "i2"]}, image_vectors, table, text_vectors)
    en = result["per_language"]["en"]
    assert en["i2t"]["R@1"] == pytest.approx(100 / 3) and en["t2i"]["R@1"] == pytest.approx(100 / 3)
    assert result["ties"]["per_language"]["en"] == {"i2t": 2, "t2i": 2} and result["ties"]["total"] == 4
    assert result["settings"]["tie_rule"].startswith("pessimistic") and result["ties"]["rule"].startswith("pessim")


def test_identical_captions_in_caption_to_caption_retrieval_are_ties():
    vectors = np.array([[1, 0], [1, 0], [1, 0], [1, 0]], dtype=np.float32)  # every caption the same vector
    table = {
        "id": ["e0", "e1", "d0", "d1"],
        "image_id": ["i0", "i1", "i0", "i1"],
        "lang": ["en", "en", "de", "de"],
        "caption_id": ["s0", "s1", "s0", "s1"],
    }
    result = evaluate_retrieval(None, None, table, vectors, metrics=("c2c",))
    assert result["c2c"]["de-en"]["de->en"]["R@1"] == 0.0  # the other caption ties with the hit: rank 1, not 0
    assert result["ties"]["c2c"]["de-en"] == {"de->en": 2, "en->de": 2}


def _captions(tmp_path, name, captions, caption_ids=None, image_ids=None, lang="de"):
    n = len(captions)
    table = pa.table(
        {
            "image_id": image_ids or [f"img{i}" for i in range(n)],
            "lang": [lang] * n,
            "caption": captions,
            "caption_id": caption_ids or [f"s{i}" for i in range(n)],
            "split": ["train"] * n,
        }
    )
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path)
    return path


def test_empty_and_whitespace_captions_are_dropped_with_a_warning(tmp_path, capsys):
    """Every stage that encodes or learns from text reads with drop_empty=True; the artifact keeps its rows."""
    path = _captions(tmp_path, "caps", ["ein roter kreis", "", "   ", "\t"])
    table = artifacts.load_captions(path, drop_empty=True)
    assert table.column("caption").to_pylist() == ["ein roter kreis"]
    assert "dropped 3 empty or whitespace caption(s) (de 3)" in capsys.readouterr().err
    assert artifacts.load_captions(path).num_rows == 4


def test_a_language_whose_captions_are_all_empty_is_not_evaluated(tmp_path):
    """Encoded, empty captions are one vector that ties with everything (R@1 100 under the old tie rule)."""
    from helpers_tiny import tiny_bert_folder

    bert = tiny_bert_folder(tmp_path / "bert")
    images = artifacts.write_embeddings(
        tmp_path / "img", [f"img{i}" for i in range(4)], _unit(np.random.default_rng(1).standard_normal((4, 32)))
    )
    path = _captions(tmp_path, "caps", ["", " ", "", "  "])
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(images),
            "--model",
            str(bert),
            "--captions",
            str(path),
            "--out",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 2 and str(path) in result.stderr.splitlines()[-1]
    assert "dropped 4 empty or whitespace caption(s)" in result.stderr


def test_build_vocab_on_whitespace_captions_exits_2(tmp_path):
    path = _captions(tmp_path, "caps", ["", "  ", "\u3000", " \n "])
    result = runner.invoke(app, ["build-vocab", str(path), "--lang", "de", "--out", str(tmp_path / "v")])
    assert result.exit_code == 2 and result.stdout == ""  # was exit 0 with a vocabulary of 0 new tokens
    assert str(path) in result.stderr.splitlines()[-1] and not (tmp_path / "v").exists()


def test_a_caption_id_on_two_images_is_refused(tmp_path, world):
    path = _captions(tmp_path, "caps", ["ein kreis", "ein quadrat"], caption_ids=["s0", "s0"])
    with pytest.raises(SchemaError, match="name more than one image") as caught:
        artifacts.load_captions(path)
    assert str(path) in str(caught.value)
    image_path, _, images = world
    shared = _texts(tmp_path / "shared", images, caption_ids=["s0", "s0"] + [f"s{i}" for i in range(2, N)])
    result, _ = _evaluate(tmp_path, image_path, shared)
    _refused(result, shared, "'s0' on 'img0', 'img1'")


def test_nul_bytes_become_a_space_not_glued_words(tmp_path):
    folder = tmp_path / "lines"
    folder.mkdir()
    (folder / "de.txt").write_text("ein roter\x00kreis\nblaues\x00\x00quadrat\x1f\n", encoding="utf-8")
    (folder / "images.txt").write_text("a.jpg\nb.jpg\n", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "import-data",
            "lines",
            str(folder / "de.txt"),
            "--lang",
            "de",
            "--image-list",
            str(folder / "images.txt"),
            "--out",
            str(tmp_path / "imp"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    captions = artifacts.load_captions(tmp_path / "imp" / "captions").column("caption").to_pylist()
    assert [c.split() for c in captions] == [["ein", "roter", "kreis"], ["blaues", "quadrat"]]
    assert "control characters replaced with a space in 2 caption(s)" in result.stderr


def test_the_vector_guards_read_in_chunks_and_find_a_problem_in_the_last_one(monkeypatch, tmp_path):
    """The scan holds one chunk of rows at a time (no copy of the array); a problem in the last chunk is found."""
    from mltk.evaluate import guards

    monkeypatch.setattr(guards, "CHUNK_ROWS", 5)
    vectors = _unit(np.random.default_rng(2).standard_normal((23, D)))
    vectors[22] *= 3
    path = artifacts.write_embeddings(tmp_path / "e", [str(i) for i in range(23)], vectors)
    _, mapped = artifacts.load_embeddings(path, check_finite=False)
    assert isinstance(mapped, np.memmap)
    with pytest.raises(ArtifactError, match="1 of 23 vector"):
        guards.check_vectors(mapped, path, guards.Guard(), unit_expected=True)
    forced = guards.Guard(force=True)
    assert guards.check_vectors(mapped, path, forced, unit_expected=True) is mapped  # scored as given, no copy
    assert len(forced.warnings) == 1 and json.dumps(forced.warnings)
    same = np.tile(vectors[:1], (23, 1))
    same[21] = vectors[5]  # breaks constancy in the last chunk only
    guards.check_vectors(same, "x", guards.Guard(), unit_expected=True)  # not constant: no error
