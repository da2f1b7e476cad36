"""What ``mltk.train.loop.fit`` saves and restores for exact resume: the commit record ``loop.json``, the state and
best-state tensor files, and the random streams (see ``mltk.train.loop`` for the protocol).

The public API, all that the loop uses: ``LoopState`` (what is saved), ``save_state`` / ``load_state``,
``state_files`` and ``remove_unreferenced`` (the files of a state directory), ``cpu_copy``, ``capture_rng`` /
``restore_rng``, and the resume rule (``MAY_CHANGE_ON_RESUME``, ``settings_record``, ``changed_settings``). The
loop's settings reach it as ``LoopSettings``, so this module does not import the loop."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from mltk.artifacts import canonical_settings, load_tensors, save_tensors, write_json
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import Runtime

LOOP_JSON = "loop.json"
# The one resume rule, for every stage: a saved run may be continued with different values of these settings only
# (where it runs, how often it reports, validates and saves, the size of the validation gallery, what is kept);
# every other setting, of the stage and of its LoopConfig (``steps``, ``lr``, ``seed``, the loss, the batch size,
# ...), changes the trajectory and must be the same. A new setting is therefore checked unless it is listed here.
MAY_CHANGE_ON_RESUME = (
    "out",
    "device",
    "precision",
    "cache_dir",
    "keep_task_checkpoints",
    "val_images",
    "eval_every",
    "save_every",
    "log_every",
)


def settings_record(config: Any) -> dict:
    """A (stage or loop) config as the JSON it is saved as, nested configs as nested objects, paths by what they
    are (``canonical_settings``: resolved, however they were spelled)."""
    return json.loads(json.dumps(canonical_settings(config)))


def changed_settings(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """``name=saved (now current)`` for each setting that differs and may not change (``MAY_CHANGE_ON_RESUME``,
    by the setting's own name at any depth: ``loop.eval_every`` may change, ``loop.lr`` may not)."""
    changed = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if key in MAY_CHANGE_ON_RESUME or old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changed += changed_settings(old, new, f"{prefix}{key}.")
        else:
            changed.append(f"{prefix}{key}={old!r} (now {new!r})")
    return changed


def capture_rng(runtime: Runtime) -> dict[str, Any]:
    """The torch (CPU and this process's CUDA device), NumPy and Python random states."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state() if runtime.device.type == "cuda" else None,
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


@contextlib.contextmanager
def rng_preserved(runtime: Runtime) -> Iterator[None]:
    """Run a block on a forked random stream: the states are put back afterwards."""
    saved = capture_rng(runtime)
    try:
        yield
    finally:
        restore_rng(saved)


def restore_rng(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])


# ----------------------------------------------------------------------------------------------------------------
# Loop state: what is saved and restored
# ----------------------------------------------------------------------------------------------------------------


class LoopSettings(Protocol):
    """What the state files need of ``mltk.train.loop.LoopConfig`` (a frozen dataclass, recorded whole)."""

    steps: int


@dataclass
class LoopState:
    rng: dict[str, Any]  # random states at the current step boundary
    step: int = 0  # completed updates
    best_score: float | None = None
    best_step: int = 0
    best_state: dict[str, torch.Tensor] = field(default_factory=dict)  # trained tensors and kept buffers
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # kept buffers at the current step boundary
    history: list[dict] = field(default_factory=list)
    window: list[torch.Tensor] = field(default_factory=list)  # losses since the last log line (on the device)
    last_validated: int = 0
    saved_step: int = -1
    consistent: bool = True  # False while an update is half-applied


def cpu_copy(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: p.detach().to("cpu", copy=True) for name, p in params.items()}


def task_buffers(task: Any) -> dict[str, torch.Tensor]:
    """The task's ``buffers_to_keep()`` (none when it has no such method), by names distinct from its parameters'."""
    buffers = dict(getattr(task, "buffers_to_keep", dict)())
    shared = set(buffers) & set(task.parameters_to_train())
    if shared:
        raise ValueError(f"buffers_to_keep and parameters_to_train share the names {sorted(shared)[:3]}")
    return buffers


def snapshot(buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Clones of the kept buffers (on their device), taken at a step boundary."""
    return {name: b.detach().clone() for name, b in buffers.items()}


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


def _load_optimizer_state(
    optimizer: torch.optim.Optimizer, tensors: dict, scalars: dict, names: dict[int, str]
) -> None:
    """Inverse of ``_optimizer_tensors``, through ``load_state_dict`` (which puts each slot on its parameter's
    device and dtype, and Adam's ``step`` where torch wants it)."""
    slots_by_name: dict[str, dict] = {name: dict(values) for name, values in scalars.items()}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            name, slot = key[len("optimizer/") :].rsplit("/", 1)
            slots_by_name.setdefault(name, {})[slot] = value
    ordered = [p for group in optimizer.param_groups for p in group["params"]]  # state_dict's numbering
    state_dict = optimizer.state_dict()
    state_dict["state"] = {
        i: slots_by_name[names[id(p)]] for i, p in enumerate(ordered) if names[id(p)] in slots_by_name
    }
    optimizer.load_state_dict(state_dict)


def _rng_for_files(rng: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    _, keys, pos, has_gauss, cached_gaussian = rng["numpy"]
    version, internal, gauss_next = rng["python"]
    tensors = {"rng/torch": rng["torch"], "rng/numpy": torch.from_numpy(np.asarray(keys, dtype=np.int64))}
    if rng["cuda"] is not None:
        tensors["rng/cuda"] = rng["cuda"]
    as_json = {
        "numpy": [int(pos), int(has_gauss), float(cached_gaussian)],
        "python": [version, list(internal), gauss_next],
    }
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


def save_state(
    state_dir: Path,
    state: LoopState,
    params: dict,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    config: LoopSettings,
) -> None:
    """Write the state of ``state.step``: tensor files first, ``loop.json`` (the commit record) last."""
    state_dir.mkdir(parents=True, exist_ok=True)
    names = {id(p): name for name, p in params.items()}
    optimizer_tensors, optimizer_scalars = _optimizer_tensors(optimizer, names)
    rng_tensors, rng_json = _rng_for_files(state.rng)
    state_file, best_file = state_files(state)
    save_tensors(
        state_dir / state_file,
        {
            **{f"trained/{n}": p for n, p in params.items()},
            **{f"buffer/{n}": b for n, b in state.buffers.items()},
            **optimizer_tensors,
            **rng_tensors,
        },
    )
    if best_file is not None and not (state_dir / best_file).exists():  # else unchanged since the last save
        save_tensors(state_dir / best_file, state.best_state)
    write_json(
        state_dir / LOOP_JSON,
        {
            "step": state.step,
            "steps": config.steps,
            "state_file": state_file,
            "best_file": best_file,
            "best_score": state.best_score,
            "best_step": state.best_step,
            "last_validated": state.last_validated,
            "window": [float(loss) for loss in state.window],
            "optimizer_scalars": optimizer_scalars,
            "rng": rng_json,
            "grad_scaler": scaler.state_dict() if scaler is not None else None,
            "config": dataclasses.asdict(config),
            "history": state.history,
        },
    )
    remove_unreferenced(state_dir, {state_file, best_file})
    state.saved_step = state.step


def state_files(state: LoopState) -> tuple[str, str | None]:
    best_file = f"best-{state.best_step:08d}.safetensors" if state.best_score is not None else None
    return f"state-{state.step:08d}.safetensors", best_file


def remove_unreferenced(state_dir: Path, keep: set) -> None:
    """Delete state files that ``loop.json`` does not name (older saves, leftovers of a crash)."""
    for path in [
        *state_dir.glob("state-*.safetensors"),
        *state_dir.glob("best-*.safetensors"),
        *state_dir.glob("*.tmp"),
    ]:
        if path.name not in keep:
            path.unlink(missing_ok=True)


def load_state(
    state_dir: Path,
    params: dict,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    config: LoopSettings,
    runtime: Runtime,
    buffers: dict | None = None,
) -> LoopState | None:
    """Restore tensors, kept buffers, optimizer, GradScaler and RNG from ``state_dir``; None when there is no saved
    state."""
    buffers = buffers or {}
    record = state_dir / LOOP_JSON
    if not record.is_file():
        return None
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
        tensors = load_tensors(state_dir / saved["state_file"])
        best_state = load_tensors(state_dir / saved["best_file"]) if saved["best_file"] else {}
    except (OSError, ValueError, KeyError, ArtifactError) as exc:
        raise ArtifactError(f"cannot read the saved training state ({exc}); delete {state_dir} to start over", record)
    _check_same_run(saved["config"], config, params, tensors, record)
    _check_buffers(buffers, tensors, record)
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(tensors[f"trained/{name}"])
        for name, buffer in buffers.items():
            buffer.copy_(tensors[f"buffer/{name}"])
    _load_optimizer_state(optimizer, tensors, saved["optimizer_scalars"], {id(p): n for n, p in params.items()})
    if scaler is not None and saved["grad_scaler"]:
        scaler.load_state_dict(saved["grad_scaler"])
    state = LoopState(
        rng=_rng_from_files(tensors, saved["rng"]),
        step=saved["step"],
        best_score=saved["best_score"],
        best_step=saved["best_step"],
        best_state=best_state,
        history=saved["history"],
        last_validated=saved["last_validated"],
        window=[torch.tensor(v, dtype=torch.float64, device=runtime.device) for v in saved["window"]],
        saved_step=saved["step"],
    )
    restore_rng(state.rng)
    return state


def _check_same_run(saved_config: dict, config: LoopSettings, params: dict, tensors: dict, record: Path) -> None:
    changed = changed_settings(saved_config, settings_record(config))
    if changed:
        raise ConfigError(
            f"the saved training state was made with other settings: {', '.join(changed)}; rerun "
            f"with the same settings, or pass --overwrite to start over",
            record,
        )
    saved_names = {k[len("trained/") :] for k in tensors if k.startswith("trained/")}
    if saved_names != set(params) or any(
        tuple(tensors[f"trained/{n}"].shape) != tuple(p.shape) for n, p in params.items()
    ):
        raise ArtifactError(
            f"the saved training state trains other tensors than this run (saved "
            f"{len(saved_names)}, now {len(params)}, or shapes differ); delete {record.parent} "
            f"to start over",
            record,
        )


def _check_buffers(buffers: dict, tensors: dict, record: Path) -> None:
    saved = {k[len("buffer/") :] for k in tensors if k.startswith("buffer/")}
    if saved != set(buffers) or any(tuple(tensors[f"buffer/{n}"].shape) != tuple(b.shape) for n, b in buffers.items()):
        raise ArtifactError(
            f"the saved training state holds other buffers than this run needs (saved {len(saved)}, "
            f"now {len(buffers)}: an older mltk saved no running statistics, or shapes differ); "
            f"delete {record.parent} to start over",
            record,
        )
