"""Per-step training metrics: a CSV inside the artifact, and TensorBoard event files on request.

``fit`` keeps one ``StepLogger`` per run. Every ``log_every`` steps (the same steps as the stderr log line and
``history.json``) it appends one row to ``steps.csv``::

    step, loss, <each named loss term>, lr, grad_norm, steps_per_s, samples_per_s

- ``loss`` and the terms are means over the steps since the previous row (the loss exactly as in history.json).
  A task names its terms by returning ``(loss, {"nlt_mse": tensor, ...})`` from ``loss(step)``; a bare tensor
  gives the ``loss`` column alone. ``loss`` is the optimised total; the terms are unweighted, so the loss is
  the sum of each term times its weight (the stage's option named in brackets below):

  ================ =============================================================================================
  stage            term columns
  ================ =============================================================================================
  pretrain         ``clip_infonce`` (= loss); ``logit_scale`` (CLIP's learnt 1/T: logged, not a loss term)
  train-nlt        ``nlt_mse`` (= loss)
  train-le         ``le_infonce`` (= loss)
  train-nlt-le     ``nlt_mse`` [nlt_weight], ``le_infonce`` [le_weight]
  train-continual  ``infonce`` [gamma1], ``mse`` [gamma2], ``logit_scale`` (logged), and the method's own: oewc
                   ``ewc_penalty`` = sum F (theta - theta*)^2 (half of it with ``half``) [penalty, lambda]; er
                   ``replay_mse`` [gamma2] (the memory rows' own MSE; none with ``replay_loss=joint``), with
                   ``replay_loss=separate`` also ``replay_infonce`` [gamma1]; der
                   ``der_mse`` [alpha]; dualprompt ``prompt_pull`` [pull_weight]. One file per task; EWC and
                   replay terms appear from the second task on
  train-ccrk       per ``--loss``: ``one_to_k``, ``one_to_one``, ``english_bridge_mse`` or ``hinge`` (= loss); mlmme:
                   ``mlmme_image_sentence`` [beta], ``mlmme_sentence_sentence`` [1 - beta] (sums over the
                   languages); ``logit_scale`` (logged) with one-to-k and one-to-one
  ================ =============================================================================================

  Terms cost no synchronisation: ``add_terms`` keeps the detached tensors where they are, and they are read once
  per row, when the loss is too.
- ``lr`` is the first param group's learning rate of the row's step; ``grad_norm`` the L2 norm of all trained
  gradients of that step before clipping (after un-scaling and averaging over processes), so a clipped run
  shows how hard the clip bites.
- ``samples_per_s`` counts ``task.batches.batch_size`` samples per step where the task has it (blank otherwise).

Why a CSV: it is read by every plotting tool, survives without TensorBoard, and travels with the checkpoint.
A resumed run first drops the rows after its saved step, so the file reads as one uninterrupted run (terms of the
first row after a resume average only the steps since the resume).

``--log-every`` and ``--tensorboard`` reach ``fit`` through ``step_logging(...)``, a context the command enters
around its one library call, so the stage configurations (and the trajectory a saved state is checked against)
do not change with them.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import importlib.util
import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from mltk.core.errors import ConfigError
from mltk.settings.loop import LOG_EVERY

STEPS_CSV = "steps.csv"
FIXED_BEFORE = ("step", "loss")
FIXED_AFTER = ("lr", "grad_norm", "steps_per_s", "samples_per_s")


@dataclass(frozen=True)
class StepLogOptions:
    """``log_every``: steps between rows and log lines; ``tensorboard``: a directory to
    write event files under (one sub-directory per training run, named after it), or None."""

    log_every: int = LOG_EVERY
    tensorboard: Path | None = None


_OPTIONS: contextvars.ContextVar[StepLogOptions] = contextvars.ContextVar("mltk_step_log", default=StepLogOptions())


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


@contextlib.contextmanager
def step_logging(log_every: int | None = None, tensorboard: Path | None = None) -> Iterator[StepLogOptions]:
    """Set ``--log-every`` / ``--tensorboard`` for the training runs inside the block; checked here, before any
    work, so a missing TensorBoard fails at once with one line."""
    if log_every is not None and log_every < 1:
        raise ConfigError(f"--log-every must be at least 1, got {log_every}")
    if tensorboard is not None and not tensorboard_available():
        # not 'mltk[tensorboard]': the name mltk on the public package index is another project
        raise ConfigError(
            "--tensorboard needs the tensorboard package (pip install 'tensorboard>=2.12', or "
            "pip install -e '.[tensorboard]' in the mltk checkout)"
        )
    options = StepLogOptions(
        LOG_EVERY if log_every is None else log_every, Path(tensorboard) if tensorboard is not None else None
    )
    token = _OPTIONS.set(options)
    try:
        yield options
    finally:
        _OPTIONS.reset(token)


def current_options() -> StepLogOptions:
    return _OPTIONS.get()


def gradient_norm(parameters) -> float:
    """The L2 norm of all gradients together (``clip_grad_norm_``'s total norm, without clipping)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)).float()))


def run_name(description: str) -> str:
    """A directory name for a run (``task 0 en`` -> ``task-0-en``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", description).strip("-") or "train"


class StepLogger:
    """Rows of ``steps.csv`` (and TensorBoard scalars) every ``log_every`` steps; inert when ``enabled`` is False
    (processes other than rank 0); no CSV when ``csv_path`` is None."""

    def __init__(
        self,
        csv_path: Path | None,
        description: str,
        start_step: int,
        samples_per_step: int | None,
        enabled: bool = True,
        tensorboard: Path | None = None,
    ):
        self.path = Path(csv_path) if csv_path is not None else None
        self.samples_per_step, self.enabled = samples_per_step, enabled
        self._terms: dict[str, list[torch.Tensor]] = {}
        self._mark = (start_step, time.perf_counter())
        self._columns: list[str] | None = None
        self._tensorboard = None
        if not enabled:
            return
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._columns = _keep_rows_up_to(self.path, start_step)
        if tensorboard is not None:
            from torch.utils.tensorboard import SummaryWriter

            self._tensorboard = SummaryWriter(
                str(Path(tensorboard) / run_name(description)), purge_step=start_step or None
            )

    def add_terms(self, terms: Mapping[str, torch.Tensor]) -> None:
        """Keep one step's named loss terms (detached, on their device: no synchronisation per step)."""
        if self.enabled:
            for name, value in terms.items():
                self._terms.setdefault(name, []).append(torch.as_tensor(value).detach())

    def write(self, step: int, loss: float, lr: float, grad_norm: float | None) -> None:
        """One row for the steps since the previous one, ending at ``step`` (completed updates)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        steps_per_s = (step - self._mark[0]) / max(now - self._mark[1], 1e-9)
        self._mark = (step, now)
        terms = {name: float(torch.stack(values).double().mean()) for name, values in self._terms.items()}
        self._terms = {}
        row = {
            "step": step,
            "loss": loss,
            **terms,
            "lr": lr,
            "grad_norm": grad_norm,
            "steps_per_s": steps_per_s,
            "samples_per_s": steps_per_s * self.samples_per_step if self.samples_per_step else None,
        }
        self._append(row)
        if self._tensorboard is not None:
            for name, value in row.items():
                if name != "step" and value is not None and math.isfinite(value):
                    self._tensorboard.add_scalar(f"train/{name}", value, step)

    def validation(self, entry: Mapping[str, float]) -> None:
        """Validation metrics of a step, as TensorBoard scalars ``val/<name>`` (history.json keeps them too)."""
        if self._tensorboard is not None:
            for name, value in entry.items():
                if name not in ("event", "step"):
                    self._tensorboard.add_scalar(f"val/{name}", float(value), int(entry["step"]))

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None

    def _append(self, row: dict) -> None:
        if self.path is None:
            return
        if self._columns is None:
            terms = [name for name in row if name not in FIXED_BEFORE + FIXED_AFTER]
            self._columns = [*FIXED_BEFORE, *terms, *FIXED_AFTER]
            with self.path.open("w", newline="", encoding="utf-8") as handle:
                csv.writer(handle).writerow(self._columns)
        with self.path.open("a", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerow(["" if row.get(c) is None else _cell(row[c]) for c in self._columns])


def _cell(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:.7g}"


def _keep_rows_up_to(path: Path, step: int) -> list[str] | None:
    """Drop the rows after ``step`` (written after the state a run resumes from); a fresh run (step 0) starts an
    empty file. Returns the existing header, or None when there is none."""
    if step == 0 or not path.is_file():
        path.unlink(missing_ok=True)
        return None
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return None
    header, kept = rows[0], [r for r in rows[1:] if r and int(r[0]) <= step]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *kept])
    tmp.replace(path)
    return header


def read_steps_csv(path: Path) -> list[dict[str, float | None]]:
    """The rows of a ``steps.csv`` as dicts of floats (None for blank cells)."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        return [{k: (float(v) if v != "" else None) for k, v in row.items()} for row in csv.DictReader(handle)]
