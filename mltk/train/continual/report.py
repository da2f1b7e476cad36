"""What train-continual writes when the last task is done: the checkpoint files, ``continual.json`` (matrix, AR, F,
per-task records) and the two pictures. Returns the summary; printing it is the CLI's job."""

from __future__ import annotations

import shutil

from mltk import artifacts
from mltk.artifacts import schema
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.cll_clip.options import options_dict
from mltk.metrics.continual import AVERAGE_RECALL_FORMULA, FORGETTING_FORMULA, continual_metrics
from mltk.train.continual.order import CONTINUAL_FILE, ContinualTrainConfig
from mltk.vocab import Vocabulary

MATRIX_PNG, CURVE_PNG = "continual_matrix.png", "continual_curve.png"
TRAINING_STATE = "training_state.safetensors"
TRAINING_INFO = "training_state.json"
TASK_FILE = "task.json"


TASK_IDENTITY_NOTE = (
    "task-specific method: the language of each caption (the task identity) selects that task's own "
    "set (adapters, LoRA or prefixes) at evaluation, as CLL-CLIP evaluated it"
)


def joint_summary(row: list[float | None]) -> dict:
    """The joint run (every language at once, the upper bound): one row a[0][i] over all languages, AR its mean,
    no forgetting."""
    values = [v for v in row if v is not None]
    return {"matrix": [row], "AR": [float(sum(values) / len(values)) if values else None], "F": [None]}


def finish(
    writer: artifacts.ArtifactWriter,
    config: ContinualTrainConfig,
    encoder: ContinualTextEncoder,
    vocabulary: Vocabulary,
    order: list[str],
    records: list[dict],
) -> dict:
    """Write the final checkpoint files, continual.json and the pictures into the artifact."""
    from mltk.present import plots

    summary = (
        joint_summary(records[0]["row"]) if config.joint else continual_metrics([record["row"] for record in records])
    )
    method = encoder.method
    continual = {
        "continual": {"tasks": order, "metric": config.metric, **summary},
        "method": {
            "name": method.name,
            "description": method.description,
            "options": options_dict(method.options),
            "needs_task_identity": method.needs_task_identity,
            "teir": {
                "init": config.teir_init,
                "regularisation": config.teir_reg,
                "gradient_scaling": config.teir_reg and config.teir_reg_grad,
                "decay_scaling": config.teir_reg and config.teir_reg_decay,
                "token_sets": config.token_sets,
                "variant": config.variant,
            },
        },
        "protocol": protocol(config),
        "per_task": records,
        "settings": {
            "matrix": "a[j][i] = metric on task i's language (test split) after training task j",
            "AR": AVERAGE_RECALL_FORMULA,
            "F": FORGETTING_FORMULA,
            "task_identity": TASK_IDENTITY_NOTE if method.needs_task_identity else "not used at test time",
        },
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
            plots.continual_heatmap(summary["matrix"], order, config.metric, title, fmt=fmt)
        )
        (writer.dir / CURVE_PNG).with_suffix(f".{fmt}").write_bytes(
            plots.continual_curves(
                summary["AR"], summary["F"], ["joint"] if config.joint else order, title, config.metric, fmt=fmt
            )
        )
    shutil.rmtree(writer.dir / "train", ignore_errors=True)
    if not config.keep_task_checkpoints:
        shutil.rmtree(writer.dir / "tasks", ignore_errors=True)
    writer.manifest.update(
        tasks=order,
        method=method.name,
        teir=config.variant,
        metric=config.metric,
        final_AR=summary["AR"][-1],
        final_F=summary["F"][-1],
        needs_task_identity=method.needs_task_identity,
    )
    return summary


def protocol(config: ContinualTrainConfig) -> dict:
    """What the run trained against and how a_{j,i} was measured (with images, or text only)."""
    if config.text_only:
        return {
            "images": False,
            "loss": f"{config.gamma2} x MSE to the frozen tower's English embedding of the "
            f"parallel caption; InfoNCE off (gamma1 0: a text-only tower has no image tower)",
            "a_ji": f"{config.metric}: caption-to-caption retrieval of task i's language against English on the "
            f"{config.test_split} split (x2en: the language's captions retrieve English captions; "
            f"English encoded by the frozen tower, the teacher)",
        }
    return {
        "images": True,
        "loss": f"{config.gamma1} x InfoNCE(image, text) + {config.gamma2} x MSE(English teacher, text)",
        "a_ji": f"{config.metric} of image-text retrieval on the {config.test_split} split",
        "temperature": temperature_protocol(config),
    }


def temperature_protocol(config: ContinualTrainConfig) -> dict:
    """How T trained (each task's final T is in its ``per_task`` record): T itself clamped to a range and reset
    at every task (the authors'), or log(1/T) with T >= 0.01 carried across tasks."""
    clamped = config.temperature_form == "temperature"
    return {
        "form": config.temperature_form,
        "initial": config.temperature,
        "range": list(config.temperature_range) if clamped else [0.01, None],
        "reset_each_task": clamped,
    }


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
