"""``mltk train-ccrk``: 1-to-K contrastive training of a multilingual text tower."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from mltk.cli.common import emit, examples, lang_option, out_option, require, route_input, split_list
from mltk.cli.config_options import GivenSettings, training_options
from mltk.cli.options import (
    CaptionsOpt,
    DeviceOpt,
    ImagesOpt,
    InitEmbeddingsOpt,
    InitOpt,
    JsonOpt,
    LogEveryOpt,
    ModelOpt,
    PrecisionOpt,
    PretrainedOpt,
    RecipeOpt,
    TensorboardOpt,
    TokenizerOpt,
)
from mltk.settings.ccrk import CcrkConfig

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-ccrk --captions world/captions --init runs/nlt \\",
    "      --lang en,de,zh --steps 200 -o runs/ccrk",
)


ImagesArg = typer.Argument(
    None,
    metavar="[IMAGES]",
    help="Image embeddings artifact (mltk encode-images), or - / "
    "nothing to read its path from stdin (a captions artifact there is taken as --captions).",
)
OutOpt = out_option("Directory of the checkpoint artifact to write (the format of --init; MLA when starting fresh).")
LangOpt = lang_option(
    "The K languages of a batch (include en: frozen with MLA, trained with CLL-CLIP); default: en "
    "and every language of --init, or every language of the captions. Repeat or comma-separate."
)
SimilarityOpt = Annotated[
    str,
    typer.Option(
        "--similarity",
        help="--loss hinge: cosine (symmetric) or order (AME's asymmetric order-violation similarity, "
        "Vendrov et al. 2016).",
    ),
]
TrainEmbeddingOpt = Annotated[
    bool,
    typer.Option(
        "--train-embedding/--freeze-embedding",
        help="MLA: train the shared non-native embedding as well as the "
        "acquirers (--freeze-embedding: the acquirers only).",
    ),
]
ValSplitOpt = Annotated[str, typer.Option("--val-split", help="Split whose captions validate (mean AR).")]


@training_options("train-ccrk", CcrkConfig)
def train_ccrk_command(
    source: Optional[str] = ImagesArg,
    captions: CaptionsOpt = None,
    images: ImagesOpt = None,
    out: Path = OutOpt,
    init: InitOpt = None,
    model: ModelOpt = None,
    pretrained: PretrainedOpt = None,
    tokenizer: TokenizerOpt = None,
    init_embeddings: InitEmbeddingsOpt = True,
    lang: List[str] = LangOpt,
    recipe: RecipeOpt = None,
    similarity: SimilarityOpt = "cosine",
    train_embedding: TrainEmbeddingOpt = True,
    val_split: ValSplitOpt = "val",
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """Train a multilingual text tower against frozen image embeddings with 1-to-K contrastive learning (or a
    baseline loss): MLA's acquirers (English stays the frozen CLIP), or CLL-CLIP's token table from a
    train-continual checkpoint (every language trains, English included). Writes a checkpoint of the same format
    that evaluate and index read. Hyper-parameters: recipe ccrk (mlmme for the MLMME baseline)."""
    from mltk import artifacts
    from mltk.train.ccrk import train_ccrk
    from mltk.train.step_log import step_logging

    routed = route_input(
        source,
        {"image-embeddings": images, "captions": captions},
        default="image-embeddings",
        options={"captions": "--captions", "image-embeddings": "--images"},
    )
    config = CcrkConfig(
        images=require(routed, "image-embeddings", "--images"),
        captions=require(routed, "captions", "--captions"),
        out=out,
        init=init,
        model=model,
        pretrained=pretrained,
        tokenizer=tokenizer,
        init_embeddings=init_embeddings,
        languages=split_list(lang),
        train_embedding=train_embedding,
        val_split=val_split,
        device=device,
        precision=precision,
        recipe=recipe,
        similarity=similarity,
        loop=settings.loop,
        **settings.config,
    )
    with step_logging(log_every, tensorboard):
        path = train_ccrk(config)
    manifest = artifacts.read_manifest(path, "checkpoint")
    emit(
        path,
        as_json,
        best_score=manifest.get("best_score"),
        best_step=manifest.get("best_step"),
        languages=manifest.get("languages"),
    )


def register(app: typer.Typer) -> None:
    app.command("train-ccrk", epilog=EXAMPLE)(train_ccrk_command)
