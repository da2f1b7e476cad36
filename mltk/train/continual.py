"""``mltk train-continual``: CLL-CLIP, learning languages one after another (with TEIR and baselines).

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning" (AAAI
2024); ``../shared/design.md`` section 3. The text tower of a frozen CLIP reads an expandable token-embedding table
(``mltk.continual.model``); for each task t (one language, English first by default):

1. **Vocabulary.** V_t = V_{t-1} ∪ V̂_t, V̂_t a BPE vocabulary trained on the task's training captions
   (``mltk.vocab``; ``vocab_size`` tokens, 10K in the paper), or taken prebuilt from ``vocab_dir/<lang>``.
2. **Growth.** The table gains a row per new token: N(mu, sigma) with the scalar mean and std of the previous
   table under TEIR's initialisation, N(0, 0.02) for plain CLL-CLIP (``mltk.teir.init_new_rows``).
3. **Training** of the table, the temperature (from 0.07) and the method's own tensors with

       loss = gamma1 * InfoNCE(image, text) + gamma2 * MSE(English teacher, text)      (0.01 and 1)

   (``mltk.losses.cll_clip_loss``), where the teacher is the frozen CLIP's unnormalised English embedding of the
   caption with the same ``caption_id`` (computed once and cached, ``mltk.train.teacher``); captions without an
   English counterpart are left out. AdamW lr 5e-5, weight decay 0.05, 10% linear warm-up then constant, batch
   128 of distinct images (one of each image's captions drawn per step), 3 epochs; an epoch is one pass over the
   task's images. The epoch with the best validation recall sum (R@1+R@5+R@10, both directions) of the task's
   language is kept. Under TEIR's regularisation the optimizer is ``TeirAdamW``: lambda_j = 1 / (1 + c_j) for the
   tokens of the task's text, 0 (frozen, no decay) for the others and the special tokens, applied to the clipped
   gradient before the moment estimates and to the decoupled decay. A method's own tensors (adapters, LoRA,
   prompts) train at ``method_lr``, sized for them rather than for the table.
4. **Evaluation** of every language seen so far on the test split: a_{j,i} (``metric``, t2i R@1 by default),
   AR_j and F_j (``mltk.metrics.continual_metrics``).

The English task. Its teacher is the frozen CLIP on the very same caption, so its MSE term starts at zero and
anchors the English rows where CLIP had them while the (0.01-weighted) contrastive term adapts them to the image
embeddings; its vocabulary is grown like every other task's (CLIP already holds most English words, so few new
tokens occur). English is then the first task that later languages can make forget.

Output: a checkpoint artifact (format ``cll``, readable by ``mltk evaluate --model`` and ``mltk index``) holding
the final table, temperature and method tensors (``model.safetensors``), ``config.json`` naming the base model,
the final vocabulary (``vocab/``) and the method, plus ``continual.json`` (tasks, metric, the matrix, AR, F,
per-task test metrics, validation history and vocabulary sizes), ``continual_matrix.png``,
``continual_curve.png`` and the vocabularies built on the way (``vocabs/NN-lang``). Methods that route by
language (``mla``) say ``needs_task_identity: true`` in config.json, continual.json and the manifest.

Resume. The artifact is built in its partial directory: each finished task is a complete ``cll`` checkpoint
``tasks/NN-lang`` (with the method's training state: Fisher, replay memory), and the running task keeps the
training loop's exact-resume state in ``train/NN-lang``. Rerunning the same command skips finished tasks and
continues the running one where it stopped; the result equals an uninterrupted run on the CPU. The task
checkpoints are removed when the run completes unless ``keep_task_checkpoints``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from mltk import artifacts, metrics as M, report, schema
from mltk.continual import METHODS, MethodOptions, make_method
from mltk.continual.model import ContinualTextEncoder
from mltk.encoders import ClipTextEncoder, encode_captions
from mltk.errors import ArtifactError, ConfigError
from mltk.evaluate import evaluate_retrieval
from mltk.losses import cll_clip_loss
from mltk.models.clip import load_clip
from mltk.runtime import Runtime, log, resolve_runtime, seed_everything
from mltk.teir import TeirAdamW, init_new_rows, token_lambdas
from mltk.train.batches import LanguageBatches
from mltk.train.distributed import gather_with_grad, init_from_env, shard
from mltk.train.loop import LoopConfig, fit
from mltk.train.teacher import teacher_embeddings
from mltk.train.validate import RetrievalValidator
from mltk.vocab import Vocabulary, clip_vocabulary, load_vocabulary, select_captions, train_vocabulary, \
    vocabulary_size_problem, write_vocabulary

NATIVE_LANG = "en"
CONTINUAL_FILE = "continual.json"
MATRIX_PNG, CURVE_PNG = "continual_matrix.png", "continual_curve.png"
TRAINING_STATE = "training_state.safetensors"
TRAINING_INFO = "training_state.json"
TASK_FILE = "task.json"
RUN_FILE = "run.json"
# Options that do not change what is trained: a partial run may be continued with other values.
NON_TRAJECTORY_FIELDS = ("out", "device", "precision", "cache_dir", "keep_task_checkpoints", "val_images")

METRIC_PATTERN = re.compile(r"AR|(i2t|t2i)\.R@(1|5|10)")

OnStep = Callable[[int, int, float], None]  # (task index, step, loss)


@dataclass(frozen=True)
class ContinualConfig:
    """Options of ``mltk train-continual`` (built by the CLI, received by ``train_continual``)."""

    images: Path  # image embeddings (encode-images) of the images the captions describe
    captions: Path
    out: Path
    model: str = "mltk-tiny"  # the frozen base CLIP (open_clip name with ``pretrained``, or a checkpoint)
    pretrained: str | None = None
    languages: tuple[str, ...] = ()  # task order; default English first, then the captions' other languages
    method: str = "cll-clip"
    teir_init: bool = False  # TEIR initialisation of new rows (else N(0, 0.02))
    teir_reg: bool = False  # TEIR regularisation (per-token lambda in AdamW)
    vocab_dir: Path | None = None  # prebuilt vocab artifacts at vocab_dir/<lang>; built on the fly otherwise
    vocab_size: int = 10000
    vocab_min_frequency: int = 2
    protect_lang: str | None = None  # keep this language's parent ids when vocabularies are built (off: paper)
    epochs: int = 3
    steps: int | None = None  # updates per task (default: epochs x steps per epoch)
    eval_every: int | None = None  # validation interval in steps (default: once per epoch)
    batch_size: int = 128
    lr: float = 5e-5
    method_lr: float = 1e-3
    warmup_fraction: float = 0.1
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    gamma1: float = 0.01
    gamma2: float = 1.0
    temperature: float = 0.07
    metric: str = "t2i.R@1"  # a_{j,i}: AR or <i2t|t2i>.R@<K>
    split: str = "train"
    val_split: str = "val"
    test_split: str = "test"
    val_images: int | None = 1000
    options: MethodOptions = MethodOptions()
    keep_task_checkpoints: bool = False
    save_every: int = 50
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    cache_dir: Path | None = None

    @property
    def variant(self) -> str:
        """plain, init-only, reg-only or teir."""
        return {(False, False): "plain", (True, False): "init-only", (False, True): "reg-only",
                (True, True): "teir"}[(self.teir_init, self.teir_reg)]

    def check(self) -> None:
        problems = []
        if self.method not in METHODS:
            problems.append(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.epochs < 1 or (self.steps is not None and self.steps < 1) or self.batch_size < 1:
            problems.append(f"epochs, steps and batch size must be positive (got {self.epochs}, {self.steps}, "
                            f"{self.batch_size})")
        if problem := vocabulary_size_problem(self.vocab_size, "--vocab-size"):
            problems.append(problem)
        if len(set(self.languages)) != len(self.languages):
            problems.append(f"a language appears twice in the task order {','.join(self.languages)}")
        if not METRIC_PATTERN.fullmatch(self.metric):
            problems.append(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {self.metric!r}")
        if problems:
            raise ConfigError("; ".join(problems))


def metric_value(result: dict, lang: str, metric: str) -> float | None:
    """``metric`` (``AR`` or ``<i2t|t2i>.R@K``) of ``result["per_language"][lang]``; None when not evaluated."""
    value: Any = result.get("per_language", {}).get(lang)
    if value is None:
        return None
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ConfigError(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
        value = value[part]
    if isinstance(value, dict):
        raise ConfigError(f"--metric must be AR or <i2t|t2i>.R@<1|5|10>, got {metric!r}")
    return float(value)


def final_summary(checkpoint: Path) -> dict[str, Any]:
    """The task order and the final AR and F of a train-continual checkpoint (``continual.json``)."""
    summary = json.loads((Path(checkpoint) / CONTINUAL_FILE).read_text(encoding="utf-8"))["continual"]
    return {"tasks": summary["tasks"], "AR": summary["AR"][-1], "F": summary["F"][-1]}


def task_order(config: ContinualConfig, captions: pa.Table) -> list[str]:
    """The task languages: ``config.languages``, or English first and the others in order of appearance."""
    available = list(dict.fromkeys(captions.column("lang").to_pylist()))
    if config.languages:
        missing = [lang for lang in config.languages if lang not in available]
        if missing:
            raise ConfigError(f"no captions in language(s) {', '.join(missing)} (has {', '.join(available)})",
                              config.captions)
        return list(config.languages)
    return ([NATIVE_LANG] if NATIVE_LANG in available else []) + [lang for lang in available if lang != NATIVE_LANG]


# ----------------------------------------------------------------------------------------------------------------
# Data: every training pair of every task language, with its English teacher
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Examples:
    tokens: torch.Tensor  # [n, L] with the current vocabulary
    images: torch.Tensor  # [n, D] L2-normalised image embeddings
    teacher: torch.Tensor  # [n, D] unnormalised English teacher embeddings


class Corpus:
    """The training pairs (caption, image, English teacher) of each task language; an example is addressed by
    the key (language index in the task order, row within that language)."""

    def __init__(self, captions: pa.Table, split: str, languages: list[str], image_row: dict[str, int],
                 image_vectors: torch.Tensor, teacher_of: Callable[[list[str], list[str]], np.ndarray],
                 source: Path):
        rows = captions.filter(pc.equal(captions.column("split"), split))
        english = rows.filter(pc.equal(rows.column("lang"), NATIVE_LANG))
        english_caption = dict(zip(english.column("caption_id").to_pylist(), english.column("caption").to_pylist()))
        self.languages = languages
        self.image_vectors = image_vectors
        self.texts: dict[str, list[str]] = {}
        self.image_rows: dict[str, np.ndarray] = {}
        self.caption_ids: dict[str, list[str]] = {}
        for lang in languages:
            part = rows.filter(pc.equal(rows.column("lang"), lang))
            kept = [(cid, text, image_row[image]) for cid, text, image in zip(
                part.column("caption_id").to_pylist(), part.column("caption").to_pylist(),
                part.column("image_id").to_pylist()) if image in image_row and cid in english_caption]
            if not kept:
                raise ConfigError(f"no {lang} captions of split {split!r} have an image in the image embeddings "
                                  f"and an English caption with the same caption_id (the teacher)", source)
            self.caption_ids[lang] = [cid for cid, _, _ in kept]
            self.texts[lang] = [text for _, text, _ in kept]
            self.image_rows[lang] = np.array([row for _, _, row in kept], dtype=np.int64)
        needed = sorted({cid for ids in self.caption_ids.values() for cid in ids})
        self.teacher = torch.from_numpy(np.array(teacher_of(needed, [english_caption[c] for c in needed]),
                                                   dtype=np.float32))
        teacher_row = {cid: i for i, cid in enumerate(needed)}
        self.teacher_rows = {lang: np.array([teacher_row[c] for c in ids], dtype=np.int64)
                             for lang, ids in self.caption_ids.items()}

    def size(self, lang: str) -> int:
        return len(self.texts[lang])

    def keys(self, lang: str) -> np.ndarray:
        """[n, 2]: (language index, row) of every training pair of ``lang``."""
        rows = np.arange(self.size(lang), dtype=np.int64)
        return np.stack([np.full_like(rows, self.languages.index(lang)), rows], axis=1)

    def examples(self, keys: np.ndarray, encoder: ContinualTextEncoder) -> Examples:
        """The examples of ``keys`` [n, 2], tokenised with the encoder's current vocabulary."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 2)
        texts = [self.texts[self.languages[lang]][row] for lang, row in keys]
        image_rows = np.array([self.image_rows[self.languages[lang]][row] for lang, row in keys], dtype=np.int64)
        teacher_rows = np.array([self.teacher_rows[self.languages[lang]][row] for lang, row in keys], dtype=np.int64)
        return Examples(encoder.tokenize(texts), self.image_vectors[torch.from_numpy(image_rows)],
                        self.teacher[torch.from_numpy(teacher_rows)])


