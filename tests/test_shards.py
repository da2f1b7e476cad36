"""img2dataset's webdataset shards: ``import-data webdataset`` (captions with the sample keys as image ids),
``encode-images SHARDS_DIR`` streamed tar by tar, resumed at the tar where a run stopped, two processes under
torchrun (gloo) writing the artifact of one, bad shards counted and named, duplicate keys refused.

Tiny shards are made with ``webdataset.TarWriter`` from the synthetic world's images and English captions.
This file is also the torchrun worker: ``python -m torch.distributed.run --standalone --nproc_per_node 2
tests/test_shards.py SHARDS OUT CHECKPOINT`` encodes SHARDS into OUT on both ranks.
"""

from __future__ import annotations

import io
import json
import re
import sys
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from helpers_torchrun import leave_worker, report_shard_writes, run_two_ranks, tiny_clip_checkpoint
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ConfigError, SchemaError
from mltk.data.importers import import_dataset
from mltk.encode.images import encode_images

webdataset = pytest.importorskip("webdataset")
runner = CliRunner()
SETTINGS = {"batch_size": 2, "workers": 0, "dtype": "float32", "device": "cpu", "precision": "fp32"}
PER_SHARD = 3


def synth_samples(count: int, start: int = 0) -> list[tuple[bytes, str]]:
    """(JPEG bytes, English caption) of the synthetic world's train images ``start .. start + count - 1``."""
    from PIL import Image

    from mltk.data.synth import SynthConfig, generate_example

    config = SynthConfig(image_size=32, langs="en")
    samples = []
    for index in range(start, start + count):
        example = generate_example(config, "train", index)
        buffer = io.BytesIO()
        Image.open(io.BytesIO(example.png)).convert("RGB").save(buffer, format="JPEG", quality=95)
        samples.append((buffer.getvalue(), example.rendering(0, "en")[0]))
    return samples


def key_of(shard: int, row: int) -> str:
    """img2dataset's keys: the shard number then the row, zero-padded."""
    return f"{shard:05d}{row:04d}"


