"""MLA training stages: Native Language Transfer (NLT) and Language Exposure (LE).

Zhang et al., "Generalizing Multimodal Pre-training into Multilingual via Language Acquisition".

- NLT: for a translation pair (English S, target T), minimise MSE(f_en(S), f_lang(T)) where f_en is the frozen,
  unnormalised English CLIP text embedding (computed once and cached, ``mltk.train.teacher``) and f_lang the
  acquisition encoder. Paper: batch 128, lr 1e-4, 117,150 steps.
- LE: symmetric InfoNCE between frozen image embeddings (from ``encode-images``) and the non-native text, both
  L2-normalised, temperature 0.01 (fixed logit scale 100). Paper: batch 128, lr 3e-6, 11,715 steps. 0.01 is
  OpenAI ViT-B/32's own learned temperature (its logit scale ends at CLIP's clamp of 100); ``temperature=None``
  (``--temperature clip``) fixes it at the frozen base CLIP's own instead, which is what a CLIP whose learned
  temperature differs (the embedded default's tiny CLIP learns about 0.06) needs: at 0.01 its LE drifts away from
  the similarity scale the frozen towers were trained at and loses recall.

Batches hold one language, drawn uniformly per step (``mltk.train.batches``). What is trained: the acquirers of
the languages being trained and, by default, the shared non-native embedding; when languages are added to an
existing checkpoint only their acquirers train, so the other languages stay bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from mltk import artifacts
from mltk.errors import ConfigError
from mltk.losses import info_nce, mse_distill
from mltk.models.multilingual import NATIVE_LANG, LanguageAcquisitionEncoder, build_encoder, load_encoder
from mltk.runtime import Runtime, log, resolve_runtime, seed_everything
from mltk.train.batches import LanguageBatches
from mltk.train.distributed import gather_with_grad, init_from_env, shard
from mltk.train.loop import LoopConfig
from mltk.train.stage import train_to_checkpoint
from mltk.train.teacher import teacher_embeddings
from mltk.train.validate import RetrievalValidator

LE_TEMPERATURE = 0.01


@dataclass(frozen=True)
class MlaConfig:
    """Options of ``mltk train-nlt`` and ``mltk train-le`` (built by the CLI, received by the library)."""

    captions: Path
    out: Path
    images: Path | None = None  # image embeddings: LE trains on them; NLT validates on them when given
    init: Path | None = None  # an MLA checkpoint to start from (LE: the NLT result)
    model: str = "mltk-tiny"  # base CLIP when starting fresh (open_clip name or checkpoint artifact)
    pretrained: str | None = None
    tokenizer: str | None = None  # non-native tokenizer: vocab artifact or transformers name
    init_embeddings: bool = False  # copy the transformers model's word embeddings (M-BERT in the paper)
    languages: tuple[str, ...] = ()  # default: every non-English language of the captions (or of --init)
    steps: int = 1000
    batch_size: int = 128
    lr: float = 1e-4
    warmup_fraction: float = 0.1
    weight_decay: float = 0.2
    grad_clip: float | None = 1.0
    train_embedding: bool | None = None  # default: yes, unless languages are added to an existing checkpoint
    temperature: float | None = LE_TEMPERATURE  # None: the frozen base CLIP's own learned temperature
    eval_every: int = 0
    split: str = "train"
    val_split: str = "val"
    val_images: int | None = 1000  # validation gallery size cap (speed)
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    cache_dir: Path | None = None

    def loop(self) -> LoopConfig:
        return LoopConfig(steps=self.steps, lr=self.lr, warmup_fraction=self.warmup_fraction,
                          weight_decay=self.weight_decay, grad_clip=self.grad_clip, eval_every=self.eval_every,
                          seed=self.seed)


# ----------------------------------------------------------------------------------------------------------------
# Building the encoder and choosing what trains
# ----------------------------------------------------------------------------------------------------------------


def prepare_encoder(config: MlaConfig, captions: pa.Table, runtime: Runtime
                    ) -> tuple[LanguageAcquisitionEncoder, list[str], bool]:
    """The encoder, the languages to train, and whether the shared embedding trains."""
    available = sorted(set(captions.column("lang").to_pylist()) - {NATIVE_LANG})
    if config.init is not None:
        encoder = load_encoder(config.init, device=runtime.device)
        languages = list(config.languages) or encoder.languages
        added = [lang for lang in languages if lang not in encoder.languages]
        for lang in added:
            encoder.add_language(lang)
        train_embedding = config.train_embedding if config.train_embedding is not None else not added
    else:
        if not config.tokenizer:
            raise ConfigError("--tokenizer is needed when no --init checkpoint is given (a vocabulary artifact "
                              "from `mltk build-vocab`, or a transformers name like bert-base-multilingual-cased)")
        languages = list(config.languages) or available
        encoder = build_encoder(config.model, config.pretrained, config.tokenizer, languages,
                                init_embeddings=config.init_embeddings, device=runtime.device)
        train_embedding = True if config.train_embedding is None else config.train_embedding
    missing = [lang for lang in languages if lang not in available]
    if missing:
        raise ConfigError(f"no captions in language(s) {', '.join(missing)} (has {', '.join(available)})",
                          config.captions)
    if NATIVE_LANG in languages:
        raise ConfigError("English is the native language and is not trained", config.captions)
    return encoder, languages, train_embedding


def le_temperature(temperature: float | None, encoder: LanguageAcquisitionEncoder) -> float:
    """``temperature``, or the frozen base CLIP's own learned one (1 / exp(logit_scale)) when None."""
    if temperature is None:
        return float(1.0 / encoder.clip.model.logit_scale.detach().exp())
    return temperature


