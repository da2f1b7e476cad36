"""Training commands: ``train-nlt`` and ``train-le`` (MLA)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (DeviceOption, JsonOption, LogEveryOption, PrecisionOption, SeedOption,
                              TensorboardOption, emit, resolve_input)
from mltk.train.step_log import step_logging
from mltk.errors import ConfigError
from mltk.train.loop import LoopConfig
from mltk.train.mla import MlaConfig, train_le, train_nlt


def _languages(values: list[str]) -> tuple[str, ...]:
    return tuple(lang.strip() for value in values for lang in value.split(",") if lang.strip())


LangOption = typer.Option([], "--lang", help="Languages to train (default: all non-English ones); repeat or "
                          "comma-separate.")
StepsOption = typer.Option(1000, "--steps", min=1, help="Optimizer steps (one language per step, drawn uniformly).")
BatchOption = typer.Option(128, "--batch-size", min=2, help="Captions per step (paper: 128).")
EvalOption = typer.Option(0, "--eval-every", help="Validate every N steps (0: at the end only); the best "
                          "validation state is kept.")
TrainEmbeddingOption = typer.Option(
    None, "--train-embedding/--freeze-embedding", help="Train the shared non-native embedding (default: yes, "
    "unless languages are added to an --init checkpoint, which keeps the other languages bit-identical).")
CacheOption = typer.Option(None, "--cache-dir", help="Cache of English teacher embeddings (default: $MLTK_CACHE_DIR "
                           "or ~/.cache/mltk).")


def train_nlt_command(
    captions: Optional[str] = typer.Argument(None, help="Captions artifact with translation pairs (shared "
                                             "caption_id between English and each language), or - for stdin."),
    out: Path = typer.Option(..., "--out", help="Checkpoint artifact to write."),
    model: str = typer.Option("mltk-tiny", "--model", help="Frozen text tower: an open_clip name or checkpoint "
                              "(either tower family; hf-hub: names too), or a transformers / sentence-transformers "
                              "folder (text only)."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="Pretrained tag or weights file."),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Non-native tokenizer: a vocab artifact (mltk build-vocab), a transformers name "
        "such as bert-base-multilingual-cased, or 'tower': the tower's own tokenizer with a trainable copy of its "
        "word table (the default on a Hugging Face tower)."),
    train: str = typer.Option("acquirers", "--train", help="acquirers: MLA's acquirers per language; full: a "
                              "student copy of the whole text tower (multilingual knowledge distillation, the "
                              "baseline), same objective, data and steps."),
    embedding_lr: Optional[float] = typer.Option(
        None, "--embedding-lr", help="Peak learning rate of the shared non-native embedding (default: --lr)."),
    init_embeddings: bool = typer.Option(False, "--init-embeddings", help="Initialise the shared embedding from "
                                         "the transformers model's word embeddings (the paper's M-BERT init)."),
    init: Optional[Path] = typer.Option(None, "--init", help="MLA checkpoint to continue from or add languages to."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, to validate by retrieval "
                                          "(otherwise by validation MSE)."),
    lang: List[str] = LangOption,
    steps: int = StepsOption,
    batch_size: int = BatchOption,
    lr: float = typer.Option(1e-4, "--lr", help="Peak learning rate (paper: 1e-4; 10% linear warm-up)."),
    weight_decay: float = typer.Option(0.2, "--weight-decay"),
    grad_clip: float = typer.Option(1.0, "--grad-clip", help="Per-tensor gradient norm clip (0: off)."),
    train_embedding: Optional[bool] = TrainEmbeddingOption,
    eval_every: int = EvalOption,
    cache_dir: Optional[Path] = CacheOption,
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """MLA Native Language Transfer: MSE from each language to the frozen English text embedding (of a CLIP, or of a
    text-only tower such as all-MiniLM-L6-v2); --train full trains a whole student tower instead (the baseline).

    Rerun the same command after an interruption to resume exactly where it stopped.
    """
    config = MlaConfig(captions=resolve_input(captions, what="captions"), out=out, images=images,
                       init=init, model=model, pretrained=pretrained, tokenizer=tokenizer, train=train,
                       embedding_lr=embedding_lr,
                       init_embeddings=init_embeddings, languages=_languages(lang), batch_size=batch_size,
                       train_embedding=train_embedding, cache_dir=cache_dir, device=device, precision=precision,
                       loop=LoopConfig(steps=steps, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip or None,
                                       eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        emit(train_nlt(config), as_json)


def train_le_command(
    images: Optional[str] = typer.Argument(None, help="Image embeddings (encode-images), or -/piped stdin."),
    captions: Path = typer.Option(..., "--captions", help="Captions artifact with image-caption pairs."),
    init: Optional[Path] = typer.Option(None, "--init", help="The NLT checkpoint to start from (the MLA recipe)."),
    out: Path = typer.Option(..., "--out", help="Checkpoint artifact to write."),
    model: str = typer.Option("mltk-tiny", "--model", help="Without --init: frozen base CLIP of fresh acquirers."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="Without --init: pretrained tag or file."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Without --init: non-native tokenizer (LE "
                                            "only, the paper's ablation)."),
    lang: List[str] = LangOption,
    steps: int = StepsOption,
    batch_size: int = BatchOption,
    lr: float = typer.Option(3e-6, "--lr", help="Peak learning rate (paper: 3e-6; 10% linear warm-up)."),
    weight_decay: float = typer.Option(0.2, "--weight-decay"),
    grad_clip: float = typer.Option(1.0, "--grad-clip", help="Per-tensor gradient norm clip (0: off)."),
    temperature: str = typer.Option("0.01", "--temperature", help="Fixed InfoNCE temperature (paper: 0.01, "
                                    "OpenAI ViT-B/32's own), or 'clip': the frozen base CLIP's own learned one."),
    train_embedding: Optional[bool] = TrainEmbeddingOption,
    eval_every: int = EvalOption,
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """MLA Language Exposure: symmetric InfoNCE between frozen image embeddings and each language's captions."""
    config = MlaConfig(captions=captions, out=out, images=resolve_input(images, what="image embeddings"),
                       init=init, model=model, pretrained=pretrained, tokenizer=tokenizer,
                       languages=_languages(lang), batch_size=batch_size, temperature=_temperature(temperature),
                       train_embedding=train_embedding, device=device, precision=precision,
                       loop=LoopConfig(steps=steps, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip or None,
                                       eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        emit(train_le(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("train-nlt")(train_nlt_command)
    app.command("train-le")(train_le_command)


def _temperature(text: str) -> float | None:
    """``--temperature``: a number, or ``clip`` (None: the base CLIP's own, resolved by the library)."""
    if text.strip().lower() == "clip":
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--temperature must be a number or 'clip', got {text!r}") from None
