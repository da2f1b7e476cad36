"""Run a training task into a checkpoint artifact, resumably.

The loop's resumable state lives in ``state/`` inside the artifact's partial directory, so rerunning the same
command after an interruption continues from the last saved step; the finished artifact holds the best trained
tensors (``model.safetensors``), the checkpoint config, the training history, the per-step metrics
(``steps.csv``) and the final optimizer state beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mltk import artifacts, schema
from mltk.runtime import Runtime, log
from mltk.train.loop import LoopConfig, TrainTask, fit
from mltk.train.step_log import STEPS_CSV


def train_to_checkpoint(task: TrainTask, loop: LoopConfig, runtime: Runtime, out: Path, *, stage: str,
                        checkpoint_config: Callable[[], dict], run_config: Any, inputs: Iterable[Path],
                        on_step: Callable[[int, float], None] | None = None,
                        checkpoint_tensors: Callable[[dict], dict] | None = None,
                        extra_files: Callable[[Path], None] | None = None, **manifest_fields: Any) -> Path:
    """Fit ``task`` and write its best tensors as a checkpoint artifact at ``out``; returns the path.

    ``checkpoint_tensors(best_state)`` may complete the trained tensors with frozen ones the checkpoint must hold;
    ``extra_files(directory)`` may write files the checkpoint needs besides them (a vocabulary).
    """
    with artifacts.ArtifactWriter(out, "checkpoint", stage=stage, config=run_config, inputs=inputs,
                                  resume=True) as writer:
        result = fit(task, loop, runtime, writer.dir / "state", on_step=on_step, description=stage,
                     steps_csv=writer.dir / STEPS_CSV)
        tensors = checkpoint_tensors(result.best_state) if checkpoint_tensors else result.best_state
        artifacts.save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, tensors)
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, checkpoint_config())
        if extra_files is not None:
            extra_files(writer.dir)
        artifacts.write_json(writer.dir / "history.json", result.history)
        writer.manifest.update(best_step=result.best_step, best_score=result.best_score, steps=loop.steps,
                               **manifest_fields)
    log(f"{stage}: best validation score {result.best_score:.4f} at step {result.best_step}; wrote {writer.path}")
    return writer.path
