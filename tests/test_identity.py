"""What an input IS, not how it is spelled: checkpoints pin their base model and tokenizer by content (a changed
base is refused, a moved tree finds them again, ``--base`` points at a new place), pretrain resumes its BatchNorm
statistics bit for bit, and an existing --out is reused whatever spelling named the same inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import dependencies
from mltk.cli.application import app
from mltk.core import policy
from mltk.core.errors import MltkError
from mltk.models.clip import clip_checkpoint_config, load_clip

runner = CliRunner()
LANGS = ("en", "de", "zh")


def _native(path: Path, seed: int) -> Path:
    """A random-weight tiny CLIP saved as a whole-CLIP checkpoint (what `mltk pretrain` writes)."""
    torch.manual_seed(seed)
    with policy.overwriting():
        return artifacts.write_checkpoint(
            path, load_clip("mltk-tiny").model.state_dict(), clip_checkpoint_config("mltk-tiny"), stage="pretrain"
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny world (synth-data), a 'native' CLIP checkpoint, image embeddings piped from encode-images (its stdout
    kept: what a pipe carries) and a BPE vocabulary for de."""
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("identity")
    result = runner.invoke(
        app,
        [
            "synth-data",
            "-o",
            str(root / "world"),
            "--train",
            "24",
            "--val",
            "8",
            "--test",
            "8",
            "--lang",
            ",".join(LANGS),
        ],
    )
    assert result.exit_code == 0, result.stderr
    native = _native(root / "native", 0)
    result = runner.invoke(
        app,
        ["encode-images", "-m", str(native), "-o", str(root / "emb"), "--device", "cpu", "--workers", "0"],
        input=result.stdout,
    )
    assert result.exit_code == 0, result.stderr
    captions = root / "world" / "captions"
    vocab = build_vocab(captions, "de", root / "vocab", size=600)
    return {
        "root": root,
        "captions": captions,
        "native": native,
        "vocab": vocab,
        "pipe": result.stdout,
        "emb": Path(result.stdout.strip()),
    }


def _ok(args, stdin=None):
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert result.exit_code == 0, result.stderr
    return result


def _refused(args, stdin=None) -> str:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr
    return " ".join(result.stderr.split())


def _nlt(world, base: Path, vocab: Path, out: Path) -> Path:
    _ok(
        [
            "train-nlt",
            world["captions"],
            "--model",
            base,
            "--tokenizer",
            vocab,
            "--lang",
            "de",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "-o",
            out,
            "--cache-dir",
            world["root"] / "cache",
        ]
    )
    return out


def _tree(world, root: Path) -> dict:
    """A project tree of its own: base model, vocabulary and an MLA checkpoint trained on them."""
    root.mkdir(parents=True)
    base = Path(shutil.copytree(world["native"], root / "native"))
    vocab = Path(shutil.copytree(world["vocab"], root / "vocab"))
    return {"base": base, "vocab": vocab, "nlt": _nlt(world, base, vocab, root / "runs" / "nlt")}


def _encode(world, model: Path, out: Path, *extra) -> np.ndarray:
    path = _ok(
        [
            "encode-texts",
            world["captions"],
            "-m",
            model,
            "--lang",
            "de",
            "--split",
            "test",
            "--device",
            "cpu",
            "-o",
            out,
            *extra,
        ]
    ).stdout.strip()
    return np.array(artifacts.load_embeddings(path)[1])


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints pin their base model and tokenizer
# ----------------------------------------------------------------------------------------------------------------


def test_an_mla_checkpoint_records_base_and_tokenizer_by_fingerprint_and_relative_path(world, tmp_path):
    tree = _tree(world, tmp_path / "p")
    config = json.loads((tree["nlt"] / "config.json").read_text())
    base, tokenizer = config["depends_on"]["base.model"], config["depends_on"]["non_native.source"]
    assert base["location"] == str(tree["base"]) and base["relative"] == "../../native"
    assert base["fingerprint"] == dependencies.content_fingerprint(tree["base"])
    assert tokenizer["location"] == str(tree["vocab"]) and tokenizer["relative"] == "../../vocab"
    assert tokenizer["fingerprint"] == dependencies.content_fingerprint(tree["vocab"])


