"""``mltk pretrain``: train the embedded default's native (English) CLIP from scratch."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mltk.cli.common import emit, examples, out_option, resolve_input
from mltk.cli.config_options import GivenSettings, training_options
from mltk.cli.options import (
    CaptionsOpt,
    DeviceOpt,
    JsonOpt,
    LogEveryOpt,
    ModelOpt,
    PrecisionOpt,
    RecipeOpt,
    TensorboardOpt,
)
from mltk.settings.pretrain import PretrainConfig

EXAMPLE = examples("mltk synth-data -o world | mltk pretrain -o runs/native --steps 500")


@training_options("pretrain", PretrainConfig)
def pretrain_command(
    images: Optional[str] = typer.Argument(
        None, help="Images artifact (e.g. WORLD/images, what synth-data prints), or - for stdin."
    ),
    captions: CaptionsOpt = None,
    out: Path = out_option("Checkpoint artifact to write."),
    model: ModelOpt = "mltk-tiny",
    recipe: RecipeOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """Train a CLIP from scratch (--model: an open_clip architecture) on English captions with the standard CLIP
    loss (resumable: rerun to continue). Hyper-parameters: recipe clip-pretrain (10% warm-up, then cosine).

    The checkpoint holds the whole model under open_clip key names; pass it as --model to every other stage.
    """
    from mltk.train.pretrain import paired_captions, pretrain
    from mltk.train.step_log import step_logging

    images_path = resolve_input(images, what="images")
    config = PretrainConfig(
        images=images_path,
        captions=captions or paired_captions(images_path),
        out=out,
        model=model,
        device=device,
        precision=precision,
        recipe=recipe,
        loop=settings.loop,
        **settings.config,
    )
    with step_logging(log_every, tensorboard):
        emit(pretrain(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("pretrain", epilog=EXAMPLE)(pretrain_command)