def _rows(captions: pa.Table, split: str, langs: list[str]) -> pa.Table:
    keep = pc.and_(pc.equal(captions.column("split"), split),
                   pc.is_in(captions.column("lang"), pa.array(langs, pa.string())))
    return captions.filter(keep)


# ----------------------------------------------------------------------------------------------------------------
# NLT
# ----------------------------------------------------------------------------------------------------------------


class NltTask:
    """MSE between the cached English teacher embedding and the acquisition encoder's embedding of a translation."""

    def __init__(self, encoder: LanguageAcquisitionEncoder, tokens: dict[str, torch.Tensor],
                 teacher: dict[str, torch.Tensor], languages: list[str], train_embedding: bool, batch_size: int,
                 steps: int, seed: int, runtime: Runtime, validator=None, val_pairs=None):
        self.encoder, self.tokens, self.teacher = encoder, tokens, teacher  # per language: [N, L], [N, D]
        self.languages, self.train_embedding, self.runtime = languages, train_embedding, runtime
        self.batches = LanguageBatches({lang: len(tokens[lang]) for lang in languages}, batch_size, steps, seed)
        self.validator, self.val_pairs = validator, val_pairs

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return self.encoder.trainable_tensors(self.languages, embedding=self.train_embedding)

    def loss(self, step: int) -> torch.Tensor:
        lang, index = self.batches.batch(step)
        index = torch.as_tensor(shard(index))
        student = self.encoder.encode_tokens(self.tokens[lang][index].to(self.runtime.device), lang)
        return mse_distill(student.float(), self.teacher[lang][index].to(self.runtime.device))

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        if self.validator is not None:
            return self.validator()
        losses = {}  # no images given: the score is minus the validation MSE
        for lang, (tokens, teacher) in self.val_pairs.items():
            student = self.encoder.encode_tokens(tokens.to(self.runtime.device), lang).float()
            losses[f"mse_{lang}"] = float(mse_distill(student, teacher.to(self.runtime.device)))
        return {**losses, "score": -float(np.mean(list(losses.values())))}


def translation_pairs(captions: pa.Table, split: str, languages: list[str]
                      ) -> tuple[dict[str, tuple[list[str], list[str]]], dict[str, str]]:
    """Per language (caption_ids, texts) of captions with an English caption of the same ``caption_id``, and the
    English caption of each id."""
    english_rows = _rows(captions, split, [NATIVE_LANG])
    english = dict(zip(english_rows.column("caption_id").to_pylist(), english_rows.column("caption").to_pylist()))
    pairs = {}
    for lang in languages:
        rows = _rows(captions, split, [lang])
        ids, texts = rows.column("caption_id").to_pylist(), rows.column("caption").to_pylist()
        kept = [(i, t) for i, t in zip(ids, texts) if i in english]
        pairs[lang] = ([i for i, _ in kept], [t for _, t in kept])
    return pairs, english


