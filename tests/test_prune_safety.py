"""`mltk prune` under the artifact rules: nested artifacts kept, the lock taken before the manifest is read, a kill at
any point leaving a complete checkpoint (and a rerun recovering), the identity that artifacts built on it recorded,
a full disk or a refused write as exit 2."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import locks, schema
from mltk.artifacts.manifest import fingerprint
from mltk.cli.application import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def checkpoint_with_state_and_vocab(path: Path) -> Path:
    """A checkpoint with resume state and a nested artifact (``vocab/``, as train-ccrk keeps CLL-CLIP's)."""
    vocab = artifacts.write_metrics(path.parent / "vocab-source", {"tokens": 3})
    with artifacts.ArtifactWriter(path, "checkpoint", stage="test") as writer:
        (writer.dir / schema.CHECKPOINT_STATE_DIR).mkdir()
        (writer.dir / schema.CHECKPOINT_STATE_DIR / "moments.json").write_text('{"m": 1}')
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, {"format": "open_clip", "model": "mltk-tiny"})
        shutil.copytree(vocab, writer.dir / "vocab")
    shutil.rmtree(vocab)
    return path


def assert_pruned(checkpoint: Path) -> None:
    assert not (checkpoint / schema.CHECKPOINT_STATE_DIR).exists()
    assert artifacts.verify_artifact(checkpoint)["verified"]
    assert artifacts.verify_artifact(checkpoint / "vocab")["verified"]  # the nested artifact is whole
    assert [p.name for p in checkpoint.parent.iterdir() if p.name.startswith(f".{checkpoint.name}")] == []


def test_prune_keeps_nested_artifacts_and_the_identity_built_on_it(tmp_path):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    downstream = artifacts.write_metrics(tmp_path / "other" / "m", {"a": 1}, config={"n": 1}, inputs=[checkpoint])
    recorded = artifacts.read_manifest(downstream)["inputs"][0]["fingerprint"]
    result = runner.invoke(app, ["prune", str(checkpoint)])
    assert result.exit_code == 0, result.stderr
    assert_pruned(checkpoint)
    assert fingerprint(checkpoint) == recorded  # artifacts built on it are not "made from other inputs"
    assert (
        artifacts.reusable(downstream, "metrics", stage="evaluate", config={"n": 1}, inputs=[checkpoint]) == downstream
    )
    manifest = artifacts.read_manifest(checkpoint)
    manifest["checksums"]["config.json"]["sha256"] = "0" * 64  # a pruned manifest that pins other content
    artifacts.write_json(checkpoint / schema.MANIFEST, manifest)
    assert fingerprint(checkpoint) != recorded


def test_prune_takes_the_lock_before_it_reads_the_manifest(tmp_path, monkeypatch):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    seen = []
    verify = artifacts.verify_artifact

    def looking(path, **kwargs):
        seen.append(locks.lock_path(checkpoint).exists())
        return verify(path, **kwargs)

    monkeypatch.setattr(artifacts, "verify_artifact", looking)
    assert runner.invoke(app, ["prune", str(checkpoint)]).exit_code == 0
    assert seen and seen[0] is True


KILLED = """
import os, signal, sys
from mltk.artifacts import prune
from mltk.artifacts import swap
where = os.environ["KILL_AT"]
real = prune.replace_directory
def die():
    os.kill(os.getpid(), signal.SIGKILL)
def replace(new, path, old):
    if where == "between the renames":
        os.replace(path, old)
    elif where == "after the swap":
        real(new, path, old)
    die()
prune.replace_directory = replace
sys.argv = ["mltk", "prune", sys.argv[1]]
from mltk.cli import main
main()
"""


@pytest.mark.parametrize("where", ["before the swap", "between the renames", "after the swap"])
def test_a_killed_prune_leaves_a_checkpoint_or_a_rerun_puts_it_back(tmp_path, where):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    env = {**os.environ, "PYTHONPATH": str(REPO), "KILL_AT": where}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(checkpoint)], env=env, capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    if where != "between the renames":  # the swap is one step: a complete checkpoint, old or new, at the path
        assert artifacts.verify_artifact(checkpoint)["verified"]
    result = runner.invoke(app, ["prune", str(checkpoint)])
    assert result.exit_code == 0, result.stderr
    assert_pruned(checkpoint)


@pytest.mark.parametrize("failure", ["ENOSPC", "EACCES"])
def test_a_failed_write_is_exit_2_naming_the_file_and_changes_nothing(tmp_path, monkeypatch, failure):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    before = {p: p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()}
    code = errno.ENOSPC if failure == "ENOSPC" else errno.EACCES

    def failing(path, obj):
        raise OSError(code, os.strerror(code), str(path) + ".tmp")

    monkeypatch.setattr(artifacts, "write_json", failing)
    result = runner.invoke(app, ["prune", str(checkpoint)])
    assert result.exit_code == 2, (result.stderr, result.exception)
    words = "no space left on device" if failure == "ENOSPC" else "cannot write"
    assert result.stderr.startswith("mltk prune: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert words in result.stderr and f"while writing {checkpoint / schema.MANIFEST};" in result.stderr
    assert {p: p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_an_unwritable_folder_is_refused_before_anything(tmp_path, monkeypatch):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: False if Path(path) == tmp_path else real_access(path, mode, **kw)
    )
    result = runner.invoke(app, ["prune", str(checkpoint)])
    assert result.exit_code == 2 and f"{tmp_path} is not writable" in result.stderr, result.stderr
    assert (checkpoint / schema.CHECKPOINT_STATE_DIR).is_dir()


def _kill_prune_at(checkpoint: Path, where: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KILL_AT": where}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(checkpoint)], env=env, capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]


def test_a_rewrite_after_a_killed_prune_leaves_nothing_beside_the_checkpoint(tmp_path):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    _kill_prune_at(checkpoint, "after the swap")  # the complete original is left under the staging name
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".ck.prune-")]
    with artifacts.ArtifactWriter(checkpoint, "checkpoint", stage="retrain", overwrite=True) as writer:
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, {"format": "open_clip", "model": "mltk-tiny"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_a_reader_after_a_killed_prune_says_where_the_checkpoint_is_and_how_to_put_it_back(tmp_path):
    checkpoint = checkpoint_with_state_and_vocab(tmp_path / "ck")
    _kill_prune_at(checkpoint, "between the renames")
    result = runner.invoke(app, ["inspect", str(checkpoint)])
    assert result.exit_code == 2 and ".ck.pruned-original-" in result.stderr and "mltk prune" in result.stderr
    assert runner.invoke(app, ["prune", str(checkpoint)]).exit_code == 0
    assert_pruned(checkpoint)
