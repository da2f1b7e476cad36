"""Training commands: ``train-nlt``, ``train-le`` and ``train-nlt-le`` (MLA). Their hyper-parameters come from a
recipe (``--recipe``; default mla-nlt, mla-le, mla-nlt-le, and real-text-minilm for train-nlt on a Hugging Face
tower); an option given on the command line replaces the recipe's value."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import emit, examples, lang_option, out_option, require, route_input, split_list
from mltk.cli.config_options import GivenSettings, training_options
from mltk.cli.options import (
    CacheDirOpt,
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
from mltk.settings.mla import MlaConfig

LangOpt = lang_option("Languages to train (default: all non-English ones); repeat or comma-separate.")
OutOpt = out_option("Checkpoint artifact to write.")
ImagesArg = typer.Argument(
    None,
    metavar="[IMAGES]",
    help="Image embeddings (encode-images), or -/piped stdin (a captions artifact there is taken as --captions).",
)
NLT_EXAMPLE = examples(
    "mltk train-nlt world/captions -m runs/native --tokenizer vocab/zh \\",
    "    --lang de,zh --steps 200 -o runs/nlt",
    "mltk train-nlt captions -m ./all-MiniLM-L6-v2 --lang de --steps 200 \\",
    "    -o runs/de",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-nlt --captions world/captions -m runs/native \\",
    "      --tokenizer vocab/zh --lang de,zh --steps 200 -o runs/nlt",
)
NLT_LE_EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-nlt-le --captions world/captions -m runs/native \\",
    "      --tokenizer vocab/zh --lang de,zh --steps 200 -o runs/nlt-le",
)
LE_EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-le --captions world/captions --init runs/nlt \\",
    "      --recipe mla-le --steps 200 -o runs/le",
)


@training_options("train-nlt", MlaConfig)
def train_nlt_command(
    source: Optional[str] = typer.Argument(
        None,
        metavar="[CAPTIONS]",
        help="Captions artifact with translation pairs (shared caption_id between "
        "English and each language), or -/piped stdin; an embeddings artifact here (or piped) is taken as "
        "--images (then NLT validates by retrieval, else by validation MSE).",
    ),
    captions: CaptionsOpt = None,
    images: ImagesOpt = None,
    out: Path = OutOpt,
    init: InitOpt = None,
    model: ModelOpt = None,
    pretrained: PretrainedOpt = None,
    tokenizer: TokenizerOpt = None,
    train: str = typer.Option(
        "acquirers",
        "--train",
        help="acquirers: MLA's acquirers per language; full: a "
        "student copy of the whole text tower for the non-native languages (multilingual "
        "knowledge distillation, the baseline), same objective, data and steps; mkd: that "
        "student replaces the English text encoder too (M-CLIP, MLA's MKD baseline), English "
        "captions distilled to the frozen tower's embedding of themselves.",
    ),
    init_embeddings: InitEmbeddingsOpt = True,
    lang: List[str] = LangOpt,
    recipe: RecipeOpt = None,
    cache_dir: CacheDirOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """MLA Native Language Transfer: MSE from each language to the frozen English text embedding (of a CLIP, or of a
    text-only tower such as all-MiniLM-L6-v2); --train full trains a whole student tower instead (the baseline).

    Rerun the same command after an interruption to resume exactly where it stopped."""
    _train(
        "train-nlt",
        source,
        captions,
        images,
        out,
        settings,
        (log_every, tensorboard, as_json),
        recipe=recipe,
        init=init,
        model=model,
        pretrained=pretrained,
        tokenizer=tokenizer,
        train=train,
        init_embeddings=init_embeddings,
        languages=split_list(lang),
        cache_dir=cache_dir,
        device=device,
        precision=precision,
    )


@training_options("train-le", MlaConfig)
def train_le_command(
    source: Optional[str] = ImagesArg,
    captions: CaptionsOpt = None,
    images: ImagesOpt = None,
    init: InitOpt = None,
    out: Path = OutOpt,
    model: ModelOpt = None,
    pretrained: PretrainedOpt = None,
    tokenizer: TokenizerOpt = None,
    lang: List[str] = LangOpt,
    recipe: RecipeOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """MLA Language Exposure: symmetric InfoNCE between frozen image embeddings and each language's captions,
    from the NLT checkpoint (--init), or fresh acquirers on --model with --tokenizer (the paper's LE-only
    ablation). Recipe mla-le: the paper's learning rate and temperature."""
    _train(
        "train-le",
        source,
        captions,
        images,
        out,
        settings,
        (log_every, tensorboard, as_json),
        recipe=recipe,
        init=init,
        model=model,
        pretrained=pretrained,
        tokenizer=tokenizer,
        languages=split_list(lang),
        device=device,
        precision=precision,
    )


@training_options("train-nlt-le", MlaConfig)
def train_nlt_le_command(
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
    cache_dir: CacheDirOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """MLA's NLT and LE in one stage (the paper's ablation of its two-stage recipe): each step adds the NLT MSE of a
    translation batch and the LE InfoNCE of an image batch."""
    _train(
        "train-nlt-le",
        source,
        captions,
        images,
        out,
        settings,
        (log_every, tensorboard, as_json),
        recipe=recipe,
        init=init,
        model=model,
        pretrained=pretrained,
        tokenizer=tokenizer,
        init_embeddings=init_embeddings,
        languages=split_list(lang),
        cache_dir=cache_dir,
        device=device,
        precision=precision,
    )


def _train(
    stage: str,
    source: str | None,
    captions: Path | None,
    images: Path | None,
    out: Path,
    settings: GivenSettings,
    output: tuple,
    **fields,
) -> None:
    """Route the inputs, build the ``MlaConfig`` (the loop values given in ``settings``, the rest the recipe's)
    and run ``stage``; ``output``: log_every, tensorboard, as_json."""
    from mltk.train import mla
    from mltk.train.step_log import step_logging

    slots = {"captions": captions, "image-embeddings": images}
    routed = route_input(
        source,
        slots if stage == "train-nlt" else dict(reversed(slots.items())),
        default="captions" if stage == "train-nlt" else "image-embeddings",
        options={"captions": "--captions", "image-embeddings": "--images"},
    )
    images = routed["image-embeddings"] if stage == "train-nlt" else require(routed, "image-embeddings", "--images")
    config = MlaConfig(
        captions=require(routed, "captions", "--captions"),
        out=out,
        images=images,
        loop=settings.loop,
        **fields,
        **settings.config,
    )
    log_every, tensorboard, as_json = output
    run = {"train-nlt": mla.train_nlt, "train-le": mla.train_le, "train-nlt-le": mla.train_nlt_le}[stage]
    with step_logging(log_every, tensorboard):
        emit(run(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("train-nlt", epilog=NLT_EXAMPLE)(train_nlt_command)
    app.command("train-le", epilog=LE_EXAMPLE)(train_le_command)
    app.command("train-nlt-le", epilog=NLT_LE_EXAMPLE)(train_nlt_le_command)
