"""The one stage runner: what every training stage (pretrain, train-nlt, train-le, train-continual, train-ccrk)
does around its task, written once.

A stage is a recipe: it builds its ``TrainTask`` (what trains, the loss, the validation) from the inputs this
module loads, then calls ``run_stage`` (one fit into a checkpoint artifact) or, for a sequence of fits inside one
artifact (train-continual's tasks), ``open_run`` and ``fit_best``. Here:

- ``load_inputs``: runtime (and torchrun), the seed, the captions and the image embeddings, in that order (the
  seed is set before any model is built, so every stage draws its random initialisations from the same state);
- ``retrieval_split`` / ``retrieval_validator``: the one builder of the retrieval validation;
- ``prepare_encoder``: MLA's language acquisition encoder, loaded from ``--init`` or built fresh;
- ``run_stage``: the artifact writer, the run-settings check, ``fit``, the best state and the checkpoint files.

Resume. One rule decides which settings may change when a partial run is continued: ``changed_settings`` in
``mltk.train.loop_state`` (an allow-list, ``MAY_CHANGE_ON_RESUME``). ``fit`` applies it to its ``LoopConfig``
(``loop.json``), and ``open_run`` to the stage's whole config (``run.json`` in the partial artifact), which embeds
that ``LoopConfig`` as its ``loop`` field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.distributed import init_from_env
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, log, resolve_runtime, seed_everything
from mltk.train.loop import FitResult, LoopConfig, TrainTask, fit
from mltk.train.loop_state import changed_settings, settings_record, task_buffers
from mltk.train.step_log import STEPS_CSV
from mltk.train.validate import RetrievalValidator

RUN_FILE = "run.json"  # the settings a partial run was started with (removed when the artifact is finished)


# ----------------------------------------------------------------------------------------------------------------
# Stage configs: one LoopConfig inside each
# ----------------------------------------------------------------------------------------------------------------


def replace_settings(config: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` for a stage config: a change names a field of the config, or else of its ``loop``
    (``replace_settings(config, steps=3, lr=1e-3)``)."""
    own = {k: v for k, v in changes.items() if k in config.__dataclass_fields__}
    loop = {k: v for k, v in changes.items() if k not in own}
    unknown = [k for k in loop if k not in LoopConfig.__dataclass_fields__]
    if unknown:
        raise TypeError(f"{type(config).__name__} has no setting {', '.join(unknown)}")
    if loop:
        base = own.get("loop", config.loop)  # a LoopConfig, or (not yet resolved) None / a dict over the recipe's
        own["loop"] = dataclasses.replace(base, **loop) if isinstance(base, LoopConfig) else {**(base or {}), **loop}
    return dataclasses.replace(config, **own)


# ----------------------------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class StageInputs:
    runtime: Runtime
    captions: pa.Table
    image_table: pa.Table | None = None  # rows of the image embeddings (``id``)
    image_vectors: np.ndarray | None = None  # [N, D] float32, as ``encode-images`` wrote them

    def image_row(self) -> dict[str, int]:
        """image id -> row of the image embeddings."""
        return {image_id: i for i, image_id in enumerate(self.image_table.column("id").to_pylist())}

    def unit_image_vectors(self) -> torch.Tensor:
        """[N, D] L2-normalised copy of the image embeddings (CPU)."""
        return F.normalize(torch.from_numpy(np.array(self.image_vectors, dtype=np.float32)), dim=-1)


HELD_OUT_FRACTION = 0.05  # of the train images, as validation when the captions have no validation split


