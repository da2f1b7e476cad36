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

Optimizer: ``torch.optim.AdamW`` with the config's betas/eps and decoupled weight decay on tensors with
``ndim >= 2`` only (weight matrices and embedding tables), none on biases, norms' gains and scalars such as a
logit scale: open_clip's rule (``exclude = p.ndim < 2 or "bn"/"ln"/"bias"/"logit_scale" in name``). A task may
supply its own through ``make_optimizer(params, config)`` (CLL-CLIP's TEIR AdamW); then every bit of mutable
state must live in ``optimizer.state[param]`` and the param groups must depend only on ``(params, config)``,
because resume rebuilds the optimizer with ``make_optimizer`` and loads only that state.
The defaults (betas 0.9/0.98, eps 1e-6, weight decay 0.2, per-tensor clipping at 1.0) are the MLA authors'
settings (Zhang et al. 2023); ``schedule="cosine"`` is CLIP's.

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
import dataclasses
import json
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from mltk.artifacts import _jsonable, load_tensors, save_tensors, write_json
from mltk.errors import ArtifactError, ConfigError, MltkError
from mltk.runtime import Runtime, console, progress_bar, seed_everything
from mltk.train import distributed

SCHEDULES = ("constant", "cosine")
CLIP_MODES = ("per_tensor", "global")
LOOP_JSON = "loop.json"
# LoopConfig fields that change the trajectory: a saved state made with other values cannot be continued.
TRAJECTORY_FIELDS = ("steps", "lr", "warmup_fraction", "schedule", "weight_decay", "betas", "eps", "grad_clip",
                     "clip_mode", "seed")


class TrainingDiverged(MltkError):
    """The loss became NaN or infinite (usually a learning rate too high for the precision)."""


@dataclass(frozen=True)
class LoopConfig:
    steps: int
    lr: float
    warmup_fraction: float = 0.1      # linear warm-up over this fraction of steps
    schedule: str = "constant"        # after warm-up: "constant" or "cosine" (to 0)
    weight_decay: float = 0.2         # decoupled (AdamW), on tensors with ndim >= 2 only
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    grad_clip: float | None = 1.0
    clip_mode: str = "per_tensor"     # "per_tensor" (authors' MLA code: clip each tensor's norm) or "global"
    eval_every: int = 0               # steps between validations; 0 = only at the end
    save_every: int = 50              # steps between resumable state saves; 0 = only at the end / interrupt
    log_every: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        problems = []
        if self.steps < 1:
            problems.append(f"steps must be at least 1, got {self.steps}")
        if not self.lr > 0:
            problems.append(f"lr must be positive, got {self.lr}")
        if not 0.0 <= self.warmup_fraction <= 1.0:
            problems.append(f"warmup_fraction must be in [0, 1], got {self.warmup_fraction}")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.clip_mode not in CLIP_MODES:
            problems.append(f"clip_mode must be one of {', '.join(CLIP_MODES)}, got {self.clip_mode!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            problems.append(f"grad_clip must be positive or None, got {self.grad_clip}")
        if self.weight_decay < 0 or self.eps < 0 or len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            problems.append(f"invalid AdamW settings: weight_decay={self.weight_decay}, betas={self.betas}, "
                            f"eps={self.eps}")
        if self.eval_every < 0 or self.save_every < 0 or self.log_every < 1:
            problems.append(f"eval_every and save_every must be >= 0 and log_every >= 1, got {self.eval_every}, "
                            f"{self.save_every}, {self.log_every}")
        if problems:
            raise ConfigError("; ".join(problems))


class TrainTask(Protocol):
    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        """The tensors to train; the names are the keys of checkpoints and saved state."""

    def loss(self, step: int) -> torch.Tensor:
        """The scalar loss of the batch of global step ``step`` (0-based), built deterministically from
        ``(seed, step)``; under torchrun only this rank's shard of it (``mltk.train.distributed``)."""

    def validate(self) -> dict[str, float]:
        """Validation metrics; must contain ``"score"`` (higher is better). Runs under ``torch.no_grad()``."""

    # Optional: def make_optimizer(self, params: dict[str, Parameter], config: LoopConfig) -> torch.optim.Optimizer


@dataclass
class FitResult:
    best_state: dict[str, torch.Tensor]   # trained tensors at the best validation (cpu clones)
    last_state: dict[str, torch.Tensor]
    best_step: int
    best_score: float
    history: list[dict]                   # one dict per validation / log line: event, step, loss, lr, score...


# ----------------------------------------------------------------------------------------------------------------
# Learning rate, optimizer, clipping
# ----------------------------------------------------------------------------------------------------------------


def warmup_steps(config: LoopConfig) -> int:
    return round(config.warmup_fraction * config.steps)


def lr_factor(step: int, config: LoopConfig) -> float:
    """Multiplier of each param group's base lr for the update of 0-based ``step`` (a LambdaLR lambda).

    Warm-up ``W = round(warmup_fraction * steps)``: ``(step + 1) / W`` for ``step < W``, so the first update
    already moves and update ``W - 1`` reaches the full lr. Then ``1`` ("constant"), or ("cosine")
    ``0.5 * (1 + cos(pi * (step - W) / (steps - W)))``, which would reach 0 at ``step = steps``.
    """
    warmup = warmup_steps(config)
    if step < warmup:
        return (step + 1) / warmup
    if config.schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, config.steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def default_optimizer(params: dict[str, torch.nn.Parameter], config: LoopConfig) -> torch.optim.AdamW:
    """AdamW with decoupled weight decay on tensors with ndim >= 2 only (open_clip's rule)."""
    matrices = [p for p in params.values() if p.ndim >= 2]
    others = [p for p in params.values() if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": config.weight_decay}, {"params": others, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=config.lr, betas=config.betas, eps=config.eps)


def clip_gradients(parameters: list[torch.Tensor], max_norm: float, mode: str) -> None:
    """Scale gradients so that their L2 norm is at most ``max_norm``: each tensor's own norm ("per_tensor", the MLA
    authors' code) or the norm of all of them together ("global", ``torch.nn.utils.clip_grad_norm_``). Same
    coefficient as torch: ``min(1, max_norm / (norm + 1e-6))``."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    if mode == "global":
        torch.nn.utils.clip_grad_norm_([p for p in parameters if p.grad is not None], max_norm)
        return
    norms = torch.stack(torch._foreach_norm(grads))  # [n_tensors]
    scales = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, list(scales.unbind()))


def _build_optimizer(task: TrainTask, params: dict[str, torch.nn.Parameter],
                     config: LoopConfig) -> torch.optim.Optimizer:
    make = getattr(task, "make_optimizer", None)
    optimizer = make(params, config) if make is not None else default_optimizer(params, config)
    known = {id(p) for p in params.values()}
    for group in optimizer.param_groups:
        if any(id(p) not in known for p in group["params"]):
            raise ValueError("make_optimizer returned an optimizer over a tensor that parameters_to_train does not "
                             "name; its state could not be saved")
        group.setdefault("initial_lr", group["lr"])  # the base lr the schedule multiplies, as LambdaLR keeps it
    return optimizer


def _set_lr(optimizer: torch.optim.Optimizer, factor: float) -> float:
    for group in optimizer.param_groups:
        group["lr"] = group["initial_lr"] * factor
    return optimizer.param_groups[0]["lr"]


# ----------------------------------------------------------------------------------------------------------------
# Random streams and signals
# ----------------------------------------------------------------------------------------------------------------


def capture_rng(runtime: Runtime) -> dict[str, Any]:
    """The torch (CPU and this process's CUDA device), NumPy and Python random states."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state() if runtime.device.type == "cuda" else None,
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def restore_rng(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])


@contextlib.contextmanager
def rng_preserved(runtime: Runtime) -> Iterator[None]:
    """Run a block on a forked random stream: the states are put back afterwards."""
    saved = capture_rng(runtime)
    try:
        yield
    finally:
        restore_rng(saved)


class _Signals:
    """While ``fit`` runs: SIGTERM raises SystemExit (as Ctrl-C raises KeyboardInterrupt) so that both save the
    state, and inside ``held()`` both signals wait until the block is done. Main thread only (Python delivers
    signals there); elsewhere it does nothing."""

    def __init__(self) -> None:
        self.active = threading.current_thread() is threading.main_thread()
        self._previous_term = None

    def __enter__(self) -> _Signals:
        if self.active and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._previous_term = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous_term is not None:
            signal.signal(signal.SIGTERM, self._previous_term)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        pending: list[int] = []
        handlers = {sig: signal.signal(sig, lambda s, _frame: pending.append(s))
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        for sig in pending[:1]:
            handler = handlers[sig]
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(sig)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


# ----------------------------------------------------------------------------------------------------------------
# Loop state: what is saved and restored
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _LoopState:
    rng: dict[str, Any]                       # random states at the current step boundary
    step: int = 0                             # completed updates
    best_score: float | None = None
    best_step: int = 0
    best_state: dict[str, torch.Tensor] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    window: list[torch.Tensor] = field(default_factory=list)  # losses since the last log line (on the device)
    last_validated: int = 0
    saved_step: int = -1
    consistent: bool = True                   # False while an update is half-applied


def _validation_due(state: _LoopState, config: LoopConfig) -> bool:
    at_point = state.step == config.steps or (config.eval_every > 0 and state.step % config.eval_every == 0)
    return state.step > 0 and at_point and state.last_validated < state.step


def _cpu_copy(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: p.detach().to("cpu", copy=True) for name, p in params.items()}


def _optimizer_tensors(optimizer: torch.optim.Optimizer, names: dict[int, str]) -> tuple[dict, dict]:
    """Flatten ``optimizer.state`` to ``optimizer/<name>/<slot>`` tensors, plus non-tensor slots for JSON."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict] = {}
    for param, slots in optimizer.state.items():
        for slot, value in slots.items():
            if torch.is_tensor(value):
                tensors[f"optimizer/{names[id(param)]}/{slot}"] = value
            else:
                scalars.setdefault(names[id(param)], {})[slot] = value
    return tensors, scalars


def _load_optimizer_state(optimizer: torch.optim.Optimizer, tensors: dict, scalars: dict,
                          names: dict[int, str]) -> None:
    """Inverse of ``_optimizer_tensors``, through ``load_state_dict`` (which puts each slot on its parameter's
    device and dtype, and Adam's ``step`` where torch wants it)."""
    slots_by_name: dict[str, dict] = {name: dict(values) for name, values in scalars.items()}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            name, slot = key[len("optimizer/"):].rsplit("/", 1)
            slots_by_name.setdefault(name, {})[slot] = value
    ordered = [p for group in optimizer.param_groups for p in group["params"]]  # state_dict's numbering
    state_dict = optimizer.state_dict()
    state_dict["state"] = {i: slots_by_name[names[id(p)]] for i, p in enumerate(ordered)
                           if names[id(p)] in slots_by_name}
    optimizer.load_state_dict(state_dict)


def _rng_for_files(rng: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    _, keys, pos, has_gauss, cached_gaussian = rng["numpy"]
    version, internal, gauss_next = rng["python"]
    tensors = {"rng/torch": rng["torch"], "rng/numpy": torch.from_numpy(np.asarray(keys, dtype=np.int64))}
    if rng["cuda"] is not None:
        tensors["rng/cuda"] = rng["cuda"]
    as_json = {"numpy": [int(pos), int(has_gauss), float(cached_gaussian)],
               "python": [version, list(internal), gauss_next]}
    return tensors, as_json


def _rng_from_files(tensors: dict[str, torch.Tensor], as_json: dict) -> dict[str, Any]:
    pos, has_gauss, cached_gaussian = as_json["numpy"]
    version, internal, gauss_next = as_json["python"]
    return {
        "torch": tensors["rng/torch"],
        "cuda": tensors.get("rng/cuda"),
        "numpy": ("MT19937", tensors["rng/numpy"].numpy().astype(np.uint32), pos, has_gauss, cached_gaussian),
        "python": (version, tuple(internal), gauss_next),
    }


def _save_state(state_dir: Path, state: _LoopState, params: dict, optimizer: torch.optim.Optimizer,
                scaler: torch.amp.GradScaler | None, config: LoopConfig) -> None:
    """Write the state of ``state.step``: tensor files first, ``loop.json`` (the commit record) last."""
    state_dir.mkdir(parents=True, exist_ok=True)
    names = {id(p): name for name, p in params.items()}
    optimizer_tensors, optimizer_scalars = _optimizer_tensors(optimizer, names)
    rng_tensors, rng_json = _rng_for_files(state.rng)
    state_file, best_file = _state_files(state)
    save_tensors(state_dir / state_file, {**{f"trained/{n}": p for n, p in params.items()}, **optimizer_tensors,
                                          **rng_tensors})
    if best_file is not None and not (state_dir / best_file).exists():  # else unchanged since the last save
        save_tensors(state_dir / best_file, state.best_state)
    write_json(state_dir / LOOP_JSON, {
        "step": state.step, "steps": config.steps, "state_file": state_file, "best_file": best_file,
        "best_score": state.best_score, "best_step": state.best_step, "last_validated": state.last_validated,
        "window": [float(loss) for loss in state.window],
        "optimizer_scalars": optimizer_scalars, "rng": rng_json,
        "grad_scaler": scaler.state_dict() if scaler is not None else None,
        "config": dataclasses.asdict(config), "history": state.history,
    })
    _remove_unreferenced(state_dir, {state_file, best_file})
    state.saved_step = state.step


def _state_files(state: _LoopState) -> tuple[str, str | None]:
    best_file = f"best-{state.best_step:08d}.safetensors" if state.best_score is not None else None
    return f"state-{state.step:08d}.safetensors", best_file


def _remove_unreferenced(state_dir: Path, keep: set) -> None:
    """Delete state files that ``loop.json`` does not name (older saves, leftovers of a crash)."""
    for path in [*state_dir.glob("state-*.safetensors"), *state_dir.glob("best-*.safetensors"),
                 *state_dir.glob("*.tmp")]:
        if path.name not in keep:
            path.unlink(missing_ok=True)


def _load_state(state_dir: Path, params: dict, optimizer: torch.optim.Optimizer,
                scaler: torch.amp.GradScaler | None, config: LoopConfig, runtime: Runtime) -> _LoopState | None:
    """Restore tensors, optimizer, GradScaler and RNG from ``state_dir``; None when there is no saved state."""
    record = state_dir / LOOP_JSON
    if not record.is_file():
        return None
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
        tensors = load_tensors(state_dir / saved["state_file"])
        best_state = load_tensors(state_dir / saved["best_file"]) if saved["best_file"] else {}
    except (OSError, ValueError, KeyError, ArtifactError) as exc:
        raise ArtifactError(f"cannot read the saved training state ({exc}); delete {state_dir} to start over",
                            record)
    _check_same_run(saved["config"], config, params, tensors, record)
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(tensors[f"trained/{name}"])
    _load_optimizer_state(optimizer, tensors, saved["optimizer_scalars"], {id(p): n for n, p in params.items()})
    if scaler is not None and saved["grad_scaler"]:
        scaler.load_state_dict(saved["grad_scaler"])
    state = _LoopState(rng=_rng_from_files(tensors, saved["rng"]), step=saved["step"],
                       best_score=saved["best_score"], best_step=saved["best_step"], best_state=best_state,
                       history=saved["history"], last_validated=saved["last_validated"],
                       window=[torch.tensor(v, dtype=torch.float64, device=runtime.device) for v in saved["window"]],
                       saved_step=saved["step"])
    restore_rng(state.rng)
    return state


def _check_same_run(saved_config: dict, config: LoopConfig, params: dict, tensors: dict, record: Path) -> None:
    current = json.loads(json.dumps(_jsonable(dataclasses.asdict(config))))
    changed = [f"{k}={saved_config.get(k)!r} (now {current[k]!r})" for k in TRAJECTORY_FIELDS
               if saved_config.get(k) != current[k]]
    if changed:
        raise ConfigError(f"the saved training state was made with other settings: {', '.join(changed)}; rerun "
                          f"with the same settings, or pass --overwrite to start over", record)
    saved_names = {k[len("trained/"):] for k in tensors if k.startswith("trained/")}
    if saved_names != set(params) or any(tuple(tensors[f"trained/{n}"].shape) != tuple(p.shape)
                                         for n, p in params.items()):
        raise ArtifactError(f"the saved training state trains other tensors than this run (saved "
                            f"{len(saved_names)}, now {len(params)}, or shapes differ); delete {record.parent} "
                            f"to start over", record)


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


def fit(task: TrainTask, config: LoopConfig, runtime: Runtime, state_dir: Path,
        on_step: Callable[[int, float], None] | None = None, description: str = "train") -> FitResult:
    """Train ``task`` for ``config.steps`` updates, resuming from ``state_dir`` when it holds a saved state.

    ``on_step(step, loss)`` is called after each update with the 0-based step passed to ``task.loss`` and that
    step's (local) loss; it runs on a forked random stream. Raising KeyboardInterrupt or SystemExit from it (or
    receiving SIGINT/SIGTERM) saves the state and re-raises; any other exception propagates without saving, as
    a crash would. Returns the best and last trained tensors, the best step and score, and the history.
    """
    state_dir = Path(state_dir)
    params = dict(task.parameters_to_train())
    optimizer = _build_optimizer(task, params, config)
    scaler = torch.amp.GradScaler(runtime.device.type) if runtime.autocast_dtype == torch.float16 else None
    is_main = distributed.is_main_process()
    state = _load_state(state_dir, params, optimizer, scaler, config, runtime)
    resumed = state is not None
    if not resumed:
        seed_everything(config.seed)
        state = _LoopState(rng=capture_rng(runtime))
    if is_main and state_dir.is_dir():
        _remove_unreferenced(state_dir, set(_state_files(state)) if resumed else set())
    if not distributed.same_on_all_ranks(state.step):
        raise ArtifactError("the processes found different saved states; the state directory must be on a file "
                            "system every process reads", state_dir)
    with _Signals() as signals, _Reporter(description, config.steps, is_main) as reporter:
        reporter.begin(state.step, f"{sum(p.numel() for p in params.values()):,} trained values in {len(params)} "
                                   f"tensors, {type(optimizer).__name__}, lr {config.lr:g}, {runtime.device} "
                                   f"{runtime.precision}")
        try:
            _run(task, config, runtime, state_dir, params, optimizer, scaler, state, signals, reporter, on_step)
        except (KeyboardInterrupt, SystemExit):
            if is_main and state.consistent:
                _save_state(state_dir, state, params, optimizer, scaler, config)
                reporter.note(f"{description}: interrupted; state of step {state.step} saved in {state_dir}")
            raise
    if is_main and state.saved_step != state.step:
        _save_state(state_dir, state, params, optimizer, scaler, config)
    return FitResult(best_state=state.best_state, last_state=_cpu_copy(params), best_step=state.best_step,
                     best_score=state.best_score, history=state.history)


def _run(task: TrainTask, config: LoopConfig, runtime: Runtime, state_dir: Path, params: dict,
         optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None, state: _LoopState,
         signals: _Signals, reporter: _Reporter, on_step: Callable[[int, float], None] | None) -> None:
    trained = list(params.values())
    is_main = distributed.is_main_process()
    if _validation_due(state, config):  # the run was interrupted during this validation
        _validate(task, state, params, runtime, signals, reporter)
    for step in range(state.step, config.steps):
        with runtime.autocast():
            loss = task.loss(step)
        if not torch.is_tensor(loss) or loss.dim() != 0:
            raise TypeError(f"task.loss({step}) must return a scalar tensor, got {type(loss).__name__}")
        (scaler.scale(loss) if scaler is not None else loss).backward()
        loss = loss.detach()

        with signals.held():  # an interrupt never lands in a half-applied update
            state.consistent = False
            distributed.average_gradients(trained)
            if scaler is not None:
                scaler.unscale_(optimizer)
            if config.grad_clip is not None:
                clip_gradients(trained, config.grad_clip, config.clip_mode)
            lr = _set_lr(optimizer, lr_factor(step, config))
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state.step = step + 1
            state.rng = capture_rng(runtime)
            state.window.append(loss.double())
            if state.step % config.log_every == 0 or state.step == config.steps:
                _log_window(state, lr, reporter)
            state.consistent = True
        reporter.advance(state.step)

        if _validation_due(state, config):
            _validate(task, state, params, runtime, signals, reporter)
        if on_step is not None:
            with rng_preserved(runtime):
                on_step(step, float(loss))
        if is_main and config.save_every and state.step % config.save_every == 0:
            _save_state(state_dir, state, params, optimizer, scaler, config)


def _log_window(state: _LoopState, lr: float, reporter: _Reporter) -> None:
    """One log line and history entry: the mean loss of the steps since the previous one."""
    mean_loss = float(torch.stack(state.window).sum()) / len(state.window)
    if not math.isfinite(mean_loss):
        raise TrainingDiverged(f"the training loss became {mean_loss} by step {state.step}; lower the learning "
                               f"rate, or train in fp32 or bf16")
    state.history.append({"event": "train", "step": state.step, "loss": mean_loss, "lr": lr})
    state.window = []
    reporter.train_line(state.step, mean_loss, lr)


def _validate(task: TrainTask, state: _LoopState, params: dict, runtime: Runtime, signals: _Signals,
              reporter: _Reporter) -> None:
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
    snapshot = _cpu_copy(params) if improved else None
    with signals.held():
        state.history.append(entry)
        state.last_validated = state.step
        if improved:
            state.best_score, state.best_step, state.best_state = score, state.step, snapshot
    details = " ".join(f"{k} {v:.4f}" for k, v in entry.items() if k not in ("event", "step", "score"))
    reporter.note(f"{reporter.description} step {state.step}/{reporter.steps} validation score {score:.4f} "
                  f"(best {state.best_score:.4f} at step {state.best_step}) {details}".rstrip())
