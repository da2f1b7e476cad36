"""One task of train-continual: the ``TrainTask`` of one language, and the vocabulary it grows the table to."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from mltk import artifacts
from mltk.cll_clip.base import TaskContext
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.cll_clip.teir import TeirAdamW, token_lambdas
from mltk.core.distributed import gather_with_grad, shard
from mltk.core.errors import ArtifactError
from mltk.core.runtime import Runtime
from mltk.losses import CLLCLIPLoss
from mltk.losses.base import split_loss
from mltk.train.batches import LanguageBatches, draw_captions
from mltk.train.continual.data import Corpus, TaskData
from mltk.train.continual.order import ContinualTrainConfig
from mltk.train.loop import LoopConfig, adamw
from mltk.train.validate import RetrievalValidator
from mltk.vocab import (
    Vocabulary,
    load_vocabulary,
    select_captions,
    token_frequencies,
    train_vocabulary,
    write_vocabulary,
)

# ----------------------------------------------------------------------------------------------------------------
# One task
# ----------------------------------------------------------------------------------------------------------------


class CllClipTask:
    """The TrainTask of one language: CLL-CLIP loss on its pairs, plus the method's terms; validation is the
    recall sum of the language on the validation split."""

    def __init__(
        self,
        encoder: ContinualTextEncoder,
        corpus: Corpus,
        data: TaskData,
        index: int,
        lang: str,
        config: ContinualTrainConfig,
        runtime: Runtime,
        validator,
        lambdas: torch.Tensor | None,
    ):
        self.encoder, self.method, self.corpus, self.data = encoder, encoder.method, corpus, data
        self.index, self.lang, self.config, self.runtime = index, lang, config, runtime
        self.validator, self.lambdas = validator, lambdas
        self.criterion = CLLCLIPLoss(config.gamma1, config.gamma2, config.mse_form)
        self.batch_size = config.batch_size
        # An epoch passes over every caption once (the authors' dataset of pairs), or over every image once with
        # one of its captions drawn per step (``epoch_unit="images"``, batches of distinct images).
        self.by_caption = config.epoch_unit == "captions"
        units = len(data.tokens) if self.by_caption else len(data.image_rows)
        self.steps_per_epoch = max(units // config.batch_size, 1)
        steps = config.steps or config.epochs * self.steps_per_epoch
        self.steps = steps
        self.seed = task_seed(config.loop.seed, index)
        self.batches = LanguageBatches({lang: units}, config.batch_size, steps, self.seed)
        self.caption_image = np.repeat(np.arange(len(data.image_rows)), data.counts)  # [captions] -> image index
        self.context = TaskContext(
            encoder=encoder,
            corpus=corpus,
            index=index,
            lang=lang,
            steps=steps,
            steps_per_epoch=self.steps_per_epoch,
            batch_size=config.batch_size,
            pair_terms=self.pair_terms,
            data_loss=self.data_loss,
            sample_tokens=self.sample_tokens,
        )

    # --- TrainTask ---------------------------------------------------------------------------------------------

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        """The table, the temperature (not in a text-only run: it scales only the InfoNCE term) and the method's."""
        temperature = {} if self.config.text_only else {"logit_scale": self.encoder.logit_scale.parameter}
        return {
            "table": self.encoder.table,
            **temperature,
            **{f"method.{k}": p for k, p in self.method.trainable().items()},
        }

    def make_optimizer(self, params: dict[str, torch.nn.Parameter], loop: LoopConfig) -> torch.optim.Optimizer:
        """AdamW (TeirAdamW under TEIR's regularisation): decay on the table and the method's matrices, the
        method's tensors at ``method_lr`` (the table's lr unless set)."""
        config = self.config
        method_lr = loop.lr if config.method_lr is None else config.method_lr
        own = [p for name, p in params.items() if name.startswith("method.")]
        groups = [
            {"params": [params["table"]], "weight_decay": loop.weight_decay, "lr": loop.lr},
            {
                "params": [params[name] for name in ("logit_scale",) if name in params],
                "weight_decay": 0.0,
                "lr": loop.lr,
            },
            {"params": [p for p in own if p.ndim >= 2], "weight_decay": loop.weight_decay, "lr": method_lr},
            {"params": [p for p in own if p.ndim < 2], "weight_decay": 0.0, "lr": method_lr},
        ]
        groups = [g for g in groups if g["params"]]
        if self.lambdas is None:
            return adamw(groups, loop)
        return TeirAdamW(
            groups,
            lr=loop.lr,
            betas=loop.betas,
            eps=loop.eps,
            weight_decay=loop.weight_decay,
            row_scales={params["table"]: self.lambdas.to(params["table"].device)},
            scale_gradients=config.teir_reg_grad,
            scale_weight_decay=config.teir_reg_decay,
        )

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``gamma1 * infonce + gamma2 * mse`` of the batch plus the method's terms, with every term named and
        unweighted (``mltk.train.step_log``)."""
        loss, terms = self.data_terms(step, self.method.joint_batch(self.context, step))
        for extra in (self.method.pop_auxiliary_loss(), self.method.extra_loss(self.context, step)):
            if extra is not None:
                extra, extra_terms = split_loss(extra)
                loss = loss + extra
                terms.update(extra_terms)
        return loss, terms

    def validate(self) -> dict[str, float]:
        return self.validator()

    # --- what methods use (through ``self.context``) ------------------------------------------------------------

    def pair_loss(self, image: torch.Tensor | None, text: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        """CLL-CLIP's loss of one batch (image [b, D] normalised, text and teacher [b, D] raw)."""
        return self.pair_terms(image, text, teacher)[0]

    def pair_terms(
        self,
        image: torch.Tensor | None,
        text: torch.Tensor,
        teacher: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``pair_loss`` with its terms: ``{"infonce", "mse"}`` unweighted, and the ``logit_scale`` it used. A
        text-only run (``image`` None: no image tower) trains the MSE-to-English term alone (InfoNCE off, gamma1 =
        0), and logs ``mse`` only. ``memory`` (images [r, D], text [r, D]): replayed rows appended after the batch
        (after every process's rows) that take part in InfoNCE only; the MSE runs over the batch's rows."""
        if image is None:
            return self.criterion(None, gather_with_grad(text.float()), gather_with_grad(teacher))
        image, text = gather_with_grad(image), gather_with_grad(text.float())
        if memory is not None:  # [b + r, D] each; the teachers stay [b, D]
            image, text = (
                torch.cat([image, gather_with_grad(memory[0])]),
                torch.cat([text, gather_with_grad(memory[1].float())]),
            )
        scale = self.encoder.logit_scale()
        loss, terms = self.criterion(image, text, gather_with_grad(teacher), scale)
        return loss, {**terms, "logit_scale": scale}

    def data_loss(self, step: int) -> torch.Tensor:
        """The CLL-CLIP loss of the batch of ``step`` (``data_terms`` without the terms)."""
        return self.data_terms(step)[0]

    def data_terms(
        self, step: int, joined: tuple[torch.Tensor | None, torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The CLL-CLIP loss of the batch of ``step`` and its terms: distinct captions (by caption epochs), or
        distinct images with one caption each drawn from the seed (by image epochs). ``joined`` (images, text
        features, teachers; the method's ``joint_batch``) is appended to the batch: one loss over both, or, when
        its teachers are None (the authors' replay), one InfoNCE over both and the MSE over the batch's rows."""
        data = self.data
        if self.by_caption:
            _, captions = self.batches.batch(step)
            images = self.caption_image[captions]
        else:
            _, images = self.batches.batch(step)
            captions = draw_captions(self.seed, step, 0xC11, images, data.offsets, data.counts)
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        text = self.encoder.encode_tokens(data.tokens[captions].to(device), self.lang)
        vectors = self.corpus.image_vectors
        image = None if vectors is None else vectors[torch.from_numpy(data.image_rows[images])].to(device)
        teacher = data.teacher[captions].to(device)
        if joined is not None and joined[2] is None:  # InfoNCE over b + r rows, the teacher MSE over b
            return self.pair_terms(image, text, teacher, memory=(joined[0], joined[1]))
        if joined is not None:  # [b + r, D] each
            text, teacher = torch.cat([text, joined[1].to(text.dtype)]), torch.cat([teacher, joined[2]])
            image = None if image is None else torch.cat([image, joined[0]])
        return self.pair_terms(image, text, teacher)

    def sample_tokens(self, count: int) -> torch.Tensor:
        """Tokens [<= count, L] of the task's training captions (a fixed, spread-out selection)."""
        rows = np.linspace(0, len(self.data.tokens) - 1, min(count, len(self.data.tokens))).astype(np.int64)
        return self.data.tokens[torch.from_numpy(rows)]


def task_seed(seed: int, index: int) -> int:
    return seed * 1009 + index


class RecallSumValidator:
    """Validation score: the recall sum (R@1 + R@5 + R@10 of both directions, = 6 x AR) of one language, or its
    mean over several (the joint run)."""

    def __init__(self, retrieval: RetrievalValidator, lang: str | list[str]):
        self.retrieval = retrieval
        self.languages = [lang] if isinstance(lang, str) else list(lang)

    def __call__(self) -> dict[str, float]:
        scores = self.retrieval()
        averages = {f"AR_{lang}": scores.get(f"AR_{lang}", float("nan")) for lang in self.languages}
        return {"score": 6 * float(np.mean(list(averages.values()))), **averages}


# ----------------------------------------------------------------------------------------------------------------
# Vocabularies
# ----------------------------------------------------------------------------------------------------------------


def task_vocabulary(
    config: ContinualTrainConfig, index: int, order: list[str], parent: Vocabulary, captions: pa.Table, build_dir: Path
) -> Vocabulary:
    """V_t for task ``index``: prebuilt (``vocab_dir/<lang>``), already built by an interrupted run, or built; with
    the oracle vocabulary, the one vocabulary of every task's text seen from task ``index``."""
    if config.uses_oracle_vocab:
        return oracle_task_vocabulary(config, index, order, captions, build_dir)
    lang = order[index]
    if config.vocab_dir is not None:
        path = Path(config.vocab_dir) / lang
        if not artifacts.is_artifact(path):
            raise ArtifactError(
                f"--vocab-dir has no vocab artifact for task {index} ({lang}); expected one at "
                f"{path} (mltk build-vocab --lang {lang} --parent <previous task's vocab>)",
                path,
            )
        vocabulary = load_vocabulary(path)
        if vocabulary.languages != order[: index + 1]:
            raise ArtifactError(
                f"vocabulary was built for the task chain {','.join(vocabulary.languages)}, not "
                f"{','.join(order[: index + 1])}",
                path,
            )
        return vocabulary
    path = build_dir / f"{index:02d}-{lang}"
    if artifacts.is_artifact(path):
        return load_vocabulary(path)
    texts = select_captions(captions, lang, config.split, config.captions)
    protected = select_captions(captions, config.protect_lang, None, config.captions) if config.protect_lang else []
    vocabulary = train_vocabulary(
        texts, lang, parent, config.vocab_size, config.vocab_min_frequency, protected, config.wordpiece_growth
    )
    write_vocabulary(
        vocabulary,
        path,
        config={
            "lang": lang,
            "size": config.vocab_size,
            "split": config.split,
            "min_frequency": config.vocab_min_frequency,
            "protect_lang": config.protect_lang,
            "stage": "train-continual",
            "wordpiece_growth": config.wordpiece_growth,
        },
        inputs=[config.captions],
    )
    return load_vocabulary(path)


def oracle_task_vocabulary(
    config: ContinualTrainConfig, index: int, order: list[str], captions: pa.Table, build_dir: Path
) -> Vocabulary:
    """The oracle vocabulary (CLL-CLIP's Table 3 and its joint bound): one vocabulary of ``vocab_size`` tokens
    trained on the text of every task up front, built once (``build_dir/oracle``). Task ``index`` sees it with
    its own TEIR counts: the tokens of its text (``order[index]``; every language in a joint run) and c_j over
    the earlier tasks' texts, CLIP counting as one. The table grows to the whole vocabulary at the first task."""
    oracle_path = build_dir / "oracle"
    if not artifacts.is_artifact(oracle_path):
        texts = [t for lang in order for t in select_captions(captions, lang, config.split, config.captions)]
        oracle = train_vocabulary(texts, "+".join(order), None, config.vocab_size, config.vocab_min_frequency)
        write_vocabulary(
            oracle,
            oracle_path,
            config={
                "lang": "oracle",
                "languages": order,
                "size": config.vocab_size,
                "split": config.split,
                "stage": "train-continual",
            },
            inputs=[config.captions],
        )
    oracle = load_vocabulary(oracle_path)
    name = "joint" if config.joint else order[index]
    path = build_dir / f"{index:02d}-{name}"
    if artifacts.is_artifact(path):
        return load_vocabulary(path)
    tokenizer = oracle.tokenizer
    task_languages = order if config.joint else [order[index]]
    texts_of = {lang: select_captions(captions, lang, config.split, config.captions) for lang in order}
    prior = np.zeros(tokenizer.vocab_size, np.int64)
    prior[: oracle.parent_size] = 1  # CLIP's vocabulary counts as one earlier task
    for lang in order[: 0 if config.joint else index]:
        prior += token_frequencies(tokenizer, texts_of[lang]) > 0
    freq = sum(token_frequencies(tokenizer, texts_of[lang]) for lang in task_languages)
    sizes = oracle.sizes if index == 0 else dataclasses.replace(oracle.sizes, old=tokenizer.vocab_size)
    tasks = [{"lang": lang, "captions": len(texts_of[lang]), "oracle": True} for lang in order[: index + 1]]
    vocabulary = Vocabulary(tokenizer, prior, freq, tasks, sizes)
    write_vocabulary(
        vocabulary,
        path,
        config={"lang": name, "oracle": str(oracle_path), "stage": "train-continual"},
        inputs=[config.captions],
    )
    return load_vocabulary(path)


def teir_lambdas(
    vocabulary: Vocabulary, token_sets: str = "occurrence", memory_ids: np.ndarray | None = None
) -> torch.Tensor:
    """TEIR's lambda [V] for the task of ``vocabulary`` (``mltk.cll_clip.teir.token_lambdas``) over its token set
    (``Vocabulary.token_set``: occurrence in the task's text, or membership of its new vocabulary), together with
    ``memory_ids``, the tokens of the captions a rehearsal method replays during the task (CLFM's
    ``prepare_token_mapping`` maps the task's and the memory's tokens alike; c_j, the earlier tasks' count, is
    unchanged, so a token only the memory uses gets 1 / (1 + c_j) > 0 instead of staying frozen)."""
    ids, counts = vocabulary.token_set(token_sets)
    if memory_ids is not None:
        ids = np.union1d(ids, memory_ids)
    # the special tokens (CLIP's start and end; BERT's [CLS], [SEP], [PAD], [UNK], [MASK]) stay frozen
    return token_lambdas(ids, counts, special_ids=vocabulary.tokenizer.all_special_ids)


def replayed_token_ids(encoder: ContinualTextEncoder, tokens: torch.Tensor | None) -> np.ndarray | None:
    """The distinct token ids of replayed caption rows ``tokens`` [n, L], each row up to its end token (the
    padding after it is not text); None without a memory."""
    if tokens is None:
        return None
    lengths = encoder.tower.lengths(tokens)  # [n]
    kept = torch.arange(tokens.shape[1]) < lengths[:, None]  # [n, L]
    return torch.unique(tokens[kept]).numpy().astype(np.int64)


def vocabulary_summary(vocabulary: Vocabulary, lambdas: torch.Tensor | None) -> dict[str, Any]:
    task = vocabulary.tasks[-1] if vocabulary.tasks else {}
    summary = {
        "size": vocabulary.vocab_size,
        "parent_size": vocabulary.parent_size,
        "new_tokens": vocabulary.vocab_size - vocabulary.parent_size,
        "new_tokens_produced": task.get("new_tokens_produced"),
        "tokens_in_task_text": int(np.count_nonzero(vocabulary.task_token_freq)),
    }
    if lambdas is not None:
        active = lambdas[lambdas > 0]
        summary["lambda"] = {
            "active_rows": int(active.numel()),
            "mean_active": float(active.mean()) if active.numel() else None,
            "ones": int((lambdas == 1).sum()),
        }
    return summary