def hold_out_validation(
    table: pa.Table,
    source: Path | str,
    split: str = "train",
    val_split: str = "val",
    fraction: float = HELD_OUT_FRACTION,
) -> pa.Table:
    """The captions, with a validation split carved out of ``split`` when they have no ``val_split`` rows.

    Whole images move (every caption and language of an image, so no translation of a validation sentence stays
    in training), chosen by a hash of the image id: the same data always holds out the same images, whatever the
    seed or row order. Says so on stderr; a table that has a validation split is returned as it is.
    """
    splits = table.column("split")
    if pc.any(pc.equal(splits, val_split)).as_py() or not pc.any(pc.equal(splits, split)).as_py():
        return table
    train_images = sorted(set(table.filter(pc.equal(splits, split)).column("image_id").to_pylist()))
    if len(train_images) < 2:
        return table
    by_hash = sorted(train_images, key=lambda image: hashlib.sha256(str(image).encode()).hexdigest())
    held = set(by_hash[: max(1, round(fraction * len(train_images)))])
    moved = pc.and_(pc.equal(splits, split), pc.is_in(table.column("image_id"), pa.array(sorted(held))))
    log(
        f"{source}: no {val_split!r} split; holding out {len(held)} of {len(train_images)} {split} images "
        f"({fraction:.0%}, chosen by image id) as validation"
    )
    new_splits = pc.if_else(moved, pa.scalar(val_split, splits.type), splits)
    return table.set_column(table.schema.get_field_index("split"), "split", new_splits)


def load_inputs(
    device: str,
    precision: str,
    seed: int,
    captions: Path,
    image_embeddings: Path | None = None,
    split: str = "train",
    val_split: str = "val",
    cpu_bf16: bool = False,
) -> StageInputs:
    """Resolve the runtime (joining torchrun when launched by it; ``cpu_bf16``: see ``resolve_runtime``), seed
    every generator, read the captions (with a validation slice held out of ``split`` when there is no
    ``val_split``) and the image embeddings."""
    runtime = resolve_runtime(device, precision, cpu_bf16)
    init_from_env(runtime)
    seed_everything(seed)
    inputs = StageInputs(
        runtime, hold_out_validation(artifacts.load_captions(captions, drop_empty=True), captions, split, val_split)
    )
    if image_embeddings is not None:
        table, vectors = artifacts.load_embeddings(image_embeddings, lazy=True)  # shards copied once, to float32
        inputs.image_table, inputs.image_vectors = table, np.asarray(vectors, dtype=np.float32)
    return inputs


# ----------------------------------------------------------------------------------------------------------------
# Validation: one builder
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class RetrievalSplit:
    """The captions of one split and the images they describe (a retrieval gallery)."""

    captions: pa.Table
    image_table: pa.Table
    image_vectors: np.ndarray


def retrieval_split(
    captions: pa.Table, image_table: pa.Table, image_vectors: np.ndarray, split: str, languages: list[str] | None = None
) -> RetrievalSplit | None:
    """The ``split`` captions (of ``languages``, default all) and the images any of them describes, in the image
    embeddings' order; None when no such image is in the embeddings."""
    keep_rows = pc.equal(captions.column("split"), split)
    if languages is not None:
        keep_rows = pc.and_(keep_rows, pc.is_in(captions.column("lang"), pa.array(languages, pa.string())))
    rows = captions.filter(keep_rows)
    wanted = set(rows.column("image_id").to_pylist())
    keep = np.array([i in wanted for i in image_table.column("id").to_pylist()], dtype=bool)
    if not keep.any():
        return None
    return RetrievalSplit(rows, image_table.filter(pa.array(keep)), image_vectors[keep])


def retrieval_validator(
    encoder,
    split: RetrievalSplit,
    languages: list[str],
    runtime: Runtime,
    max_images: int | None,
    similarity: str = "cosine",
) -> RetrievalValidator:
    """Mean AR over ``languages`` on ``split`` (at most ``max_images`` images), ranked by ``similarity``: the score
    that picks the best step."""
    return RetrievalValidator(
        encoder,
        split.captions,
        split.image_table,
        split.image_vectors,
        languages,
        runtime,
        max_images=max_images,
        similarity=similarity,
    )


# ----------------------------------------------------------------------------------------------------------------
# MLA's encoder: one builder
# ----------------------------------------------------------------------------------------------------------------


def refuse_text_only_tower(stage: str, model: str, init: Path | None) -> None:
    """Stages that align text with images (LE, CCR_k) need a CLIP: refuse a text-only tower (a transformers
    folder, given as ``model`` or as the base of the MLA ``init`` checkpoint) in one line, before any work."""
    from mltk.models.clip import is_hf_model_folder

    base = model
    if init is not None and artifacts.checkpoint_format(init) in ("mla", "cll"):
        base = artifacts.read_checkpoint_config(init)["base"]["model"]
    if is_hf_model_folder(base):
        raise ConfigError(
            f"{stage} aligns text with images, but {base!r} is a text-only tower (no image tower); use a CLIP"
        )


