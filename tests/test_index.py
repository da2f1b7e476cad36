"""``mltk index``: the exact index equals brute force, approximate kinds work, JSON-lines queries, contact sheets,
and bad input."""

from __future__ import annotations

import io
import json

import faiss
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import schema
from mltk.cli import app
from mltk.core.errors import ArtifactError
from mltk.index.faiss_index import IndexConfig, build_index, open_index, query

runner = CliRunner()


@pytest.fixture
def image_embeddings(tmp_path):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 16)).astype(np.float32) * rng.uniform(0.5, 2.0, size=(200, 1)).astype(
        np.float32
    )  # not normalised: the index must normalise
    ids = [f"img{i:03d}" for i in range(200)]
    return artifacts.write_embeddings(tmp_path / "img", ids, vectors, normalized=False), ids, vectors


def _brute_force(vectors, queries, k):
    base = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = q.astype(np.float64) @ base.T.astype(np.float64)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def test_exact_index_results_equal_brute_force(tmp_path, image_embeddings):
    path, ids, vectors = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    manifest = artifacts.read_manifest(index_path, "index")
    assert manifest["index_kind"] == "flat" and manifest["count"] == 200
    assert isinstance(faiss.read_index(str(index_path / schema.INDEX_FILE)), faiss.IndexFlatIP)
    queries = np.random.default_rng(1).standard_normal((25, 16)).astype(np.float32)
    results = query(index_path, queries, k=10)
    order, scores = _brute_force(vectors, queries, 10)
    for (result_ids, result_scores), expected_rows, expected_scores in zip(results, order, scores):
        assert result_ids == [ids[i] for i in expected_rows]
        assert result_scores == pytest.approx(expected_scores.tolist(), abs=1e-5)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_kinds_find_the_vector_itself(tmp_path, image_embeddings, kind):
    path, ids, vectors = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / kind, kind=kind, nlist=4, nprobe=4))
    assert artifacts.read_manifest(index_path)["index_kind"] == kind
    results = open_index(index_path).search(vectors[:20], k=3)
    hits = sum(result_ids[0] == ids[i] for i, (result_ids, _) in enumerate(results))
    assert hits == 20


def test_k_larger_than_the_index_returns_every_vector(tmp_path, image_embeddings):
    path, ids, vectors = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    ((result_ids, scores),) = query(index_path, vectors[:1], k=500)
    assert len(result_ids) == 200 and sorted(result_ids) == sorted(ids) and scores == sorted(scores, reverse=True)


def _images_artifact(tmp_path, ids):
    encoded = []
    for i, _ in enumerate(ids):
        buffer = io.BytesIO()
        Image.new("RGB", (32, 24), (i % 256, 100, 200)).save(buffer, format="PNG")
        encoded.append(buffer.getvalue())
    table = pa.table({"image_id": ids, "split": ["test"] * len(ids), "image": pa.array(encoded, pa.binary())})
    return artifacts.write_images(tmp_path / "images", table)


def test_cli_build_and_query_print_json_lines_and_a_contact_sheet(tmp_path, image_embeddings):
    path, ids, vectors = image_embeddings
    result = runner.invoke(app, ["index", "build", str(path), "--out", str(tmp_path / "index")])
    assert result.exit_code == 0, result.stderr
    index_path = result.stdout.strip()
    assert index_path == str((tmp_path / "index").resolve())
    sheet = tmp_path / "sheet.png"
    images = _images_artifact(tmp_path, ids)
    result = runner.invoke(
        app,
        [
            "index",
            "query",
            index_path,
            "--images",
            str(path),
            "--ids",
            "img003",
            "--ids",
            "img007",
            "--k",
            "4",
            "--contact-sheet",
            str(sheet),
            "--image-source",
            str(images),
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["img003", "img007"]
    old = runner.invoke(app, ["index", "query", index_path, "--images", str(images), "--contact-sheet", str(sheet)])
    assert old.exit_code == 2 and "--image-source" in old.stderr  # raw images under --images: named, not misread
    assert [len(line["results"]) for line in lines] == [4, 4]
    assert "img003" not in [hit["id"] for hit in lines[0]["results"]]  # a query is not its own hit
    from mltk.index.faiss_index import LABEL_LINES, SHEET_MARGIN, TILE_GAP, SheetFonts

    label = LABEL_LINES * SheetFonts(12).line_height + 4  # two label lines under each 128 px tile
    with Image.open(sheet) as picture:  # the query image and 4 results per row, 2 rows
        assert picture.size == (
            2 * SHEET_MARGIN + 128 + 4 * (128 + TILE_GAP),
            2 * SHEET_MARGIN + 2 * (128 + label + TILE_GAP),
        )
    assert "contact sheet" in result.stderr


def test_cli_query_from_a_npy_file(tmp_path, image_embeddings):
    path, ids, vectors = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    np.save(tmp_path / "q.npy", vectors[[5, 9]])
    result = runner.invoke(app, ["index", "query", str(index_path), "--vectors", str(tmp_path / "q.npy"), "--k", "2"])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["query"], line["results"][0]["id"]) for line in lines] == [("0", ids[5]), ("1", ids[9])]


