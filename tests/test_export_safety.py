"""`mltk export` under the rules every artifact writer follows (docs/safety.md): what an existing --out may be,
one writer per output, no debris from a killed run, a full disk or a refused write as exit 2, long names, the
input from a pipe, --base for a checkpoint moved alone, and the files' modes."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers_encoders import tiny_clip_and_mla
from helpers_locks import hold_lock
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import locks
from mltk.cli.application import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def invoke(*args, input=None, env=None):
    return runner.invoke(app, [str(a) for a in args], input=input, env=env)


def assert_refused(result, *words):
    """Exit 2, nothing on stdout, one error line naming ``words``."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("mltk")]
    assert len(errors) == 1 and errors[0].startswith("mltk export: error: "), result.stderr
    for word in words:
        assert str(word) in errors[0], (word, errors[0])


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny CLIP checkpoint and an MLA checkpoint over it with its WordPiece tokenizer folder, in one tree."""
    root = tmp_path_factory.mktemp("models")
    clip, mla = tiny_clip_and_mla(root)
    return {"root": root, "clip": clip, "mla": mla, "tokenizer": root / "wordpiece"}


def export(models, out, *extra, checkpoint=None, env=None):
    return invoke("export", checkpoint or models["clip"], "--format", "open_clip", "-o", out, *extra, env=env)


# --- what an existing --out may be -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "the folder holding the checkpoint",
        "inside the checkpoint's tokenizer folder",
        "a user's folder",
        "a user's folder under MLTK_OVERWRITE=1",
        "-o ''",
        "the current directory",
    ],
)
def test_overwrite_never_replaces_what_export_did_not_make(models, tmp_path, monkeypatch, case):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    outs = {
        "the folder holding the checkpoint": (models["root"], "holds the input checkpoint"),
        "inside the checkpoint's tokenizer folder": (models["tokenizer"] / "export", "lies inside the tokenizer"),
        "a user's folder": (mine, "is not an mltk export"),
        "a user's folder under MLTK_OVERWRITE=1": (mine, "is not an mltk export"),
        "-o ''": ("", "current directory"),
        "the current directory": (".", "current directory"),
    }
    out, message = outs[case]
    checkpoint = models["mla"] if "tokenizer" in case else models["clip"]
    fmt = "mla" if "tokenizer" in case else "open_clip"
    before = snapshot(models["root"]), snapshot(mine)
    env = {"MLTK_OVERWRITE": "1"} if "MLTK_OVERWRITE" in case else None
    extra = () if env else ("--overwrite",)
    result = invoke("export", checkpoint, "--format", fmt, "-o", out, *extra, env=env)
    assert_refused(result, message)
    assert (snapshot(models["root"]), snapshot(mine)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_an_empty_folder_or_an_earlier_export_is_replaced(models, tmp_path):
    out = tmp_path / "clip"
    out.mkdir()
    assert export(models, out).exit_code == 0  # an empty folder takes the export without --overwrite
    info = json.loads((out / "mltk_export.json").read_text())
    assert info["made_by"] == "mltk export" and info["format"] == "open_clip"
    again = export(models, out)  # the same checkpoint in the same format: reused, as the help of --overwrite says
    assert again.exit_code == 0 and "up to date" in again.stderr and again.stdout.strip() == str(out.resolve())
    assert_refused(export(models, out, checkpoint=models["mla"]), "exists; pass --overwrite")
    (out / "stale.txt").write_text("from an older export")
    assert export(models, out, "--overwrite").exit_code == 0
    assert not (out / "stale.txt").exists() and (out / "open_clip_model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip"]


# --- one writer, no debris -------------------------------------------------------------------------------------


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(models, tmp_path):
    out = tmp_path / "clip"
    holder = hold_lock(locks.lock_path(out))
    try:
        assert_refused(export(models, out), "is being written by another mltk process", f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert not out.exists()
    assert export(models, out).exit_code == 0


KILLED = """
import os, signal, sys
from pathlib import Path
sys.argv = ["mltk", "export", sys.argv[1], "--format", "open_clip", "-o", sys.argv[2], "--overwrite"]
from mltk.export import folder, open_clip_dir
where = os.environ["KILL_AT"]
if where == "writing":
    write = open_clip_dir.write_open_clip_folder
    def write_then_die(*args, **kwargs):
        write(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    open_clip_dir.write_open_clip_folder = write_then_die
else:
    def first_rename_then_die(staging, out):
        os.replace(out, out.parent / f".{folder.stem(out)}.export-old-{os.getpid()}-0123456789ab")
        os.kill(os.getpid(), signal.SIGKILL)
    folder._swap = first_rename_then_die
from mltk.cli import main
main()
"""


@pytest.mark.parametrize("where", ["writing", "between the renames"])
def test_a_killed_export_leaves_nothing_the_next_run_does_not_clean(models, tmp_path, where):
    out = tmp_path / ("x" * 240)  # a legal long name: mltk's own names beside it must fit too
    assert export(models, out).exit_code == 0
    before = snapshot(out)
    env = {**os.environ, "PYTHONPATH": str(REPO), "KILL_AT": where}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(models["clip"]), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != locks.lock_path(out).name)  # a stale lock: no lock
    assert len(left) == 2, left  # the export (or nothing at its place) and the killed run's folder
    again = export(models, out)
    assert again.exit_code == 0 and "up to date" in again.stderr  # the previous export is back in its place
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    assert export(models, out, "--overwrite").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


# --- a full disk, a refused write ------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["ENOSPC", "EACCES"])
def test_a_failed_write_is_exit_2_naming_the_file_and_keeps_the_previous_export(models, tmp_path, monkeypatch, failure):
    out = tmp_path / "clip"
    assert export(models, out).exit_code == 0
    before = snapshot(out)
    code, text = (
        (errno.ENOSPC, "No space left on device") if failure == "ENOSPC" else (errno.EACCES, "Permission denied")
    )

    def failing(path, tensors, metadata=None):
        Path(path).with_name(Path(path).name + ".tmp").write_bytes(b"\0" * 16)  # a few bytes made it
        raise OSError(code, text)

    monkeypatch.setattr(artifacts, "save_tensors", failing)
    result = export(models, out, "--overwrite")
    words = ["no space left on device"] if failure == "ENOSPC" else ["cannot write", "Permission denied"]
    assert_refused(result, *words, f"while writing {out.resolve() / 'open_clip_model.safetensors'}")
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip"]


def test_an_unwritable_parent_is_refused_before_any_work(models, tmp_path, monkeypatch):
    parent = tmp_path / "read-only"
    parent.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: False if Path(path) == parent else real_access(path, mode, **kw)
    )
    assert_refused(export(models, parent / "a" / "clip"), f"{parent} is not writable")
    assert list(parent.iterdir()) == []


# --- input from a pipe, --base for a checkpoint moved alone ----------------------------------------------------


def test_export_takes_its_checkpoint_from_a_pipe(models, tmp_path):
    result = invoke("export", "-", "--format", "open_clip", "-o", tmp_path / "clip", input=f"{models['clip']}\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str((tmp_path / "clip").resolve())


def test_a_checkpoint_moved_alone_names_every_missing_dependency_at_once_and_takes_base(tmp_path):
    tree = tmp_path / "tree"
    clip, mla = tiny_clip_and_mla(tree)
    alone = Path(shutil.copytree(mla, tmp_path / "alone"))
    moved = Path(shutil.move(tree, tmp_path / "moved"))
    result = invoke("export", alone, "--format", "mla", "-o", tmp_path / "out")
    assert_refused(result, "misses 2 dependencies", f"base model {clip}", f"tokenizer {tree / 'wordpiece'}", "--base")
    for command in (["export", alone, "--format", "mla", "-o", tmp_path / "out"], ["inspect", alone]):
        done = invoke(*command, "--base", f"{moved / 'native'},{moved / 'wordpiece'}")
        assert done.exit_code == 0, done.stderr
    assert (tmp_path / "out" / "mla_loader.py").is_file()
    assert "--base" in " ".join(invoke("classify", "--help").stdout.split())


# --- what the exported files are ------------------------------------------------------------------------------


def test_every_exported_file_and_checkpoint_weights_get_the_umasks_mode(models, tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "mla"
        assert invoke("export", models["mla"], "--format", "mla", "-o", out).exit_code == 0
        weights = artifacts.write_checkpoint(tmp_path / "ck", {"w": torch.zeros(2)}, {"format": "open_clip"})
    finally:
        os.umask(old)
    files = [p for p in out.rglob("*") if p.is_file()] + [p for p in weights.rglob("*") if p.is_file()]
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {"0o644"}, modes
    assert (out / "acquirers.safetensors").is_file() and (weights / "model.safetensors").is_file()


MLA_NORMS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from mla_loader import load
encoder = load(sys.argv[1])
print(json.dumps({lang: encoder.encode(["a red circle", "ein blaues Quadrat"], lang).norm(dim=-1).tolist()
                  for lang in ("en", "de")}))
"""


def test_the_mla_loader_normalises_when_its_config_says_so(models, tmp_path):
    out = tmp_path / "mla"
    assert invoke("export", models["mla"], "--format", "mla", "-o", out).exit_code == 0
    config = json.loads((out / "mla_config.json").read_text())
    assert config["normalize"] is False  # a CLIP's features are normalised by their users, as open_clip's
    (out / "mla_config.json").write_text(json.dumps({**config, "normalize": True}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", MLA_NORMS, str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    norms = json.loads(done.stdout)
    assert all(abs(value - 1) < 1e-5 for values in norms.values() for value in values), norms


def test_a_full_disk_while_training_is_exit_2_naming_the_file(models, tmp_path, monkeypatch):
    """safetensors reports a full disk as its own error (no OSError): train-nlt said "internal error", exit 1."""
    import safetensors.torch
    from safetensors import SafetensorError

    from mltk.data.synth import SynthConfig, synthesize

    world = synthesize(tmp_path / "world", SynthConfig(train=8, val=4, test=4, langs=("en", "de")))

    def full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 8)  # a few bytes made it
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    out = tmp_path / "nlt"
    result = invoke(
        "train-nlt",
        world.captions_path,
        "--model",
        models["clip"],
        "--tokenizer",
        models["tokenizer"],
        "--no-init-embeddings",
        "--lang",
        "de",
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--cache-dir",
        tmp_path / "cache",
        "-o",
        out,
    )
    assert result.exit_code == 2, (result.stderr, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("mltk")]
    assert len(errors) == 1 and "no space left on device while writing" in errors[0], result.stderr
    assert str(out.resolve()) in errors[0] and ".safetensors" in errors[0]
    assert not out.exists()
