"""MLA training stages: Native Language Transfer (NLT) and Language Exposure (LE).

Zhang et al., "Generalizing Multimodal Pre-training into Multilingual via Language Acquisition".

- NLT: for a translation pair (English S, target T), minimise MSE(f_en(S), f_lang(T)) where f_en is the frozen,
  unnormalised English CLIP text embedding (computed for the pairs a step draws and cached on disk,
  ``mltk.train.teacher``; the pairs are tokenised per step too, so the first step never waits for the corpus) and
  f_lang the acquisition encoder. Paper: batch 128, lr 1e-4, 117,150 steps.
- LE: symmetric InfoNCE between frozen image embeddings (from ``encode-images``) and the non-native text, both
  L2-normalised, temperature 0.01 (fixed logit scale 100). Paper: batch 128, lr 3e-6, 11,715 steps. 0.01 is
  OpenAI ViT-B/32's own learned temperature (its logit scale ends at CLIP's clamp of 100); ``temperature=None``
  (``--temperature clip``) fixes it at the frozen base CLIP's own instead, which is what a CLIP whose learned
  temperature differs (the embedded default's tiny CLIP learns about 0.06) needs: at 0.01 its LE drifts away from
  the similarity scale the frozen towers were trained at and loses recall.

- NLT+LE in one stage (``train_nlt_le``, MLA's ablation of the two-stage recipe): each step adds
  ``nlt_weight * NLT loss`` of a translation batch and ``le_weight * LE loss`` of an image batch.

``acquirer`` picks MLA's acquirer ablations for a fresh encoder (``mlp``, ``linear``, ``none`` = embedding only;
``mltk.models.acquirer``). The NLT MSE is the mean over elements, as the authors' code (``mse_form="sum"``: the
written per-sample sum).

Batches hold one language, drawn uniformly per step (``mltk.train.batches``). What is trained: the acquirers of
the languages being trained and, by default, the shared non-native embedding; when languages are added to an
existing checkpoint only their acquirers train, so the other languages stay bit-identical.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk.ame.rcsls import with_alignment
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, log
from mltk.encode.text_encoders import TowerTextEncoder
from mltk.losses import MSE_FORMS
from mltk.models.multilingual import TRAIN_MODES, LanguageAcquisitionEncoder
from mltk.models.preflight import check_image_embeddings, require_model, require_weights
from mltk.models.towers import names_hf_tower
from mltk.settings.mla import MlaConfig
from mltk.settings.resolve import resolve
from mltk.train.batches import group_by_image
from mltk.train.loop import StepCallback
from mltk.train.mla_tasks import (  # noqa: F401 (API)
    LeTask,
    NltLeTask,
    NltPairs,
    NltTask,
    caption_rows,
    nlt_optimizer,
    translation_columns,
    translation_pairs,
)
from mltk.train.stage import (
    StageInputs,
    check_image_width,
    load_inputs,
    log_sizes,
    model_inputs,
    prepare_encoder,
    refuse_text_only_tower,
    retrieval_split,
    retrieval_validator,
    run_stage,
)
from mltk.train.teacher import TeacherRows

# ----------------------------------------------------------------------------------------------------------------
# Building the encoder and choosing what trains
# ----------------------------------------------------------------------------------------------------------------


def mla_encoder(
    config: MlaConfig, captions: pa.Table, runtime: Runtime
) -> tuple[LanguageAcquisitionEncoder, list[str], bool]:
    """The encoder, the languages to train, and whether the shared embedding trains."""
    available = sorted(set(pc.unique(captions.column("lang")).to_pylist()) - {NATIVE_LANG})
    if config.train not in TRAIN_MODES:
        raise ConfigError(f"--train must be one of {', '.join(TRAIN_MODES)}, got {config.train!r}")
    encoder, languages, added = prepare_encoder(
        config.init,
        config.model,
        config.pretrained,
        config.tokenizer,
        config.init_embeddings,
        lambda known: list(config.languages) or (known if config.init else available),
        runtime,
        config.acquirer,
        train=config.train,
    )
    if config.train != encoder.train_mode:  # an --init checkpoint keeps what it trained
        raise ConfigError(f"--train {config.train} but the --init checkpoint trains {encoder.train_mode}", config.init)
    train_embedding = config.train_embedding if config.train_embedding is not None else not added
    missing = [lang for lang in languages if lang not in available]
    if missing:
        raise ConfigError(
            f"no captions in language(s) {', '.join(missing)} (has {', '.join(available)})", config.captions
        )
    if NATIVE_LANG in languages:
        raise ConfigError("English is the native language and is not trained", config.captions)
    return encoder, languages, train_embedding


def le_temperature(temperature: float | None, encoder: LanguageAcquisitionEncoder) -> float:
    """``temperature``, or the frozen base CLIP's own learned one (1 / exp(logit_scale)) when None."""
    if temperature is None:
        return float(1.0 / encoder.base.require_image_tower("train-le").model.logit_scale.detach().exp())
    return temperature


