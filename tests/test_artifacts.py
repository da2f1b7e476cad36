"""The artifact contract: round trips, atomic writes and one-line errors for bad artifacts."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, SchemaError


def captions_table(n: int = 4) -> pa.Table:
    return pa.table(
        {
            "image_id": [f"img{i // 2}" for i in range(n)],
            "lang": ["en", "de"] * (n // 2),
            "caption": [f"caption {i}" for i in range(n)],
            "caption_id": [f"c{i // 2}" for i in range(n)],
            "split": ["train"] * n,
        }
    )


def test_embeddings_round_trip_keeps_ids_with_vectors(tmp_path):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 3)).astype(np.float32)
    ids = [f"id{i}" for i in range(5)]
    path = artifacts.write_embeddings(
        tmp_path / "emb", ids, vectors, lang=["en", "de", "fr", "en", "de"], image_id=["a", "a", "b", "b", "c"]
    )
    table, loaded = artifacts.load_embeddings(path)
    assert table.column("id").to_pylist() == ids
    assert table.column("lang").to_pylist() == ["en", "de", "fr", "en", "de"]
    np.testing.assert_array_equal(loaded, vectors)
    manifest = artifacts.read_manifest(path)
    assert manifest["kind"] == "embeddings" and manifest["schema_version"] == schema.SCHEMA_VERSION
    assert {"created_by", "inputs", "mltk_version", "created_at"} <= set(manifest)


def test_embeddings_in_several_shards_concatenate_in_order(tmp_path):
    vectors = np.arange(20, dtype=np.float32).reshape(10, 2)
    path = artifacts.write_embeddings(
        tmp_path / "emb", [str(i) for i in range(10)], vectors, shard_size=3, dtype="float16"
    )
    table, loaded = artifacts.load_embeddings(path)
    assert len(artifacts.read_manifest(path)["shards"]) == 4
    assert loaded.dtype == np.float16
    np.testing.assert_array_equal(loaded.astype(np.float32), vectors)
    assert table.column("id").to_pylist() == [str(i) for i in range(10)]


def test_captions_round_trip_and_int_ids_become_strings(tmp_path):
    table = captions_table().set_column(0, "image_id", pa.array([1, 1, 2, 2]))
    path = artifacts.write_captions(tmp_path / "caps", table)
    loaded = artifacts.load_captions(path)
    assert loaded.column("image_id").to_pylist() == ["1", "1", "2", "2"]
    assert artifacts.read_manifest(path)["languages"] == ["de", "en"]


def test_captions_missing_column_names_the_file(tmp_path):
    with pytest.raises(SchemaError, match="caption_id"):
        artifacts.write_captions(tmp_path / "caps", captions_table().drop(["caption_id"]))


def test_nan_vectors_are_rejected(tmp_path):
    vectors = np.ones((2, 2), dtype=np.float32)
    vectors[1, 0] = np.nan
    with pytest.raises(ArtifactError, match="NaN"):
        artifacts.write_embeddings(tmp_path / "emb", ["a", "b"], vectors)


def test_ids_that_do_not_line_up_are_rejected(tmp_path):
    with pytest.raises(ArtifactError, match="2 ids but 3 vectors"):
        artifacts.write_embeddings(tmp_path / "emb", ["a", "b"], np.ones((3, 2)))
    path = artifacts.write_embeddings(tmp_path / "ok", ["a", "b"], np.ones((2, 2)))
    np.save(path / "vectors-00000.npy", np.ones((3, 2), dtype=np.float32))  # corrupt it afterwards
    with pytest.raises(ArtifactError, match="152 bytes, the manifest says 144"):
        artifacts.load_embeddings(path)  # the recorded size catches it first
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["checksums"] = artifacts.integrity.checksums(path, manifest["files"])  # forged consistently
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="do not line up"):
        artifacts.load_embeddings(path)


def test_wrong_kind_and_missing_files_give_errors_naming_the_path(tmp_path):
    caps = artifacts.write_captions(tmp_path / "caps", captions_table())
    with pytest.raises(ArtifactError, match="is a captions artifact, expected embeddings") as info:
        artifacts.load_embeddings(caps)
    assert str(caps) in str(info.value)
    with pytest.raises(ArtifactError, match="no such file"):
        artifacts.load_captions(tmp_path / "nope")
    (caps / schema.CAPTIONS_FILE).unlink()
    with pytest.raises(ArtifactError, match="missing"):
        artifacts.load_captions(caps)


def test_failed_write_leaves_nothing_that_looks_complete(tmp_path):
    out = tmp_path / "art"
    with pytest.raises(RuntimeError):
        with artifacts.ArtifactWriter(out, "metrics") as writer:
            (writer.dir / "metrics.json").write_text("{}")
            raise RuntimeError("crash mid-write")
    assert not out.exists()
    assert not artifacts.partial_dir(out).exists()


def test_manifest_written_last_and_inputs_fingerprinted(tmp_path):
    caps = artifacts.write_captions(tmp_path / "caps", captions_table())
    with artifacts.ArtifactWriter(
        tmp_path / "m", "metrics", stage="evaluate", config={"k": 1}, inputs=[caps]
    ) as writer:
        assert not (writer.dir / schema.MANIFEST).exists()
        artifacts.write_json(writer.dir / "metrics.json", {"a": 1})
    manifest = artifacts.read_manifest(tmp_path / "m", "metrics")
    assert manifest["created_by"] == {"stage": "evaluate", "config": {"k": 1}}
    assert manifest["inputs"][0]["kind"] == "captions"
    assert manifest["inputs"][0]["fingerprint"].startswith("sha256:")


def test_rewriting_an_artifact_replaces_it(tmp_path):
    artifacts.write_embeddings(tmp_path / "e", ["a"], np.ones((1, 2)))
    artifacts.write_embeddings(tmp_path / "e", ["b", "c"], np.ones((2, 2)))
    table, _ = artifacts.load_embeddings(tmp_path / "e")
    assert table.column("id").to_pylist() == ["b", "c"]


def test_refuses_to_overwrite_a_non_artifact_directory(tmp_path):
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="refusing"):
        artifacts.write_embeddings(tmp_path / "precious", ["a"], np.ones((1, 2)))


def test_unsupported_schema_version(tmp_path):
    path = artifacts.write_embeddings(tmp_path / "e", ["a"], np.ones((1, 2)))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="schema_version 99"):
        artifacts.read_manifest(path)


def test_checkpoint_round_trip_is_safetensors(tmp_path):
    import torch

    path = artifacts.write_checkpoint(tmp_path / "ck", {"w": torch.ones(2, 3)}, {"base": "mltk-tiny"})
    tensors, config = artifacts.load_checkpoint(path)
    assert config == {"base": "mltk-tiny"}
    assert torch.equal(tensors["w"], torch.ones(2, 3))
    assert (path / "model.safetensors").read_bytes()[8:9] == b"{"  # safetensors header, not a pickle
