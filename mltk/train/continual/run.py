"""The task sequence of train-continual: each task prepared, fitted, restored at its best step and evaluated."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from mltk import artifacts
from mltk.ame.rcsls import with_alignment
from mltk.artifacts import schema
from mltk.cll_clip.methods import make_method
from mltk.cll_clip.model import ContinualTextEncoder, check_growable_name, load_growable_base, root_vocabulary
from mltk.cll_clip.teir import init_new_rows
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import Runtime, log
from mltk.encode.text_encoders import TowerTextEncoder
from mltk.losses import Temperature, make_temperature
from mltk.models.clip import is_hf_model_folder
from mltk.models.preflight import check_image_embeddings, require_model, require_weights
from mltk.settings.resolve import resolve
from mltk.train.continual.data import Corpus, caption_image_rows, task_data
from mltk.train.continual.judges import CaptionRetrieval, ImageRetrieval, split_data
from mltk.train.continual.order import ContinualTrainConfig, metric_value, task_order
from mltk.train.continual.report import TASK_FILE, TRAINING_INFO, TRAINING_STATE, finish, fmt
from mltk.train.continual.task import (
    CllClipTask,
    RecallSumValidator,
    replayed_token_ids,
    task_seed,
    task_vocabulary,
    teir_lambdas,
    vocabulary_summary,
)
from mltk.train.loop import LoopConfig
from mltk.train.stage import (
    RetrievalSplit,
    check_image_width,
    fit_best,
    load_inputs,
    model_inputs,
    open_run,
    retrieval_validator,
    stage_writer,
)
from mltk.train.teacher import teacher_embeddings
from mltk.vocab import Vocabulary, load_vocabulary

OnStep = Callable[[int, int, float], None]  # (task index, step, loss)


# ----------------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------------


def split_task_data(
    captions: pa.Table, image_table: pa.Table, image_vectors: np.ndarray, split: str, languages: list[str], source: Path
) -> RetrievalSplit:
    return split_data(captions, image_table, image_vectors, split, languages, source)


def check_base(config: ContinualTrainConfig) -> None:
    """A CLIP learns with its image embeddings; a text-only tower (a transformers / sentence-transformers folder)
    has no image tower and learns from text alone: refuse the other two combinations in one line."""
    text_only_tower = is_hf_model_folder(config.model)
    if text_only_tower and not config.text_only:
        raise ConfigError(
            f"{config.model!r} is a text-only tower (no image tower): leave out the image embeddings; "
            f"train-continual then trains on text alone (MSE to the English teacher)"
        )
    if config.text_only and not text_only_tower:
        raise ConfigError(
            f"train-continual on the CLIP {config.model!r} needs the image embeddings of its captions' "
            f"images (IMAGES or --images); only a text-only tower trains without them"
        )


def write_task_checkpoint(
    path: Path, encoder: ContinualTextEncoder, vocabulary: Vocabulary, record: dict, config: ContinualTrainConfig
) -> Path:
    inputs = [p for p in (config.captions, config.images) if p is not None]
    inputs += model_inputs(None, config.model, config.pretrained)
    with artifacts.ArtifactWriter(path, "checkpoint", stage="train-continual", config=config, inputs=inputs) as writer:
        artifacts.save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, encoder.state_tensors())
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, encoder.checkpoint_config())
        shutil.copytree(vocabulary.path, writer.dir / encoder.checkpoint_config()["vocab"])
        tensors, info = encoder.method.training_state()
        artifacts.save_tensors(writer.dir / TRAINING_STATE, tensors)
        artifacts.write_json(writer.dir / TRAINING_INFO, info)
        artifacts.write_json(writer.dir / TASK_FILE, record)
        writer.manifest.update(
            task=record["task"],
            lang=record["lang"],
            languages=encoder.trained_languages,
            needs_task_identity=encoder.method.needs_task_identity,
        )
    return writer.path


def _restore_task(path: Path, encoder: ContinualTextEncoder) -> tuple[Vocabulary, dict]:
    """Load a finished task checkpoint into ``encoder``; returns its vocabulary and task record."""
    tensors, config = artifacts.load_checkpoint(path, device=str(encoder.table.device))
    vocabulary = load_vocabulary(path / config["vocab"])
    extra = vocabulary.vocab_size - encoder.vocab_size
    encoder.grow(vocabulary.tokenizer, torch.zeros(extra, encoder.table.shape[1]))
    encoder.method.build(config["method"]["structure"])
    encoder.load_state_tensors(tensors)
    encoder.trained_languages = list(config["languages"])
    state = artifacts.load_tensors(path / TRAINING_STATE)
    encoder.method.load_training_state(state, artifacts.read_json(path / TRAINING_INFO))
    return vocabulary, artifacts.read_json(path / TASK_FILE)


def train_continual(config: ContinualTrainConfig, on_step: OnStep | None = None) -> Path:
    """``mltk train-continual``: train the task sequence and write the checkpoint artifact; returns its path."""
    config = resolve(config, "train-continual")
    require_model(config.model, None, "train-continual")
    check_growable_name(config.model)
    check_base(config)
    config.check()
    config.alignment.check_form(takes_map=False, encoder="a CLL-CLIP token table")
    require_weights(config.model, config.pretrained, None, "train-continual")
    check_image_embeddings(config.images, config.model, config.pretrained)
    inputs = load_inputs(
        config.device,
        config.precision,
        config.loop.seed,
        config.captions,
        config.images,
        config.split,
        config.val_split,
    )
    runtime, captions, image_vectors = inputs.runtime, inputs.captions, inputs.image_vectors
    order = task_order(config, captions)
    base = load_growable_base(config.model, config.pretrained, device=runtime.device)
    root = root_vocabulary(base)  # refused here, before any encoding, if the table cannot take new rows
    corpus, judge = _corpus_and_judge(config, inputs, order, base)
    log(
        f"train-continual: {config.method} ({config.variant}) over {len(order)} tasks: {', '.join(order)}; "
        f"training pairs " + ", ".join(f"{lang} {corpus.size(lang)}" for lang in order)
    )
    if config.text_only:
        log(
            f"train-continual: text-only (no image tower): the loss is the MSE to the frozen tower's English alone "
            f"(gamma1 0, InfoNCE off); a_{{j,i}} = {config.metric} of caption-to-caption retrieval against English"
        )

    method = make_method(config.method, config.options, base.tower, config.loop.seed)
    encoder = ContinualTextEncoder(
        base,
        root.tokenizer,
        method,
        temperature=make_temperature(config.temperature_form, config.temperature, config.temperature_range),
    )
    check_image_width(encoder.tower.output_dim, image_vectors, config.images)
    inputs_used = [p for p in (config.captions, config.images, config.alignment.lexicon) if p is not None]
    inputs_used += model_inputs(None, config.model, config.pretrained)
    writer = stage_writer(config.out, "train-continual", config, inputs_used)
    if writer.existing is not None:
        return writer.reuse()
    with open_run(writer, config):
        records: list[dict] = []
        vocabulary = root
        for index, name in enumerate(task_names(config, order)):
            task_dir = writer.dir / "tasks" / f"{index:02d}-{name}"
            if artifacts.is_artifact(task_dir):
                vocabulary, record = _restore_task(task_dir, encoder)
                records.append(record)
                log(f"task {index} ({name}): finished earlier, loaded {task_dir}")
                continue
            vocabulary = task_vocabulary(config, index, order, vocabulary, captions, writer.dir / "vocabs")
            record = _run_task(
                config,
                encoder,
                corpus,
                vocabulary,
                index,
                order,
                judge,
                runtime,
                writer.dir / "train" / f"{index:02d}-{name}",
                on_step,
            )
            evaluated = evaluated_languages(config, order, index)
            record["row"] = [metric_value(record["test"], lang_i, config.metric) for lang_i in evaluated] + [None] * (
                len(order) - len(evaluated)
            )
            records.append(record)
            write_task_checkpoint(task_dir, encoder, vocabulary, record, config)
            shutil.rmtree(writer.dir / "train" / f"{index:02d}-{name}", ignore_errors=True)
        summary = finish(writer, config, encoder, vocabulary, order, records)
    if encoder.method.needs_task_identity:
        log(
            f"train-continual: {encoder.method.name} is task-specific: evaluated with the task identity (each "
            f"caption's language picks its set)"
        )
    log(f"train-continual: final AR {fmt(summary['AR'][-1])}, F {fmt(summary['F'][-1])}; wrote {writer.path}")
    return writer.path


def _corpus_and_judge(
    config: ContinualTrainConfig, inputs, order: list[str], base
) -> tuple[Corpus, CaptionRetrieval | ImageRetrieval]:
    """The training pairs of every task language, with the frozen tower's English embeddings as the teacher, and
    the judge that validates and tests each task (image retrieval, or caption retrieval in a text-only run)."""
    captions, image_vectors, runtime = inputs.captions, inputs.image_vectors, inputs.runtime
    teacher_encoder = TowerTextEncoder(base)

    def teacher_of(ids: list[str], texts: list[str]) -> np.ndarray:
        return teacher_embeddings(teacher_encoder, base.spec, ids, texts, runtime, config.cache_dir)

    corpus = Corpus(
        captions,
        config.split,
        order,
        caption_image_rows(captions) if config.text_only else inputs.image_row(),
        None if config.text_only else torch.from_numpy(image_vectors),
        teacher_of,
        config.captions,
    )
    if config.text_only:
        judge = CaptionRetrieval(
            captions,
            order,
            teacher_of,
            config.val_split,
            config.test_split,
            runtime,
            config.val_images,
            config.captions,
        )
    else:
        judge = ImageRetrieval(
            captions,
            inputs.image_table,
            image_vectors,
            order,
            config.val_split,
            config.test_split,
            runtime,
            config.val_images,
            config.captions,
        )
    return corpus, judge


def task_names(config: ContinualTrainConfig, order: list[str]) -> list[str]:
    """The tasks of the run: one per language, or the single ``joint`` task (every language at once)."""
    return ["joint"] if config.joint else list(order)


def evaluated_languages(config: ContinualTrainConfig, order: list[str], index: int) -> list[str]:
    """The languages tested after task ``index``: those seen so far (all of them after the joint task)."""
    return list(order) if config.joint else list(order[: index + 1])


def prepare_task(
    config: ContinualTrainConfig,
    encoder: ContinualTextEncoder,
    corpus: Corpus,
    vocabulary: Vocabulary,
    index: int,
    lang: str,
    val,
    runtime: Runtime,
    languages: list[str] | None = None,
) -> CllClipTask:
    """Grow the table to ``vocabulary`` (TEIR or plain initialisation), and set up task ``index``: its data,
    TEIR's lambdas, validation on ``val`` (a ``RetrievalSplit`` of images, a judge of ``judges``, or None: no
    validation), and the method's per-task modules. ``languages``: the languages trained together (the joint
    task; default ``[lang]``)."""
    languages = languages or [lang]
    kinds = {getattr(t, "kind", None) for t in (vocabulary.tokenizer, encoder.tokenizer)}
    if len(kinds) > 1:
        raise ArtifactError(
            f"the vocabulary of task {index} ({lang}) is a {vocabulary.tokenizer.kind} vocabulary; "
            f"the base model reads {encoder.tokenizer.kind}",
            vocabulary.path,
        )
    if vocabulary.parent_size != encoder.vocab_size:
        raise ArtifactError(
            f"the vocabulary of task {index} ({lang}) grows a vocabulary of {vocabulary.parent_size} "
            f"tokens, but the table has {encoder.vocab_size} rows (a different chain)",
            vocabulary.path,
        )
    generator = torch.Generator().manual_seed(task_seed(config.loop.seed, index))
    new_rows = init_new_rows(
        encoder.table.detach().cpu(),
        vocabulary.vocab_size - encoder.vocab_size,
        generator,
        mode="teir" if config.teir_init else "normal",
    )
    encoder.grow(vocabulary.tokenizer, new_rows)
    if isinstance(encoder.logit_scale, Temperature):  # the temperature form (log(1/T) is carried across tasks)
        encoder.logit_scale.reset()  # the authors rebuild the loss, and T with it, for every task
    lambdas = teir_lambdas(vocabulary, config.token_sets) if config.teir_reg else None
    data = task_data(corpus, languages, encoder)
    if val is None or not isinstance(val, RetrievalSplit):
        validator = None if val is None else val.validator(encoder, languages)
    else:
        validator = RecallSumValidator(
            retrieval_validator(encoder, val, languages, runtime, config.val_images), languages
        )
    task = CllClipTask(encoder, corpus, data, index, lang, config, runtime, validator, lambdas)
    encoder.train()
    encoder.method.begin_task(task.context)
    if lambdas is not None and config.teir_memory_tokens and config.token_sets == "occurrence":
        memory = replayed_token_ids(encoder, encoder.method.memory_tokens())
        task.lambdas = lambdas if memory is None else teir_lambdas(vocabulary, config.token_sets, memory)
    return task


def loop_config(config: ContinualTrainConfig, task: CllClipTask) -> LoopConfig:
    """The task's own LoopConfig: the run's, with the task's steps, validation interval and seed."""
    return dataclasses.replace(
        config.loop, steps=task.steps, eval_every=config.eval_every or task.steps_per_epoch, seed=task.seed
    )