# ----------------------------------------------------------------------------------------------------------------
# NLT
# ----------------------------------------------------------------------------------------------------------------


def _nlt_data(
    encoder, config: MlaConfig, captions: pa.Table, split: str, languages: list[str], runtime: Runtime
) -> NltPairs:
    """The translation pairs per trained language; with English through the student (``train="mkd"``) also
    English itself, each English caption (by caption_id, sorted) distilled to the frozen tower's embedding of it."""
    pairs, english = translation_columns(captions, split, languages)
    if not any(rows.num_rows for rows in pairs.values()):
        raise ConfigError(
            f"no translation pairs (captions sharing caption_id with English) in split {split!r}", config.captions
        )
    texts = {lang: rows.column("caption").combine_chunks() for lang, rows in pairs.items()}
    sources = {lang: rows.column("english").combine_chunks() for lang, rows in pairs.items()}
    if encoder.english_student:
        needed = pc.unique(pa.chunked_array([rows.column("caption_id") for rows in pairs.values()]))
        needed = needed.take(pc.sort_indices(needed))
        own = english.column("caption").take(pc.index_in(needed, value_set=english.column("caption_id")))
        texts[NATIVE_LANG] = sources[NATIVE_LANG] = own
    teacher_model = TowerTextEncoder(encoder.base) if encoder.english_student else encoder  # the frozen tower
    return NltPairs(texts, sources, TeacherRows(teacher_model, encoder.spec, runtime, config.cache_dir))


NLT_VALIDATION_PAIRS = 512  # per language, when no image embeddings give a retrieval validation

MLA_INIT = "an MLA checkpoint to go on from"


def preflight(config: MlaConfig, stage: str) -> None:
    """Checks that need no model: weights of the base CLIP, and image embeddings made by that CLIP."""
    require_weights(config.model, config.pretrained, config.init, stage)
    check_image_embeddings(config.images, config.model, config.pretrained, config.init)


def train_nlt(config: MlaConfig, on_step: StepCallback | None = None) -> Path:
    """``mltk train-nlt``: Native Language Transfer. Returns the checkpoint artifact path."""
    config = resolve(config, "train-nlt")
    require_model(config.model, config.init, "train-nlt", MLA_INIT)
    preflight(config, "train-nlt")
    inputs = _inputs(config)
    runtime = inputs.runtime
    encoder, languages, train_embedding = mla_encoder(config, inputs.captions, runtime)
    check_image_width(encoder.tower.output_dim, inputs.image_vectors, config.images)
    pairs = _nlt_data(encoder, config, inputs.captions, config.split, languages, runtime)
    log_sizes("NLT translation pairs", pairs.texts)
    validator, val_pairs = _validator(config, encoder, inputs, languages), None
    if validator is None:
        val_pairs = _nlt_data(encoder, config, inputs.captions, config.val_split, languages, runtime).head(
            NLT_VALIDATION_PAIRS
        )
    task = NltTask(
        encoder,
        pairs,
        list(pairs.texts),
        train_embedding,
        config.batch_size,
        config.loop.steps,
        config.loop.seed,
        runtime,
        validator,
        val_pairs,
        config.mse_form,
    )
    return _run(task, encoder, config, runtime, "train-nlt", languages, on_step)