def test_a_base_retrained_in_place_is_refused_shown_by_inspect_and_not_up_to_date(world, tmp_path):
    tree = _tree(world, tmp_path / "p")
    _encode(world, tree["nlt"], tmp_path / "e1")
    _native(tree["base"], seed=1)  # `pretrain --overwrite` of the base: same path, other weights
    message = _refused(
        ["encode-texts", world["captions"], "-m", tree["nlt"], "--lang", "de", "--device", "cpu", "-o", tmp_path / "e2"]
    )
    assert "base model changed since this checkpoint was made" in message and str(tree["base"]) in message
    inspected = _ok(["inspect", tree["nlt"], "--json"]).stdout
    rows = {row["field"]: row for row in json.loads(inspected)["dependencies"]}
    assert rows["base.model"]["status"] == "changed" and rows["non_native.source"]["status"] == "unchanged"
    shown = " ".join(_ok(["inspect", tree["nlt"]]).stderr.split())
    assert f"warning: base model {tree['base']} changed since this checkpoint was made" in shown
    assert f"warning: input {tree['base']} changed" in shown  # a stage's base model is one of its inputs
    # the training stage itself: the same command is no longer "up to date"
    message = _refused(
        [
            "train-nlt",
            world["captions"],
            "--model",
            tree["base"],
            "--tokenizer",
            tree["vocab"],
            "--lang",
            "de",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "-o",
            tree["nlt"],
            "--cache-dir",
            world["root"] / "cache",
        ]
    )
    assert "from other inputs" in message


def test_a_moved_tree_finds_its_base_and_vocabulary_again(world, tmp_path):
    tree = _tree(world, tmp_path / "p")
    before = _encode(world, tree["nlt"], tmp_path / "e1")
    moved = Path(shutil.move(tmp_path / "p", tmp_path / "elsewhere"))
    after = _encode(world, moved / "runs" / "nlt", tmp_path / "e2")
    np.testing.assert_array_equal(before, after)
    rows = dependencies.report(
        artifacts.read_checkpoint_config(moved / "runs" / "nlt", resolve=False), moved / "runs" / "nlt"
    )
    assert [row["status"] for row in rows] == [f"found at {moved / 'native'}", f"found at {moved / 'vocab'}"]


def test_a_checkpoint_moved_alone_names_its_base_and_takes_base(world, tmp_path):
    tree = _tree(world, tmp_path / "p")
    before = _encode(world, tree["nlt"], tmp_path / "e1")
    alone = Path(shutil.move(tree["nlt"], tmp_path / "nlt"))
    new_base = Path(shutil.move(tree["base"], tmp_path / "models" / "native"))
    message = _refused(
        ["encode-texts", world["captions"], "-m", alone, "--lang", "de", "--device", "cpu", "-o", tmp_path / "e2"]
    )
    assert f"checkpoint {alone} depends on base model {tree['base']} (sha256:" in message
    assert "pass --base" in message
    wrong = _native(tmp_path / "other", seed=2)
    message = _refused(
        [
            "encode-texts",
            world["captions"],
            "-m",
            alone,
            "--base",
            wrong,
            "--lang",
            "de",
            "--device",
            "cpu",
            "-o",
            tmp_path / "e2",
        ]
    )
    assert f"--base {wrong} is not it" in message
    after = _encode(world, alone, tmp_path / "e2", "--base", new_base)
    np.testing.assert_array_equal(before, after)


def test_a_name_is_recorded_as_a_name_without_fingerprint(tmp_path):
    config = {
        "format": "mla",
        "base": {"model": "ViT-B-32-quickgelu", "pretrained": "openai"},
        "non_native": {"kind": "hf", "source": "bert-base-multilingual-cased"},
    }
    pinned = dependencies.pin(config, tmp_path / "ckpt")
    records = pinned["depends_on"]
    assert set(records) == {"base.model", "base.pretrained", "non_native.source"}
    assert all(r["fingerprint"] is None and "no fingerprint" in r["note"] for r in records.values())
    assert records["base.pretrained"]["name"] == "openai"
    assert dependencies.resolve(pinned, tmp_path / "ckpt")["base"] == config["base"]  # names are trusted
    assert {row["status"] for row in dependencies.report(pinned, tmp_path / "ckpt")} == {"a name"}