def test_cli_bad_inputs_are_exit_2_naming_the_file(tmp_path, image_embeddings):
    path, ids, vectors = image_embeddings
    result = runner.invoke(app, ["index", "query", str(path), "--image-emb", str(path)])
    assert result.exit_code == 2 and str(path) in result.stderr and "expected index" in result.stderr
    missing = tmp_path / "missing"
    result = runner.invoke(app, ["index", "build", str(missing), "--out", str(tmp_path / "i")])
    assert result.exit_code == 2 and str(missing) in result.stderr and result.stdout == ""
    result = runner.invoke(app, ["index", "build", str(path), "--out", str(tmp_path / "i"), "--kind", "lsh"])
    assert result.exit_code == 2 and "--kind" in result.stderr
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    np.save(tmp_path / "wrong.npy", np.ones((2, 3), np.float32))
    result = runner.invoke(app, ["index", "query", str(index_path), "--vectors", str(tmp_path / "wrong.npy")])
    assert result.exit_code == 2 and "dim 16" in result.stderr and result.stderr.count("\n") == 1


def test_contact_sheet_of_a_caption_index_shows_the_captions_images(tmp_path):
    from mltk.index.faiss_index import write_contact_sheet

    image_ids = ["a", "b", "c"]
    captions = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    caption_index = build_index(
        IndexConfig(
            embeddings=artifacts.write_embeddings(
                tmp_path / "txt", ["en:1", "en:2", "en:3"], captions, image_id=["c", "a", "b"]
            ),
            out=tmp_path / "index",
        )
    )
    opened = open_index(caption_index)
    results = opened.search(np.array([[0, 1, 0.1]], np.float32), k=2)
    assert results[0][0] == ["en:2", "en:3"]
    sheet = write_contact_sheet(
        tmp_path / "sheet.png", ["q"], results, _images_artifact(tmp_path, image_ids), index=opened
    )
    from mltk.index.faiss_index import CARD_BACKGROUND, SHEET_MARGIN, TILE_GAP

    with Image.open(sheet) as picture:
        # query "q" has no image (a text card two tiles wide); caption en:2 shows image "a" (red 0), en:3 image
        # "b" (red 1)
        picture = picture.convert("RGB")
        assert picture.getpixel((SHEET_MARGIN + 2, SHEET_MARGIN + 2)) == CARD_BACKGROUND
        first = SHEET_MARGIN + 256 + TILE_GAP
        assert picture.getpixel((first + 64, SHEET_MARGIN + 64)) == (0, 100, 200)
        assert picture.getpixel((first + 128 + TILE_GAP + 64, SHEET_MARGIN + 64)) == (1, 100, 200)


# ----------------------------------------------------------------------------------------------------------------
# Text queries through a checkpoint (tiny random-weight models built here)
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def text_world(tmp_path_factory):
    """A tiny CLIP checkpoint, an MLA checkpoint over it that reads German, and an index of 30 image vectors of
    the models' width."""
    from helpers_encoders import tiny_clip_and_mla

    from mltk.models.clip import load_clip

    root = tmp_path_factory.mktemp("text-queries")
    clip, mla = tiny_clip_and_mla(root, ("de",))
    dim = load_clip(str(clip)).model.text_projection.shape[1]
    vectors = np.random.default_rng(2).standard_normal((30, dim)).astype(np.float32)
    ids = [f"img{i:02d}" for i in range(30)]
    embeddings = artifacts.write_embeddings(root / "img", ids, vectors, normalized=False)
    return {
        "clip": clip,
        "mla": mla,
        "ids": ids,
        "vectors": vectors,
        "embeddings": embeddings,
        "index": build_index(IndexConfig(embeddings=embeddings, out=root / "index")),
    }


