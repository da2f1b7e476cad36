"""What a new user trips over at the edges: which command spoke, an empty pipe, a local path that does
not exist, no validation split, dropping the resume state, log lines off a terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.download import looks_local
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.train import mla
from mltk.train.stage import hold_out_validation

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("friction")
    result = synthesize(root / "world", SynthConfig(train=32, val=8, test=8, langs=("en", "de")))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    vocab = build_vocab(result.captions_path, "de", root / "vocab-de", size=600)
    return {"root": root, "captions": result.captions_path, "native": native, "vocab": vocab}


def mltk(*args: str, stdin=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mltk", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def test_an_error_line_names_the_command_that_failed(tmp_path):
    result = runner.invoke(app, ["inspect", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"mltk inspect: error: {tmp_path / 'missing'}: no such file or directory"
    ]


def test_a_stage_after_a_failed_one_says_the_pipe_was_empty(world, tmp_path):
    """`mltk encode-images MISSING | mltk index build` used to say 'empty stdin; expected the path ...'."""
    pipe = subprocess.run(
        f"{sys.executable} -m mltk inspect {tmp_path / 'nothing'} | {sys.executable} -m mltk "
        f"index build -o {tmp_path / 'idx'}",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    lines = pipe.stderr.strip().splitlines()
    assert pipe.returncode == 2 and lines[0].startswith("mltk inspect: error:")
    assert lines[-1].startswith("mltk index: error: <stdin>: the previous stage of the pipe wrote nothing")


def test_a_missing_input_after_an_empty_pipe_says_so(world, tmp_path):
    """train-le routes a piped path to --images; with nothing piped it asked the user to pipe one."""
    pipe = subprocess.run(
        f"true | {sys.executable} -m mltk train-le --captions {world['captions']} "
        f"--init {tmp_path / 'x'} -o {tmp_path / 'le'}",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert pipe.returncode == 2
    assert "the previous stage of the pipe wrote nothing" in pipe.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "name, local",
    [
        ("runs/vocab", True),
        ("./vocab", True),
        ("/abs/folder", True),
        ("a/b/c", True),
        ("bert-base-multilingual-cased", False),
        ("sentence-transformers/all-MiniLM-L6-v2", False),
        ("hf-hub:laion/CLIP-ViT-B-32", False),
        ("local-dir:/x/y", False),
    ],
)
def test_names_spelled_as_paths_are_told_from_hub_ids(tmp_path, monkeypatch, name, local):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert looks_local(name) is local


def test_a_local_tokenizer_that_does_not_exist_fails_at_once(world, tmp_path, monkeypatch):
    """`--tokenizer runs/vocab` (no such folder, but runs/ exists) was tried on the hub for 53 s of retries."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub

    def no_network(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    result = runner.invoke(
        app,
        [
            "train-nlt",
            str(world["captions"]),
            "--model",
            str(world["native"]),
            "--tokenizer",
            "runs/vocab",
            "--lang",
            "de",
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "nlt"),
        ],
    )
    assert result.exit_code == 2
    assert "tokenizer not found: no such file or directory (a local path, so it is not looked up" in result.stderr


def test_no_validation_split_holds_out_whole_train_images(world):
    table = artifacts.load_captions(world["captions"])
    no_val = table.filter(pa.compute.not_equal(table.column("split"), "val"))
    held = hold_out_validation(no_val, "caps")
    val = held.filter(pa.compute.equal(held.column("split"), "val"))
    val_images = set(val.column("image_id").to_pylist())
    assert len(val_images) == 2  # 5% of 32, rounded
    train = held.filter(pa.compute.equal(held.column("split"), "train"))
    assert not val_images & set(train.column("image_id").to_pylist())  # no translation of a val image trains
    assert set(val.column("lang").to_pylist()) == {"en", "de"}
    assert hold_out_validation(no_val, "caps").equals(held)  # the same images every time
    assert hold_out_validation(table, "caps") is table  # a val split is kept as it is


