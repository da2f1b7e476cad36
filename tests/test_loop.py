"""The shared training loop: schedule, clipping, weight decay, best state, exact resume, logs, AMP on the CPU."""

from __future__ import annotations

import json
import math
import random
import re
import signal

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers_loop import loop_config

from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, seed_everything
from mltk.train.loop import (
    LoopConfig,
    TrainingDiverged,
    build_optimizer,
    clip_gradients,
    default_optimizer,
    fit,
    lr_factor,
    training_step,
    warmup_steps,
)
from mltk.train.step_log import step_logging

CPU = Runtime(torch.device("cpu"), None)
BF16 = Runtime(torch.device("cpu"), torch.bfloat16)


class ToyTask:
    """Linear regression whose steps also draw from every global random stream (dropout: torch; noise: NumPy
    and Python), so exact resume needs the RNG states; the batch of step k comes from (seed, k)."""

    def __init__(self, seed: int = 0, validate_scores: list[float] | None = None):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(64, 6, generator=g)
        self.y = self.x @ torch.randn(6, 3, generator=g) + 0.1 * torch.randn(64, 3, generator=g)
        self.weight = torch.nn.Parameter(0.1 * torch.randn(3, 6, generator=g))
        self.bias = torch.nn.Parameter(torch.zeros(3))
        self.seed = seed
        self.scripted_scores = list(validate_scores) if validate_scores is not None else None
        self.loss_calls: list[int] = []
        self.autocast_dtypes: list[torch.dtype] = []
        self.validated_weights: list[torch.Tensor] = []

    def parameters_to_train(self):
        return {"linear.weight": self.weight, "linear.bias": self.bias}

    def loss(self, step: int) -> torch.Tensor:
        self.loss_calls.append(step)
        batch = torch.randperm(64, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + step))[:16]
        x = F.dropout(self.x[batch], p=0.2, training=True)
        projected = x @ self.weight.T  # [16, 3]; bf16 under bf16 autocast
        self.autocast_dtypes.append(projected.dtype)
        prediction = projected + self.bias
        jitter = 1e-3 * (float(np.random.rand()) + random.random())
        return F.mse_loss(prediction.float(), self.y[batch]) + jitter * self.bias.sum()

    def validate(self) -> dict[str, float]:
        torch.rand(5), np.random.rand(), random.random()  # validation must not shift the training's streams
        self.validated_weights.append(self.weight.detach().clone())
        if self.scripted_scores is not None:
            return {"score": self.scripted_scores.pop(0)}
        val_loss = F.mse_loss(self.x[:16] @ self.weight.T + self.bias, self.y[:16])
        return {"score": -float(val_loss), "val_loss": float(val_loss)}


@pytest.fixture(autouse=True)
def logging_every_5():
    """Every run here logs every 5 steps (--log-every 5)."""
    with step_logging(log_every=5):
        yield


def config(**overrides) -> LoopConfig:
    settings = dict(steps=20, lr=0.05, warmup_fraction=0.2, eval_every=5, save_every=0, weight_decay=0.1)
    settings.update(overrides)
    return loop_config(**settings)


def run(tmp_path, cfg: LoopConfig, task=None, name="state", runtime=CPU, **kwargs):
    task = task or ToyTask()
    return fit(task, cfg, runtime, tmp_path / name, **kwargs), task


def scramble_global_rngs() -> None:
    torch.manual_seed(987), np.random.seed(987), random.seed(987)


