"""`mltk encode-images ... | mltk STAGE --captions CAPS ...`: every stage that takes image embeddings reads the
piped path by its kind (an embeddings artifact), and the checks that need no model run before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli.application import app
from mltk.models.clip import clip_checkpoint_config, load_clip

runner = CliRunner()
LANGS = ("en", "de", "zh")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny world from `mltk synth-data`, a random-weight CLIP saved as a checkpoint (the 'native' model), image
    embeddings from `mltk encode-images` (its stdout kept: what a pipe would carry) and a vocabulary for de, zh."""
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("pipes")
    result = runner.invoke(
        app,
        [
            "synth-data",
            "-o",
            str(root / "world"),
            "--train",
            "32",
            "--val",
            "12",
            "--test",
            "12",
            "--lang",
            ",".join(LANGS),
        ],
    )
    assert result.exit_code == 0, result.stderr
    images = result.stdout.strip()
    assert artifacts.read_manifest(images, "images")
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    result = runner.invoke(
        app,
        ["encode-images", "-m", str(native), "-o", str(root / "emb"), "--device", "cpu", "--workers", "0"],
        input=f"{images}\n",
    )  # synth-data | encode-images
    assert result.exit_code == 0, result.stderr
    captions = root / "world" / "captions"
    vocab = build_vocab(captions, "de", root / "vocab-de", size=600)
    vocab = build_vocab(captions, "zh", root / "vocab-zh", parent=vocab, size=600)
    return {
        "root": root,
        "images": images,
        "captions": captions,
        "native": native,
        "vocab": vocab,
        "pipe": result.stdout,
    }


def _run(args, pipe):
    result = runner.invoke(app, args, input=pipe)
    assert result.exit_code == 0, result.stderr
    path = result.stdout.strip()
    assert artifacts.is_artifact(path)
    return path


def _inputs_of(path):
    return [entry["path"] for entry in artifacts.read_manifest(path)["inputs"]]


def test_encode_images_pipes_into_train_nlt_le_and_evaluate(world, tmp_path):
    emb = world["pipe"].strip()
    common = ["--captions", str(world["captions"]), "--device", "cpu", "--batch-size", "4", "--lang", "de,zh"]
    nlt = _run(
        [
            "train-nlt",
            *common,
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--steps",
            "2",
            "-o",
            str(tmp_path / "nlt"),
            "--cache-dir",
            str(world["root"] / "cache"),
        ],
        world["pipe"],
    )
    assert emb in _inputs_of(nlt)  # the piped embeddings validated NLT by retrieval
    le = _run(["train-le", *common, "--init", nlt, "--steps", "2", "-o", str(tmp_path / "le")], world["pipe"])
    assert emb in _inputs_of(le)
    metrics = _run(
        [
            "evaluate",
            "--model",
            le,
            "--captions",
            str(world["captions"]),
            "--split",
            "test",
            "--metric",
            "recall,mrv",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m"),
        ],
        world["pipe"],
    )
    result = json.loads((Path(metrics) / "metrics.json").read_text())
    assert "mrv" in result and emb in _inputs_of(metrics)
    # the checkpoint as the positional: evaluate takes it as --model by its kind
    again = _run(
        [
            "evaluate",
            le,
            "--images",
            emb,
            "--captions",
            str(world["captions"]),
            "--split",
            "test",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m2"),
        ],
        "",
    )
    assert json.loads((Path(again) / "metrics.json").read_text())["per_language"] == result["per_language"]


def test_encode_images_pipes_into_train_continual_ccrk_and_index_build(world, tmp_path):
    emb = world["pipe"].strip()
    cll = _run(
        [
            "train-continual",
            "--captions",
            str(world["captions"]),
            "-m",
            str(world["native"]),
            "--lang",
            "en,de",
            "--vocab-size",
            "600",
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
            "-o",
            str(tmp_path / "cll"),
        ],
        world["pipe"],
    )
    assert emb in _inputs_of(cll)
    ccrk = _run(
        [
            "train-ccrk",
            "--captions",
            str(world["captions"]),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--lang",
            "en,de,zh",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "ccrk"),
        ],
        world["pipe"],
    )
    assert emb in _inputs_of(ccrk)
    index = _run(["index", "build", "-o", str(tmp_path / "idx")], world["pipe"])
    assert emb in _inputs_of(index)