def test_a_train_continual_checkpoint_pins_its_base(world, tmp_path):
    tree_base = Path(shutil.copytree(world["native"], tmp_path / "native"))
    out = tmp_path / "cll"
    _ok(
        [
            "train-continual",
            "--captions",
            world["captions"],
            "-m",
            tree_base,
            "--lang",
            "en,de",
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--vocab-size",
            "600",
            "--device",
            "cpu",
            "--cache-dir",
            world["root"] / "cache",
            "-o",
            out,
        ],
        stdin=world["pipe"],
    )
    record = artifacts.read_checkpoint_config(out, resolve=False)["depends_on"]["base.model"]
    assert record["relative"] == "../native" and record["fingerprint"] == dependencies.content_fingerprint(tree_base)
    _native(tree_base, seed=3)
    message = _refused(
        ["encode-texts", world["captions"], "-m", out, "--lang", "de", "--device", "cpu", "-o", tmp_path / "e"]
    )
    assert "base model changed since this checkpoint was made" in message


# ----------------------------------------------------------------------------------------------------------------
# Settings identity: resolved paths plus input fingerprints
# ----------------------------------------------------------------------------------------------------------------


def test_the_pipe_form_and_the_positional_form_reuse_each_other(world, tmp_path, monkeypatch):
    nlt = _nlt(world, world["native"], world["vocab"], tmp_path / "nlt")
    le = [
        "--captions",
        world["captions"],
        "--init",
        nlt,
        "--lang",
        "de",
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--device",
        "cpu",
    ]
    first = _ok(["train-le", *le, "-o", tmp_path / "le"], stdin=world["pipe"]).stdout.strip()  # encode-images | ...
    monkeypatch.chdir(world["emb"].parent)
    again = _ok(["train-le", world["emb"].name, *le, "-o", tmp_path / "le"])  # the positional, spelled relative
    assert again.stdout.strip() == first and "up to date" in again.stderr


def test_relative_and_absolute_spellings_reuse_each_other_and_changed_content_does_not(world, tmp_path, monkeypatch):
    base = artifacts.write_checkpoint(
        tmp_path / "native",
        artifacts.load_tensors(world["native"] / "model.safetensors"),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    args = [world["captions"], "--lang", "en", "--split", "test", "--device", "cpu"]
    first = _ok(["encode-texts", *args, "-m", base, "-o", tmp_path / "t"]).stdout.strip()
    monkeypatch.chdir(tmp_path)
    again = _ok(["encode-texts", *args, "-m", "native", "-o", "t"])  # relative where the first was absolute
    assert again.stdout.strip() == first  # the same run: not refused as "made with other settings"
    _native(base, seed=4)  # same path, new content
    assert "from other inputs" in _refused(["encode-texts", *args, "-m", "native", "-o", "t"])


def test_canonical_settings_resolve_paths_and_inputs_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "emb").mkdir()
    settings = artifacts.canonical_settings(
        {"images": Path("emb"), "model": "emb", "name": "mltk-tiny"}, [str(tmp_path / "emb")]
    )
    assert settings == {"images": str(tmp_path / "emb"), "model": str(tmp_path / "emb"), "name": "mltk-tiny"}


# ----------------------------------------------------------------------------------------------------------------
# Buffers (BatchNorm running statistics) are saved, resumed and kept with the best step
# ----------------------------------------------------------------------------------------------------------------


class BatchNormTask:
    """A linear layer behind a BatchNorm in training mode: each forward moves the running statistics. Scores are
    scripted to fall, so the best step is the first validation and its buffers are not the last ones."""

    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).train()
        self.x = torch.randn(32, 4) * 3 + 1
        self.scores = [3.0, 2.0, 1.0]
        self.buffers_seen: dict[int, dict] = {}

    def parameters_to_train(self):
        return dict(self.model.named_parameters())

    def buffers_to_keep(self):
        return dict(self.model.named_buffers())

    def loss(self, step: int) -> torch.Tensor:
        rows = torch.randperm(32, generator=torch.Generator().manual_seed(step))[:8]
        return self.model(self.x[rows] * (1 + step)).pow(2).mean()

    def validate(self) -> dict[str, float]:
        return {"score": self.scores.pop(0)}


def _fit(task, state_dir, on_step=None):
    from helpers_loop import loop_config

    from mltk.core.runtime import Runtime
    from mltk.train.loop import fit
    from mltk.train.step_log import step_logging

    config = loop_config(steps=6, lr=0.05, eval_every=2, save_every=0)
    with step_logging(log_every=2):
        return fit(task, config, Runtime(torch.device("cpu"), None), state_dir, on_step=on_step)


