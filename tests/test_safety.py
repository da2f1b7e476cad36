"""Output safety: the existing-artifact policy, one writer per output, containment, integrity, the
exit-2 paths that used to be exit 1, duplicate ids and TorchScript."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pyarrow as pa
import pytest
from helpers_locks import hold_lock
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import locks, schema
from mltk.cli.application import app
from mltk.core import policy
from mltk.core.errors import ArtifactError, ConfigError

runner = CliRunner()


def captions_table(n: int = 8) -> pa.Table:
    return pa.table(
        {
            "image_id": [f"img{i // 2}" for i in range(n)],
            "lang": ["en", "de"] * (n // 2),
            "caption": [f"a red circle number {i}" for i in range(n)],
            "caption_id": [f"c{i // 2}" for i in range(n)],
            "split": ["train"] * n,
        }
    )


def embeddings(tmp_path, name="emb", n=6, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return artifacts.write_embeddings(tmp_path / name, [f"id{i}" for i in range(n)], vectors, split=["test"] * n)


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


# -- 1. the existing-artifact policy ------------------------------------------------------------------------------


def test_writing_onto_an_input_of_the_same_command_is_refused(tmp_path):
    caps = artifacts.write_captions(tmp_path / "caps", captions_table())
    before = (caps / schema.MANIFEST).read_bytes()
    result = invoke("build-vocab", caps, "--lang", "de", "--size", "600", "--out", caps)
    assert result.exit_code == 2 and "is an input of this command" in result.stderr
    assert (caps / schema.MANIFEST).read_bytes() == before and artifacts.load_captions(caps).num_rows == 8
    emb = embeddings(tmp_path)
    result = invoke("index", "build", emb, "--out", emb)
    assert result.exit_code == 2 and "is an input of this command" in result.stderr
    artifacts.load_embeddings(emb)


def test_same_settings_reuse_other_settings_refused_unless_overwrite(tmp_path):
    emb = embeddings(tmp_path)
    out = tmp_path / "index"
    assert invoke("index", "build", emb, "--out", out).exit_code == 0
    made = (out / schema.MANIFEST).read_bytes()
    again = invoke("index", "build", emb, "--out", out)
    assert again.exit_code == 0 and again.stdout.strip() == str(out) and "up to date" in again.stderr
    assert (out / schema.MANIFEST).read_bytes() == made  # nothing was rebuilt
    other = invoke("index", "build", emb, "--out", out, "--kind", "hnsw")
    assert other.exit_code == 2 and "other settings" in other.stderr and "--overwrite" in other.stderr
    assert (out / schema.MANIFEST).read_bytes() == made
    replaced = invoke("index", "build", emb, "--out", out, "--kind", "hnsw", "--overwrite")
    assert replaced.exit_code == 0 and artifacts.read_manifest(out)["index_kind"] == "hnsw"
    # the same settings over changed inputs are "made otherwise" too
    with policy.overwriting():
        embeddings(tmp_path, seed=1)
    changed = invoke("index", "build", emb, "--out", out, "--kind", "hnsw")
    assert changed.exit_code == 2 and "other inputs" in changed.stderr


def test_overwrite_is_reset_after_each_command(tmp_path):
    emb = embeddings(tmp_path)
    assert invoke("index", "build", emb, "--out", tmp_path / "i", "--overwrite").exit_code == 0
    assert policy.OVERWRITE.get() is False
    assert invoke("index", "build", emb, "--out", tmp_path / "i", "--kind", "hnsw").exit_code == 2


def test_replacing_is_atomic_the_old_artifact_stays_until_the_new_one_is_complete(tmp_path):
    emb = embeddings(tmp_path)
    with pytest.raises(RuntimeError):
        with artifacts.ArtifactWriter(emb, "embeddings", overwrite=True) as writer:
            (writer.dir / "half.npy").write_bytes(b"x")
            raise RuntimeError("crash while building the replacement")
    assert artifacts.load_embeddings(emb)[0].num_rows == 6
    assert not artifacts.partial_dir(emb).exists()


def test_inspect_reports_inputs_that_changed_since(tmp_path):
    emb = embeddings(tmp_path)
    index = invoke("index", "build", emb, "--out", tmp_path / "index")
    assert index.exit_code == 0
    assert invoke("inspect", tmp_path / "index", "--json").exit_code == 0
    assert json.loads(invoke("inspect", tmp_path / "index", "--json").stdout)["changed_inputs"] == []
    with policy.overwriting():
        embeddings(tmp_path, seed=3)
    result = invoke("inspect", tmp_path / "index", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["changed_inputs"] == [{"path": str(emb), "change": "changed"}]


def test_metrics_and_checkpoints_record_their_inputs_fingerprints(tmp_path):
    import torch

    emb = embeddings(tmp_path)
    ck = artifacts.write_checkpoint(tmp_path / "ck", {"w": torch.ones(2)}, {"format": "x"}, inputs=[emb])
    metrics = artifacts.write_metrics(tmp_path / "m", {"a": 1}, inputs=[emb, ck])
    recorded = [entry["fingerprint"] for entry in artifacts.read_manifest(metrics)["inputs"]]
    assert recorded == [artifacts.fingerprint(emb), artifacts.fingerprint(ck)]
    assert artifacts.read_manifest(ck)["inputs"][0]["fingerprint"] == artifacts.fingerprint(emb)


# -- 2. one writer per output ---------------------------------------------------------------------------------------


def test_a_second_writer_is_refused_naming_the_holders_pid(tmp_path):
    out = tmp_path / "m"
    holder = hold_lock(locks.lock_path(out))
    try:
        with pytest.raises(ArtifactError, match=f"another mltk process \\(pid {holder.pid}\\)"):
            artifacts.write_metrics(out, {"a": 1})
        result = invoke("index", "build", embeddings(tmp_path), "--out", out)
        assert result.exit_code == 2 and f"pid {holder.pid}" in result.stderr
        assert not out.exists() and not artifacts.partial_dir(out).exists()
    finally:
        holder.kill()
        holder.wait()
    artifacts.write_metrics(out, {"a": 1})  # the holder is gone: its lock is stale and taken over
    assert artifacts.load_metrics(out) == {"a": 1} and not locks.lock_path(out).exists()


def test_the_lock_is_held_while_building_and_released_after(tmp_path):
    out = tmp_path / "m"
    with artifacts.ArtifactWriter(out, "metrics") as writer:
        assert locks.lock_path(out).read_text().split()[0] == str(os.getpid())
        artifacts.write_json(writer.dir / "metrics.json", {})
    assert not locks.lock_path(out).exists()


def test_bad_input_in_a_fresh_resumable_run_leaves_no_partial_behind(tmp_path):
    out = tmp_path / "ck"
    with pytest.raises(ConfigError):
        with artifacts.ArtifactWriter(out, "checkpoint", resume=True):
            raise ConfigError("width mismatch found late")
    assert not artifacts.partial_dir(out).exists()
    with pytest.raises(KeyboardInterrupt):  # an interrupted run keeps its partial directory to resume
        with artifacts.ArtifactWriter(out, "checkpoint", resume=True) as writer:
            (writer.dir / "state.txt").write_text("step 5")
            raise KeyboardInterrupt
    assert (artifacts.partial_dir(out) / "state.txt").is_file()


def test_overwrite_discards_a_partial_run_started_with_other_settings(tmp_path):
    out = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        with artifacts.ArtifactWriter(out, "checkpoint", config={"lr": 1}, resume=True) as writer:
            (writer.dir / "state.txt").write_text("step 5")
            raise KeyboardInterrupt
    with artifacts.ArtifactWriter(out, "checkpoint", config={"lr": 1}, resume=True) as writer:
        assert (writer.dir / "state.txt").is_file()  # same settings: resumed
    with pytest.raises(KeyboardInterrupt):
        with artifacts.ArtifactWriter(tmp_path / "b", "checkpoint", config={"lr": 1}, resume=True) as writer:
            (writer.dir / "state.txt").write_text("step 5")
            raise KeyboardInterrupt
    with artifacts.ArtifactWriter(
        tmp_path / "b", "checkpoint", config={"lr": 2}, resume=True, overwrite=True
    ) as writer:
        assert not (writer.dir / "state.txt").exists()


# -- 3. containment ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../secret/x.npy", "/etc/passwd", "sub/../../x.npy"])
def test_a_manifest_naming_files_outside_the_artifact_is_refused(tmp_path, name):
    emb = embeddings(tmp_path)
    secret = tmp_path / "secret"
    secret.mkdir()
    np.save(secret / "x.npy", np.ones((6, 4), dtype=np.float32))
    manifest = json.loads((emb / schema.MANIFEST).read_text())
    manifest["shards"][0]["vectors"] = name
    (emb / schema.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="outside the artifact"):
        artifacts.load_embeddings(emb)
    result = invoke("index", "build", emb, "--out", tmp_path / "index")
    assert result.exit_code == 2 and "outside the artifact" in result.stderr and not (tmp_path / "index").exists()


def test_a_symlink_leading_out_is_refused(tmp_path):
    emb = embeddings(tmp_path)
    outside = tmp_path / "outside.npy"
    os.replace(emb / "vectors-00000.npy", outside)
    os.symlink(outside, emb / "vectors-00000.npy")
    with pytest.raises(ArtifactError, match="symlink leading outside"):
        artifacts.load_embeddings(emb)
    assert invoke("inspect", emb).exit_code == 2


# -- 4. integrity -----------------------------------------------------------------------------------------------------


def test_manifests_record_size_and_sha256_of_every_file(tmp_path):
    import hashlib

    emb = embeddings(tmp_path)
    manifest = artifacts.read_manifest(emb)
    assert set(manifest["checksums"]) == set(manifest["files"])
    for name, entry in manifest["checksums"].items():
        data = (emb / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("victim", ["vectors-00000.npy", "rows-00000.parquet"])
def test_truncated_files_fail_readers_and_inspect(tmp_path, victim):
    emb = embeddings(tmp_path)
    with open(emb / victim, "r+b") as handle:
        handle.truncate(os.path.getsize(emb / victim) - 7)
    with pytest.raises(ArtifactError, match="truncated or replaced"):
        artifacts.load_embeddings(emb)
    result = invoke("inspect", emb)
    assert result.exit_code == 2 and victim in result.stderr


def test_inspect_verifies_hashes_and_decodes_unless_quick(tmp_path):
    import torch

    ck = artifacts.write_checkpoint(tmp_path / "ck", {"w": torch.ones(4)}, {"format": "x"})
    weights = ck / schema.CHECKPOINT_WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))  # same size, other bytes
    result = invoke("inspect", ck, "--quick")
    assert result.exit_code == 2 and "sha256" in result.stderr
    # a consistently rewritten manifest passes the hashes; only decoding finds the damage
    weights.write_bytes(weights.read_bytes()[:20])
    manifest = json.loads((ck / schema.MANIFEST).read_text())
    manifest["checksums"] = {
        n: e for n, e in json.loads(json.dumps(artifacts.integrity.checksums(ck, manifest["files"]))).items()
    }
    (ck / schema.MANIFEST).write_text(json.dumps(manifest))
    assert invoke("inspect", ck, "--quick").exit_code == 0
    result = invoke("inspect", ck)
    assert result.exit_code == 2 and "model.safetensors: cannot decode" in result.stderr


# -- 5. the exit-1 paths ------------------------------------------------------------------------------------------


def test_compare_on_a_corrupt_metrics_json_is_exit_2(tmp_path):
    metrics = artifacts.write_metrics(tmp_path / "m", {"per_language": {}})
    (metrics / schema.METRICS_FILE).write_text('{"oops')
    manifest = json.loads((metrics / schema.MANIFEST).read_text())
    manifest["checksums"] = artifacts.integrity.checksums(metrics, manifest["files"])  # forged consistently
    (metrics / schema.MANIFEST).write_text(json.dumps(manifest))
    result = invoke("compare", metrics, "--out", tmp_path / "cmp")
    assert result.exit_code == 2 and "metrics.json: cannot read JSON" in result.stderr
    assert not (tmp_path / "cmp").exists()


def test_junk_weights_file_is_exit_2_naming_it(tmp_path):
    from mltk.models.clip import load_clip

    junk = tmp_path / "junk.pt"
    for data in (bytes(range(100)), b"\x80\x02" + bytes(range(256)) * 3, b"PK\x03\x04 broken zip"):
        junk.write_bytes(data)
        with pytest.raises(ConfigError, match="junk.pt: cannot load weights"):
            load_clip("mltk-tiny", str(junk))


def test_torchscript_is_loaded_only_when_trusted(tmp_path, monkeypatch):
    import open_clip

    from mltk.models import clip as clip_module

    archive = tmp_path / "ViT.pt"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("ViT/constants.pkl", b"not loaded")
    loaded = []
    monkeypatch.setattr(open_clip, "load_openai_model", lambda *a, **k: loaded.append(a) or 1 / 0)
    with pytest.raises(ConfigError, match="TorchScript archive.*--trust-torchscript"):
        clip_module.load_clip("mltk-tiny", str(archive))
    assert loaded == []
    with policy.trusting_torchscript(), pytest.raises(ZeroDivisionError):
        clip_module.load_clip("mltk-tiny", str(archive))
    assert len(loaded) == 1


def test_every_command_with_out_has_overwrite_and_with_pretrained_has_trust_torchscript():
    import typer.main

    group = typer.main.get_command(app)
    commands = [(name, command) for name, command in group.commands.items() if not hasattr(command, "commands")]
    commands += [(f"index {n}", c) for n, c in group.commands["index"].commands.items()]
    checked = 0
    for name, command in commands:
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        if "--out" in options:
            assert "--overwrite" in options, name
            checked += 1
        if "--pretrained" in options:
            assert "--trust-torchscript" in options, name
    assert checked >= 12


def test_undecodable_image_in_pretrain_names_the_image(tmp_path):
    from mltk.train.pretrain import decode_images

    table = pa.table({"image_id": ["a", "b"], "image": [b"\x89PNG junk", b"not an image"]})
    with pytest.raises(ArtifactError, match="imgs: image a cannot be decoded"):
        decode_images(table, lambda image: image, "imgs")


def test_image_width_is_checked_before_training():
    from mltk.train.stage import check_image_width

    with pytest.raises(ConfigError, match="img64: image embeddings have dim 64 but the model's text features"):
        check_image_width(128, np.zeros((3, 64)), "img64")
    check_image_width(64, np.zeros((3, 64)), "img64")


def test_unwritable_out_is_exit_2_before_anything_is_created(tmp_path):
    emb = embeddings(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = invoke("index", "build", emb, "--out", blocker / "sub" / "index")
    assert result.exit_code == 2 and "is not a directory" in result.stderr


def test_usage_errors_are_one_line():
    result = invoke("pretrain", "x", "--captions", "y", "--steps", "0", "--out", "z")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--steps" in lines[0]


# -- 6. duplicate ids -------------------------------------------------------------------------------------------------


def test_duplicate_ids_are_refused_by_every_reader_of_embeddings(tmp_path):
    emb = embeddings(tmp_path)
    rows = emb / "rows-00000.parquet"
    table = artifacts.read_table(rows)
    ids = table.column("id").to_pylist()
    ids[1] = ids[0]
    artifacts.write_table(rows, table.set_column(0, "id", pa.array(ids)))
    manifest = json.loads((emb / schema.MANIFEST).read_text())
    manifest["checksums"] = artifacts.integrity.checksums(emb, manifest["files"])
    (emb / schema.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="occur more than once"):
        artifacts.load_embeddings(emb)
    result = invoke("index", "build", emb, "--out", tmp_path / "index")
    assert result.exit_code == 2 and "'id0'" in result.stderr


def test_the_other_ranks_of_a_torchrun_job_share_rank_0s_lock(tmp_path, monkeypatch):
    """encode-images under torchrun: every rank builds a writer on the same --out; only rank 0 locks it, and the
    other ranks must not refuse it as a second writer (a failure 2 runs in 3 of the two-process test before)."""
    from mltk.artifacts import locks

    out = tmp_path / "emb"
    lock_file = locks.lock_path(out)
    holder = hold_lock(lock_file)  # a live process other than this one holds it
    try:
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "1")
        locks.refuse_if_held(out)  # rank 1: no error
        locks.OutputLock(out).acquire()
        assert lock_file.read_text() == f"{holder.pid} -\n"  # untouched
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(ArtifactError, match="another mltk process"):
            locks.refuse_if_held(out)
    finally:
        holder.kill()
        holder.wait()
