"""``mltk train-continual``: CLL-CLIP, languages learned one after another (TEIR and continual baselines)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (DeviceOption, JsonOption, LogEveryOption, PrecisionOption, SeedOption,
                              TensorboardOption, emit, resolve_input)
from mltk.errors import ConfigError

METHOD_HELP = ("cll-clip (the table alone), oewc (online EWC), er (experience replay), der (dark experience replay), "
               "mla (adapters per language; needs the task identity at test time), lora (q and v), ptuning, "
               "dualprompt, codaprompt.")


def _split(values: List[str]) -> tuple[str, ...]:
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def train_continual_command(
    images: Optional[str] = typer.Argument(
        None, help="Image embeddings artifact (mltk encode-images), or - / nothing to read its path from stdin."),
    captions: Path = typer.Option(..., "--captions", help="Captions artifact; parallel captions share caption_id "
                                  "(the English one is each caption's teacher)."),
    out: Path = typer.Option(..., "--out", "-o", help="Directory of the checkpoint artifact to write."),
    model: str = typer.Option(
        "mltk-tiny", "--model", "-m", help="Frozen base CLIP: open_clip name (with --pretrained) or a checkpoint "
        "artifact from `mltk pretrain`."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag for --model."),
    lang: List[str] = typer.Option(
        [], "--lang", help="Task languages in training order (repeat or comma-separate); default: en first, then "
        "every other language of the captions."),
    method: str = typer.Option("cll-clip", "--method", help=METHOD_HELP),
    teir: bool = typer.Option(False, "--teir", help="TEIR: initialisation and regularisation of the token table."),
    teir_init_only: bool = typer.Option(False, "--teir-init-only", help="TEIR's initialisation alone (ablation)."),
    teir_reg_only: bool = typer.Option(
        False, "--teir-reg-only", help="TEIR's regularisation alone (ablation)."),
    vocab_dir: Optional[Path] = typer.Option(
        None, "--vocab-dir", help="Prebuilt vocab artifacts, one per task at DIR/<lang> (mltk build-vocab, each "
        "with the previous task's as --parent); built on the fly when left out."),
    vocab_size: int = typer.Option(10000, "--vocab-size", help="Tokens of each task's new vocabulary V̂."),
    protect_lang: Optional[str] = typer.Option(
        None, "--protect-lang", help="When building vocabularies, keep this language's parent ids (e.g. en)."),
    epochs: int = typer.Option(3, "--epochs", help="Epochs per task (an epoch = one pass over its images)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Updates per task (overrides --epochs)."),
    eval_every: Optional[int] = typer.Option(
        None, "--eval-every", help="Validate every N steps (default: every epoch); the best one is kept."),
    batch_size: int = typer.Option(128, "--batch-size", help="Distinct images per batch."),
    lr: float = typer.Option(5e-5, "--lr", help="Learning rate of the table and temperature (AdamW)."),
    method_lr: float = typer.Option(1e-3, "--method-lr", help="Learning rate of the method's own tensors "
                                    "(adapters, LoRA, prompts)."),
    warmup: float = typer.Option(0.1, "--warmup", help="Fraction of each task's steps of linear warm-up."),
    weight_decay: float = typer.Option(0.05, "--weight-decay", help="Decoupled weight decay."),
    gamma1: float = typer.Option(0.01, "--gamma1", help="Weight of the image-text InfoNCE term."),
    gamma2: float = typer.Option(1.0, "--gamma2", help="Weight of the MSE to the English teacher."),
    metric: str = typer.Option("t2i.R@1", "--metric", help="a_{j,i} of the continual matrix: AR or "
                               "<i2t|t2i>.R@<1|5|10>."),
    memory_size: int = typer.Option(8000, "--memory-size", help="ER/DER reservoir capacity."),
    replay_batch: Optional[int] = typer.Option(None, "--replay-batch", help="ER/DER replayed examples per step "
                                               "(default: the batch size)."),
    ewc_lambda: float = typer.Option(1000.0, "--ewc-lambda", help="oEWC penalty weight."),
    ewc_gamma: float = typer.Option(1.0, "--ewc-gamma", help="oEWC decay of earlier Fisher information."),
    lora_rank: int = typer.Option(8, "--lora-rank", help="LoRA rank."),
    prompt_length: int = typer.Option(30, "--prompt-length", help="P-Tuning prompt length."),
    keep_task_checkpoints: bool = typer.Option(
        False, "--keep-task-checkpoints", help="Keep each task's checkpoint (tasks/NN-lang) in the artifact."),
    val_images: int = typer.Option(1000, "--val-images", help="At most this many validation images."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Where the English teacher embeddings are "
                                             "cached (default: $MLTK_CACHE_DIR or ~/.cache/mltk)."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    seed: int = SeedOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """Learn languages one after another with CLL-CLIP: each task grows CLIP's vocabulary and trains the token
    table of the frozen text tower (0.01 x InfoNCE + MSE to the English teacher). After each task every language
    so far is evaluated; writes a checkpoint with continual.json (matrix, AR, F) and two PNGs. Rerun the same
    command to resume."""
    from mltk.continual import MethodOptions
    from mltk import report
    from mltk.train.continual import (CONTINUAL_LOOP, ContinualTrainConfig, final_summary, read_summary,
                                      train_continual)
    from mltk.train.step_log import step_logging

    if sum([teir, teir_init_only, teir_reg_only]) > 1:
        raise ConfigError("choose one of --teir, --teir-init-only and --teir-reg-only")
    options = MethodOptions(memory_size=memory_size, replay_batch=replay_batch, ewc_lambda=ewc_lambda,
                            ewc_gamma=ewc_gamma, lora_rank=lora_rank, ptuning_length=prompt_length)
    config = ContinualTrainConfig(
        images=resolve_input(images, what="image embeddings"), captions=captions, out=out, model=model,
        pretrained=pretrained, languages=_split(lang), method=method, teir_init=teir or teir_init_only,
        teir_reg=teir or teir_reg_only, vocab_dir=vocab_dir, vocab_size=vocab_size, protect_lang=protect_lang,
        epochs=epochs, steps=steps, eval_every=eval_every, batch_size=batch_size, method_lr=method_lr,
        gamma1=gamma1, gamma2=gamma2, metric=metric, val_images=val_images, options=options,
        keep_task_checkpoints=keep_task_checkpoints, device=device, precision=precision, cache_dir=cache_dir,
        loop=replace(CONTINUAL_LOOP, lr=lr, warmup_fraction=warmup, weight_decay=weight_decay, seed=seed))
    with step_logging(log_every, tensorboard):
        path = train_continual(config)
    report.print_metrics({"continual": read_summary(path)})  # the matrix, AR and F on stderr
    emit(path, as_json, **(final_summary(path) if as_json else {}))


def register(app: typer.Typer) -> None:
    app.command("train-continual")(train_continual_command)