# ----------------------------------------------------------------------------------------------------------------
# LE
# ----------------------------------------------------------------------------------------------------------------


def _le_data(encoder, captions: pa.Table, split: str, languages: list[str], image_row: dict[str, int]) -> dict:
    """Per language: distinct image rows, and their captions' texts grouped by image (offsets, counts); a step
    tokenises only the captions it draws."""
    data = {}
    for lang in languages:
        rows = caption_rows(captions, split, [lang])
        pairs = sorted(
            (image_row[i], t)
            for i, t in zip(rows.column("image_id").to_pylist(), rows.column("caption").to_pylist())
            if i in image_row
        )
        if not pairs:
            raise ConfigError(f"no {lang} captions of split {split!r} describe an image of the image embeddings")
        image_rows, counts, offsets = group_by_image(np.array([r for r, _ in pairs]))
        data[lang] = {
            "image_rows": image_rows,
            "counts": counts,
            "offsets": offsets,
            "texts": pa.array([t for _, t in pairs], pa.string()),  # tokenised per step, for the drawn captions
        }
    return data


def train_le(config: MlaConfig, on_step: StepCallback | None = None) -> Path:
    """``mltk train-le``: Language Exposure, normally starting from an NLT checkpoint (``init``); without one it
    trains fresh acquirers on ``model`` with ``tokenizer`` (LE only). Returns the checkpoint path."""
    config = resolve(config, "train-le")
    if config.init is None and not config.tokenizer and (config.model is None or not names_hf_tower(config.model)):
        raise ConfigError(
            "train-le starts from an NLT checkpoint (--init), or from fresh acquirers with "
            "--model and --tokenizer (the paper's LE-only ablation)"
        )
    require_model(config.model, config.init, "train-le", MLA_INIT)
    refuse_text_only_tower("train-le", config.model, config.init)
    if config.images is None:
        raise ConfigError("train-le needs image embeddings (positional IMAGES, or piped from encode-images)")
    task, encoder, languages, inputs = _le_task(config)
    return _run(task, encoder, config, inputs.runtime, "train-le", languages, on_step)


def _le_task(config: MlaConfig) -> tuple[LeTask, LanguageAcquisitionEncoder, list[str], StageInputs]:
    if config.temperature is not None and not config.temperature > 0:
        raise ConfigError(f"--temperature must be positive or 'clip', got {config.temperature}")
    preflight(config, "train-le")
    inputs = _inputs(config)
    runtime = inputs.runtime
    encoder, languages, train_embedding = mla_encoder(config, inputs.captions, runtime)
    check_image_width(encoder.tower.output_dim, inputs.image_vectors, config.images)
    data = _le_data(encoder, inputs.captions, config.split, languages, inputs.image_row())
    log_sizes("LE images", {lang: d["image_rows"] for lang, d in data.items()})
    validator = _validator(config, encoder, inputs, languages)
    if validator is None:
        raise ConfigError(
            f"no {config.val_split!r} captions match the image embeddings: LE validates on them", config.captions
        )
    temperature = le_temperature(config.temperature, encoder)
    log(f"LE temperature {temperature:.4g} (logit scale {1 / temperature:.4g})")
    task = LeTask(
        encoder,
        inputs.unit_image_vectors(),
        data,
        languages,
        train_embedding,
        config.batch_size,
        config.loop.steps,
        config.loop.seed,
        temperature,
        runtime,
        validator,
    )
    return task, encoder, languages, inputs


