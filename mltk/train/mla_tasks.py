"""The training tasks of the MLA stages (``mltk.train.mla``) and the rows they read: NLT's translation pairs
and MSE to the frozen English teacher (``NltPairs``, ``NltTask``), LE's InfoNCE between frozen image embeddings and
non-native captions (``LeTask``), both in one stage (``NltLeTask``), and the optimizer they share
(``nlt_optimizer``: the shared non-native embedding at its own learning rate when the recipe sets one)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.distributed import gather_with_grad, shard
from mltk.core.runtime import Runtime
from mltk.losses import mse_distill
from mltk.losses.registry import build_loss, options_of
from mltk.models.multilingual import LanguageAcquisitionEncoder
from mltk.train.batches import LanguageBatches, draw_captions
from mltk.train.loop import LoopConfig, adamw, default_optimizer
from mltk.train.teacher import TeacherRows


def nlt_optimizer(
    params: dict[str, torch.nn.Parameter], loop: LoopConfig, embedding_lr: float | None
) -> torch.optim.Optimizer:
    """The loop's AdamW, with the shared non-native embedding (keys ``embedding.*``) at its own peak lr when
    ``embedding_lr`` is given: a table copied from a trained tower wants a smaller step than fresh acquirers
    (measured on MiniLM: 2e-4 against 1e-3). The schedule multiplies each group's own lr."""
    if embedding_lr is None:
        return default_optimizer(params, loop)
    table = {k: p for k, p in params.items() if k.startswith("embedding.")}
    rest = {k: p for k, p in params.items() if k not in table}
    groups = []
    for part, lr in ((rest, loop.lr), (table, embedding_lr)):
        for group in default_optimizer(part, loop).param_groups if part else []:
            groups.append({"params": group["params"], "weight_decay": group["weight_decay"], "lr": lr})
    return adamw(groups, loop)


class EmbeddingLr:
    """``make_optimizer`` of the MLA tasks (``mltk.train.loop``): ``nlt_optimizer`` at ``self.embedding_lr``."""

    embedding_lr: float | None = None

    def make_optimizer(self, params: dict[str, torch.nn.Parameter], loop: LoopConfig) -> torch.optim.Optimizer:
        return nlt_optimizer(params, loop, self.embedding_lr)


def caption_rows(captions: pa.Table, split: str, langs: list[str]) -> pa.Table:
    keep = pc.and_(
        pc.equal(captions.column("split"), split), pc.is_in(captions.column("lang"), pa.array(langs, pa.string()))
    )
    return captions.filter(keep)


class NltPairs:
    """Translation pairs of one split, per language: the translated text and its English source (row-aligned
    Arrow string arrays). Nothing is tokenised or encoded here: a step asks for its rows (``tokens``, ``teacher``)."""

    def __init__(self, texts: dict[str, pa.Array], english: dict[str, pa.Array], teacher: TeacherRows):
        self.texts, self.english, self.teacher = texts, english, teacher

    def sizes(self) -> dict[str, int]:
        return {lang: len(texts) for lang, texts in self.texts.items()}

    def tokens(self, encoder: LanguageAcquisitionEncoder, lang: str, index: np.ndarray) -> torch.Tensor:
        """[b, L] token ids of the pairs ``index`` of ``lang``."""
        return encoder.tokenize(self.texts[lang].take(pa.array(index, pa.int64())).to_pylist(), lang)

    def targets(self, lang: str, index: np.ndarray) -> torch.Tensor:
        """[b, D] unnormalised English teacher embeddings of the pairs ``index`` of ``lang``."""
        return torch.from_numpy(self.teacher.rows(self.english[lang].take(pa.array(index, pa.int64())).to_pylist()))

    def head(self, limit: int) -> NltPairs:
        """The first ``limit`` pairs of each language (a capped validation set)."""
        return NltPairs(
            {lang: texts[:limit] for lang, texts in self.texts.items()},
            {lang: english[:limit] for lang, english in self.english.items()},
            self.teacher,
        )


class NltTask(EmbeddingLr):
    """MSE between the cached English teacher embedding and the acquisition encoder's embedding of a translation."""

    def __init__(
        self,
        encoder: LanguageAcquisitionEncoder,
        pairs: NltPairs,
        languages: list[str],
        train_embedding: bool,
        batch_size: int,
        steps: int,
        seed: int,
        runtime: Runtime,
        validator=None,
        val_pairs: NltPairs | None = None,
        mse_form: str = "mean",
    ):
        self.encoder, self.pairs = encoder, pairs
        self.criterion = build_loss("mse", options_of("mse", form=mse_form))
        self.languages, self.train_embedding, self.runtime = languages, train_embedding, runtime
        self.batches = LanguageBatches({lang: pairs.sizes()[lang] for lang in languages}, batch_size, steps, seed)
        self.validator, self.val_pairs = validator, val_pairs

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return self.encoder.trainable_tensors(self.languages, embedding=self.train_embedding)

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        lang, index = self.batches.batch(step)
        index = np.asarray(shard(index))
        device = self.runtime.device
        student = self.encoder.encode_tokens(self.pairs.tokens(self.encoder, lang, index).to(device), lang)
        return self.criterion(student.float(), self.pairs.targets(lang, index).to(device)).prefixed("nlt_")

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        if self.validator is not None:
            return self.validator()
        losses = {}  # no images given: the score is minus the validation MSE
        for lang, size in self.val_pairs.sizes().items():
            index = np.arange(size)
            tokens, teacher = self.val_pairs.tokens(self.encoder, lang, index), self.val_pairs.targets(lang, index)
            student = self.encoder.encode_tokens(tokens.to(self.runtime.device), lang).float()
            losses[f"mse_{lang}"] = float(mse_distill(student, teacher.to(self.runtime.device)))
        return {**losses, "score": -float(np.mean(list(losses.values())))}