def assert_same_tensors(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


# ------------------------------------------------------------------------------------------------ schedule


def test_warmup_then_constant():
    cfg = loop_config(steps=10, lr=1.0, warmup_fraction=0.3, schedule="constant")
    assert warmup_steps(cfg) == 3
    assert [lr_factor(s, cfg) for s in range(10)] == pytest.approx([1 / 3, 2 / 3, 1, 1, 1, 1, 1, 1, 1, 1])


def test_warmup_then_cosine_to_zero():
    cfg = loop_config(steps=12, lr=1.0, warmup_fraction=0.25, schedule="cosine")
    factors = [lr_factor(s, cfg) for s in range(12)]
    assert factors[:4] == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert factors[3 + 4] == pytest.approx(0.5 * (1 + math.cos(math.pi * 4 / 9)))
    assert all(a > b for a, b in zip(factors[3:], factors[4:]))
    assert lr_factor(12, cfg) == pytest.approx(0.0, abs=1e-12)


def test_linear_decays_to_zero_after_the_warmup_as_ccrk_create_scheduler():
    cfg = loop_config(steps=10, lr=1.0, warmup_fraction=0.2, schedule="linear")
    factors = [lr_factor(s, cfg) for s in range(10)]
    # X-VLM / CCR_k: max(0, (total - step) / (total - warmup)) after the warm-up
    assert factors == pytest.approx([1 / 2, 1, 1, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])
    assert lr_factor(10, cfg) == 0.0


def test_warmup_cosine_is_bertadam_over_the_fraction_of_all_steps():
    cfg = loop_config(steps=10, lr=1.0, warmup_fraction=0.2, schedule="warmup_cosine")
    factors = [lr_factor(s, cfg) for s in range(10)]
    assert factors[:2] == pytest.approx([1 / 2, 1])
    # BertAdam: warmup_cosine(x) = 0.5 (1 + cos(pi x)), x = its 1-based step / t_total
    assert factors[2] == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 10)))
    assert factors[4] == pytest.approx(0.5)
    assert factors[9] == pytest.approx(0.0, abs=1e-12)


def test_step_decay_divides_the_lr_by_ten_at_half_the_steps_as_ame():
    cfg = loop_config(steps=10, lr=1.0, warmup_fraction=0.0, schedule="step")
    assert [lr_factor(s, cfg) for s in range(10)] == pytest.approx([1] * 5 + [0.1] * 5)


def test_no_warmup_starts_at_full_lr():
    assert lr_factor(0, loop_config(steps=5, lr=1.0, warmup_fraction=0.0, schedule="constant")) == 1.0


@pytest.mark.parametrize("schedule", ["cosine", "linear", "warmup_cosine", "step"])
def test_loop_applies_the_schedule_like_lambda_lr(tmp_path, schedule):
    applied: list[float] = []

    class Recording(ToyTask):
        def make_optimizer(self, params, cfg):
            optimizer = default_optimizer(params, cfg)
            step = optimizer.step

            def recording_step(*args, **kwargs):
                applied.append(optimizer.param_groups[0]["lr"])
                return step(*args, **kwargs)

            optimizer.step = recording_step
            return optimizer

    cfg = config(steps=10, schedule=schedule, warmup_fraction=0.3)
    run(tmp_path, cfg, Recording())
    reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(reference, lambda s: lr_factor(s, cfg))
    expected = []
    for _ in range(10):
        expected.append(reference.param_groups[0]["lr"])
        reference.step()
        scheduler.step()
    assert applied == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "bad",
    [
        dict(schedule="exponential"),
        dict(clip_mode="norm"),
        dict(steps=0),
        dict(warmup_fraction=1.5),
        dict(grad_clip=-1.0),
    ],
)
def test_bad_config_is_a_config_error(bad):
    with pytest.raises(ConfigError):
        config(**bad)


# ------------------------------------------------------------------------------------------ clipping, decay


def _with_grads(*grads):
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    return params


def test_per_tensor_clipping_clips_each_tensor_to_its_own_norm():
    big, small = torch.full((4,), 3.0), torch.tensor([0.3, 0.4])  # norms 6.0 and 0.5
    params = _with_grads(big, small)
    clip_gradients(params, 1.0, "per_tensor")
    assert float(params[0].grad.norm()) == pytest.approx(1.0, rel=1e-5)
    assert torch.equal(params[1].grad, small)  # under the bound: untouched
    reference = _with_grads(big, small)
    for p in reference:
        torch.nn.utils.clip_grad_norm_([p], 1.0)
    assert all(torch.allclose(p.grad, r.grad, rtol=1e-6) for p, r in zip(params, reference))


def test_global_clipping_scales_all_tensors_by_one_factor():
    big, small = torch.full((4,), 3.0), torch.tensor([0.3, 0.4])
    params = _with_grads(big, small)
    clip_gradients(params, 1.0, "global")
    total = math.sqrt(36.0 + 0.25)
    assert torch.allclose(params[0].grad, big / total, rtol=1e-5)
    assert torch.allclose(params[1].grad, small / total, rtol=1e-5)
    assert float(torch.cat([p.grad for p in params]).norm()) == pytest.approx(1.0, rel=1e-5)


def test_clipping_mode_changes_training(tmp_path):
    per_tensor, _ = run(tmp_path, config(grad_clip=0.05, clip_mode="per_tensor"), name="a")
    global_, _ = run(tmp_path, config(grad_clip=0.05, clip_mode="global"), name="b")
    assert not torch.equal(per_tensor.last_state["linear.weight"], global_.last_state["linear.weight"])


