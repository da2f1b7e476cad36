"""encode-images: sources (folder, images artifact, Parquet of paths, stdin), corrupt images, the frozen forward
pass against plain open_clip, and resuming after an interruption (in-process and with SIGKILL)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

import mltk.encode.images as encode
from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import MltkError, SchemaError
from mltk.core.runtime import resolve_runtime
from mltk.encode.images import encode_images, encode_with_frozen_tower, frozen_tower_session
from mltk.models.clip import clip_checkpoint_config, clip_state_for_checkpoint, load_clip

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def random_png(rng: np.random.Generator, size: tuple[int, int] = (40, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def make_folder(root: Path, names: list[str], seed: int = 0, size: tuple[int, int] = (40, 48)) -> Path:
    rng = np.random.default_rng(seed)
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(random_png(rng, size))
    return root


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A whole mltk-tiny CLIP saved as a checkpoint artifact, so separate processes load identical weights."""
    torch.manual_seed(0)
    bundle = load_clip("mltk-tiny")
    out = tmp_path_factory.mktemp("ckpt") / "tiny"
    return artifacts.write_checkpoint(
        out, clip_state_for_checkpoint(bundle.model), clip_checkpoint_config("mltk-tiny"), stage="test"
    )


def test_folder_ids_are_relative_paths_and_vectors_are_normalised(tmp_path, tiny_checkpoint):
    folder = make_folder(tmp_path / "imgs", ["a.png", "sub/b.png", "sub/deeper/c.jpg", "notes.txt", ".hidden/d.png"])
    (folder / "notes.txt").write_text("not an image")
    out = encode_images(
        folder, tmp_path / "emb", model=str(tiny_checkpoint), batch_size=2, shard_size=2, workers=0, dtype="float32"
    )
    table, vectors = artifacts.load_embeddings(out)
    assert table.column("id").to_pylist() == ["a", "sub/b", "sub/deeper/c"]
    assert table.column("split").to_pylist() == ["", "", ""]
    assert vectors.dtype == np.float32 and vectors.shape == (3, 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    manifest = artifacts.read_manifest(out)
    assert [s["count"] for s in manifest["shards"]] == [2, 1]
    assert manifest["normalized"] is True and manifest["skipped"] == [] and manifest["dtype"] == "float32"
    assert manifest["preprocess"]["image_size"] == [64, 64]
    assert not (out / encode.RESUME_STATE).exists()


def test_vectors_match_a_plain_open_clip_forward_pass(tmp_path, tiny_checkpoint):
    folder = make_folder(tmp_path / "imgs", [f"{i}.png" for i in range(5)])
    out = encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), batch_size=5, workers=0, dtype="float32")
    _, vectors = artifacts.load_embeddings(out)
    bundle = load_clip(str(tiny_checkpoint))
    pixels = torch.stack([bundle.preprocess(Image.open(folder / f"{i}.png").convert("RGB")) for i in range(5)])
    with torch.no_grad():
        expected = torch.nn.functional.normalize(bundle.model.encode_image(pixels), dim=-1).numpy()
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_frozen_tower_session_gives_plain_autocast_vectors_and_stays_frozen(tiny_checkpoint):
    bundle = load_clip(str(tiny_checkpoint))
    batches = [torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = [torch.nn.functional.normalize(bundle.model.encode_image(x).float(), dim=-1) for x in batches]
    with frozen_tower_session(bundle.model.visual, resolve_runtime("cpu", "bf16")):
        got = [encode_with_frozen_tower(bundle.model.encode_image, x) for x in batches]
    assert all(torch.equal(g, e) and g.dtype == torch.float32 and not g.requires_grad for g, e in zip(got, expected))
    assert not any(p.requires_grad for p in bundle.model.parameters())
    with pytest.raises(RuntimeError), frozen_tower_session(bundle.model.visual, resolve_runtime("cpu", "fp32")):
        raise RuntimeError("interrupted")
    assert not any(p.requires_grad for p in bundle.model.parameters())


def test_corrupt_images_are_skipped_counted_and_listed(tmp_path, tiny_checkpoint):
    folder = make_folder(tmp_path / "imgs", ["good1.png", "good2.png", "good3.png"])
    (folder / "garbage.png").write_bytes(b"this is not an image")
    (folder / "truncated.png").write_bytes((folder / "good1.png").read_bytes()[:200])
    out = encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), batch_size=2, shard_size=2, workers=1)
    table, vectors = artifacts.load_embeddings(out)
    assert sorted(table.column("id").to_pylist()) == ["good1", "good2", "good3"]
    manifest = artifacts.read_manifest(out)
    assert manifest["skipped_count"] == 2 and manifest["count"] == 3
    skipped = {item["image_id"]: item["error"] for item in manifest["skipped"]}
    assert set(skipped) == {"garbage", "truncated"}
    assert all(error for error in skipped.values())
    assert vectors.dtype == np.float16


