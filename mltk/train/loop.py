"""The one training loop of mltk: ``fit(task, config, runtime, state_dir)``.

Every training stage is a ``TrainTask`` (what trains, the loss of a step, a validation score); ``fit`` does the
rest, the same way for all of them. One step, in order::

    loss = task.loss(step)                       # under runtime.autocast(); batch built from (seed, step)
    backward (scaled by a GradScaler under fp16)
    average_gradients                            # torchrun: all_reduce / world_size, as DDP does
    unscale, clip (per tensor or global)
    lr = config.lr * lr_factor(step, config)     # pure function of the step: no scheduler state to save
    optimizer.step(); zero_grad

then, when due: a log line, a validation (best state kept; ties keep the earlier one), ``on_step``, a save.
``training_step`` is that one step alone, without the bookkeeping (what benchmarks time).

Optimizer (``mltk.train.optimizer``): ``torch.optim.AdamW`` with the config's betas/eps and decoupled weight decay
on tensors with ``ndim >= 2`` only (weight matrices and embedding tables), none on biases, norms' gains and scalars
such as a logit scale: open_clip's rule (``exclude = p.ndim < 2 or "bn"/"ln"/"bias"/"logit_scale" in name``). A task may
supply its own through ``make_optimizer(params, config)`` (CLL-CLIP's TEIR AdamW); then every bit of mutable
state must live in ``optimizer.state[param]`` and the param groups must depend only on ``(params, config)``,
because resume rebuilds the optimizer with ``make_optimizer`` and loads only that state.
``LoopConfig`` (``mltk.settings.loop``) has no hyper-parameter defaults: every value comes from a recipe
(``mltk.recipes``, resolved by ``mltk.settings.resolve``).

Exact resume. ``state_dir`` holds ``loop.json`` (the commit record: step, best score and step, history, config,
Python/NumPy RNG states, GradScaler state) naming ``state-<step>.safetensors`` (trained tensors ``trained/<name>``,
optimizer state ``optimizer/<name>/<slot>`` such as ``exp_avg``, ``exp_avg_sq``, ``step``, and the torch/CUDA/NumPy
RNG states ``rng/...``) and ``best-<step>.safetensors`` (the best tensors, by name). Tensor files are written first
and ``loop.json`` last, each by temporary file plus rename, so a crash at any moment leaves the previous complete
state. State is saved every ``save_every`` steps, at the end, and when KeyboardInterrupt or SystemExit arrives
(SIGTERM, Slurm's pre-emption and time-limit signal, is turned into SystemExit while ``fit`` runs); an interrupt
that arrives during an optimizer update waits until the update is complete. Because the batch of step k is a
function of ``(seed, k)``, and validation and ``on_step`` run on a forked random stream, a resumed run repeats the
uninterrupted one bit for bit on the CPU (and ``eval_every`` never changes the trained weights).

Progress: a rich bar on stderr when it is a terminal, otherwise plain lines every ``log_every`` steps for Slurm
logs (``train step 120/1000 loss 0.4312 lr 1.00e-04 3.1 it/s``), never stdout; under torchrun only rank 0 logs
and writes state. Step numbers in logs, ``history`` and ``best_step`` count completed updates (1..steps).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from mltk.core import distributed
from mltk.core.errors import ArtifactError, MltkError
from mltk.core.runtime import Runtime, console, progress_bar, seed_everything
from mltk.losses.base import split_loss
from mltk.settings.loop import LoopConfig
from mltk.train import step_log
from mltk.train.loop_state import (
    LoopState,
    capture_rng,
    cpu_copy,
    load_state,
    remove_unreferenced,
    rng_preserved,
    save_state,
    snapshot,
    state_files,
    task_buffers,
)
from mltk.train.optimizer import (  # noqa: F401 (API)
    AFTER_WARMUP,
    adamw,
    clip_gradients,
    decay_groups,
    default_optimizer,
    lr_factor,
    set_lr,
    warmup_steps,
)
from mltk.train.signals import DeferredSignals

StepCallback = Callable[[int, float], None]  # on_step(step, loss) after each update


class TrainingDiverged(MltkError):
    """The loss became NaN or infinite (usually a learning rate too high for the precision)."""


class TrainTask(Protocol):
    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        """The tensors to train; the names are the keys of checkpoints and saved state."""

    def loss(self, step: int) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The scalar loss of the batch of global step ``step`` (0-based), built deterministically from
        ``(seed, step)``; under torchrun only this rank's shard of it (``mltk.core.distributed``). Optionally with
        its named, unweighted terms, ``(loss, {name: tensor})``, for ``steps.csv`` (``mltk.train.step_log``)."""

    def validate(self) -> dict[str, float]:
        """Validation metrics; must contain ``"score"`` (higher is better). Runs under ``torch.no_grad()``."""

    # Optional: def make_optimizer(self, params: dict[str, Parameter], config: LoopConfig) -> torch.optim.Optimizer
    # Optional: def buffers_to_keep(self) -> dict[str, Tensor]: BatchNorm statistics etc., saved and kept with the best


