"""What train-continual writes when the last task is done: the checkpoint files, ``continual.json`` (matrix, AR, F,
per-task records) and the two pictures. Returns the summary; printing it is the CLI's job."""

from __future__ import annotations

import shutil

from mltk import artifacts, metrics as M, schema
from mltk.continual.model import ContinualTextEncoder
from mltk.train.continual.config import CONTINUAL_FILE, ContinualTrainConfig
from mltk.vocab import Vocabulary

MATRIX_PNG, CURVE_PNG = "continual_matrix.png", "continual_curve.png"
TRAINING_STATE = "training_state.safetensors"
TRAINING_INFO = "training_state.json"
TASK_FILE = "task.json"


def finish(writer: artifacts.ArtifactWriter, config: ContinualTrainConfig, encoder: ContinualTextEncoder,
            vocabulary: Vocabulary, order: list[str], records: list[dict]) -> dict:
    """Write the final checkpoint files, continual.json and the pictures into the artifact."""
    from mltk import plots

    summary = M.continual_metrics([record["row"] for record in records])
    method = encoder.method
    continual = {
        "continual": {"tasks": order, "metric": config.metric, **summary},
        "method": {"name": method.name, "description": method.description,
                   "needs_task_identity": method.needs_task_identity,
                   "teir": {"init": config.teir_init, "regularisation": config.teir_reg, "variant": config.variant}},
        "per_task": records,
        "settings": {"matrix": "a[j][i] = metric on task i's language (test split) after training task j",
                     "AR": "AR_j = mean_{i<=j} a[j][i]",
                     "F": "F_j = mean_{i<j} max_{k<j} (a[k][i] - a[j][i]); F_0 undefined (null)",
                     "task_identity": "the language of each caption selects its adapter" if
                     method.needs_task_identity else "not used at test time"},
    }
    artifacts.save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, encoder.state_tensors())
    artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, encoder.checkpoint_config())
    final_vocab = writer.dir / encoder.checkpoint_config()["vocab"]
    shutil.rmtree(final_vocab, ignore_errors=True)
    shutil.copytree(vocabulary.path, final_vocab)
    artifacts.write_json(writer.dir / CONTINUAL_FILE, continual)
    title = f"{method.name} ({config.variant})"
    for fmt in plots.FORMATS:  # PNG to look at, SVG for papers
        (writer.dir / MATRIX_PNG).with_suffix(f".{fmt}").write_bytes(
            plots.continual_heatmap(summary["matrix"], order, config.metric, title, fmt=fmt))
        (writer.dir / CURVE_PNG).with_suffix(f".{fmt}").write_bytes(
            plots.continual_curves(summary["AR"], summary["F"], order, title, config.metric, fmt=fmt))
    shutil.rmtree(writer.dir / "train", ignore_errors=True)
    if not config.keep_task_checkpoints:
        shutil.rmtree(writer.dir / "tasks", ignore_errors=True)
    writer.manifest.update(tasks=order, method=method.name, teir=config.variant, metric=config.metric,
                           final_AR=summary["AR"][-1], final_F=summary["F"][-1],
                           needs_task_identity=method.needs_task_identity)
    return summary


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