def prepare_encoder(
    init: Path | None,
    model: str,
    pretrained: str | None,
    tokenizer: str | None,
    init_embeddings: bool,
    languages: Callable[[list[str]], list[str]],
    runtime: Runtime,
    acquirer: str = "mlp",
    train: str = "acquirers",
):
    """MLA's language acquisition encoder from the ``init`` checkpoint, or built fresh on the frozen text tower
    ``model`` (a CLIP of either tower family, or a text-only transformers folder) with the non-native ``tokenizer``
    (None: the tower's own, on a Hugging Face tower). ``languages(known)`` names the languages it must have, given
    those of the checkpoint (none when fresh); languages it lacks get fresh acquirers, in that order. ``acquirer``
    (MLA's ablations: mlp, linear, none) and ``train`` (``acquirers``, MLA, or ``full``, a student copy of the whole
    tower, the distillation baseline) shape a fresh encoder; a checkpoint keeps its own.
    Returns the encoder (on the runtime's device), its languages and those added to ``init``."""
    from mltk.models.multilingual import build_encoder, load_encoder

    if init is not None:  # load_encoder names what is wrong with anything but an MLA checkpoint
        encoder = load_encoder(init, device=runtime.device)
        wanted = languages(list(encoder.languages))
    else:
        wanted = languages([])
        encoder = build_encoder(
            model,
            pretrained,
            tokenizer,
            [lang for lang in wanted if lang != schema.NATIVE_LANG],
            init_embeddings=init_embeddings,
            device=runtime.device,
            acquirer=acquirer,
            train=train,
        )
    added = [lang for lang in wanted if lang != schema.NATIVE_LANG and lang not in encoder.languages]
    for lang in added:
        encoder.add_language(lang)
    return encoder.to(runtime.device), wanted, added


# ----------------------------------------------------------------------------------------------------------------
# Running: one fit into one checkpoint, or several fits inside one artifact
# ----------------------------------------------------------------------------------------------------------------


def model_inputs(init: Path | None, *names: str | None) -> list[Path]:
    """The local files and folders among a stage's model names (``--model``, ``--pretrained``, ``--tokenizer``;
    ``local-dir:`` stripped) when it starts fresh (without ``init``, whose config pins them): inputs like any
    other, so a base retrained in place makes the stage's output out of date instead of "up to date"."""
    if init is not None:
        return []
    paths = [Path(str(name).removeprefix("local-dir:")) for name in names if name]
    return [path for path in paths if str(path) and path.exists()]


def stage_writer(out: Path, stage: str, config: Any, inputs: Iterable[Path]) -> artifacts.ArtifactWriter:
    """The stage's resumable artifact writer, made before any training. Its ``existing`` is a finished artifact of
    the same command, settings and inputs (return ``writer.reuse()``); one made otherwise is refused here unless
    ``--overwrite``."""
    return artifacts.ArtifactWriter(out, "checkpoint", stage=stage, config=config, inputs=list(inputs), resume=True)


@contextlib.contextmanager
def open_run(writer: artifacts.ArtifactWriter, config: Any) -> Iterator[artifacts.ArtifactWriter]:
    """Enter ``writer`` (from ``stage_writer``). The first run records its settings (``run.json``); a rerun that
    finds the partial artifact continues it only when ``changed_settings`` allows every difference."""
    writer.bookkeeping.add(RUN_FILE)  # settings, not work: a run that fails before its first step leaves nothing
    with writer:
        record = writer.dir / RUN_FILE
        current = settings_record(config)
        if record.is_file():
            changed = changed_settings(artifacts.read_json(record), current)
            if changed:
                raise ConfigError(
                    f"the interrupted run in {writer.dir} was started with other settings: "
                    f"{'; '.join(changed)}; rerun with the same settings, or pass --overwrite to "
                    f"start over"
                )
        else:
            artifacts.write_json(record, current)
        yield writer
        record.unlink(missing_ok=True)


STRETCHES_FILE = "train_stretches.json"


