"""``mltk pretrain``: train the embedded default's native (English) CLIP from scratch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from mltk.cli.common import (DeviceOption, JsonOption, LogEveryOption, PrecisionOption, SeedOption,
                              TensorboardOption, emit, resolve_input)
from mltk.train.pretrain import PRETRAIN_LOOP, PretrainConfig, pretrain
from mltk.train.step_log import step_logging


def pretrain_command(
    images: Optional[str] = typer.Argument(None, help="Images artifact (e.g. WORLD/images), or - for stdin."),
    captions: Path = typer.Option(..., "--captions", help="Captions artifact; its English rows are used."),
    out: Path = typer.Option(..., "--out", help="Checkpoint artifact to write."),
    model: str = typer.Option("mltk-tiny", "--model", help="open_clip architecture to train from scratch."),
    steps: int = typer.Option(1500, "--steps", min=1, help="Optimizer steps."),
    batch_size: int = typer.Option(128, "--batch-size", min=2),
    lr: float = typer.Option(1e-3, "--lr", help="Peak learning rate (10% warm-up, then cosine)."),
    weight_decay: float = typer.Option(0.1, "--weight-decay"),
    eval_every: int = typer.Option(0, "--eval-every", help="Validate every N steps (0: at the end only)."),
    seed: int = SeedOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """Train a CLIP from scratch on English captions with the standard CLIP loss (resumable: rerun to continue).

    The checkpoint holds the whole model under open_clip key names; pass it as --model to every other stage.
    """
    loop = replace(PRETRAIN_LOOP, steps=steps, lr=lr, weight_decay=weight_decay, eval_every=eval_every, seed=seed)
    config = PretrainConfig(images=resolve_input(images, what="images"), captions=captions, out=out,
                            model=model, batch_size=batch_size, device=device, precision=precision, loop=loop)
    with step_logging(log_every, tensorboard):
        emit(pretrain(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("pretrain")(pretrain_command)