def _nlt_data(encoder, config: MlaConfig, captions: pa.Table, split: str, languages: list[str], runtime: Runtime):
    pairs, english = translation_pairs(captions, split, languages)
    needed = sorted({cid for ids, _ in pairs.values() for cid in ids})
    if not needed:
        raise ConfigError(f"no translation pairs (captions sharing caption_id with English) in split {split!r}",
                          config.captions)
    teacher_all = teacher_embeddings(encoder, encoder.clip.spec, needed, [english[c] for c in needed], runtime,
                                     config.cache_dir)
    row_of = {cid: i for i, cid in enumerate(needed)}
    teacher_all = torch.from_numpy(np.array(teacher_all, dtype=np.float32))  # a writable copy of the memmap
    tokens, teacher = {}, {}
    for lang, (ids, texts) in pairs.items():
        tokens[lang] = encoder.tokenize(texts, lang)
        teacher[lang] = teacher_all[[row_of[c] for c in ids]]
    return tokens, teacher


def train_nlt(config: MlaConfig, on_step=None) -> Path:
    """``mltk train-nlt``: Native Language Transfer. Returns the checkpoint artifact path."""
    runtime, captions, images = _setup(config)
    encoder, languages, train_embedding = prepare_encoder(config, captions, runtime)
    check_image_width(encoder.tower.output_dim, images, config.images)
    tokens, teacher = _nlt_data(encoder, config, captions, config.split, languages, runtime)
    _log_sizes("NLT translation pairs", tokens)
    validator, val_pairs = _validator(config, encoder, captions, images, languages, runtime), None
    if validator is None:
        val_tokens, val_teacher = _nlt_data(encoder, config, captions, config.val_split, languages, runtime)
        val_pairs = {lang: (val_tokens[lang][:512], val_teacher[lang][:512]) for lang in languages}
    task = NltTask(encoder, tokens, teacher, languages, train_embedding, config.batch_size, config.steps,
                   config.seed, runtime, validator, val_pairs)
    return _fit_and_save(task, encoder, config, runtime, "train-nlt", languages, on_step)


# ----------------------------------------------------------------------------------------------------------------
# LE
# ----------------------------------------------------------------------------------------------------------------


class LeTask:
    """Symmetric InfoNCE between frozen image embeddings and non-native captions at a fixed temperature.

    A batch holds distinct images of one language, each with one of its captions in that language (drawn from
    (seed, step)), so an image never appears twice in a batch as a false negative.
    """

    def __init__(self, encoder: LanguageAcquisitionEncoder, image_vectors: torch.Tensor, data: dict, languages,
                 train_embedding: bool, batch_size: int, steps: int, seed: int, temperature: float,
                 runtime: Runtime, validator):
        self.encoder, self.image_vectors, self.data = encoder, image_vectors, data
        self.languages, self.train_embedding, self.runtime = languages, train_embedding, runtime
        self.seed, self.logit_scale, self.validator = seed, 1.0 / temperature, validator
        self.batches = LanguageBatches({lang: len(data[lang]["image_rows"]) for lang in languages}, batch_size,
                                       steps, seed)

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return self.encoder.trainable_tensors(self.languages, embedding=self.train_embedding)

    def loss(self, step: int) -> torch.Tensor:
        lang, images = self.batches.batch(step)
        data = self.data[lang]
        # one caption per image, chosen for the global batch before sharding so every rank agrees
        draw = np.random.default_rng([self.seed, step, 0x1E]).random(len(images))
        captions = data["offsets"][images] + (draw * data["counts"][images]).astype(np.int64)
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        text = F.normalize(self.encoder.encode_tokens(data["tokens"][captions].to(device), lang).float(),
                           dim=-1)
        image = self.image_vectors[data["image_rows"][images]].to(device)  # [b, D], L2-normalised, frozen
        return info_nce(gather_with_grad(image), gather_with_grad(text), logit_scale=self.logit_scale)

    def validate(self) -> dict[str, float]:
        return self.validator()


def _le_data(encoder, captions: pa.Table, split: str, languages: list[str], image_row: dict[str, int]) -> dict:
    """Per language: distinct image rows, and their captions' tokens grouped by image (offsets, counts)."""
    data = {}
    for lang in languages:
        rows = _rows(captions, split, [lang])
        pairs = sorted((image_row[i], t) for i, t in zip(rows.column("image_id").to_pylist(),
                                                         rows.column("caption").to_pylist()) if i in image_row)
        if not pairs:
            raise ConfigError(f"no {lang} captions of split {split!r} describe an image of the image embeddings")
        image_rows, counts = np.unique(np.array([r for r, _ in pairs]), return_counts=True)
        data[lang] = {
            "image_rows": image_rows,
            "counts": counts,
            "offsets": np.concatenate([[0], np.cumsum(counts)[:-1]]),
            "tokens": encoder.tokenize([t for _, t in pairs], lang),
        }
    return data