def _same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_the_loop_resumes_buffers_exactly_and_keeps_them_with_the_best_step(tmp_path):
    full_task = BatchNormTask()
    full = _fit(
        full_task,
        tmp_path / "full",
        on_step=lambda step, loss: full_task.buffers_seen.update(
            {step + 1: {k: v.clone() for k, v in full_task.model.named_buffers()}}
        ),
    )
    assert full.best_step == 2
    _same({k: full.best_state[k] for k in full_task.buffers_to_keep()}, full_task.buffers_seen[2])
    assert not torch.equal(full.best_state["0.running_mean"], full.last_state["0.running_mean"])

    def interrupt(step, loss):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fit(BatchNormTask(), tmp_path / "cut", on_step=interrupt)
    resumed_task = BatchNormTask()
    resumed_task.scores = [2.0, 1.0]  # the validation before the cut is in the saved history
    resumed = _fit(resumed_task, tmp_path / "cut")
    _same(resumed.last_state, full.last_state)
    _same(resumed.best_state, full.best_state)


def test_an_interrupted_and_resumed_pretrain_is_bit_exact_with_an_uninterrupted_one(world, tmp_path, monkeypatch):
    import dataclasses

    from mltk.recipes import load_recipe
    from mltk.settings.resolve import recipe_loop
    from mltk.train import stage
    from mltk.train.loop import LoopConfig
    from mltk.train.pretrain import PretrainConfig, pretrain

    images = world["root"] / "world" / "images"
    loop = dataclasses.replace(recipe_loop(load_recipe("clip-pretrain")), steps=6, eval_every=2, save_every=0)
    assert isinstance(loop, LoopConfig)

    def config(out):
        return PretrainConfig(images=images, captions=world["captions"], out=out, batch_size=8, device="cpu", loop=loop)

    full = pretrain(config(tmp_path / "full"))
    fit = stage.fit

    def interrupted_fit(*args, **kwargs):
        def on_step(step, loss):
            if step == 2:
                raise KeyboardInterrupt

        return fit(*args, **{**kwargs, "on_step": on_step})

    monkeypatch.setattr(stage, "fit", interrupted_fit)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(tmp_path / "cut"))
    monkeypatch.setattr(stage, "fit", fit)
    resumed = pretrain(config(tmp_path / "cut"))
    a = artifacts.load_tensors(Path(full) / "model.safetensors")
    b = artifacts.load_tensors(Path(resumed) / "model.safetensors")
    assert any("running_mean" in name for name in a)  # mltk-tiny's ResNet image tower has BatchNorm
    _same(a, b)
    assert artifacts.read_manifest(full)["best_step"] == artifacts.read_manifest(resumed)["best_step"]
    # a base is what its model files are: `mltk prune` (dropping state/) does not change its pinned fingerprint
    from mltk.artifacts.prune import prune_state

    pinned = dependencies.content_fingerprint(full)
    prune_state(full)
    assert not (Path(full) / "state").exists() and dependencies.content_fingerprint(full) == pinned


def test_a_crafted_dependency_never_hashes_a_huge_folder_or_another_kind(tmp_path, monkeypatch):
    """A checkpoint config is data: a ``relative`` that climbs to "/" must not make every load hash the disk."""
    monkeypatch.setattr(dependencies, "MAX_FOLDER_FILES", 5)
    big = tmp_path / "big"
    big.mkdir()
    for i in range(6):
        (big / f"f{i}").write_text("x")
    record = {
        "role": "base model",
        "location": str(tmp_path / "gone"),
        "relative": "../big",
        "kind": "folder",
        "fingerprint": "sha256:0",
    }
    config = {"format": "mla", "base": {"model": str(tmp_path / "gone")}, "depends_on": {"base.model": record}}
    with pytest.raises(MltkError, match="more than 5 files: not a model or tokenizer folder"):
        dependencies.resolve(config, tmp_path / "ckpt")
    record["kind"] = "artifact"  # a folder where an artifact was pinned is not even hashed
    with pytest.raises(MltkError, match="is now a folder"):
        dependencies.resolve(config, tmp_path / "ckpt")