def test_train_nlt_without_a_val_split_trains_and_says_so(world, tmp_path):
    """It refused: "no translation pairs ... in split 'val'"."""
    table = artifacts.load_captions(world["captions"])
    no_val = artifacts.write_captions(
        tmp_path / "caps", table.filter(pa.compute.not_equal(table.column("split"), "val"))
    )
    result = runner.invoke(
        app,
        [
            "train-nlt",
            str(no_val),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--lang",
            "de",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
            "-o",
            str(tmp_path / "nlt"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "no 'val' split; holding out 2 of 32 train images" in result.stderr


def test_prune_drops_the_resume_state_and_the_artifact_still_verifies(world, tmp_path):
    config = mla.MlaConfig(
        captions=world["captions"],
        out=tmp_path / "nlt",
        model=str(world["native"]),
        tokenizer=str(world["vocab"]),
        languages=("de",),
        batch_size=4,
        device="cpu",
        cache_dir=world["root"] / "cache",
        loop={"steps": 2, "lr": 1e-3},
    )
    out = mla.train_nlt(config)
    assert (out / "state").is_dir()
    weights_before = artifacts.load_checkpoint(out)[0]
    result = runner.invoke(app, ["prune", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out}\n" and not (out / "state").exists()
    artifacts.verify_artifact(out)  # inspect accepts it
    weights_after = artifacts.load_checkpoint(out)[0]
    assert all(torch.equal(weights_before[k], weights_after[k]) for k in weights_before)
    assert mla.train_nlt(config) == out  # the same command still finds it up to date
    assert runner.invoke(app, ["prune", str(out)]).exit_code == 0  # nothing left to prune: a no-op


def test_prune_refuses_an_artifact_without_resume_state_kind(world):
    result = runner.invoke(app, ["prune", str(world["captions"])])
    assert result.exit_code == 2 and "only checkpoints keep resume state" in result.stderr


def test_log_lines_off_a_terminal_are_not_wrapped(tmp_path):
    long_path = "/".join(["a_rather_long_folder_name"] * 8)
    code = f"from mltk.core.runtime import log; log('wrote {long_path}')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "80"},
    )
    assert done.stderr.splitlines() == [f"wrote {long_path}"]


def test_the_tensorboard_hint_installs_the_right_package(monkeypatch):
    """`pip install 'mltk[tensorboard]'` installs an unrelated project that has the name mltk on the index."""
    from mltk.core.errors import ConfigError
    from mltk.train import step_log

    monkeypatch.setattr(step_log, "tensorboard_available", lambda: False)
    with pytest.raises(ConfigError) as raised, step_log.step_logging(tensorboard="tb"):
        pass
    assert "pip install 'tensorboard>=2.12'" in str(raised.value) and "mltk[" not in str(raised.value)


def test_evaluate_split_takes_a_comma_list_like_every_list_option(tmp_path):
    """`--split test,val` failed ("leaves 0 image(s)") although lists take commas elsewhere."""
    import numpy as np

    rng = np.random.default_rng(0)
    images = rng.standard_normal((6, 8)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    splits = ["test", "test", "val", "val", "train", "train"]
    image_path = artifacts.write_embeddings(tmp_path / "img", [f"i{n}" for n in range(6)], images, split=splits)
    texts = images + 0.1 * rng.standard_normal((6, 8)).astype(np.float32)
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    text_path = artifacts.write_embeddings(
        tmp_path / "txt",
        [f"en/{n}" for n in range(6)],
        texts,
        image_id=[f"i{n}" for n in range(6)],
        lang=["en"] * 6,
        caption_id=[f"s{n}" for n in range(6)],
        split=splits,
    )
    counts = {}
    for spelling in (["--split", "test,val"], ["--split", "test", "--split", "val"], ["--split", "test"]):
        out = tmp_path / "-".join(spelling[1::2])
        result = runner.invoke(
            app, ["evaluate", "--images", str(image_path), "--texts", str(text_path), *spelling, "-o", str(out)]
        )
        assert result.exit_code == 0, result.stderr
        counts[tuple(spelling)] = artifacts.load_metrics(out)["settings"]["counts"]["images"]
    assert list(counts.values()) == [4, 4, 2]


TRAINING_COMMANDS = ("train-nlt", "train-le", "train-nlt-le", "train-ccrk", "train-continual")


@pytest.mark.parametrize("command", TRAINING_COMMANDS)
def test_training_commands_have_no_default_model_that_they_refuse(world, tmp_path, command):
    """``--model`` defaulted to ``mltk-tiny``, a random-weight architecture every training stage refuses: the
    default now is no model, and leaving out both --model and --init says what to give, before any work."""
    help_text = runner.invoke(app, [command, "--help"], terminal_width=200).stdout
    assert "mltk-tiny]" not in help_text
    out = tmp_path / "out"
    result = runner.invoke(app, [command, str(world["captions"]), "--images", str(world["native"]), "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    if command == "train-le":  # LE starts from NLT, or from fresh acquirers on --model with --tokenizer
        assert result.stderr.startswith("mltk train-le: error: train-le starts from an NLT checkpoint (--init)")
    else:
        assert result.stderr.startswith(f"mltk {command}: error: {command} needs --model BASE")
        assert ("--init CHECKPOINT" in result.stderr) == (command != "train-continual")
    assert not out.exists()
