"""``mltk classify``: zero-shot image classification per language (MLA's open-domain check)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import BaseOption, emit, examples, lang_option, out_option, require, route_input, split_list
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt

EXAMPLE = examples(
    "mltk classify emb --classes world -m runs/le -o runs/zero-shot",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk classify --classes world -m runs/native -o zs",
)


def classify_command(
    source: Optional[str] = typer.Argument(
        None, metavar="[IMAGE_EMBEDDINGS]", help="Image embeddings (mltk encode-images), or -/piped stdin."
    ),
    classes: Path = typer.Option(
        ...,
        "--classes",
        help="The task: a synthetic world (its folder or images "
        "artifact: the 64 colour-shape classes, the world's sentence frames as prompts in "
        "every language) or a JSON file {classes: {ID: {LANG: NAME}}, templates: {LANG: "
        "[..'{}'..]}, labels: {IMAGE_ID: ID}}.",
    ),
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="The text side: a checkpoint (MLA, train-continual, "
        "train-ccrk, a whole CLIP) or an open_clip name with --pretrained.",
    ),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag or weights file."),
    base: Optional[List[str]] = BaseOption,
    out: Path = out_option("Metrics artifact to write."),
    lang: List[str] = lang_option("Languages to classify in (default: every language of the task the model reads)."),
    split: str = typer.Option("test", "--split", help="The split of a synthetic world's images."),
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Zero-shot classification: each class's prompts in a language are encoded by the model and averaged (CLIP's
    prompt ensemble); each image takes the class of highest similarity (cosine, or
    order for a checkpoint trained with it); top-1 and top-5 accuracy per
    language are written to metrics.json and shown on stderr."""
    from mltk.evaluate.zero_shot import ClassifyConfig, classify

    routed = route_input(
        source, {"image-embeddings": None}, default="image-embeddings", options={"image-embeddings": "IMAGE_EMBEDDINGS"}
    )
    images = require(routed, "image-embeddings", "IMAGE_EMBEDDINGS")
    emit(
        classify(
            ClassifyConfig(
                images=images,
                classes=classes,
                model=model,
                pretrained=pretrained,
                out=out,
                languages=split_list(lang),
                split=split,
                device=device,
                precision=precision,
            )
        ),
        as_json,
    )


def register(app: typer.Typer) -> None:
    app.command("classify", epilog=EXAMPLE)(classify_command)