def test_no_readable_image_is_an_error_and_leaves_nothing_to_resume(tmp_path, tiny_checkpoint):
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(MltkError, match="none of the 1 images could be read"):
        encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), workers=0)
    assert not (tmp_path / "emb").exists() and not artifacts.partial_dir(tmp_path / "emb").exists()


def test_images_artifact_of_bytes_with_split_filter(tmp_path, tiny_checkpoint):
    rng = np.random.default_rng(1)
    table = pa.table(
        {
            "image_id": ["x0", "x1", "x2", "x3"],
            "split": ["train", "test", "train", "test"],
            "image": pa.array([random_png(rng) for _ in range(4)], pa.binary()),
        }
    )
    images = artifacts.write_images(tmp_path / "images", table)
    out = encode_images(images, tmp_path / "emb", model=str(tiny_checkpoint), splits=["test"], workers=0)
    rows, vectors = artifacts.load_embeddings(out)
    assert rows.column("id").to_pylist() == ["x1", "x3"]
    assert rows.column("split").to_pylist() == ["test", "test"]
    assert len(vectors) == 2


def test_parquet_of_relative_paths_gives_the_same_vectors_as_the_folder(tmp_path, tiny_checkpoint):
    folder = make_folder(tmp_path / "imgs", ["p.png", "q.png"])
    parquet = tmp_path / "list.parquet"
    artifacts.write_table(parquet, pa.table({"image_id": ["P", "Q"], "path": ["imgs/p.png", "imgs/q.png"]}))
    from_table = encode_images(parquet, tmp_path / "emb_table", model=str(tiny_checkpoint), workers=0)
    from_folder = encode_images(folder, tmp_path / "emb_folder", model=str(tiny_checkpoint), workers=0)
    rows, vectors = artifacts.load_embeddings(from_table)
    assert rows.column("id").to_pylist() == ["P", "Q"]
    np.testing.assert_array_equal(vectors, artifacts.load_embeddings(from_folder)[1])


def test_duplicate_image_ids_are_rejected(tmp_path, tiny_checkpoint):
    folder = make_folder(tmp_path / "imgs", ["same.png", "same.jpg"])
    with pytest.raises(SchemaError, match="not unique"):
        encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint))


def test_interrupted_run_resumes_and_changed_settings_start_over(tmp_path, tiny_checkpoint, monkeypatch, capsys):
    folder = make_folder(tmp_path / "imgs", [f"{i:02d}.png" for i in range(7)])
    reference = encode_images(
        folder, tmp_path / "reference", model=str(tiny_checkpoint), batch_size=2, shard_size=3, workers=0
    )
    write_shard = encode._write_shard
    written = []

    def write_then_crash(records, shard, collected, directory, state):
        write_shard(records, shard, collected, directory, state)
        written.append(shard)
        raise KeyboardInterrupt

    monkeypatch.setattr(encode, "_write_shard", write_then_crash)
    with pytest.raises(KeyboardInterrupt):
        encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), batch_size=2, shard_size=3, workers=0)
    monkeypatch.setattr(encode, "_write_shard", write_shard)
    assert written == [0] and not (tmp_path / "emb").exists()
    assert (artifacts.partial_dir(tmp_path / "emb") / "rows-00000.parquet").is_file()

    capsys.readouterr()
    out = encode_images(folder, tmp_path / "emb", model=str(tiny_checkpoint), batch_size=2, shard_size=3, workers=0)
    assert "resuming, 1 of 3 shards already done" in capsys.readouterr().err
    ref_rows, ref_vectors = artifacts.load_embeddings(reference)
    rows, vectors = artifacts.load_embeddings(out)
    assert rows.column("id").to_pylist() == ref_rows.column("id").to_pylist()
    np.testing.assert_array_equal(vectors, ref_vectors)

    monkeypatch.setattr(encode, "_write_shard", write_then_crash)
    with pytest.raises(KeyboardInterrupt):
        encode_images(folder, tmp_path / "emb2", model=str(tiny_checkpoint), shard_size=3, workers=0)
    monkeypatch.setattr(encode, "_write_shard", write_shard)
    capsys.readouterr()
    out = encode_images(folder, tmp_path / "emb2", model=str(tiny_checkpoint), shard_size=3, workers=0, dtype="float32")
    assert "starting over" in capsys.readouterr().err
    assert artifacts.load_embeddings(out)[1].dtype == np.float32