def test_weight_decay_only_on_matrices(tmp_path):
    class NoGradient(ToyTask):
        def loss(self, step):  # zero gradients: Adam's update is 0, only decoupled decay moves the tensors
            return 0.0 * (self.weight.sum() + self.bias.sum())

    task = NoGradient()
    task.bias.data.fill_(0.5)
    weight0, bias0 = task.weight.detach().clone(), task.bias.detach().clone()
    cfg = config(steps=4, warmup_fraction=0.5, weight_decay=0.2, lr=0.1, eval_every=0)
    result, _ = run(tmp_path, cfg, task)
    shrink = math.prod(1 - cfg.lr * lr_factor(s, cfg) * cfg.weight_decay for s in range(4))
    assert torch.allclose(result.last_state["linear.weight"], weight0 * shrink, rtol=1e-6)
    assert torch.equal(result.last_state["linear.bias"], bias0)
    groups = default_optimizer(task.parameters_to_train(), cfg).param_groups
    assert [(len(g["params"]), g["weight_decay"]) for g in groups] == [(1, 0.2), (1, 0.0)]


# ------------------------------------------------------------------------------------------ best state


def test_best_state_is_the_first_of_the_best_scores(tmp_path):
    task = ToyTask(validate_scores=[0.1, 0.5, 0.5, 0.3])
    result, _ = run(tmp_path, config(eval_every=5), task)
    assert (result.best_step, result.best_score) == (10, 0.5)
    assert torch.equal(result.best_state["linear.weight"], task.validated_weights[1])
    assert not torch.equal(result.best_state["linear.weight"], result.last_state["linear.weight"])
    validations = [h for h in result.history if h["event"] == "validate"]
    assert [h["step"] for h in validations] == [5, 10, 15, 20]


def test_validates_at_the_end_when_eval_every_is_zero(tmp_path):
    result, task = run(tmp_path, config(eval_every=0, steps=7))
    assert [h["step"] for h in result.history if h["event"] == "validate"] == [7]
    assert result.best_step == 7 and len(task.validated_weights) == 1


def test_validation_does_not_change_training(tmp_path):
    often, _ = run(tmp_path, config(eval_every=1), name="a")
    rarely, _ = run(tmp_path, config(eval_every=0), name="b")
    assert_same_tensors(often.last_state, rarely.last_state)


# ------------------------------------------------------------------------------------------ resume


def _interrupt_at(k: int, exception: type[BaseException] = KeyboardInterrupt):
    def on_step(step: int, loss: float) -> None:
        if step == k:
            raise exception()

    return on_step


def test_same_seed_same_result_on_cpu(tmp_path):
    first, _ = run(tmp_path, config(), name="a")
    second, _ = run(tmp_path, config(), name="b")
    assert_same_tensors(first.last_state, second.last_state)
    assert first.history == second.history


@pytest.mark.parametrize("interrupt", ["keyboard", "sigterm"])
def test_resume_after_interrupt_is_exact(tmp_path, interrupt):
    cfg = config(save_every=0)
    losses_full: list = []
    full, _ = run(tmp_path, cfg, name="full", on_step=lambda s, loss: losses_full.append((s, loss)))

    losses: list = []

    def on_step(step, loss):
        losses.append((step, loss))
        if step == 11:
            if interrupt == "keyboard":
                raise KeyboardInterrupt
            signal.raise_signal(signal.SIGTERM)  # Slurm's signal: turned into SystemExit, state saved

    with pytest.raises(KeyboardInterrupt if interrupt == "keyboard" else SystemExit):
        run(tmp_path, cfg, name="cut", on_step=on_step)
    assert json.loads((tmp_path / "cut" / "loop.json").read_text())["step"] == 12
    scramble_global_rngs()  # as in a new process
    resumed, task = run(tmp_path, cfg, ToyTask(), name="cut", on_step=lambda s, loss: losses.append((s, loss)))
    assert task.loss_calls == list(range(12, 20))
    assert losses == losses_full
    assert_same_tensors(resumed.last_state, full.last_state)
    assert_same_tensors(resumed.best_state, full.best_state)
    assert resumed.history == full.history
    assert (resumed.best_step, resumed.best_score) == (full.best_step, full.best_score)