def train_le(config: MlaConfig, on_step=None) -> Path:
    """``mltk train-le``: Language Exposure, normally starting from an NLT checkpoint (``init``); without one it
    trains fresh acquirers on ``model`` with ``tokenizer`` (LE only). Returns the checkpoint path."""
    if config.init is None and not config.tokenizer:
        raise ConfigError("train-le starts from an NLT checkpoint (--init), or from fresh acquirers with "
                          "--model and --tokenizer (the paper's LE-only ablation)")
    if config.images is None:
        raise ConfigError("train-le needs image embeddings (positional IMAGES, or piped from encode-images)")
    if config.temperature is not None and not config.temperature > 0:
        raise ConfigError(f"--temperature must be positive or 'clip', got {config.temperature}")
    runtime, captions, images = _setup(config)
    image_table, image_vectors = images
    encoder, languages, train_embedding = prepare_encoder(config, captions, runtime)
    check_image_width(encoder.tower.output_dim, images, config.images)
    image_row = {image_id: i for i, image_id in enumerate(image_table.column("id").to_pylist())}
    data = _le_data(encoder, captions, config.split, languages, image_row)
    _log_sizes("LE images", {lang: d["image_rows"] for lang, d in data.items()})
    validator = _validator(config, encoder, captions, images, languages, runtime)
    if validator is None:
        raise ConfigError(f"no {config.val_split!r} captions match the image embeddings: LE validates on them",
                          config.captions)
    unit_images = F.normalize(torch.from_numpy(np.array(image_vectors, dtype=np.float32)), dim=-1)  # [N, D]
    temperature = le_temperature(config.temperature, encoder)
    log(f"LE temperature {temperature:.4g} (logit scale {1 / temperature:.4g})")
    task = LeTask(encoder, unit_images, data, languages,
                  train_embedding, config.batch_size, config.steps, config.seed, temperature, runtime,
                  validator)
    return _fit_and_save(task, encoder, config, runtime, "train-le", languages, on_step)


# ----------------------------------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------------------------------


def _setup(config: MlaConfig):
    runtime = resolve_runtime(config.device, config.precision)
    init_from_env(runtime)
    seed_everything(config.seed)
    captions = artifacts.load_captions(config.captions)
    images = None
    if config.images is not None:
        table, vectors = artifacts.load_embeddings(config.images)
        images = (table, np.asarray(vectors, dtype=np.float32))
    return runtime, captions, images


def check_image_width(text_dim: int, images: tuple | None, path) -> None:
    """Image embeddings must have the text tower's output width; checked before the output directory exists."""
    if images is not None and images[1].shape[1] != text_dim:
        raise ConfigError(f"image embeddings have dim {images[1].shape[1]} but the model's text features have dim "
                          f"{text_dim}: encode the images with the model's base CLIP", path)


def _validator(config: MlaConfig, encoder, captions, images, languages, runtime) -> RetrievalValidator | None:
    if images is None:
        return None
    table, vectors = images
    val_captions = captions.filter(pc.equal(captions.column("split"), config.val_split))
    val_image_ids = set(val_captions.column("image_id").to_pylist())
    keep = np.array([i in val_image_ids for i in table.column("id").to_pylist()])
    if not keep.any():
        return None
    return RetrievalValidator(encoder, val_captions, table.filter(pa.array(keep)), vectors[keep], languages,
                              runtime, max_images=config.val_images)


def _fit_and_save(task, encoder: LanguageAcquisitionEncoder, config: MlaConfig, runtime: Runtime, stage: str,
                  languages: list[str], on_step=None) -> Path:
    encoder.train()
    inputs = [p for p in (config.captions, config.images, config.init) if p is not None]
    trained = sorted(task.parameters_to_train())

    def checkpoint_tensors(best: dict) -> dict:
        """Every acquirer and the embedding: tensors frozen in this stage are saved unchanged beside the best
        trained ones."""
        return {**{k: v.detach().cpu() for k, v in encoder.state_tensors().items()}, **best}

    return train_to_checkpoint(task, config.loop(), runtime, config.out, stage=stage,
                               checkpoint_config=encoder.checkpoint_config, checkpoint_tensors=checkpoint_tensors,
                               run_config=config, inputs=inputs, on_step=on_step, languages_trained=languages,
                               tensors_trained=len(trained))


def _log_sizes(what: str, per_language: dict) -> None:
    log(f"{what}: " + ", ".join(f"{lang} {len(v)}" for lang, v in per_language.items()))