def test_cli_reads_an_images_artifact_from_stdin_and_prints_only_the_path(tmp_path, tiny_checkpoint):
    rng = np.random.default_rng(2)
    table = pa.table(
        {
            "image_id": ["a", "b"],
            "split": ["test", "test"],
            "image": pa.array([random_png(rng) for _ in range(2)], pa.binary()),
        }
    )
    images = artifacts.write_images(tmp_path / "images", table)
    out = tmp_path / "emb"
    result = runner.invoke(
        app,
        ["encode-images", "-", "--model", str(tiny_checkpoint), "--out", str(out), "--workers", "0"],
        input=f"{images}\n",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "2 images encoded" in result.stderr
    result = runner.invoke(
        app,
        ["encode-images", str(images), "--model", str(tiny_checkpoint), "--out", str(out), "--workers", "0", "--json"],
    )
    payload = json.loads(result.stdout)
    assert payload == {"path": str(out.resolve()), "count": 2, "dim": 128, "skipped": 0}


@pytest.mark.parametrize(
    "args, message",
    [
        (["{tmp}/missing", "--model", "mltk-tiny"], "no such file"),
        (["{imgs}", "--model", "no-such-architecture"], "unknown model"),
        (["{imgs}", "--model", "mltk-tiny", "--dtype", "int8"], "--dtype"),
        (["{imgs}", "--model", "mltk-tiny", "--split", "train"], "no images in split"),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(tmp_path, args, message):
    imgs = make_folder(tmp_path / "imgs", ["a.png"])
    args = [a.format(tmp=tmp_path, imgs=imgs) for a in args]
    result = runner.invoke(app, ["encode-images", *args, "--out", str(tmp_path / "emb")])
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "emb").exists()


def test_sigkill_mid_run_then_resume_gives_exactly_the_uninterrupted_embeddings(tmp_path, tiny_checkpoint):
    """Run the real CLI in a subprocess, SIGKILL its process group once the first shard is recorded as done,
    resume, and compare with an uninterrupted run."""
    folder = make_folder(tmp_path / "imgs", [f"{i:03d}.png" for i in range(48)], size=(128, 128))
    options = ["--model", str(tiny_checkpoint), "--batch-size", "2", "--shard-size", "4", "--device", "cpu"]
    out = tmp_path / "emb"
    first_shard_done = artifacts.partial_dir(out) / encode.RESUME_STATE
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "mltk", "encode-images", str(folder), *options, "--workers", "1", "--out", str(out)],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not first_shard_done.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, stderr.decode()
    assert not out.exists()
    state = json.loads((artifacts.partial_dir(out) / encode.RESUME_STATE).read_text())
    done = len(state["done"])
    assert 1 <= done < 12

    result = runner.invoke(app, ["encode-images", str(folder), *options, "--workers", "0", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert f"resuming, {done} of 12 shards already done" in result.stderr
    reference = encode_images(
        folder, tmp_path / "reference", model=str(tiny_checkpoint), batch_size=2, shard_size=4, device="cpu", workers=0
    )
    ref_rows, ref_vectors = artifacts.load_embeddings(reference)
    rows, vectors = artifacts.load_embeddings(out)
    assert rows.column("id").to_pylist() == ref_rows.column("id").to_pylist() == [f"{i:03d}" for i in range(48)]
    np.testing.assert_array_equal(vectors, ref_vectors)
    assert not artifacts.partial_dir(out).exists()