@dataclass
class FitResult:
    best_state: dict[str, torch.Tensor]  # trained tensors and kept buffers at the best validation (cpu clones)
    last_state: dict[str, torch.Tensor]
    best_step: int
    best_score: float
    history: list[dict]  # one dict per validation / log line: event, step, loss, lr, score...


# ----------------------------------------------------------------------------------------------------------------
# The optimizer (its schedule, AdamW and clipping are mltk.train.optimizer's)
# ----------------------------------------------------------------------------------------------------------------


def build_optimizer(
    task: TrainTask, params: dict[str, torch.nn.Parameter], config: LoopConfig
) -> torch.optim.Optimizer:
    """The task's ``make_optimizer`` or ``default_optimizer``, each group remembering its base lr."""
    make = getattr(task, "make_optimizer", None)
    optimizer = make(params, config) if make is not None else default_optimizer(params, config)
    known = {id(p) for p in params.values()}
    for group in optimizer.param_groups:
        if any(id(p) not in known for p in group["params"]):
            raise ValueError(
                "make_optimizer returned an optimizer over a tensor that parameters_to_train does not "
                "name; its state could not be saved"
            )
        group.setdefault("initial_lr", group["lr"])  # the base lr the schedule multiplies, as LambdaLR keeps it
    return optimizer


# ----------------------------------------------------------------------------------------------------------------
# One update
# ----------------------------------------------------------------------------------------------------------------