def test_replay_after_a_crash_that_lost_steps_since_the_save(tmp_path):
    cfg = config(save_every=5)
    full, _ = run(tmp_path, cfg, name="full")
    with pytest.raises(RuntimeError):
        run(tmp_path, cfg, name="cut", on_step=_interrupt_at(7, RuntimeError))  # a crash saves nothing
    assert json.loads((tmp_path / "cut" / "loop.json").read_text())["step"] == 5
    scramble_global_rngs()
    resumed, task = run(tmp_path, cfg, ToyTask(), name="cut")
    assert task.loss_calls == list(range(5, 20))
    assert_same_tensors(resumed.last_state, full.last_state)
    assert resumed.history == full.history


def test_interrupt_during_an_update_waits_for_it(tmp_path):
    class SignalInStep(ToyTask):
        def make_optimizer(self, params, cfg):
            optimizer = default_optimizer(params, cfg)
            step, calls = optimizer.step, []

            def step_with_signal(*args, **kwargs):
                calls.append(1)
                if len(calls) == 9:
                    signal.raise_signal(signal.SIGINT)  # Ctrl-C in the middle of the update
                return step(*args, **kwargs)

            optimizer.step = step_with_signal
            return optimizer

    cfg = config()
    full, _ = run(tmp_path, cfg, name="full")
    # Ctrl-C as an interactive Python handles it, whatever the test run inherited: a run started as a background
    # job of a non-interactive shell ignores SIGINT, and then nothing is raised (fit keeps the inherited handler)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, cfg, SignalInStep(), name="cut")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert json.loads((tmp_path / "cut" / "loop.json").read_text())["step"] == 9
    resumed, _ = run(tmp_path, cfg, ToyTask(), name="cut")
    assert_same_tensors(resumed.last_state, full.last_state)


def test_interrupt_inside_a_step_resumes_from_its_start(tmp_path):
    class InterruptedLoss(ToyTask):
        def __init__(self, at: int):
            super().__init__()
            self.at = at

        def loss(self, step):
            value = super().loss(step)  # random streams already consumed
            if step == self.at:
                raise KeyboardInterrupt
            return value

    cfg = config()
    full, _ = run(tmp_path, cfg, name="full")
    for at, saved_step in ((0, 0), (13, 13)):
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, cfg, InterruptedLoss(at), name="cut")
        assert json.loads((tmp_path / "cut" / "loop.json").read_text())["step"] == saved_step
        scramble_global_rngs()
    resumed, task = run(tmp_path, cfg, ToyTask(), name="cut")
    assert task.loss_calls == list(range(13, 20))
    assert_same_tensors(resumed.last_state, full.last_state)
    assert resumed.history == full.history


def test_custom_optimizer_state_resumes_exactly(tmp_path):
    class Momentum(ToyTask):
        def make_optimizer(self, params, cfg):
            return torch.optim.SGD(list(params.values()), lr=cfg.lr, momentum=0.9)

    cfg = config()
    full, _ = run(tmp_path, cfg, Momentum(), name="full")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, cfg, Momentum(), name="cut", on_step=_interrupt_at(8))
    from mltk.artifacts import load_tensors

    saved = load_tensors(tmp_path / "cut" / "state-00000009.safetensors")
    assert {"optimizer/linear.weight/momentum_buffer", "optimizer/linear.bias/momentum_buffer"} <= set(saved)
    resumed, _ = run(tmp_path, cfg, Momentum(), name="cut")
    assert_same_tensors(resumed.last_state, full.last_state)


def test_saved_state_files_and_finished_run(tmp_path):
    cfg = config(save_every=5)
    result, _ = run(tmp_path, cfg)
    state_dir = tmp_path / "state"
    record = json.loads((state_dir / "loop.json").read_text())
    assert sorted(p.name for p in state_dir.iterdir()) == sorted(
        ["loop.json", "state-00000020.safetensors", f"best-{result.best_step:08d}.safetensors"]
    )
    from mltk.artifacts import load_tensors

    saved = load_tensors(state_dir / "state-00000020.safetensors")
    assert {
        "trained/linear.weight",
        "optimizer/linear.weight/exp_avg",
        "optimizer/linear.weight/exp_avg_sq",
        "optimizer/linear.weight/step",
        "rng/torch",
        "rng/numpy",
    } <= set(saved)
    assert record["step"] == 20 and record["history"] == result.history
    again, task = run(tmp_path, cfg, ToyTask())  # finished: nothing left to train
    assert task.loss_calls == [] and task.validated_weights == []
    assert_same_tensors(again.best_state, result.best_state)
    assert again.history == result.history