def _run_task(
    config: ContinualTrainConfig,
    encoder: ContinualTextEncoder,
    corpus: Corpus,
    vocabulary: Vocabulary,
    index: int,
    order: list[str],
    judge,
    runtime: Runtime,
    state_dir: Path,
    on_step: OnStep | None,
) -> dict:
    lang = task_names(config, order)[index]
    evaluated = evaluated_languages(config, order, index)
    task = prepare_task(
        config, encoder, corpus, vocabulary, index, lang, judge, runtime, languages=evaluated if config.joint else None
    )
    data, steps, steps_per_epoch, lambdas = task.data, task.steps, task.steps_per_epoch, task.lambdas
    loop = loop_config(config, task)
    fitted = with_alignment(
        task, encoder, config.alignment, loop.seed, evaluated if config.joint else [lang], other_language_ok=True
    )
    log(
        f"task {index} ({lang}): {len(data.image_rows)} images, {len(data.tokens)} captions, {steps} steps "
        f"({steps_per_epoch} per epoch); vocabulary {vocabulary.parent_size} -> {vocabulary.vocab_size}"
    )
    result = fit_best(
        fitted,
        loop,
        runtime,
        state_dir,
        description=f"task {index} {lang}",
        steps_csv=state_dir.parent.parent / "steps" / f"{state_dir.name}.csv",
        on_step=(lambda step, loss: on_step(index, step, loss)) if on_step else None,
    )
    encoder.method.end_task(task.context)
    encoder.trained_languages = evaluated
    evaluation = judge.evaluate(encoder, evaluated)
    log(
        f"task {index} ({lang}): best validation recall sum {result.best_score:.2f} at step {result.best_step}; "
        f"test {config.metric} "
        + ", ".join(f"{k} {fmt(metric_value(evaluation, k, config.metric))}" for k in evaluated)
    )
    return {
        "task": index,
        "lang": lang,
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        "best_step": result.best_step,
        "best_epoch": result.best_step / steps_per_epoch,
        "best_validation_recall_sum": result.best_score,
        "temperature": encoder.logit_scale.temperature,
        "vocabulary": vocabulary_summary(vocabulary, lambdas),
        "history": [h for h in result.history if h.get("event") == "validate"],
        "test": {"per_language": evaluation["per_language"], "settings": evaluation["settings"]},
    }
