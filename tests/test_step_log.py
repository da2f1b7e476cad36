"""Per-step metrics of training runs: steps.csv (named loss terms, lr, grad norm, throughput), --log-every, exact
resume of the file, TensorBoard event files read back, and the training results unchanged by all of it."""

from __future__ import annotations

import pytest
import torch
from test_loop import CPU, ToyTask, assert_same_tensors, config, logging_every_5  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.train import step_log
from mltk.train.loop import fit
from mltk.train.step_log import read_steps_csv, step_logging


def event_accumulator(directory):
    """TensorBoard's own reader of event files (the tensorboard extra; tests that need it skip without it)."""
    module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = module.EventAccumulator(str(directory))
    events.Reload()
    return events


class Batches:
    batch_size = 16


class TermsTask(ToyTask):
    """ToyTask's loss returned with its two terms named: the same total, so the same training."""

    batches = Batches()

    def loss(self, step: int):
        total = super().loss(step)
        return total, {"mse": total.detach(), "penalty": torch.zeros(())}


def test_csv_rows_every_log_interval_with_named_terms(tmp_path):
    result = fit(TermsTask(), config(), CPU, tmp_path / "state", steps_csv=tmp_path / "steps.csv")
    rows = read_steps_csv(tmp_path / "steps.csv")
    header = list(rows[0])
    assert header == ["step", "loss", "mse", "penalty", "lr", "grad_norm", "steps_per_s", "samples_per_s"]
    train = [h for h in result.history if h["event"] == "train"]
    assert [r["step"] for r in rows] == [h["step"] for h in train] == [5, 10, 15, 20]
    for row, entry in zip(rows, train):
        assert row["loss"] == pytest.approx(entry["loss"], rel=1e-6)
        assert row["mse"] == pytest.approx(entry["loss"], rel=1e-6)  # the mean of the same window
        assert row["penalty"] == 0.0
        assert row["lr"] == pytest.approx(entry["lr"], rel=1e-6)
        assert row["grad_norm"] > 0
        assert row["samples_per_s"] == pytest.approx(16 * row["steps_per_s"], rel=1e-5)


def test_a_tuple_loss_trains_exactly_as_the_bare_loss(tmp_path):
    plain = fit(ToyTask(), config(), CPU, tmp_path / "plain")  # no CSV, no TensorBoard: the loop as it was
    bare = fit(ToyTask(), config(), CPU, tmp_path / "bare", steps_csv=tmp_path / "bare.csv")
    named = fit(TermsTask(), config(), CPU, tmp_path / "named", steps_csv=tmp_path / "named.csv")
    assert_same_tensors(plain.last_state, bare.last_state)
    assert_same_tensors(bare.last_state, named.last_state)
    assert plain.history == bare.history == named.history
    assert "mse" not in read_steps_csv(tmp_path / "bare.csv")[0]


def test_grad_norm_is_the_norm_before_clipping(tmp_path):
    with step_logging(log_every=1):
        tiny = fit(ToyTask(), config(grad_clip=1e-3, steps=3), CPU, tmp_path / "a", steps_csv=tmp_path / "a.csv")
    rows = read_steps_csv(tmp_path / "a.csv")
    assert all(r["grad_norm"] > 1e-3 * 1.5 for r in rows)  # larger than the clip: measured before it
    assert len(tiny.history) >= 3


def test_log_every_from_the_command_overrides_the_stage_default(tmp_path):
    with step_logging(log_every=4):
        result = fit(ToyTask(), config(steps=10), CPU, tmp_path / "s", steps_csv=tmp_path / "m.csv")
    assert [r["step"] for r in read_steps_csv(tmp_path / "m.csv")] == [4, 8, 10]
    assert [h["step"] for h in result.history if h["event"] == "train"] == [4, 8, 10]
    with pytest.raises(ConfigError, match="--log-every"):
        with step_logging(log_every=0):
            pass