def _encoded(model, texts, lang):
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_texts

    return encode_texts(load_text_encoder(model), texts, lang, resolve_runtime("cpu", "fp32"))


@pytest.mark.parametrize(
    "model, lang, texts",
    [("mla", "de", ["ein roter kreis", "blaues quadrat links"]), ("clip", "en", ["two red circle"])],
)
def test_text_queries_are_encoded_in_their_language_and_match_brute_force(text_world, model, lang, texts):
    options = [option for text in texts for option in ("--text", text)]
    result = runner.invoke(
        app,
        [
            "index",
            "query",
            str(text_world["index"]),
            *options,
            "--lang",
            lang,
            "--model",
            str(text_world[model]),
            "--k",
            "5",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == texts
    order, scores = _brute_force(text_world["vectors"], _encoded(text_world[model], texts, lang), 5)
    for line, expected_rows, expected_scores in zip(lines, order, scores):
        assert [hit["id"] for hit in line["results"]] == [text_world["ids"][i] for i in expected_rows]
        assert [hit["score"] for hit in line["results"]] == pytest.approx(expected_scores.tolist(), abs=1e-5)


def test_text_queries_from_a_file_skip_blank_lines_and_add_to_text(text_world, tmp_path):
    queries = tmp_path / "queries.txt"
    queries.write_text("ein roter kreis\n\n  blaues quadrat  \n\n", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "index",
            "query",
            str(text_world["index"]),
            "--text",
            "roter kreis",
            "--text-file",
            str(queries),
            "--lang",
            "de",
            "--model",
            str(text_world["mla"]),
            "--k",
            "2",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["roter kreis", "ein roter kreis", "blaues quadrat"]
    assert all(len(line["results"]) == 2 for line in lines)


def test_text_query_bad_inputs_are_exit_2_naming_the_file(text_world, tmp_path):
    index, mla = str(text_world["index"]), str(text_world["mla"])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    cases = [
        (["--text", "roter kreis"], ["--model"]),
        (["--text", "roter kreis", "--model", mla, "--images", str(text_world["embeddings"])], ["one kind"]),
        (["--text", "un cercle rouge", "--lang", "fr", "--model", mla], [mla, "fr"]),
        (["--text-file", str(blank), "--model", mla], [str(blank), "no query"]),
        (["--text-file", str(tmp_path / "none.txt"), "--model", mla], [str(tmp_path / "none.txt"), "no such file"]),
        (["--vectors", str(tmp_path / "q.npy"), "--model", mla], ["--text"]),
    ]
    for options, fragments in cases:
        result = runner.invoke(app, ["index", "query", index, *options, "--device", "cpu"])
        assert result.exit_code == 2, result.stderr
        assert result.stdout == "" and result.stderr.count("\n") == 1
        for fragment in fragments:
            assert fragment in result.stderr, result.stderr


def test_index_files_are_read_through_artifacts_and_checked_against_each_other(tmp_path, image_embeddings):
    path, ids, _ = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    manifest, index, table = artifacts.read_index(index_path)
    assert manifest["files"] == sorted([schema.INDEX_FILE, schema.INDEX_IDS_FILE])
    assert index.ntotal == 200 and table.column("id").to_pylist() == ids
    artifacts.write_table(index_path / schema.INDEX_IDS_FILE, table.slice(0, 199))
    with pytest.raises(ArtifactError, match="the manifest says"):
        open_index(index_path)  # the recorded size catches it first
    manifest = json.loads((index_path / "manifest.json").read_text())
    manifest["checksums"] = artifacts.integrity.checksums(index_path, manifest["files"])  # forged consistently
    (index_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="199 rows but the index holds 200"):
        open_index(index_path)
    (index_path / schema.INDEX_FILE).write_bytes(b"not faiss")
    manifest["checksums"] = artifacts.integrity.checksums(index_path, manifest["files"])  # forged consistently
    (index_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="cannot read index.faiss"):
        open_index(index_path)


def test_query_vectors_from_a_pickled_npy_are_refused(tmp_path, image_embeddings):
    path, _, _ = image_embeddings
    index_path = build_index(IndexConfig(embeddings=path, out=tmp_path / "index"))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    result = runner.invoke(app, ["index", "query", str(index_path), "--vectors", str(tmp_path / "objects.npy")])
    assert result.exit_code == 2 and str(tmp_path / "objects.npy") in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