@dataclass
class TaskData:
    """One language's training pairs grouped by image (batches hold distinct images)."""

    image_rows: np.ndarray  # [n_images] rows of the image embeddings
    offsets: np.ndarray  # [n_images] first caption of each image
    counts: np.ndarray  # [n_images] captions of each image
    tokens: torch.Tensor  # [N, L]
    teacher: torch.Tensor  # [N, D]


def task_data(corpus: Corpus, lang: str, encoder: ContinualTextEncoder) -> TaskData:
    order = np.argsort(corpus.image_rows[lang], kind="stable")
    examples = corpus.examples(corpus.keys(lang)[order], encoder)
    image_rows, counts = np.unique(corpus.image_rows[lang][order], return_counts=True)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return TaskData(image_rows, offsets, counts, examples.tokens, examples.teacher)


# ----------------------------------------------------------------------------------------------------------------
# One task
# ----------------------------------------------------------------------------------------------------------------


class CllClipTask:
    """The TrainTask of one language: CLL-CLIP loss on its pairs, plus the method's terms; validation is the
    recall sum of the language on the validation split."""

    def __init__(self, encoder: ContinualTextEncoder, corpus: Corpus, data: TaskData, index: int, lang: str,
                 config: ContinualConfig, runtime: Runtime, validator, lambdas: torch.Tensor | None):
        self.encoder, self.method, self.corpus, self.data = encoder, encoder.method, corpus, data
        self.index, self.lang, self.config, self.runtime = index, lang, config, runtime
        self.validator, self.lambdas = validator, lambdas
        self.batch_size = config.batch_size
        self.steps_per_epoch = max(len(data.image_rows) // config.batch_size, 1)  # an epoch: each image once
        steps = config.steps or config.epochs * self.steps_per_epoch
        self.steps = steps
        self.seed = task_seed(config.seed, index)
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
        draw = np.random.default_rng([self.seed, step, 0xC11]).random(len(images))
        captions = data.offsets[images] + (draw * data.counts[images]).astype(np.int64)
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


def task_vocabulary(config: ContinualConfig, index: int, order: list[str], parent: Vocabulary,
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


# ----------------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Split:
    captions: pa.Table
    image_table: pa.Table
    image_vectors: np.ndarray


def _split_data(captions: pa.Table, image_table: pa.Table, image_vectors: np.ndarray, split: str,
                languages: list[str], source: Path) -> _Split:
    rows = captions.filter(pc.and_(pc.equal(captions.column("split"), split),
                                   pc.is_in(captions.column("lang"), pa.array(languages, pa.string()))))
    wanted = set(rows.column("image_id").to_pylist())
    keep = np.array([i in wanted for i in image_table.column("id").to_pylist()], dtype=bool)
    if not keep.any():
        raise ConfigError(f"no image of the {split!r} captions is in the image embeddings", source)
    return _Split(rows, image_table.filter(pa.array(keep)), image_vectors[keep])


def evaluate_languages(encoder: ContinualTextEncoder, test: _Split, languages: list[str],
                       runtime: Runtime) -> dict:
    """Retrieval metrics of ``languages`` on the test split (``mltk.evaluate.evaluate_retrieval``)."""
    was_training = encoder.training
    encoder.eval()
    table, vectors = encode_captions(encoder, test.captions, runtime, languages=languages)
    encoder.train(was_training)
    return evaluate_retrieval(test.image_table, test.image_vectors, table, vectors)


def _trajectory(config: ContinualConfig) -> dict:
    raw = artifacts._jsonable(dataclasses.asdict(config))
    return json.loads(json.dumps({k: v for k, v in raw.items() if k not in NON_TRAJECTORY_FIELDS}))


def _check_same_run(directory: Path, config: ContinualConfig) -> None:
    """A partial run may only be continued with the settings it was started with."""
    record = directory / RUN_FILE
    current = _trajectory(config)
    if record.is_file():
        saved = json.loads(record.read_text(encoding="utf-8"))
        changed = [f"{k}={saved.get(k)!r} (now {current.get(k)!r})" for k in sorted(set(saved) | set(current))
                   if saved.get(k) != current.get(k)]
        if changed:
            raise ConfigError(f"the interrupted run in {directory} was started with other settings: "
                              f"{'; '.join(changed)}; rerun with the same settings, or pass --overwrite to start over")
    else:
        artifacts.write_json(record, current)


def _write_task_checkpoint(path: Path, encoder: ContinualTextEncoder, vocabulary: Vocabulary, record: dict,
                           config: ContinualConfig) -> Path:
    with artifacts.ArtifactWriter(path, "checkpoint", stage="train-continual", config=config,
                                  inputs=[config.captions, config.images]) as writer:
        artifacts.save_tensors(writer.dir / schema.CHECKPOINT_WEIGHTS, encoder.state_tensors())
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, encoder.checkpoint_config())
        shutil.copytree(vocabulary.path, writer.dir / encoder.checkpoint_config()["vocab"])
        tensors, info = encoder.method.training_state()
        artifacts.save_tensors(writer.dir / TRAINING_STATE, tensors)
        artifacts.write_json(writer.dir / TRAINING_INFO, info)
        artifacts.write_json(writer.dir / TASK_FILE, record)
        writer.manifest.update(task=record["task"], lang=record["lang"], languages=encoder.trained_languages,
                               needs_task_identity=encoder.method.needs_task_identity)
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
    encoder.method.load_training_state(state, json.loads((path / TRAINING_INFO).read_text(encoding="utf-8")))
    return vocabulary, json.loads((path / TASK_FILE).read_text(encoding="utf-8"))


def train_continual(config: ContinualConfig, on_step: OnStep | None = None) -> Path:
    """``mltk train-continual``: train the task sequence and write the checkpoint artifact; returns its path."""
    config.check()
    runtime = init_from_env(resolve_runtime(config.device, config.precision))
    seed_everything(config.seed)
    captions = artifacts.load_captions(config.captions)
    order = task_order(config, captions)
    image_table, image_vectors = artifacts.load_embeddings(config.images)
    image_vectors = np.asarray(image_vectors, dtype=np.float32)
    image_row = {image_id: i for i, image_id in enumerate(image_table.column("id").to_pylist())}
    clip = load_clip(config.model, config.pretrained, device=runtime.device)
    teacher_encoder = ClipTextEncoder(clip)
    corpus = Corpus(captions, config.split, order, image_row, torch.from_numpy(image_vectors),
                    lambda ids, texts: teacher_embeddings(teacher_encoder, clip.spec, ids, texts, runtime,
                                                          config.cache_dir), config.captions)
    val = _split_data(captions, image_table, image_vectors, config.val_split, order, config.captions)
    test = _split_data(captions, image_table, image_vectors, config.test_split, order, config.captions)
    log(f"train-continual: {config.method} ({config.variant}) over {len(order)} tasks: {', '.join(order)}; "
        f"training pairs " + ", ".join(f"{lang} {corpus.size(lang)}" for lang in order))

    root = clip_vocabulary()
    if clip.model.token_embedding.weight.shape[0] != root.vocab_size:
        raise ConfigError(f"the base model's token table has {clip.model.token_embedding.weight.shape[0]} rows, "
                          f"CLIP's vocabulary {root.vocab_size}: CLL-CLIP grows CLIP's own vocabulary")
    method = make_method(config.method, config.options, clip, config.seed)
    encoder = ContinualTextEncoder(clip, root.tokenizer, method, init_temperature=config.temperature)
    if encoder.tower.output_dim != image_vectors.shape[1]:
        raise ConfigError(f"image embeddings have dim {image_vectors.shape[1]} but the model's text features have "
                          f"dim {encoder.tower.output_dim}: encode the images with the model's base CLIP", config.images)
    writer = artifacts.ArtifactWriter(config.out, "checkpoint", stage="train-continual", config=config,
                                      inputs=[config.captions, config.images], resume=True)
    if writer.existing is not None:
        return writer.reuse()
    with writer:
        _check_same_run(writer.dir, config)
        records: list[dict] = []
        vocabulary = root
        for index, lang in enumerate(order):
            task_dir = writer.dir / "tasks" / f"{index:02d}-{lang}"
            if artifacts.is_artifact(task_dir):
                vocabulary, record = _restore_task(task_dir, encoder)
                records.append(record)
                log(f"task {index} ({lang}): finished earlier, loaded {task_dir}")
                continue
            vocabulary = task_vocabulary(config, index, order, vocabulary, captions, writer.dir / "vocabs")
            record = _run_task(config, encoder, corpus, vocabulary, index, order, val, test, runtime,
                               writer.dir / "train" / f"{index:02d}-{lang}", on_step)
            record["row"] = [metric_value(record["test"], lang_i, config.metric) for lang_i in order[:index + 1]] + \
                [None] * (len(order) - index - 1)
            records.append(record)
            _write_task_checkpoint(task_dir, encoder, vocabulary, record, config)
            shutil.rmtree(writer.dir / "train" / f"{index:02d}-{lang}", ignore_errors=True)
        summary = _finish(writer, config, encoder, vocabulary, order, records)
    log(f"train-continual: final AR {_fmt(summary['AR'][-1])}, F {_fmt(summary['F'][-1])}; wrote {writer.path}")
    return writer.path


def prepare_task(config: ContinualConfig, encoder: ContinualTextEncoder, corpus: Corpus, vocabulary: Vocabulary,
                 index: int, lang: str, val: _Split | None, runtime: Runtime) -> CllClipTask:
    """Grow the table to ``vocabulary`` (TEIR or plain initialisation), and set up task ``index``: its data,
    TEIR's lambdas, validation on ``val`` (none when None), and the method's per-task modules."""
    if vocabulary.parent_size != encoder.vocab_size:
        raise ArtifactError(f"the vocabulary of task {index} ({lang}) grows a vocabulary of {vocabulary.parent_size} "
                            f"tokens, but the table has {encoder.vocab_size} rows (a different chain)",
                            vocabulary.path)
    generator = torch.Generator().manual_seed(task_seed(config.seed, index))
    new_rows = init_new_rows(encoder.table.detach().cpu(), vocabulary.vocab_size - encoder.vocab_size, generator,
                             mode="teir" if config.teir_init else "normal")
    encoder.grow(vocabulary.tokenizer, new_rows)
    lambdas = teir_lambdas(vocabulary) if config.teir_reg else None
    data = task_data(corpus, lang, encoder)
    validator = None if val is None else RecallSumValidator(RetrievalValidator(
        encoder, val.captions, val.image_table, val.image_vectors, [lang], runtime, max_images=config.val_images), lang)
    task = CllClipTask(encoder, corpus, data, index, lang, config, runtime, validator, lambdas)
    encoder.train()
    encoder.method.begin_task(task)
    return task


def loop_config(config: ContinualConfig, task: CllClipTask) -> LoopConfig:
    return LoopConfig(steps=task.steps, lr=config.lr, warmup_fraction=config.warmup_fraction, schedule="constant",
                      weight_decay=config.weight_decay, betas=config.betas, eps=config.eps,
                      grad_clip=config.grad_clip, eval_every=config.eval_every or task.steps_per_epoch,
                      save_every=config.save_every, seed=task.seed)


def _run_task(config: ContinualConfig, encoder: ContinualTextEncoder, corpus: Corpus, vocabulary: Vocabulary,
              index: int, order: list[str], val: _Split, test: _Split, runtime: Runtime, state_dir: Path,
              on_step: OnStep | None) -> dict:
    lang = order[index]
    task = prepare_task(config, encoder, corpus, vocabulary, index, lang, val, runtime)
    data, steps, steps_per_epoch, lambdas = task.data, task.steps, task.steps_per_epoch, task.lambdas
    loop = loop_config(config, task)
    log(f"task {index} ({lang}): {len(data.image_rows)} images, {len(data.tokens)} captions, {steps} steps "
        f"({steps_per_epoch} per epoch); vocabulary {vocabulary.parent_size} -> {vocabulary.vocab_size}")
    result = fit(task, loop, runtime, state_dir, description=f"task {index} {lang}",
                 on_step=(lambda step, loss: on_step(index, step, loss)) if on_step else None)
    params = task.parameters_to_train()
    with torch.no_grad():
        for name, value in result.best_state.items():
            params[name].copy_(value)
    encoder.method.end_task(task)
    encoder.trained_languages = order[:index + 1]
    evaluation = evaluate_languages(encoder, test, order[:index + 1], runtime)
    log(f"task {index} ({lang}): best validation recall sum {result.best_score:.2f} at step {result.best_step}; "
        f"test {config.metric} " + ", ".join(f"{k} {_fmt(metric_value(evaluation, k, config.metric))}"
                                             for k in order[:index + 1]))
    return {"task": index, "lang": lang, "steps": steps, "steps_per_epoch": steps_per_epoch,
            "best_step": result.best_step, "best_epoch": result.best_step / steps_per_epoch,
            "best_validation_recall_sum": result.best_score, "temperature": encoder.logit_scale.temperature,
            "vocabulary": vocabulary_summary(vocabulary, lambdas),
            "history": [h for h in result.history if h.get("event") == "validate"],
            "test": {"per_language": evaluation["per_language"], "settings": evaluation["settings"]}}


def _finish(writer: artifacts.ArtifactWriter, config: ContinualConfig, encoder: ContinualTextEncoder,
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
    (writer.dir / MATRIX_PNG).write_bytes(plots.continual_heatmap(summary["matrix"], order, config.metric, title))
    (writer.dir / CURVE_PNG).write_bytes(plots.continual_curves(summary["AR"], summary["F"], order, title))
    shutil.rmtree(writer.dir / "train", ignore_errors=True)
    (writer.dir / RUN_FILE).unlink(missing_ok=True)
    if not config.keep_task_checkpoints:
        shutil.rmtree(writer.dir / "tasks", ignore_errors=True)
    writer.manifest.update(tasks=order, method=method.name, teir=config.variant, metric=config.metric,
                           final_AR=summary["AR"][-1], final_F=summary["F"][-1],
                           needs_task_identity=method.needs_task_identity)
    report.print_metrics({"continual": continual["continual"]})
    return summary


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