def test_resume_with_other_settings_is_refused(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, config(), on_step=_interrupt_at(3))
    with pytest.raises(ConfigError, match="lr=0.05"):
        run(tmp_path, config(lr=0.01))
    with step_logging(log_every=3):
        run(tmp_path, config(eval_every=2))  # reporting settings may change


# ------------------------------------------------------------------------------------------ logs, AMP


def test_logs_go_to_stderr_as_plain_lines(tmp_path, capsys):
    run(tmp_path, config(steps=10, eval_every=0), description="train-nlt")
    out, err = capsys.readouterr()
    assert out == ""
    lines = [line for line in err.splitlines() if re.search(r"step \d+/10 loss", line)]
    assert len(lines) == 2
    assert re.fullmatch(r"train-nlt step 5/10 loss \d+\.\d{4} lr \d\.\d\de[-+]\d\d [\d.]+ it/s", lines[0])
    assert "validation score" in err


def test_diverging_loss_is_reported(tmp_path):
    class Diverging(ToyTask):
        def loss(self, step):
            return super().loss(step) * float("nan")

    with pytest.raises(TrainingDiverged, match="nan"):
        run(tmp_path, config(), Diverging())


def test_fp32_and_bf16_autocast_on_cpu(tmp_path):
    fp32, task32 = run(tmp_path, config(), name="a")
    bf16, task16 = run(tmp_path, config(), name="b", runtime=BF16)
    assert set(task32.autocast_dtypes) == {torch.float32}
    assert set(task16.autocast_dtypes) == {torch.bfloat16}
    losses32 = [h["loss"] for h in fp32.history if h["event"] == "train"]
    losses16 = [h["loss"] for h in bf16.history if h["event"] == "train"]
    assert losses16[-1] < losses16[0] and losses32[-1] < losses32[0]
    assert bf16.last_state["linear.weight"].dtype == torch.float32  # master weights stay fp32
    assert torch.allclose(bf16.last_state["linear.weight"], fp32.last_state["linear.weight"], atol=0.05)
    assert not torch.equal(bf16.last_state["linear.weight"], fp32.last_state["linear.weight"])


def test_fp16_uses_a_grad_scaler_and_resumes_it(tmp_path):
    fp16 = Runtime(torch.device("cpu"), torch.float16)  # CPU fp16 autocast: the GradScaler path without CUDA
    cfg = config()
    full, _ = run(tmp_path, cfg, name="full", runtime=fp16)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, cfg, name="cut", runtime=fp16, on_step=_interrupt_at(6))
    scaler_state = json.loads((tmp_path / "cut" / "loop.json").read_text())["grad_scaler"]
    assert scaler_state["scale"] > 1
    resumed, _ = run(tmp_path, cfg, ToyTask(), name="cut", runtime=fp16)
    assert_same_tensors(resumed.last_state, full.last_state)


def test_progress_bar_on_a_terminal(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    import mltk.core.runtime
    import mltk.train.loop

    terminal = Console(file=io.StringIO(), force_terminal=True, width=100)
    monkeypatch.setattr(mltk.core.runtime, "console", terminal)
    monkeypatch.setattr(mltk.train.loop, "console", terminal)
    result, _ = run(tmp_path, config(steps=10), description="train-le")
    shown = terminal.file.getvalue()
    assert "train-le" in shown and "10/10" in shown and "validation score" in shown
    assert "it/s" not in shown  # the bar replaces the plain lines
    assert result.best_step == 10


@pytest.mark.parametrize("clip_mode", ["per_tensor", "global"])
def test_training_step_is_the_update_fit_makes(tmp_path, clip_mode):
    """Benchmarks time ``training_step``: step for step it must train what ``fit`` trains (same loss, schedule,
    clipping mode, optimizer), here without validation so that no stream is forked."""
    cfg = config(eval_every=0, steps=12, grad_clip=0.05, clip_mode=clip_mode)
    fitted, _ = run(tmp_path, cfg)
    task = ToyTask()
    params = task.parameters_to_train()
    optimizer = build_optimizer(task, params, cfg)
    seed_everything(cfg.seed)
    losses = [float(training_step(task, step, cfg, CPU, params, optimizer)) for step in range(cfg.steps)]
    assert_same_tensors(fitted.last_state, {name: p.detach() for name, p in params.items()})
    assert all(math.isfinite(loss) for loss in losses)