def translation_columns(captions: pa.Table, split: str, languages: list[str]) -> tuple[dict[str, pa.Table], pa.Table]:
    """Per language the rows (``caption_id``, ``caption``, ``english``) of its captions that share a caption_id
    with an English caption of ``split``, in row order; and the English rows (``caption_id``, ``caption``)."""
    english = caption_rows(captions, split, [NATIVE_LANG]).select(["caption_id", "caption"]).combine_chunks()
    pairs = {}
    for lang in languages:
        rows = caption_rows(captions, split, [lang])
        position = pc.index_in(rows.column("caption_id"), value_set=english.column("caption_id"))
        kept = pc.is_valid(position)
        pairs[lang] = pa.table(
            {
                "caption_id": rows.column("caption_id").filter(kept),
                "caption": rows.column("caption").filter(kept),
                "english": english.column("caption").take(position.filter(kept)),
            }
        )
    return pairs, english


def translation_pairs(
    captions: pa.Table, split: str, languages: list[str]
) -> tuple[dict[str, tuple[list[str], list[str]]], dict[str, str]]:
    """Per language (caption_ids, texts) of captions with an English caption of the same ``caption_id``, and the
    English caption of each id (Python lists of ``translation_columns``)."""
    pairs, english = translation_columns(captions, split, languages)
    return (
        {
            lang: (rows.column("caption_id").to_pylist(), rows.column("caption").to_pylist())
            for lang, rows in pairs.items()
        },
        dict(zip(english.column("caption_id").to_pylist(), english.column("caption").to_pylist())),
    )


class LeTask(EmbeddingLr):
    """Symmetric InfoNCE between frozen image embeddings and non-native captions at a fixed temperature.

    A batch holds distinct images of one language, each with one of its captions in that language (drawn from
    (seed, step)), so an image never appears twice in a batch as a false negative.
    """

    def __init__(
        self,
        encoder: LanguageAcquisitionEncoder,
        image_vectors: torch.Tensor,
        data: dict,
        languages,
        train_embedding: bool,
        batch_size: int,
        steps: int,
        seed: int,
        temperature: float,
        runtime: Runtime,
        validator,
    ):
        self.encoder, self.image_vectors, self.data = encoder, image_vectors, data
        self.languages, self.train_embedding, self.runtime = languages, train_embedding, runtime
        self.seed, self.logit_scale, self.validator = seed, 1.0 / temperature, validator
        self.criterion = build_loss("infonce")
        self.batches = LanguageBatches(
            {lang: len(data[lang]["image_rows"]) for lang in languages}, batch_size, steps, seed
        )

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return self.encoder.trainable_tensors(self.languages, embedding=self.train_embedding)

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        lang, images = self.batches.batch(step)
        data = self.data[lang]
        captions = draw_captions(self.seed, step, 0x1E, images, data["offsets"], data["counts"])
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        tokens = self.encoder.tokenize(data["texts"].take(pa.array(captions, pa.int64())).to_pylist(), lang)
        text = F.normalize(self.encoder.encode_tokens(tokens.to(device), lang).float(), dim=-1)
        image = self.image_vectors[data["image_rows"][images]].to(device)  # [b, D], L2-normalised, frozen
        return self.criterion(gather_with_grad(image), gather_with_grad(text), self.logit_scale).prefixed("le_")

    def validate(self) -> dict[str, float]:
        return self.validator()


class NltLeTask:
    """``nlt_weight * NLT + le_weight * LE`` each step, on the same encoder; validation is LE's retrieval. The
    terms ``nlt_mse`` and ``le_infonce`` are logged unweighted."""

    def __init__(self, nlt: NltTask, le: LeTask, nlt_weight: float, le_weight: float):
        self.nlt, self.le, self.nlt_weight, self.le_weight = nlt, le, nlt_weight, le_weight

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return self.le.parameters_to_train()

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        (nlt, nlt_terms), (le, le_terms) = self.nlt.loss(step), self.le.loss(step)
        return self.nlt_weight * nlt + self.le_weight * le, {**nlt_terms, **le_terms}

    def validate(self) -> dict[str, float]:
        return self.le.validate()