def test_synth_data_pipes_into_pretrain_which_finds_the_captions(world, tmp_path):
    out = _run(
        ["pretrain", "--steps", "1", "--batch-size", "4", "--device", "cpu", "-o", str(tmp_path / "p")],
        f"{world['images']}\n",
    )
    assert str(world["captions"].resolve()) in _inputs_of(out)


def test_a_piped_artifact_of_the_wrong_kind_or_given_twice_is_one_line(world, tmp_path):
    base = ["train-le", "--init", str(world["native"]), "-o", str(tmp_path / "x"), "--device", "cpu"]
    result = runner.invoke(app, base + ["--captions", str(world["captions"])], input=f"{world['vocab']}\n")
    assert result.exit_code == 2 and "is a vocab artifact" in result.stderr and len(result.stderr.splitlines()) == 1
    result = runner.invoke(
        app, base + ["-", "--captions", str(world["captions"]), "--images", world["pipe"].strip()], input=world["pipe"]
    )
    assert result.exit_code == 2 and "given twice" in result.stderr
    # a captions artifact piped into train-le goes to --captions; the image embeddings are then missing
    result = runner.invoke(app, base, input=f"{world['captions']}\n")
    assert result.exit_code == 2 and "no image embeddings given" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("stage", ["train-nlt", "train-le", "train-continual"])
def test_random_weight_model_is_refused_before_training(world, tmp_path, stage):
    args = [
        stage,
        "--captions",
        str(world["captions"]),
        "--model",
        "mltk-tiny",
        "--device",
        "cpu",
        "-o",
        str(tmp_path / "x"),
        "--steps",
        "1",
    ]
    if stage == "train-le":
        args += ["--tokenizer", str(world["vocab"])]
    result = runner.invoke(app, args, input=world["pipe"])
    assert result.exit_code == 2, result.stderr
    assert "random-weight architecture" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob("*partial*"))


def test_image_embeddings_of_another_model_are_refused_up_front(world, tmp_path):
    torch.manual_seed(1)
    other = artifacts.write_checkpoint(
        tmp_path / "other",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    for args in (
        ["train-nlt", "--tokenizer", str(world["vocab"]), "--model", str(other)],
        ["train-ccrk", "--tokenizer", str(world["vocab"]), "--model", str(other)],
        ["evaluate", "--model", str(other), "--split", "test"],
    ):
        result = runner.invoke(
            app,
            [*args, "--captions", str(world["captions"]), "--device", "cpu", "-o", str(tmp_path / "x")],
            input=world["pipe"],
        )
        assert result.exit_code == 2, (args, result.stderr)
        assert "image embeddings were made by" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_unknown_metric_fails_before_captions_are_encoded(world, tmp_path, monkeypatch):
    import mltk.evaluate.stage as stage

    def never(*args, **kwargs):
        raise AssertionError("captions were encoded before the options were checked")

    monkeypatch.setattr(stage, "text_embeddings_for", never)
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(world["native"]),
            "--captions",
            str(world["captions"]),
            "--metric",
            "recall,ndcg",
            "-o",
            str(tmp_path / "m"),
        ],
        input=world["pipe"],
    )
    assert result.exit_code == 2 and "unknown --metric ndcg" in result.stderr


class _NeverClosingPipe:
    """A stdin that is a pipe whose writer never finishes: reading it would hang a real process."""

    def isatty(self):
        return False

    def read(self):
        raise AssertionError("stdin was read although nothing was missing")


def test_stdin_is_not_read_when_nothing_it_could_give_is_missing(tmp_path):
    from mltk.cli.common import route_input

    captions = tmp_path / "caps.parquet"
    captions.write_bytes(b"")
    options = {"captions": "--captions", "image-embeddings": "--images", "checkpoint": "--model"}
    routed = route_input(
        None,
        {"captions": str(captions), "image-embeddings": None, "checkpoint": None},
        default="captions",
        options=options,
        stdin=_NeverClosingPipe(),
        wanting=["captions"],
    )
    assert routed == {"captions": captions, "image-embeddings": None, "checkpoint": None}
    with open(os.devnull) as devnull:  # a character device, not a pipe: nothing to wait for
        routed = route_input(
            None, {"captions": None, "image-embeddings": None}, default="captions", options=options, stdin=devnull
        )
    assert routed == {"captions": None, "image-embeddings": None}