def loss_and_backward(
    task: TrainTask, step: int, runtime: Runtime, scaler: torch.amp.GradScaler | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss of ``step`` (under autocast) and its terms, back-propagated (scaled under fp16); the loss is
    returned detached."""
    with runtime.autocast():
        loss, terms = split_loss(task.loss(step))
    if not torch.is_tensor(loss) or loss.dim() != 0:
        raise TypeError(f"task.loss({step}) must return a scalar tensor, got {type(loss).__name__}")
    (scaler.scale(loss) if scaler is not None else loss).backward()
    return loss.detach(), terms


def apply_update(
    trained: list[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    config: LoopConfig,
    step: int,
    measure_norm: bool = False,
) -> tuple[float, float | None]:
    """The update of ``step`` from the gradients: averaged over ranks (torchrun), unscaled, clipped as the config
    says, at the step's learning rate; gradients zeroed. Returns the lr and, with ``measure_norm``, the gradient
    norm before clipping (read-only)."""
    distributed.average_gradients(trained)
    if scaler is not None:
        scaler.unscale_(optimizer)
    grad_norm = step_log.gradient_norm(trained) if measure_norm else None
    if config.grad_clip is not None:
        clip_gradients(trained, config.grad_clip, config.clip_mode)
    lr = set_lr(optimizer, lr_factor(step, config))
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return lr, grad_norm


def training_step(
    task: TrainTask,
    step: int,
    config: LoopConfig,
    runtime: Runtime,
    params: dict[str, torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One update exactly as ``fit`` makes it, without its bookkeeping (state, logs, validation): for benchmarks
    that time the library's own step. ``optimizer`` from ``build_optimizer``. Returns the detached loss."""
    loss, _ = loss_and_backward(task, step, runtime, scaler)
    apply_update(list(params.values()), optimizer, scaler, config, step)
    return loss


# ----------------------------------------------------------------------------------------------------------------
# Progress on stderr
# ----------------------------------------------------------------------------------------------------------------


class _Reporter:
    """A rich bar when stderr is a terminal, plain lines otherwise; silent on ranks other than 0."""

    def __init__(self, description: str, steps: int, enabled: bool):
        self.description, self.steps, self.enabled = description, steps, enabled
        self.progress = progress_bar() if enabled and console.is_terminal else None
        self._bar = None
        self._mark = (0, time.perf_counter())

    def __enter__(self) -> _Reporter:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def begin(self, step: int, summary: str) -> None:
        self._mark = (step, time.perf_counter())
        if self.progress is not None:
            self._bar = self.progress.add_task(self.description, total=self.steps, completed=step)
        start = f"resuming at step {step}/{self.steps}" if step else f"{self.steps} steps"
        self.note(f"{self.description}: {start}; {summary}")

    def advance(self, step: int) -> None:
        if self._bar is not None:
            self.progress.update(self._bar, completed=step)

    def train_line(self, step: int, loss: float, lr: float) -> None:
        now = time.perf_counter()
        rate = (step - self._mark[0]) / max(now - self._mark[1], 1e-9)
        self._mark = (step, now)
        if self._bar is not None:
            self.progress.update(self._bar, description=f"{self.description} loss {loss:.4f} lr {lr:.2e}")
        elif self.enabled:
            _log_line(f"{self.description} step {step}/{self.steps} loss {loss:.4f} lr {lr:.2e} {rate:.1f} it/s")

    def note(self, text: str) -> None:
        if self.enabled:
            _log_line(text)


def _log_line(text: str) -> None:
    """One line on stderr, never wrapped at the console width (a Slurm log is read with grep)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


# ----------------------------------------------------------------------------------------------------------------
# fit
# ----------------------------------------------------------------------------------------------------------------


def fit(
    task: TrainTask,
    config: LoopConfig,
    runtime: Runtime,
    state_dir: Path,
    on_step: StepCallback | None = None,
    description: str = "train",
    steps_csv: Path | None = None,
) -> FitResult:
    """Train ``task`` for ``config.steps`` updates, resuming from ``state_dir`` when it holds a saved state.

    ``on_step(step, loss)`` is called after each update with the 0-based step passed to ``task.loss`` and that
    step's (local) loss; it runs on a forked random stream. Raising KeyboardInterrupt or SystemExit from it (or
    receiving SIGINT/SIGTERM) saves the state and re-raises; any other exception propagates without saving, as
    a crash would. Returns the best and last trained tensors, the best step and score, and the history.
    Per-step metrics go to ``steps_csv`` when given (and to TensorBoard on request): ``mltk.train.step_log``.
    """
    state_dir = Path(state_dir)
    options = step_log.current_options()
    params = dict(task.parameters_to_train())
    optimizer = build_optimizer(task, params, config)
    scaler = torch.amp.GradScaler(runtime.device.type) if runtime.autocast_dtype == torch.float16 else None
    is_main = distributed.is_main_process()
    buffers = task_buffers(task)
    state = load_state(state_dir, params, optimizer, scaler, config, runtime, buffers)
    resumed = state is not None
    if not resumed:
        seed_everything(config.seed)
        state = LoopState(rng=capture_rng(runtime))
    state.buffers = snapshot(buffers)
    if is_main and state_dir.is_dir():
        remove_unreferenced(state_dir, set(state_files(state)) if resumed else set())
    if not distributed.same_on_all_ranks(state.step):
        raise ArtifactError(
            "the processes found different saved states; the state directory must be on a file "
            "system every process reads",
            state_dir,
        )
    with (
        DeferredSignals() as signals,
        _Reporter(description, config.steps, is_main) as reporter,
        contextlib.closing(
            step_log.StepLogger(
                steps_csv,
                description,
                state.step,
                enabled=is_main,
                samples_per_step=getattr(getattr(task, "batches", None), "batch_size", None),
                tensorboard=options.tensorboard,
            )
        ) as reporter.steps_log,
    ):
        reporter.begin(
            state.step,
            f"{sum(p.numel() for p in params.values()):,} trained values in {len(params)} "
            f"tensors, {type(optimizer).__name__}, lr {config.lr:g}, {runtime.device} "
            f"{runtime.precision}" + (f" ({runtime.reason})" if runtime.reason else ""),
        )
        try:
            _run(task, config, runtime, state_dir, params, optimizer, scaler, state, signals, reporter, on_step)
        except (KeyboardInterrupt, SystemExit):
            if is_main and state.consistent:
                save_state(state_dir, state, params, optimizer, scaler, config)
                reporter.note(f"{description}: interrupted; state of step {state.step} saved in {state_dir}")
            raise
    if is_main and state.saved_step != state.step:
        save_state(state_dir, state, params, optimizer, scaler, config)
    return FitResult(
        best_state=state.best_state,
        last_state={**cpu_copy(params), **cpu_copy(buffers)},
        best_step=state.best_step,
        best_score=state.best_score,
        history=state.history,
    )


def _run(
    task: TrainTask,
    config: LoopConfig,
    runtime: Runtime,
    state_dir: Path,
    params: dict,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    state: LoopState,
    signals: DeferredSignals,
    reporter: _Reporter,
    on_step: StepCallback | None,
) -> None:
    buffers = task_buffers(task)  # a save holds their copy at the last step boundary, never one forward ahead
    trained = list(params.values())
    is_main = distributed.is_main_process()
    log_every = step_log.current_options().log_every  # --log-every: not a trajectory setting
    if _validation_due(state, config):  # the run was interrupted during this validation
        _validate(task, state, params, runtime, signals, reporter)
    for step in range(state.step, config.steps):
        loss, terms = loss_and_backward(task, step, runtime, scaler)
        with signals.held():  # an interrupt never lands in a half-applied update
            state.consistent = False
            logged = (step + 1) % log_every == 0 or step + 1 == config.steps
            lr, grad_norm = apply_update(trained, optimizer, scaler, config, step, measure_norm=logged and is_main)
            state.step = step + 1
            state.rng = capture_rng(runtime)
            state.buffers = snapshot(buffers)
            state.window.append(loss.double())
            reporter.steps_log.add_terms(terms)
            if logged:
                _log_window(state, lr, reporter)
                reporter.steps_log.write(state.step, state.history[-1]["loss"], lr, grad_norm)
            state.consistent = True
        reporter.advance(state.step)

        if _validation_due(state, config):
            _validate(task, state, params, runtime, signals, reporter)
        if on_step is not None:
            with rng_preserved(runtime):
                on_step(step, float(loss))
        if is_main and config.save_every and state.step % config.save_every == 0:
            save_state(state_dir, state, params, optimizer, scaler, config)


def _validation_due(state: LoopState, config: LoopConfig) -> bool:
    at_point = state.step == config.steps or (config.eval_every > 0 and state.step % config.eval_every == 0)
    return state.step > 0 and at_point and state.last_validated < state.step


def _log_window(state: LoopState, lr: float, reporter: _Reporter) -> None:
    """One log line and history entry: the mean loss of the steps since the previous one."""
    mean_loss = float(torch.stack(state.window).sum()) / len(state.window)
    if not math.isfinite(mean_loss):
        raise TrainingDiverged(
            f"the training loss became {mean_loss} by step {state.step}; lower the learning "
            f"rate, or train in fp32 or bf16"
        )
    state.history.append({"event": "train", "step": state.step, "loss": mean_loss, "lr": lr})
    state.window = []
    reporter.train_line(state.step, mean_loss, lr)


def _validate(
    task: TrainTask, state: LoopState, params: dict, runtime: Runtime, signals: DeferredSignals, reporter: _Reporter
) -> None:
    """Validate at ``state.step``; keep a copy of the trained tensors when the score beats the best so far
    (strictly: a tie keeps the earlier step)."""
    with torch.no_grad(), rng_preserved(runtime):
        metrics = task.validate()
    if "score" not in metrics:
        raise ValueError(f"task.validate() must return a 'score', got {sorted(metrics)}")
    entry = {"event": "validate", "step": state.step, **{k: float(v) for k, v in metrics.items()}}
    score = entry["score"]
    best = state.best_score
    improved = best is None or score > best or (math.isnan(best) and not math.isnan(score))
    best_copy = {**cpu_copy(params), **cpu_copy(state.buffers)} if improved else None
    reporter.steps_log.validation(entry)
    with signals.held():
        state.history.append(entry)
        state.last_validated = state.step
        if improved:
            state.best_score, state.best_step, state.best_state = score, state.step, best_copy
    details = " ".join(f"{k} {v:.4f}" for k, v in entry.items() if k not in ("event", "step", "score"))
    reporter.note(
        f"{reporter.description} step {state.step}/{reporter.steps} validation score {score:.4f} "
        f"(best {state.best_score:.4f} at step {state.best_step}) {details}".rstrip()
    )