def write_shard(folder: Path, shard: int, samples: list[dict], successes: int | None = None) -> Path:
    """``NNNNN.tar`` with the samples, and img2dataset's ``NNNNN.parquet`` / ``NNNNN_stats.json`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{shard:05d}.tar"
    with webdataset.TarWriter(str(path)) as sink:
        for sample in samples:
            sink.write(sample)
    written = len(samples) if successes is None else successes
    pq.write_table(
        pa.table({"key": [key_of(shard, i) for i in range(written)], "status": ["success"] * written}),
        folder / f"{shard:05d}.parquet",
    )
    (folder / f"{shard:05d}_stats.json").write_text(
        json.dumps({"count": written, "successes": written, "failed_to_download": 0})
    )
    return path


def sample(shard: int, row: int, jpg: bytes | None, caption: str | None) -> dict:
    item = {"__key__": key_of(shard, row), "json": {"key": key_of(shard, row), "status": "success"}}
    if jpg is not None:
        item["jpg"] = jpg
    if caption is not None:
        item["txt"] = caption
    return item


def make_shards(folder: Path, shards: int = 4) -> Path:
    data = synth_samples(shards * PER_SHARD)
    for shard in range(shards):
        write_shard(folder, shard, [sample(shard, row, *data[shard * PER_SHARD + row]) for row in range(PER_SHARD)])
    return folder


def truncate_inside(path: Path, member_index: int) -> None:
    """Cut the tar in the middle of the body of its ``member_index``-th file, as an interrupted download does."""
    with tarfile.open(path) as archive:
        member = archive.getmembers()[member_index]
    with open(path, "r+b") as handle:
        handle.truncate(member.offset_data + member.size // 2)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return tiny_clip_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return make_shards(tmp_path_factory.mktemp("wds") / "shards")


# ----------------------------------------------------------------------------------------------------------------
# import-data webdataset
# ----------------------------------------------------------------------------------------------------------------


def test_import_gives_one_caption_per_sample_keyed_by_the_sample(tmp_path, shards):
    out = import_dataset("webdataset", shards, tmp_path / "data", lang="en")
    rows = artifacts.load_captions(out / "captions").to_pylist()
    expected = synth_samples(4 * PER_SHARD)
    assert [row["image_id"] for row in rows] == [key_of(s, r) for s in range(4) for r in range(PER_SHARD)]
    assert [row["caption"] for row in rows] == [caption for _, caption in expected]
    assert {row["lang"] for row in rows} == {"en"} and {row["split"] for row in rows} == {"train"}
    assert [row["shard"] for row in rows] == [f"{s:05d}.tar" for s in range(4) for _ in range(PER_SHARD)]
    assert [row["caption_id"] for row in rows] == [row["image_id"] for row in rows]
    assert artifacts.read_manifest(out / "captions")["skipped_files"] == []


def test_import_names_a_truncated_tar_a_missing_txt_and_a_shard_shorter_than_its_parquet(tmp_path, capsys):
    folder = tmp_path / "shards"
    data = synth_samples(9)
    write_shard(folder, 0, [sample(0, 0, *data[0]), sample(0, 1, data[1][0], None), sample(0, 2, *data[2])])
    truncate_inside(write_shard(folder, 1, [sample(1, r, *data[3 + r]) for r in range(3)]), 3)  # 2nd sample's jpg
    write_shard(folder, 2, [sample(2, r, *data[6 + r]) for r in range(2)], successes=3)  # img2dataset wrote 3
    out = import_dataset("webdataset", folder, tmp_path / "data", lang="en")
    rows = artifacts.load_captions(out / "captions").to_pylist()
    assert [row["image_id"] for row in rows] == [key_of(0, 0), key_of(0, 2), key_of(1, 0), key_of(2, 0), key_of(2, 1)]
    skipped = artifacts.read_manifest(out / "captions")["skipped_files"]
    assert len(skipped) == 3
    assert skipped[0] == f"00000.tar: sample '{key_of(0, 1)}' has no .txt caption"
    assert skipped[1].startswith("00001.tar: unreadable after 1 sample(s)")
    assert skipped[2] == "00002.tar: holds 2 sample(s) but img2dataset wrote 3 (a truncated tar)"
    err = capsys.readouterr().err
    assert all(f"skipped {line}" in err for line in skipped)


def test_duplicate_keys_are_refused_with_exit_2_and_one_line(tmp_path, tiny_checkpoint):
    folder = tmp_path / "shards"
    data = synth_samples(3)
    write_shard(folder, 0, [sample(0, 0, *data[0]), sample(0, 1, *data[1])])
    again = sample(0, 1, *data[2])  # shard 1 repeats the key of shard 0's second sample
    write_shard(folder, 1, [again])
    with pytest.raises(SchemaError, match=f"sample key '{key_of(0, 1)}' occurs in 00000.tar and 00001.tar"):
        import_dataset("webdataset", folder, tmp_path / "data", lang="en")
    for command in (
        ["import-data", "webdataset", str(folder), "--lang", "en", "-o", str(tmp_path / "d")],
        ["encode-images", str(folder), "-m", str(tiny_checkpoint), "-o", str(tmp_path / "e")],
    ):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.stderr
        assert result.stdout == "" and result.stderr.count("\n") == 1
        assert f"sample key '{key_of(0, 1)}' occurs in 00000.tar and 00001.tar" in result.stderr
    assert not (tmp_path / "e").exists() and not artifacts.partial_dir(tmp_path / "e").exists()


def test_a_key_twice_in_one_shard_is_refused(tmp_path):
    folder = tmp_path / "shards"
    data = synth_samples(3)
    write_shard(folder, 0, [sample(0, 0, *data[0]), sample(0, 1, *data[1]), sample(0, 0, *data[2])])
    with pytest.raises(SchemaError, match=f"sample key '{key_of(0, 0)}' occurs twice in 00000.tar"):
        import_dataset("webdataset", folder, tmp_path / "data", lang="en")


def test_import_needs_a_language_and_the_webdataset_package(tmp_path, shards, monkeypatch):
    with pytest.raises(ConfigError, match="needs --lang"):
        import_dataset("webdataset", shards, tmp_path / "data")
    monkeypatch.setitem(sys.modules, "webdataset", None)  # as if not installed
    result = runner.invoke(app, ["import-data", "webdataset", str(shards), "--lang", "en", "-o", str(tmp_path / "d")])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "needs the webdataset package" in result.stderr and "'.[shards]'" in result.stderr


# ----------------------------------------------------------------------------------------------------------------
# encode-images SHARDS_DIR
# ----------------------------------------------------------------------------------------------------------------


def test_encoding_shards_gives_the_vectors_of_the_same_images_in_a_folder(tmp_path, shards, tiny_checkpoint):
    out = encode_images(shards, tmp_path / "emb", model=str(tiny_checkpoint), **SETTINGS)
    manifest = artifacts.read_manifest(out)
    assert manifest["count"] == 12 and manifest["skipped_count"] == 0 and manifest["bad_shards"] == []
    assert len(manifest["shards"]) == 4 and manifest["created_by"]["config"]["shard_size"] is None
    folder = tmp_path / "folder"
    folder.mkdir()
    for index, (jpg, _) in enumerate(synth_samples(12)):
        (folder / f"{key_of(index // PER_SHARD, index % PER_SHARD)}.jpg").write_bytes(jpg)
    reference = encode_images(folder, tmp_path / "ref", model=str(tiny_checkpoint), shard_size=PER_SHARD, **SETTINGS)
    (rows, vectors), (ref_rows, ref_vectors) = artifacts.load_embeddings(out), artifacts.load_embeddings(reference)
    assert rows.column("id").to_pylist() == ref_rows.column("id").to_pylist()
    np.testing.assert_allclose(vectors, ref_vectors, atol=1e-6)


def test_decoding_workers_split_the_tars_and_give_the_same_artifact(tmp_path, shards, tiny_checkpoint):
    one = encode_images(shards, tmp_path / "one", model=str(tiny_checkpoint), **SETTINGS)
    two = encode_images(shards, tmp_path / "two", model=str(tiny_checkpoint), **{**SETTINGS, "workers": 2})
    (rows, vectors), (rows_two, vectors_two) = artifacts.load_embeddings(one), artifacts.load_embeddings(two)
    assert rows_two.to_pylist() == rows.to_pylist()
    np.testing.assert_array_equal(vectors_two, vectors)


def test_cli_prints_only_the_artifact_path(tmp_path, shards, tiny_checkpoint):
    result = runner.invoke(app, ["import-data", "webdataset", str(shards), "--lang", "en", "-o", str(tmp_path / "d")])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'd').resolve()}\n"
    result = runner.invoke(
        app,
        [
            "encode-images",
            str(shards),
            "-m",
            str(tiny_checkpoint),
            "--workers",
            "0",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "emb"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'emb').resolve()}\n"
    assert artifacts.read_manifest(tmp_path / "emb")["count"] == 4 * PER_SHARD


def test_a_folder_of_images_with_a_tar_in_it_stays_a_folder_of_images(tmp_path):
    from mltk.data.webdataset_shards import is_shard_folder

    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "archive.tar").write_bytes(b"")
    assert is_shard_folder(folder)
    (folder / "a.jpg").write_bytes(synth_samples(1)[0][0])
    assert not is_shard_folder(folder)


def test_bad_shards_are_counted_and_named_on_stderr_and_in_the_manifest(tmp_path, tiny_checkpoint, capsys):
    folder = tmp_path / "shards"
    data = synth_samples(6)
    write_shard(
        folder,
        0,
        [sample(0, 0, *data[0]), sample(0, 1, b"not an image", "a caption"), sample(0, 2, None, "no picture")],
    )
    truncate_inside(write_shard(folder, 1, [sample(1, r, *data[3 + r]) for r in range(3)]), 3)
    out = encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), **SETTINGS)
    manifest = artifacts.read_manifest(out)
    assert manifest["count"] == 2  # 00000.tar's first image and 00001.tar's first, read before the break
    assert manifest["skipped_count"] == 2
    assert [(item["image_id"], item["shard"]) for item in manifest["skipped"]] == [
        (key_of(0, 1), "00000.tar"),
        (key_of(0, 2), "00000.tar"),
    ]
    assert "cannot identify image file" in manifest["skipped"][0]["error"]
    assert manifest["skipped"][1]["error"] == "the sample has no image file (.jpg)"
    assert manifest["bad_shard_count"] == 1 and manifest["bad_shards"][0]["shard"] == "00001.tar"
    assert manifest["bad_shards"][0]["error"].startswith("unreadable after 1 sample(s)")
    err = capsys.readouterr().err
    assert f"00000.tar: skipped 2 unreadable image(s): {key_of(0, 1)}" in err
    assert "00001.tar: unreadable after 1 sample(s)" in err and "1 bad shard(s): 00001.tar" in err


def test_a_killed_encode_resumes_at_the_shard_where_it_stopped(tmp_path, shards, tiny_checkpoint, monkeypatch, capsys):
    import mltk.encode.image_shards as module

    reference = encode_images(shards, tmp_path / "reference", model=str(tiny_checkpoint), **SETTINGS)
    write = module._write_shard_file
    written = []

    def write_then_die_after_shard_1(path, shard, *args):
        write(path, shard, *args)
        written.append(shard)
        if shard == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(module, "_write_shard_file", write_then_die_after_shard_1)
    with pytest.raises(KeyboardInterrupt):
        encode_images(shards, tmp_path / "emb", model=str(tiny_checkpoint), **SETTINGS)
    assert written == [0, 1] and not (tmp_path / "emb").exists()
    capsys.readouterr()
    out = encode_images(shards, tmp_path / "emb", model=str(tiny_checkpoint), **SETTINGS)
    assert written == [0, 1, 2, 3]  # the rerun wrote only the tars the killed run had not finished
    assert "resuming, 2 of 4 shards already done" in capsys.readouterr().err
    (rows, vectors), (ref_rows, ref_vectors) = artifacts.load_embeddings(out), artifacts.load_embeddings(reference)
    assert rows.to_pylist() == ref_rows.to_pylist()
    np.testing.assert_array_equal(vectors, ref_vectors)


def test_split_and_image_roots_do_not_apply_to_shards(tmp_path, shards, tiny_checkpoint):
    with pytest.raises(ConfigError, match="do not apply to webdataset shards"):
        encode_images(shards, tmp_path / "emb", model=str(tiny_checkpoint), splits=["train"], **SETTINGS)


def test_two_processes_under_torchrun_write_the_artifact_of_one(tmp_path, shards, tiny_checkpoint):
    """gloo on the CPU; bit-exact against one process run with one thread, as each torchrun worker is."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = encode_images(shards, tmp_path / "one", model=str(tiny_checkpoint), **SETTINGS)
    finally:
        torch.set_num_threads(before)
    done = run_two_ranks(__file__, shards, tmp_path / "two", tiny_checkpoint)
    assert done.returncode == 0, done.stderr[-4000:]
    (rows_one, vectors_one), (rows_two, vectors_two) = (
        artifacts.load_embeddings(one),
        artifacts.load_embeddings(tmp_path / "two"),
    )
    assert rows_two.to_pylist() == rows_one.to_pylist()
    np.testing.assert_array_equal(vectors_two, vectors_one)
    manifest_one, manifest_two = artifacts.read_manifest(one), artifacts.read_manifest(tmp_path / "two")
    assert manifest_two["shards"] == manifest_one["shards"]
    assert not artifacts.partial_dir(tmp_path / "two").exists()
    written = sorted(re.findall(r"test-worker: rank \d+ wrote shard \d+", done.stderr))
    assert written == [
        "test-worker: rank 0 wrote shard 0",
        "test-worker: rank 0 wrote shard 2",
        "test-worker: rank 1 wrote shard 1",
        "test-worker: rank 1 wrote shard 3",
    ]


def _worker(shards: str, out: str, checkpoint: str) -> None:
    import mltk.encode.image_shards as module
    from mltk.core import distributed

    report_shard_writes(module, "_write_shard_file")
    encode_images(shards, out, model=checkpoint, **SETTINGS)
    assert distributed.world()[1] == 2 and torch.distributed.get_backend() == "gloo"


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
    leave_worker()
