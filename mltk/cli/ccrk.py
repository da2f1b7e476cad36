"""``mltk train-ccrk``: 1-to-K contrastive training of a multilingual text tower."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (DeviceOption, JsonOption, LogEveryOption, PrecisionOption, SeedOption,
                              TensorboardOption, emit, examples, lang_option, out_option, require, route_input,
                              split_list)

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-ccrk --captions world/captions --init runs/nlt \\",
    "      --lang en,de,zh -o runs/ccrk")


def train_ccrk_command(
    source: Optional[str] = typer.Argument(
        None, metavar="[IMAGES]", help="Image embeddings artifact (mltk encode-images), or - / nothing to read its "
        "path from stdin (a captions artifact there is taken as --captions)."),
    captions: Optional[Path] = typer.Option(None, "--captions", help="Captions artifact (parallel captions share "
                                            "caption_id)."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, instead of the positional."),
    out: Path = out_option("Directory of the checkpoint artifact to write (the format of --init; MLA when starting "
                           "fresh)."),
    init: Optional[Path] = typer.Option(
        None, "--init", help="Checkpoint to start from: MLA (e.g. the train-nlt result; languages it lacks get "
        "fresh acquirers, English stays the frozen CLIP) or CLL-CLIP (train-continual; its token table trains, "
        "English included)."),
    model: str = typer.Option(
        "mltk-tiny", "--model", "-m", help="Base CLIP when starting without --init: open_clip name or a checkpoint "
        "artifact from `mltk pretrain`."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag for --model."),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Non-native tokenizer without --init: a vocabulary artifact (mltk build-vocab) "
        "or a transformers name (bert-base-multilingual-cased), or 'tower' (the default on a Hugging Face tower)."),
    init_embeddings: bool = typer.Option(
        True, "--init-embeddings/--no-init-embeddings", help="Copy the transformers model's word embeddings (M-BERT, "
        "the paper's initialisation) into the table when --tokenizer is a transformers model; a vocabulary "
        "artifact has none to copy."),
    loss: str = typer.Option(
        "one-to-k", "--loss", help="one-to-k (CCR_k), one-to-one (one sampled language per image), english-bridge "
        "(MSE to English), hinge (ranking, margin), mlmme (beta x image-sentence + (1 - beta) x sentence-sentence "
        "ranking over every language pair)."),
    weighting: str = typer.Option(
        "paper", "--weighting", help="1-to-K weighting: paper (both directions equal) or code (the authors' code: "
        "divided by K)."),
    lang: List[str] = lang_option(
        "The K languages of a batch (include en: frozen with MLA, trained with CLL-CLIP); "
        "default: en and every language of --init, or every language of the captions. Repeat or comma-separate."),
    steps: int = typer.Option(1000, "--steps", help="Optimizer updates."),
    batch_size: int = typer.Option(128, "--batch-size", help="Distinct images per batch (each with K captions)."),
    lr: float = typer.Option(1e-4, "--lr", help="Peak learning rate (AdamW, linear warm-up)."),
    warmup: float = typer.Option(0.03, "--warmup", help="Fraction of steps of linear warm-up (the authors': 3%)."),
    weight_decay: float = typer.Option(0.01, "--weight-decay", help="Decoupled weight decay on weight matrices "
                                       "(the authors': 0.01)."),
    temperature: float = typer.Option(0.07, "--temperature", help="Initial temperature of the contrastive losses."),
    fixed_temperature: bool = typer.Option(
        False, "--fixed-temperature", help="Keep the temperature fixed instead of learning it."),
    margin: float = typer.Option(0.2, "--margin", help="Margin of the hinge and mlmme losses."),
    beta: float = typer.Option(0.5, "--beta", help="mlmme: beta * S_I + (1 - beta) * S_S (Calixto et al. 2017); "
                               "1 = the image-sentence terms alone."),
    mlmme_form: str = typer.Option(
        "paper", "--mlmme-form", help="mlmme with K > 2 languages: paper (sum over every language and every "
        "language pair) or english-pivot (each language paired with English, averaged over the languages)."),
    hard_negatives: int = typer.Option(
        0, "--hard-negatives", help="N > 0: batches of anchors each followed by its N most similar training images "
        "(by image embedding), so in-batch negatives are look-alikes."),
    train_embedding: bool = typer.Option(
        True, "--train-embedding/--freeze-embedding", help="MLA: train the shared non-native embedding as well as "
        "the acquirers (--freeze-embedding: the acquirers only)."),
    eval_every: int = typer.Option(0, "--eval-every", help="Validate every N steps (0: only at the end)."),
    val_split: str = typer.Option("val", "--val-split", help="Split whose captions validate (mean AR)."),
    val_images: int = typer.Option(1000, "--val-images", help="At most this many validation images."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    seed: int = SeedOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """Train a multilingual text tower against frozen image embeddings with 1-to-K contrastive learning (or a
    baseline loss): MLA's acquirers (English stays the frozen CLIP), or CLL-CLIP's token table from a
    train-continual checkpoint (every language trains, English included). Writes a checkpoint of the same format
    that evaluate and index read."""
    from dataclasses import replace

    from mltk import artifacts
    from mltk.train.ccrk import CCRK_LOOP, CcrkConfig, train_ccrk
    from mltk.train.step_log import step_logging

    routed = route_input(source, {"image-embeddings": images, "captions": captions}, default="image-embeddings",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = CcrkConfig(
        images=require(routed, "image-embeddings", "--images"), captions=require(routed, "captions", "--captions"),
        out=out, init=init,
        model=model, pretrained=pretrained, tokenizer=tokenizer, init_embeddings=init_embeddings,
        languages=split_list(lang), loss=loss, weighting=weighting, temperature=temperature,
        learn_temperature=not fixed_temperature, margin=margin, beta=beta, mlmme_form=mlmme_form,
        hard_negatives=hard_negatives,
        train_embedding=train_embedding, batch_size=batch_size, val_split=val_split, val_images=val_images,
        device=device, precision=precision, loop=replace(CCRK_LOOP, steps=steps, lr=lr, warmup_fraction=warmup,
                                                          weight_decay=weight_decay, eval_every=eval_every, seed=seed))
    with step_logging(log_every, tensorboard):
        path = train_ccrk(config)
    manifest = artifacts.read_manifest(path, "checkpoint")
    emit(path, as_json, best_score=manifest.get("best_score"), best_step=manifest.get("best_step"),
         languages=manifest.get("languages"))


def register(app: typer.Typer) -> None:
    app.command("train-ccrk", epilog=EXAMPLE)(train_ccrk_command)