def test_resumed_run_drops_rows_written_after_its_saved_state(tmp_path):
    cfg = config(save_every=10)
    fit(ToyTask(), cfg, CPU, tmp_path / "full", steps_csv=tmp_path / "full.csv")

    def crash(step, loss):
        if step == 16:  # after update 17: the row of step 15 is written, the state of step 10 is the last saved
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        fit(ToyTask(), cfg, CPU, tmp_path / "cut", on_step=crash, steps_csv=tmp_path / "cut.csv")
    assert [r["step"] for r in read_steps_csv(tmp_path / "cut.csv")] == [5, 10, 15]
    fit(ToyTask(), cfg, CPU, tmp_path / "cut", steps_csv=tmp_path / "cut.csv")
    full = read_steps_csv(tmp_path / "full.csv")
    resumed = read_steps_csv(tmp_path / "cut.csv")
    assert [r["step"] for r in resumed] == [5, 10, 15, 20]
    for a, b in zip(full, resumed):
        assert (a["loss"], a["lr"], a["grad_norm"]) == (b["loss"], b["lr"], b["grad_norm"])


def test_tensorboard_event_files_hold_the_same_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    with step_logging(tensorboard=tmp_path / "tb"):
        result = fit(TermsTask(), config(eval_every=10), CPU, tmp_path / "s", description="task 0 en")
    runs = list((tmp_path / "tb" / "task-0-en").glob("events.out.tfevents.*"))
    assert len(runs) == 1
    events = event_accumulator(runs[0].parent)
    assert {"train/loss", "train/mse", "train/lr", "train/grad_norm", "val/score"} <= set(events.Tags()["scalars"])
    losses = events.Scalars("train/loss")
    train = [h for h in result.history if h["event"] == "train"]
    assert [e.step for e in losses] == [5, 10, 15, 20]
    assert [e.value for e in losses] == pytest.approx([h["loss"] for h in train], rel=1e-5)
    assert [e.step for e in events.Scalars("val/score")] == [10, 20]


def test_tensorboard_missing_is_one_config_error(monkeypatch, tmp_path):
    monkeypatch.setattr(step_log, "tensorboard_available", lambda: False)
    with pytest.raises(ConfigError, match="tensorboard"):
        with step_logging(tensorboard=tmp_path):
            pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny synthetic world in en and de, and a random-weight native CLIP saved as a checkpoint."""
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.models.clip import clip_checkpoint_config, load_clip

    root = tmp_path_factory.mktemp("steps")
    world = synthesize(root / "world", SynthConfig(train=16, val=8, test=8, langs=("en", "de")))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    return {"world": world, "native": native}


def test_pretrain_logs_clips_infonce_and_its_learnt_logit_scale(world, tmp_path):
    from mltk.cli import app

    out = tmp_path / "native"
    result = CliRunner().invoke(
        app,
        [
            "pretrain",
            str(world["world"].images_path),
            "--steps",
            "4",
            "--batch-size",
            "4",
            "--log-every",
            "2",
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    rows = read_steps_csv(out / step_log.STEPS_CSV)
    assert [r["step"] for r in rows] == [2, 4]
    assert list(rows[0])[:4] == ["step", "loss", "clip_infonce", "logit_scale"]
    for row in rows:
        assert row["clip_infonce"] == pytest.approx(row["loss"], rel=1e-6)
        assert row["logit_scale"] == pytest.approx(1 / 0.07, rel=0.05)  # open_clip's start, learnt from there


def test_train_nlt_writes_steps_csv_into_its_artifact_and_tensorboard_events(world, tmp_path):
    from mltk.cli import app
    from mltk.settings.vocab import build_vocab

    captions, native = world["world"].captions_path, world["native"]
    vocab = build_vocab(captions, "de", tmp_path / "vocab", size=600)
    out = tmp_path / "nlt"
    result = CliRunner().invoke(
        app,
        [
            "train-nlt",
            str(captions),
            "--out",
            str(out),
            "--model",
            str(native),
            "--tokenizer",
            str(vocab),
            "--lang",
            "de",
            "--steps",
            "4",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--log-every",
            "2",
            *(["--tensorboard", str(tmp_path / "tb")] if step_log.tensorboard_available() else []),
        ],
    )
    assert result.exit_code == 0, result.stderr
    rows = read_steps_csv(out / step_log.STEPS_CSV)
    assert [r["step"] for r in rows] == [2, 4]
    assert rows[0]["samples_per_s"] > 0
    events = event_accumulator(tmp_path / "tb" / "train-nlt")
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4]
