"""Training commands: ``train-nlt``, ``train-le`` and ``train-nlt-le`` (MLA)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (CacheDirOption, DeviceOption, JsonOption, LogEveryOption, PrecisionOption, SeedOption,
                              TensorboardOption, emit, examples, lang_option, out_option, require, route_input,
                              split_list)
from mltk.core.errors import ConfigError

LangOption = lang_option("Languages to train (default: all non-English ones); repeat or comma-separate.")
StepsOption = typer.Option(1000, "--steps", min=1, help="Optimizer steps (one language per step, drawn uniformly).")
BatchOption = typer.Option(128, "--batch-size", min=2, help="Captions per step (paper: 128).")
EvalOption = typer.Option(0, "--eval-every", help="Validate every N steps (0: at the end only); the best "
                          "validation state is kept.")
TrainEmbeddingOption = typer.Option(
    None, "--train-embedding/--freeze-embedding", help="Train the shared non-native embedding (default: yes, "
    "unless languages are added to an --init checkpoint, which keeps the other languages bit-identical).")
AcquirerOption = typer.Option(
    "mlp", "--acquirer", help="Acquirers of a fresh encoder: mlp (the paper's), linear (the bottleneck without ReLU) "
    "or none (the non-native embedding alone): MLA's ablations. An --init checkpoint keeps its own.")
MseFormOption = typer.Option(
    "mean", "--mse-form", help="NLT's MSE: mean over elements (the authors' code) or sum (over D, the written form).")
NLT_EXAMPLE = examples(
    "mltk train-nlt world/captions --model runs/native -o runs/nlt --steps 200",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-nlt --captions world/captions --model runs/native -o runs/nlt")
NLT_LE_EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-nlt-le --captions world/captions --model runs/native \\",
    "      --tokenizer runs/vocab -o runs/nlt-le")
LE_EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-le --captions world/captions --init runs/nlt -o runs/le")


def train_nlt_command(
    source: Optional[str] = typer.Argument(
        None, metavar="[CAPTIONS]", help="Captions artifact with translation pairs (shared caption_id between "
        "English and each language), or -/piped stdin; an embeddings artifact here (or piped) is taken as "
        "--images."),
    captions: Optional[Path] = typer.Option(None, "--captions", help="The captions, when the positional input is "
                                            "the image embeddings (or nothing)."),
    out: Path = out_option("Checkpoint artifact to write."),
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
    init_embeddings: bool = typer.Option(True, "--init-embeddings/--no-init-embeddings", help="Initialise the "
                                         "shared embedding from the transformers model's word embeddings (the "
                                         "paper's M-BERT init) when --tokenizer is a transformers model."),
    init: Optional[Path] = typer.Option(None, "--init", help="MLA checkpoint to continue from or add languages to."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, to validate by retrieval "
                                          "(otherwise by validation MSE); may also arrive on stdin."),
    lang: List[str] = LangOption,
    steps: int = StepsOption,
    batch_size: int = BatchOption,
    lr: float = typer.Option(1e-4, "--lr", help="Peak learning rate (paper: 1e-4; 10% linear warm-up)."),
    weight_decay: float = typer.Option(0.2, "--weight-decay"),
    grad_clip: float = typer.Option(1.0, "--grad-clip", help="Per-tensor gradient norm clip (0: off)."),
    train_embedding: Optional[bool] = TrainEmbeddingOption,
    eval_every: int = EvalOption,
    acquirer: str = AcquirerOption,
    mse_form: str = MseFormOption,
    cache_dir: Optional[Path] = CacheDirOption,
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """MLA Native Language Transfer: MSE from each language to the frozen English text embedding (of a CLIP, or of a
    text-only tower such as all-MiniLM-L6-v2); --train full trains a whole student tower instead (the baseline).

    Rerun the same command after an interruption to resume exactly where it stopped."""
    from mltk.train.loop import LoopConfig
    from mltk.train.mla import MlaConfig, train_nlt
    from mltk.train.step_log import step_logging

    routed = route_input(source, {"captions": captions, "image-embeddings": images}, default="captions",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = MlaConfig(captions=require(routed, "captions", "--captions"), out=out,
                       images=routed["image-embeddings"], init=init, model=model, pretrained=pretrained,
                       tokenizer=tokenizer, train=train, embedding_lr=embedding_lr,
                       init_embeddings=init_embeddings, languages=split_list(lang), batch_size=batch_size,
                       train_embedding=train_embedding, cache_dir=cache_dir, device=device, precision=precision,
                       acquirer=acquirer, mse_form=mse_form,
                       loop=LoopConfig(steps=steps, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip or None,
                                       eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        emit(train_nlt(config), as_json)


def train_le_command(
    source: Optional[str] = typer.Argument(None, metavar="[IMAGES]", help="Image embeddings (encode-images), or "
                                           "-/piped stdin (a captions artifact there is taken as --captions)."),
    captions: Optional[Path] = typer.Option(None, "--captions", help="Captions artifact with image-caption pairs."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, instead of the positional."),
    init: Optional[Path] = typer.Option(None, "--init", help="The NLT checkpoint to start from (the MLA recipe)."),
    out: Path = out_option("Checkpoint artifact to write."),
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
    acquirer: str = AcquirerOption,
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """MLA Language Exposure: symmetric InfoNCE between frozen image embeddings and each language's captions."""
    from mltk.train.loop import LoopConfig
    from mltk.train.mla import MlaConfig, train_le
    from mltk.train.step_log import step_logging

    routed = route_input(source, {"image-embeddings": images, "captions": captions}, default="image-embeddings",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = MlaConfig(captions=require(routed, "captions", "--captions"), out=out,
                       images=require(routed, "image-embeddings", "--images"),
                       init=init, model=model, pretrained=pretrained, tokenizer=tokenizer,
                       languages=split_list(lang), batch_size=batch_size, temperature=_temperature(temperature),
                       train_embedding=train_embedding, device=device, precision=precision, acquirer=acquirer,
                       loop=LoopConfig(steps=steps, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip or None,
                                       eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        emit(train_le(config), as_json)


def train_nlt_le_command(
    source: Optional[str] = typer.Argument(None, metavar="[IMAGES]", help="Image embeddings (encode-images), or "
                                           "-/piped stdin (a captions artifact there is taken as --captions)."),
    captions: Optional[Path] = typer.Option(None, "--captions", help="Captions artifact with translation pairs "
                                            "(shared caption_id with English) and image-caption pairs."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, instead of the positional."),
    out: Path = out_option("Checkpoint artifact to write."),
    init: Optional[Path] = typer.Option(None, "--init", help="MLA checkpoint to continue from."),
    model: str = typer.Option("mltk-tiny", "--model", help="Without --init: frozen base CLIP."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="Without --init: pretrained tag or file."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Without --init: non-native tokenizer."),
    init_embeddings: bool = typer.Option(True, "--init-embeddings/--no-init-embeddings", help="Initialise the "
                                         "shared embedding from the transformers model's word embeddings (the "
                                         "paper's M-BERT init) when --tokenizer is a transformers model."),
    lang: List[str] = LangOption,
    steps: int = StepsOption,
    batch_size: int = BatchOption,
    lr: float = typer.Option(1e-4, "--lr", help="Peak learning rate (10% linear warm-up)."),
    weight_decay: float = typer.Option(0.2, "--weight-decay"),
    grad_clip: float = typer.Option(1.0, "--grad-clip", help="Per-tensor gradient norm clip (0: off)."),
    temperature: str = typer.Option("0.01", "--temperature", help="Fixed InfoNCE temperature of the LE term, or "
                                    "'clip'."),
    nlt_weight: float = typer.Option(1.0, "--nlt-weight", help="Weight of the NLT (MSE) term."),
    le_weight: float = typer.Option(1.0, "--le-weight", help="Weight of the LE (InfoNCE) term."),
    train_embedding: Optional[bool] = TrainEmbeddingOption,
    eval_every: int = EvalOption,
    acquirer: str = AcquirerOption,
    mse_form: str = MseFormOption,
    cache_dir: Optional[Path] = CacheDirOption,
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """MLA's NLT and LE in one stage (the paper's ablation of its two-stage recipe): each step adds the NLT MSE of a
    translation batch and the LE InfoNCE of an image batch."""
    from mltk.train.loop import LoopConfig
    from mltk.train.mla import MlaConfig, train_nlt_le
    from mltk.train.step_log import step_logging

    routed = route_input(source, {"image-embeddings": images, "captions": captions}, default="image-embeddings",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = MlaConfig(captions=require(routed, "captions", "--captions"), out=out,
                       images=require(routed, "image-embeddings", "--images"),
                       init=init, model=model, pretrained=pretrained, tokenizer=tokenizer,
                       init_embeddings=init_embeddings, languages=split_list(lang), batch_size=batch_size,
                       temperature=_temperature(temperature), train_embedding=train_embedding, cache_dir=cache_dir,
                       device=device, precision=precision, acquirer=acquirer, mse_form=mse_form,
                       nlt_weight=nlt_weight, le_weight=le_weight,
                       loop=LoopConfig(steps=steps, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip or None,
                                       eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        emit(train_nlt_le(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("train-nlt", epilog=NLT_EXAMPLE)(train_nlt_command)
    app.command("train-le", epilog=LE_EXAMPLE)(train_le_command)
    app.command("train-nlt-le", epilog=NLT_LE_EXAMPLE)(train_nlt_le_command)


def _temperature(text: str) -> float | None:
    """``--temperature``: a number, or ``clip`` (None: the base CLIP's own, resolved by the library)."""
    if text.strip().lower() == "clip":
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--temperature must be a number or 'clip', got {text!r}") from None