# ----------------------------------------------------------------------------------------------------------------
# NLT and LE in one stage
# ----------------------------------------------------------------------------------------------------------------


def train_nlt_le(config: MlaConfig, on_step: StepCallback | None = None) -> Path:
    """``mltk train-nlt-le``: NLT and LE trained together in one stage (MLA's ablation). Needs image embeddings
    and translation pairs; returns the checkpoint path."""
    config = resolve(config, "train-nlt-le")
    require_model(config.model, config.init, "train-nlt-le", MLA_INIT)
    if config.images is None:
        raise ConfigError("train-nlt-le needs image embeddings (positional IMAGES, or piped from encode-images)")
    if config.nlt_weight < 0 or config.le_weight < 0 or config.nlt_weight + config.le_weight == 0:
        raise ConfigError(
            f"--nlt-weight and --le-weight must be >= 0 and not both 0, got {config.nlt_weight} and {config.le_weight}"
        )
    le, encoder, languages, inputs = _le_task(config)
    runtime = inputs.runtime
    pairs = _nlt_data(encoder, config, inputs.captions, config.split, languages, runtime)
    log_sizes("NLT translation pairs", pairs.texts)
    nlt = NltTask(
        encoder,
        pairs,
        languages,
        le.train_embedding,
        config.batch_size,
        config.loop.steps,
        config.loop.seed + 1,
        runtime,
        mse_form=config.mse_form,
    )
    task = NltLeTask(nlt, le, config.nlt_weight, config.le_weight)
    return _run(task, encoder, config, runtime, "train-nlt-le", languages, on_step)


# ----------------------------------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------------------------------


def _inputs(config: MlaConfig) -> StageInputs:
    if config.mse_form is not None and config.mse_form not in MSE_FORMS:  # None: a stage that does not read it
        raise ConfigError(f"--mse-form must be one of {', '.join(MSE_FORMS)}, got {config.mse_form!r}")
    return load_inputs(
        config.device,
        config.precision,
        config.loop.seed,
        config.captions,
        config.images,
        config.split,
        config.val_split,
        cpu_bf16=config.cpu_bf16,
    )


def _validator(config: MlaConfig, encoder, inputs: StageInputs, languages: list[str]):
    """Retrieval on the validation split when image embeddings are given (else None)."""
    if inputs.image_table is None:
        return None
    split = retrieval_split(inputs.captions, inputs.image_table, inputs.image_vectors, config.val_split)
    return None if split is None else retrieval_validator(encoder, split, languages, inputs.runtime, config.val_images)


def _run(
    task,
    encoder: LanguageAcquisitionEncoder,
    config: MlaConfig,
    runtime: Runtime,
    stage: str,
    languages: list[str],
    on_step: StepCallback | None = None,
) -> Path:
    encoder.train()
    task.embedding_lr = config.embedding_lr
    task = with_alignment(task, encoder, config.alignment, config.loop.seed, languages, captions=config.captions)
    inputs = [p for p in (config.captions, config.images, config.init, config.alignment.lexicon) if p is not None]
    inputs += model_inputs(config.init, config.model, config.pretrained, config.tokenizer)
    trained = task.parameters_to_train()

    def checkpoint_tensors(best: dict) -> dict:
        """Every acquirer and the embedding: tensors frozen in this stage are saved unchanged beside the best
        trained ones."""
        return {**{k: v.detach().cpu() for k, v in encoder.state_tensors().items()}, **best}

    return run_stage(
        task,
        config.loop,
        runtime,
        config.out,
        stage=stage,
        checkpoint_config=encoder.checkpoint_config,
        checkpoint_tensors=checkpoint_tensors,
        run_config=config,
        inputs=inputs,
        on_step=on_step,
        languages_trained=languages,
        tensors_trained=len(trained),
        train=encoder.train_mode,
        parameters_trained=sum(p.numel() for p in trained.values()),
    )
