"""``mltk train-ccrk``: train a multilingual text tower against frozen image embeddings with 1-to-K contrastive
learning (default) or one of its baselines, so that retrieval is consistent across languages.

Nie et al. 2024, "Improving the Consistency in Cross-Lingual Cross-Modal Retrieval with 1-to-K Contrastive
Learning" (CCR_k). What trains is one of two multilingual text towers, picked by the ``--init`` checkpoint:

- MLA's language acquisition encoder (Zhang et al. 2023; an ``mla`` checkpoint, or built fresh from ``--model``
  and ``--tokenizer``): the acquirers of every non-English language and, by default, the shared non-native
  embedding. English stays the frozen CLIP text tower, so its caption features are constants, computed once.
- CLL-CLIP's expandable token embedding (Yang et al. 2024; a ``cll`` checkpoint from ``mltk train-continual``): the
  one table ``[V, W]`` that every language reads, English included, trains; the tower and the method's own modules
  stay frozen. English captions are encoded live like the others, so English is aligned with the images too and no
  language is a fixed point; the English bridge then pulls every language, English included, to the frozen CLIP's
  English features (the CLL-CLIP teacher).

A batch holds ``B`` distinct images, each with one caption in every language it has (``K`` language slots; a
missing language is masked out by ``text_mask``, never padded with a made-up caption). The caption of each
(image, language) is chosen from ``(seed, step)``, preferring translations of one sentence: the batch takes one
``caption_id`` of the image among those present in the most languages, and only a language lacking that
``caption_id`` gets another caption of the same image in that language.

Losses (``mltk.losses``; ``--loss``):

- ``one-to-k`` (default): ``one_to_k_contrastive``; image -> text with the image's K captions as positives
  (weight 1/K each) against every caption of the batch in every language, text -> image ordinary InfoNCE;
  temperature learnable from 0.07, clamped to [0.001, 0.5] as in the authors' code. ``--weighting code`` is the
  authors' released weighting.
- ``one-to-one``: the baseline 1-to-K replaces; one language is sampled per image (uniform over its present
  languages, English included, from ``(seed, step)``) and only that caption is encoded; symmetric InfoNCE with a
  temperature learnable from 0.07.
- ``english-bridge``: MSE of each language's L2-normalised caption feature to the (frozen) English one of the
  same image, the cross-lingual style where English bridges the languages; images take no part in the loss.
  With the CLL-CLIP table the target is the frozen CLIP's English feature, and the trained English slot is one
  of the languages pulled to it.
- ``hinge``: bidirectional pairwise ranking loss (margin 0.2, VSE) between the images and their captions, one
  term per language slot, averaged over the slots.
- ``--max-violation`` (hinge, mlmme): each anchor's hardest in-batch negative only (VSE++), not the sum.
- ``mlmme``: MLMME (Calixto, Liu and Campbell 2017) over K languages as the paper sums it: beta times the
  image-sentence ranking of every language plus (1 - beta) times the sentence-sentence ranking of every language
  pair (``mltk.losses:MLMMELoss``). ``--mlmme-form english-pivot``: per non-English language the
  two-language loss with English, averaged over the languages (mltk's earlier form; the same for K = 2).

The learnable temperature trains as T itself, clamped to its range (``temperature_form`` temperature, the authors':
key ``loss.logit_scale.value``), or as log(1/T) (``log``: key ``loss.logit_scale.log_scale``), in a param group of
its own at ``temperature_lr_scale`` x the lr with ``temperature_weight_decay`` (the authors': 2 and 0.01); it is
saved in the training state,
and its value at the best step is written to the checkpoint config (``train_ccrk.temperature``), not into
``model.safetensors``, so the checkpoint is an ordinary checkpoint of the tower's format (``mla``, or ``cll`` with
its vocabulary copied beside it) that ``evaluate`` and ``index`` read as they are.

Hard negatives (``--hard-negatives N``): each batch is built from ``ceil(B / (N + 1))`` anchor images (an epoch
walk, as without the option) and, after each anchor, its N most similar other training images by frozen image
embedding (cosine; neighbours computed once, in chunks), duplicates skipped and the batch topped up with random
images when they overlap. Every in-batch negative of an anchor's captions is then a look-alike image and its
captions.

Cost: the captions of a batch are encoded grouped by language, one forward per language through its own
acquirers (at most ``B`` captions each), and the loss holds one ``[B, B*K]`` score matrix: time and memory grow
linearly with K (``benchmarks/ccrk.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk import artifacts
from mltk.ame.rcsls import with_alignment
from mltk.artifacts.schema import NATIVE_LANG
from mltk.cll_clip.model import CHECKPOINT_FORMAT as CLL_FORMAT
from mltk.cll_clip.model import ContinualTextEncoder, load_continual_encoder
from mltk.core.distributed import gather_with_grad, shard
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, log
from mltk.encode.text_encoders import ClipTextEncoder
from mltk.encode.texts import encode_texts
from mltk.losses import AME_MARGINS, LossOutput, make_temperature
from mltk.losses.registry import LOSSES as LOSS_REGISTRY
from mltk.losses.registry import build_loss
from mltk.models.multilingual import LanguageAcquisitionEncoder
from mltk.models.preflight import check_image_embeddings, require_model, require_weights
from mltk.models.towers import names_hf_tower
from mltk.settings.ccrk import CcrkConfig
from mltk.settings.loop import LoopConfig
from mltk.settings.resolve import resolve
from mltk.train.ccrk_batches import NO_CAPTION, ImageCaptions, MultilingualBatches, group_captions, nearest_images
from mltk.train.loop import StepCallback, adamw, decay_groups
from mltk.train.stage import (
    StageInputs,
    load_inputs,
    model_inputs,
    prepare_encoder,
    refuse_text_only_tower,
    retrieval_split,
    retrieval_validator,
    run_stage,
)
from mltk.train.validate import RetrievalValidator

LOSS_PREFIX = "loss."


# ----------------------------------------------------------------------------------------------------------------
# The objective
# ----------------------------------------------------------------------------------------------------------------


LOSSES = tuple(LOSS_REGISTRY)  # --loss: mltk.losses.registry
CONTRASTIVE_LOSSES = tuple(name for name, entry in LOSS_REGISTRY.items() if entry.contrastive)


class CcrkObjective(nn.Module):
    """The selected loss (``LOSSES``) on ``image [B, D]``, ``text [B, K, D]`` (both L2-normalised) and
    ``text_mask [B, K]``. Holds the learnable temperature of the contrastive losses (``criterion.logit_scale``).
    """

    def __init__(
        self,
        loss: str,
        languages: list[str],
        weighting: str,
        temperature: float,
        learn_temperature: bool,
        margin: float | None,
        beta: float,
        temperature_range: tuple[float, float] | None,
        similarity: str = "cosine",
        mlmme_form: str = "paper",
        max_violation: bool = False,
        temperature_form: str = "log",
    ):
        super().__init__()
        if loss not in LOSSES:
            raise ConfigError(f"--loss must be one of {', '.join(LOSSES)}, got {loss!r}")
        # mlmme needs English only in its english-pivot form
        needs_english = LOSS_REGISTRY[loss].needs_english and not (loss == "mlmme" and mlmme_form == "paper")
        if needs_english and NATIVE_LANG not in languages:
            raise ConfigError(f"--loss {loss} aligns every language with English: include {NATIVE_LANG} in --lang")
        self.name, self.beta, self.similarity, self.mlmme_form = loss, beta, similarity, mlmme_form
        self.margin = AME_MARGINS[similarity] if margin is None else margin
        self.english = languages.index(NATIVE_LANG) if NATIVE_LANG in languages else None
        self.criterion = build_loss(
            loss,
            {
                "temperature": temperature,
                "learn_temperature": learn_temperature,
                "weighting": weighting,
                "temperature_range": temperature_range,
                "english_index": self.english,
                "margin": self.margin,
                "similarity": similarity,
                "beta": beta,
                "mlmme_form": mlmme_form,
                "max_violation": max_violation,
            },
        )
        if temperature_form == "temperature" and learn_temperature and hasattr(self.criterion, "logit_scale"):
            self.criterion.logit_scale = make_temperature(temperature_form, temperature, temperature_range)

    @classmethod
    def of(cls, config: CcrkConfig, languages: list[str]) -> CcrkObjective:
        """The objective ``config`` (its recipe's values filled in) names."""
        return cls(
            config.loss,
            languages,
            config.weighting,
            config.temperature,
            config.learn_temperature,
            config.margin,
            config.beta,
            config.temperature_range,
            config.similarity,
            config.mlmme_form,
            config.max_violation,
            config.temperature_form,
        )

    def forward(
        self, image: torch.Tensor, text: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor | None = None
    ) -> LossOutput:
        """``teacher`` [B, D]: the frozen CLIP's English features, given when English trains (the English bridge
        then targets them); the other losses do not use it."""
        if self.name == "english-bridge":
            return self.criterion(text, mask, teacher)
        return self.criterion(image, text, mask)

    def trainable(self) -> dict[str, nn.Parameter]:
        return {f"{LOSS_PREFIX}{name}": p for name, p in self.criterion.named_parameters() if p.requires_grad}

    def temperature(self) -> float | None:
        scale = getattr(self.criterion, "logit_scale", None)
        return scale.temperature if scale is not None else None

    def load_trained(self, tensors: dict[str, torch.Tensor]) -> None:
        own = self.trainable()
        with torch.no_grad():
            for key, value in tensors.items():
                if key in own:
                    own[key].copy_(value)


# ----------------------------------------------------------------------------------------------------------------
# The task
# ----------------------------------------------------------------------------------------------------------------


class CcrkTask:
    """Frozen image embeddings against the multilingual caption features of each batch, one forward per
    language. With MLA the English slot reads precomputed features (the frozen CLIP tower never runs twice); with
    CLL-CLIP's table English is encoded live, and the frozen CLIP's English features are precomputed only as the
    English bridge's target."""

    def __init__(
        self,
        encoder: LanguageAcquisitionEncoder | ContinualTextEncoder,
        objective: CcrkObjective,
        data: ImageCaptions,
        batches: MultilingualBatches,
        image_vectors: torch.Tensor,
        train_embedding: bool,
        runtime: Runtime,
        validator: RetrievalValidator,
        *,
        temperature_lr_scale: float,
        temperature_weight_decay: float,
    ):
        self.encoder, self.objective, self.data, self.batches = encoder, objective, data, batches
        self.temperature_lr_scale, self.temperature_weight_decay = temperature_lr_scale, temperature_weight_decay
        self.image_vectors = image_vectors  # [N_all, D] L2-normalised, CPU
        self.train_embedding, self.runtime, self.validator = train_embedding, runtime, validator
        self.languages = list(data.languages)
        self.english_trains = encoder.native_trains
        self.trained_languages = trained_languages(encoder, self.languages)
        self.tokens = {lang: encoder.tokenize(data.texts[lang], lang) for lang in self.trained_languages}
        if encoder.tower.output_dim != image_vectors.shape[1]:
            raise ConfigError(
                f"text features have dim {encoder.tower.output_dim} but the image embeddings have "
                f"dim {image_vectors.shape[1]}: encode the images with the encoder's base CLIP"
            )
        self.english = None  # [N_en, D] L2-normalised constants: frozen English, or the bridge's teacher
        if NATIVE_LANG in self.languages and (not self.english_trains or objective.name == "english-bridge"):
            frozen = ClipTextEncoder(encoder.clip) if self.english_trains else encoder
            self.english = torch.from_numpy(
                encode_texts(
                    frozen, data.texts[NATIVE_LANG], NATIVE_LANG, runtime, description="encoding English (frozen)"
                )
            )

    def parameters_to_train(self) -> dict[str, nn.Parameter]:
        return {
            **self.encoder.trainable_tensors(self.trained_languages, embedding=self.train_embedding),
            **self.objective.trainable(),
        }

    def make_optimizer(self, params: dict[str, nn.Parameter], loop: LoopConfig) -> torch.optim.Optimizer:
        """The loop's AdamW (decay on matrices only), with the loss's learnt temperature in a group of its own at
        ``temperature_lr_scale`` x the lr and ``temperature_weight_decay`` (CCR_k's ``create_optimizer`` gives the
        newly initialised temperature twice the lr and the run's decay)."""
        loss_params = {name: p for name, p in params.items() if name.startswith(LOSS_PREFIX)}
        others = {name: p for name, p in params.items() if name not in loss_params}
        groups = decay_groups(others, loop.weight_decay)
        groups.append(
            {
                "params": list(loss_params.values()),
                "lr": loop.lr * self.temperature_lr_scale,
                "weight_decay": self.temperature_weight_decay,
            }
        )
        return adamw([g for g in groups if g["params"]], loop)

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        images, captions = self.batches.batch(step)
        images, captions = shard(images), shard(captions)
        text, mask = self.text_features(captions)
        image = self.image_vectors[self.data.image_rows[images]].to(self.runtime.device)
        teacher = self.english_teacher(captions) if self.english_trains and self.english is not None else None
        image, text = gather_with_grad(image), gather_with_grad(text)
        mask = gather_with_grad(mask.float()) > 0.5
        if teacher is not None:
            teacher = gather_with_grad(teacher)
        with torch.autocast(self.runtime.device.type, enabled=False):  # the loss in fp32
            return self.objective(image.float(), text.float(), mask, teacher)

    def text_features(self, captions: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """[b, K] caption indices -> (L2-normalised features [b, K, D], text_mask [b, K]), each language through
        its own path in one forward; missing slots stay zero and are masked."""
        device = self.runtime.device
        batch, dim = len(captions), self.image_vectors.shape[1]
        slots = []
        for k, lang in enumerate(self.languages):
            present = np.flatnonzero(captions[:, k] != NO_CAPTION)
            slot = torch.zeros(batch, dim, device=device)
            if len(present):
                index = torch.as_tensor(captions[present, k])
                if lang in self.tokens:
                    features = self.encoder.encode_tokens(self.tokens[lang][index].to(device), lang)
                    features = F.normalize(features.float(), dim=-1)
                else:
                    features = self.english[index].to(device)
                slot = slot.index_copy(0, torch.as_tensor(present, device=device), features)
            slots.append(slot)
        mask = torch.as_tensor(captions != NO_CAPTION, device=device)
        return torch.stack(slots, dim=1), mask

    def english_teacher(self, captions: np.ndarray) -> torch.Tensor:
        """[b, K] caption indices -> the frozen CLIP's features [b, D] of each row's English caption (zero where
        the image has none; the loss masks those rows)."""
        english = captions[:, self.languages.index(NATIVE_LANG)]
        features = self.english[torch.as_tensor(np.where(english == NO_CAPTION, 0, english))]
        features[torch.as_tensor(english == NO_CAPTION)] = 0.0
        return features.to(self.runtime.device)

    def validate(self) -> dict[str, float]:
        scores = self.validator()
        temperature = self.objective.temperature()
        return {**scores, "temperature": temperature} if temperature is not None else scores


# ----------------------------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------------------------


def trained_languages(encoder, languages: list[str]) -> list[str]:
    """The language slots whose captions go through trained weights: every one with CLL-CLIP's shared table,
    all but English (the frozen native CLIP) with MLA."""
    if encoder.native_trains:
        return list(languages)
    return [lang for lang in languages if lang != NATIVE_LANG]


def ccrk_encoder(
    config: CcrkConfig, captions: pa.Table, runtime: Runtime
) -> tuple[LanguageAcquisitionEncoder | ContinualTextEncoder, list[str]]:
    """The encoder and the K language slots (English first when present)."""
    available = sorted(
        set(captions.filter(pc.equal(captions.column("split"), config.split)).column("lang").to_pylist())
    )
    if not available:
        raise ConfigError(f"no captions in split {config.split!r}", config.captions)
    english = [NATIVE_LANG] if NATIVE_LANG in available else []
    init_format = artifacts.checkpoint_format(config.init) if config.init is not None else None
    if init_format not in (None, "mla", CLL_FORMAT):
        raise ConfigError(
            f"--init must be an MLA checkpoint (train-nlt, train-le) or a CLL-CLIP one "
            f"(train-continual), not format {init_format!r}",
            config.init,
        )

    def slots(known: list[str]) -> list[str]:
        languages = list(config.languages) or ([*english, *known] if config.init is not None else available)
        languages = sorted(dict.fromkeys(languages), key=lambda lang: (lang != NATIVE_LANG, lang))
        missing = [lang for lang in languages if lang not in available]
        if missing:
            raise ConfigError(
                f"no {config.split} captions in language(s) {', '.join(missing)} (has {', '.join(available)})",
                config.captions,
            )
        if init_format != CLL_FORMAT and not [lang for lang in languages if lang != NATIVE_LANG]:
            raise ConfigError("nothing to train: English is the frozen native language; add other languages")
        return languages

    if init_format == CLL_FORMAT:
        if not config.train_embedding:
            raise ConfigError(
                "--freeze-embedding leaves nothing to train in a CLL-CLIP checkpoint (its token table is what trains)",
                config.init,
            )
        encoder = load_continual_encoder(config.init, device=runtime.device)
        return encoder.to(runtime.device), slots(encoder.trained_languages)
    encoder, languages, _ = prepare_encoder(
        config.init, config.model, config.pretrained, config.tokenizer, config.init_embeddings, slots, runtime
    )
    return encoder, languages


def build_task(config: CcrkConfig) -> tuple[CcrkTask, Runtime]:
    """Everything ``train_ccrk`` fits: loads the inputs, builds encoder, data, batches, objective, validator."""
    config = resolve(config, "train-ccrk")
    require_model(config.model, config.init, "train-ccrk", "MLA or CLL-CLIP")
    if config.init is None and config.tokenizer is None and not names_hf_tower(config.model):
        raise ConfigError(
            "give --init CHECKPOINT (MLA or CLL-CLIP), or --model BASE with --tokenizer VOCAB_OR_HF "
            "(a Hugging Face tower reads with its own tokenizer by default)"
        )
    refuse_text_only_tower("train-ccrk", config.model, config.init)
    cll_init = config.init is not None and artifacts.checkpoint_format(config.init) == CLL_FORMAT
    config.alignment.check_form(takes_map=not cll_init, encoder="a CLL-CLIP checkpoint (--init)")
    require_weights(config.model, config.pretrained, config.init, "train-ccrk")
    check_image_embeddings(config.images, config.model, config.pretrained, config.init)
    inputs = load_inputs(
        config.device,
        config.precision,
        config.loop.seed,
        config.captions,
        config.images,
        config.split,
        config.val_split,
    )
    runtime, captions = inputs.runtime, inputs.captions
    image_vectors = inputs.unit_image_vectors()  # [N, D]
    encoder, languages = ccrk_encoder(config, captions, runtime)
    data = group_captions(captions, config.split, languages, inputs.image_row())
    if not len(data.image_rows):
        raise ConfigError(f"no {config.split} captions describe an image of the image embeddings", config.images)
    log(
        f"train-ccrk: {len(data.image_rows)} images, K = {len(languages)} ({', '.join(languages)}); captions "
        + ", ".join(f"{lang} {len(data.texts[lang])}" for lang in languages)
        + f"; loss {config.loss}"
    )
    neighbours = None
    if config.hard_negatives:
        neighbours = nearest_images(image_vectors[data.image_rows], config.hard_negatives)
    batches = MultilingualBatches(
        data,
        config.batch_size,
        config.loop.steps,
        config.loop.seed,
        neighbours,
        one_language=config.loss == "one-to-one",
    )
    objective = CcrkObjective.of(config, languages).to(runtime.device)
    validator = _validator(config, encoder, inputs, image_vectors.numpy(), trained_languages(encoder, languages))
    task = CcrkTask(
        encoder,
        objective,
        data,
        batches,
        image_vectors,
        config.train_embedding,
        runtime,
        validator,
        temperature_lr_scale=config.temperature_lr_scale,
        temperature_weight_decay=config.temperature_weight_decay,
    )
    return with_alignment(
        task, encoder, config.alignment, config.loop.seed, languages, captions=config.captions
    ), runtime


def train_ccrk(config: CcrkConfig, on_step: StepCallback | None = None) -> Path:
    """``mltk train-ccrk``: returns the path of the checkpoint artifact it wrote (the format of the tower it
    trained: ``mla`` or ``cll``)."""
    config = resolve(config, "train-ccrk")
    task, runtime = build_task(config)
    encoder, objective = task.encoder, task.objective
    encoder.train()

    def checkpoint_tensors(best: dict) -> dict:
        """The encoder's tensors, trained ones at their best step (frozen ones unchanged); the best temperature
        goes to the checkpoint config."""
        objective.load_trained({k: v for k, v in best.items() if k.startswith(LOSS_PREFIX)})
        encoder_best = {k: v for k, v in best.items() if not k.startswith(LOSS_PREFIX)}
        return {**{k: v.detach().cpu() for k, v in encoder.state_tensors().items()}, **encoder_best}

    def checkpoint_config() -> dict:
        return {
            **encoder.checkpoint_config(),
            "train_ccrk": {
                "loss": config.loss,
                "languages": task.languages,
                "similarity": config.similarity,
                "weighting": config.weighting if config.loss == "one-to-k" else None,
                "temperature": objective.temperature(),
            },
        }

    def copy_vocabulary(directory: Path) -> None:
        """A ``cll`` checkpoint carries its vocabulary (the one of ``--init``: CCR_k adds no tokens)."""
        vocab = artifacts.read_checkpoint_config(config.init)["vocab"]
        shutil.copytree(config.init / vocab, directory / encoder.checkpoint_config()["vocab"], dirs_exist_ok=True)

    inputs = [p for p in (config.images, config.captions, config.init, config.alignment.lexicon) if p is not None]
    inputs += model_inputs(config.init, config.model, config.pretrained, config.tokenizer)
    return run_stage(
        task,
        config.loop,
        runtime,
        config.out,
        stage="train-ccrk",
        checkpoint_config=checkpoint_config,
        checkpoint_tensors=checkpoint_tensors,
        run_config=config,
        inputs=inputs,
        on_step=on_step,
        extra_files=copy_vocabulary if task.english_trains else None,
        loss=config.loss,
        languages=task.languages,
        K=len(task.languages),
    )


def _validator(
    config: CcrkConfig, encoder, inputs: StageInputs, image_vectors: np.ndarray, trained: list[str]
) -> RetrievalValidator:
    """Mean AR over the trained languages on the validation split, on at most ``val_images`` images, ranked by the
    similarity the loss trains (AME): the score that picks the checkpoint's step."""
    split = retrieval_split(inputs.captions, inputs.image_table, image_vectors, config.val_split)
    if split is None or not set(trained) & set(split.captions.column("lang").to_pylist()):
        raise ConfigError(
            f"no {config.val_split!r} captions in {', '.join(trained)} describe an image of the image "
            f"embeddings: train-ccrk validates on them (--val-split)",
            config.captions,
        )
    return retrieval_validator(encoder, split, trained, inputs.runtime, config.val_images, config.similarity)
