"""One task of train-continual: the ``TrainTask`` of one language, and the vocabulary it grows the table to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from mltk import artifacts
from mltk.continual.model import ContinualTextEncoder
from mltk.errors import ArtifactError
from mltk.losses import cll_clip_loss
from mltk.runtime import Runtime
from mltk.teir import TeirAdamW, token_lambdas
from mltk.train.batches import LanguageBatches, draw_captions
from mltk.train.continual.config import ContinualTrainConfig
from mltk.train.continual.data import Corpus, TaskData
from mltk.train.distributed import gather_with_grad, shard
from mltk.train.loop import LoopConfig
from mltk.train.validate import RetrievalValidator
from mltk.vocab import Vocabulary, load_vocabulary, select_captions, train_vocabulary, write_vocabulary


# ----------------------------------------------------------------------------------------------------------------
# One task
# ----------------------------------------------------------------------------------------------------------------


class CllClipTask:
    """The TrainTask of one language: CLL-CLIP loss on its pairs, plus the method's terms; validation is the
    recall sum of the language on the validation split."""

    def __init__(self, encoder: ContinualTextEncoder, corpus: Corpus, data: TaskData, index: int, lang: str,
                 config: ContinualTrainConfig, runtime: Runtime, validator, lambdas: torch.Tensor | None):
        self.encoder, self.method, self.corpus, self.data = encoder, encoder.method, corpus, data
        self.index, self.lang, self.config, self.runtime = index, lang, config, runtime
        self.validator, self.lambdas = validator, lambdas
        self.batch_size = config.batch_size
        self.steps_per_epoch = max(len(data.image_rows) // config.batch_size, 1)  # an epoch: each image once
        steps = config.steps or config.epochs * self.steps_per_epoch
        self.steps = steps
        self.seed = task_seed(config.loop.seed, index)
        self.batches = LanguageBatches({lang: len(data.image_rows)}, config.batch_size, steps, self.seed)

    # --- TrainTask ---------------------------------------------------------------------------------------------

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return {"table": self.encoder.table, "logit_scale": self.encoder.logit_scale.log_scale,
                **{f"method.{k}": p for k, p in self.method.trainable().items()}}

    def make_optimizer(self, params: dict[str, torch.nn.Parameter], loop: LoopConfig) -> torch.optim.Optimizer:
        """AdamW (TeirAdamW under TEIR's regularisation): decay on the table and the method's matrices, the
        method's tensors at ``method_lr``."""
        config = self.config
        own = [p for name, p in params.items() if name.startswith("method.")]
        groups = [{"params": [params["table"]], "weight_decay": loop.weight_decay, "lr": loop.lr},
                  {"params": [params["logit_scale"]], "weight_decay": 0.0, "lr": loop.lr},
                  {"params": [p for p in own if p.ndim >= 2], "weight_decay": loop.weight_decay,
                   "lr": config.method_lr},
                  {"params": [p for p in own if p.ndim < 2], "weight_decay": 0.0, "lr": config.method_lr}]
        groups = [g for g in groups if g["params"]]
        if self.lambdas is None:
            return torch.optim.AdamW(groups, lr=loop.lr, betas=loop.betas, eps=loop.eps)
        return TeirAdamW(groups, lr=loop.lr, betas=loop.betas, eps=loop.eps, weight_decay=loop.weight_decay,
                         row_scales={params["table"]: self.lambdas.to(params["table"].device)})

    def loss(self, step: int) -> torch.Tensor:
        loss = self.data_loss(step)
        for extra in (self.method.pop_auxiliary_loss(), self.method.extra_loss(self, step)):
            if extra is not None:
                loss = loss + extra
        return loss

    def validate(self) -> dict[str, float]:
        return self.validator()

    # --- what methods use --------------------------------------------------------------------------------------

    def pair_loss(self, image: torch.Tensor, text: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        """CLL-CLIP's loss of one batch (image [b, D] normalised, text and teacher [b, D] raw)."""
        return cll_clip_loss(gather_with_grad(image), gather_with_grad(text.float()), gather_with_grad(teacher),
                             self.encoder.logit_scale(), self.config.gamma1, self.config.gamma2)

    def data_loss(self, step: int) -> torch.Tensor:
        """The CLL-CLIP loss of the batch of ``step`` (distinct images, one caption each, drawn from the seed)."""
        _, images = self.batches.batch(step)
        data = self.data
        captions = draw_captions(self.seed, step, 0xC11, images, data.offsets, data.counts)
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        text = self.encoder.encode_tokens(data.tokens[captions].to(device), self.lang)
        image = self.corpus.image_vectors[torch.from_numpy(data.image_rows[images])].to(device)
        return self.pair_loss(image, text, data.teacher[captions].to(device))

    def sample_tokens(self, count: int) -> torch.Tensor:
        """Tokens [<= count, L] of the task's training captions (a fixed, spread-out selection)."""
        rows = np.linspace(0, len(self.data.tokens) - 1, min(count, len(self.data.tokens))).astype(np.int64)
        return self.data.tokens[torch.from_numpy(rows)]


def task_seed(seed: int, index: int) -> int:
    return seed * 1009 + index


class RecallSumValidator:
    """Validation score: the recall sum (R@1 + R@5 + R@10 of both directions, = 6 x AR) of one language."""

    def __init__(self, retrieval: RetrievalValidator, lang: str):
        self.retrieval, self.lang = retrieval, lang

    def __call__(self) -> dict[str, float]:
        scores = self.retrieval()
        average = scores.get(f"AR_{self.lang}", float("nan"))
        return {"score": 6 * average, f"AR_{self.lang}": average}


# ----------------------------------------------------------------------------------------------------------------
# Vocabularies
# ----------------------------------------------------------------------------------------------------------------


def task_vocabulary(config: ContinualTrainConfig, index: int, order: list[str], parent: Vocabulary,
                    captions: pa.Table, build_dir: Path) -> Vocabulary:
    """V_t for task ``index``: prebuilt (``vocab_dir/<lang>``), already built by an interrupted run, or built."""
    lang = order[index]
    if config.vocab_dir is not None:
        path = Path(config.vocab_dir) / lang
        if not artifacts.is_artifact(path):
            raise ArtifactError(f"--vocab-dir has no vocab artifact for task {index} ({lang}); expected one at "
                                f"{path} (mltk build-vocab --lang {lang} --parent <previous task's vocab>)", path)
        vocabulary = load_vocabulary(path)
        if vocabulary.languages != order[:index + 1]:
            raise ArtifactError(f"vocabulary was built for the task chain {','.join(vocabulary.languages)}, not "
                                f"{','.join(order[:index + 1])}", path)
        return vocabulary
    path = build_dir / f"{index:02d}-{lang}"
    if artifacts.is_artifact(path):
        return load_vocabulary(path)
    texts = select_captions(captions, lang, config.split, config.captions)
    protected = select_captions(captions, config.protect_lang, None, config.captions) if config.protect_lang else []
    vocabulary = train_vocabulary(texts, lang, parent, config.vocab_size, config.vocab_min_frequency, protected)
    write_vocabulary(vocabulary, path, config={"lang": lang, "size": config.vocab_size, "split": config.split,
                                               "min_frequency": config.vocab_min_frequency,
                                               "protect_lang": config.protect_lang, "stage": "train-continual"},
                     inputs=[config.captions])
    return load_vocabulary(path)


def teir_lambdas(vocabulary: Vocabulary) -> torch.Tensor:
    """TEIR's lambda [V] for the task of ``vocabulary`` (``mltk.teir.token_lambdas``)."""
    tokenizer = vocabulary.tokenizer
    return token_lambdas(vocabulary.present_token_ids(), vocabulary.prior_task_counts,
                         special_ids=[tokenizer.sot_token_id, tokenizer.eot_token_id])


def vocabulary_summary(vocabulary: Vocabulary, lambdas: torch.Tensor | None) -> dict[str, Any]:
    task = vocabulary.tasks[-1] if vocabulary.tasks else {}
    summary = {"size": vocabulary.vocab_size, "parent_size": vocabulary.parent_size,
               "new_tokens": vocabulary.vocab_size - vocabulary.parent_size,
               "new_tokens_produced": task.get("new_tokens_produced"),
               "tokens_in_task_text": int(np.count_nonzero(vocabulary.task_token_freq))}
    if lambdas is not None:
        active = lambdas[lambdas > 0]
        summary["lambda"] = {"active_rows": int(active.numel()), "mean_active": float(active.mean()) if
                             active.numel() else None, "ones": int((lambdas == 1).sum())}
    return summary