@contextlib.contextmanager
def timed_stretches(directory: Path) -> Iterator[list[float]]:
    """The seconds of each stretch of training in ``directory`` (a partial artifact), this one appended when it
    ends, finished or interrupted (Ctrl-C and SIGTERM reach here as exceptions): a resumed run's time is the sum
    of every stretch, not only the last. The list yielded holds every stretch once the block has run; the file
    keeping them between stretches is removed when the block finishes."""
    path = Path(directory) / STRETCHES_FILE
    stretches: list[float] = list(artifacts.read_json(path)) if path.is_file() else []
    started = time.perf_counter()
    finished = False
    try:
        yield stretches
        finished = True
    finally:
        stretches.append(round(time.perf_counter() - started, 1))
        if finished:
            path.unlink(missing_ok=True)
        else:
            artifacts.write_json(path, stretches)


def check_image_width(text_dim: int, image_vectors: np.ndarray | None, path: Path | None) -> None:
    """Image embeddings must have the text tower's output width; checked before the output directory exists."""
    if image_vectors is not None and image_vectors.shape[1] != text_dim:
        raise ConfigError(
            f"image embeddings have dim {image_vectors.shape[1]} but the model's text features have "
            f"dim {text_dim}: encode the images with the model's base CLIP",
            path,
        )


def fit_best(
    task: TrainTask,
    loop: LoopConfig,
    runtime: Runtime,
    state_dir: Path,
    *,
    description: str,
    on_step: Callable[[int, float], None] | None = None,
    steps_csv: Path | None = None,
) -> FitResult:
    """``fit`` (resuming from ``state_dir``), then put the best state back into the trained tensors."""
    result = fit(task, loop, runtime, state_dir, on_step=on_step, description=description, steps_csv=steps_csv)
    tensors = {**task.parameters_to_train(), **task_buffers(task)}
    with torch.no_grad():
        for name, value in result.best_state.items():
            tensors[name].copy_(value)
    return result


def run_stage(
    task: TrainTask,
    loop: LoopConfig,
    runtime: Runtime,
    out: Path,
    *,
    stage: str,
    checkpoint_config: Callable[[], dict],
    run_config: Any,
    inputs: Iterable[Path],
    on_step: Callable[[int, float], None] | None = None,
    checkpoint_tensors: Callable[[dict], dict] | None = None,
    extra_files: Callable[[Path], None] | None = None,
    **manifest_fields: Any,
) -> Path:
    """Fit ``task`` and write its best tensors as a checkpoint artifact at ``out``; returns the path.

    The loop's resumable state lives in ``state/`` inside the partial artifact, so rerunning the same command after
    an interruption continues from the last saved step; the finished artifact holds the best trained tensors
    (``model.safetensors``), the checkpoint config, ``history.json``, the per-step metrics (``steps.csv``) and the
    final optimizer state (``state/``).
    ``checkpoint_tensors(best_state)`` may complete the trained tensors with frozen ones the checkpoint must hold;
    ``extra_files(directory)`` may write files the checkpoint needs besides them (a vocabulary).
    """
    writer = stage_writer(out, stage, run_config, inputs)
    if writer.existing is not None:
        return writer.reuse()
    with open_run(writer, run_config):
        with timed_stretches(writer.dir) as stretches:
            result = fit(
                task,
                loop,
                runtime,
                writer.dir / "state",
                on_step=on_step,
                description=stage,
                steps_csv=writer.dir / STEPS_CSV,
            )
        manifest_fields.setdefault("train_seconds", round(sum(stretches), 1))  # every stretch of the run
        manifest_fields.setdefault("train_stretches_seconds", stretches)
        # what --device auto / --precision auto became on this machine, and why
        manifest_fields.setdefault("runtime", runtime.describe())
        tensors = checkpoint_tensors(result.best_state) if checkpoint_tensors else result.best_state
        artifacts.save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, tensors)
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, checkpoint_config())
        if extra_files is not None:
            extra_files(writer.dir)
        artifacts.write_json(writer.dir / "history.json", result.history)
        writer.manifest.update(
            best_step=result.best_step, best_score=result.best_score, steps=loop.steps, **manifest_fields
        )
    log(f"{stage}: best validation score {result.best_score:.4f} at step {result.best_step}; wrote {writer.path}")
    return writer.path


def log_sizes(what: str, per_language: dict) -> None:
    log(f"{what}: " + ", ".join(f"{lang} {len(v)}" for lang, v in per_language.items()))
