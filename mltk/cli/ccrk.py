"""``mltk train-ccrk``: 1-to-K contrastive training of a multilingual text tower."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from mltk.cli.align_options import (
    AlignEveryOption,
    AlignFormOption,
    AlignKOption,
    AlignLrOption,
    AlignOrthogonalOption,
    AlignWeightOption,
    LexiconOption,
    alignment_config,
)
from mltk.cli.common import emit, examples, lang_option, out_option, require, route_input, split_list
from mltk.cli.config_options import GivenSettings, config_values, training_options
from mltk.cli.options import (
    BatchOpt,
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
    ValImagesOpt,
)

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-ccrk --captions world/captions --init runs/nlt \\",
    "      --lang en,de,zh --steps 200 -o runs/ccrk")


ImagesArg = typer.Argument(None, metavar="[IMAGES]", help="Image embeddings artifact (mltk encode-images), or - / "
                           "nothing to read its path from stdin (a captions artifact there is taken as --captions).")
OutOpt = out_option("Directory of the checkpoint artifact to write (the format of --init; MLA when starting fresh).")
LangOpt = lang_option("The K languages of a batch (include en: frozen with MLA, trained with CLL-CLIP); default: en "
                      "and every language of --init, or every language of the captions. Repeat or comma-separate.")
LossOpt = Annotated[Optional[str], typer.Option(
    "--loss", help="one-to-k (CCR_k), one-to-one (one sampled language per image), english-bridge (MSE to "
    "English), hinge (ranking, margin), mlmme (beta x the image-sentence ranking of every language + (1 - beta) x "
    "the sentence-sentence ranking of every language pair; --recipe mlmme sets it with its beta).")]
MaxViolationOpt = Annotated[Optional[bool], typer.Option(
    "--max-violation/--sum-violations", help="hinge, mlmme: keep only each anchor's hardest in-batch negative "
    "(VSE++; AME's option), or sum over every negative.")]
WeightingOpt = Annotated[Optional[str], typer.Option(
    "--weighting", help="1-to-K weighting: paper (both directions equal) or code (the authors' code: divided by "
    "K).")]
TemperatureOpt = Annotated[Optional[float], typer.Option(
    "--temperature", help="Initial temperature of the contrastive losses.")]
FixedTemperatureOpt = Annotated[bool, typer.Option(
    "--fixed-temperature", help="Keep the temperature fixed instead of learning it.")]
MarginOpt = Annotated[Optional[float], typer.Option(
    "--margin", help="Margin of the hinge and mlmme losses (default: AME's margin of --similarity, "
    "mltk.losses.AME_MARGINS).")]
SimilarityOpt = Annotated[str, typer.Option(
    "--similarity", help="--loss hinge: cosine (symmetric) or order (AME's asymmetric order-violation similarity, "
    "Vendrov et al. 2016).")]
BetaOpt = Annotated[Optional[float], typer.Option(
    "--beta", help="mlmme: beta * S_I + (1 - beta) * S_S (Calixto et al. 2017); 1 = the image-sentence terms "
    "alone.")]
MlmmeFormOpt = Annotated[Optional[str], typer.Option(
    "--mlmme-form", help="mlmme with K > 2 languages: paper (sum over every language and every language pair) or "
    "english-pivot (each language paired with English, averaged over the languages).")]
HardNegativesOpt = Annotated[Optional[int], typer.Option(
    "--hard-negatives", help="N > 0: batches of anchors each followed by its N most similar training images (by "
    "image embedding), so in-batch negatives are look-alikes.")]
TrainEmbeddingOpt = Annotated[bool, typer.Option(
    "--train-embedding/--freeze-embedding", help="MLA: train the shared non-native embedding as well as the "
    "acquirers (--freeze-embedding: the acquirers only).")]
ValSplitOpt = Annotated[str, typer.Option("--val-split", help="Split whose captions validate (mean AR).")]


@training_options("train-ccrk", "mltk.train.ccrk:CcrkConfig")
def train_ccrk_command(
    source: Optional[str] = ImagesArg, captions: CaptionsOpt = None, images: ImagesOpt = None, out: Path = OutOpt,
    init: InitOpt = None, model: ModelOpt = None, pretrained: PretrainedOpt = None,
    tokenizer: TokenizerOpt = None, init_embeddings: InitEmbeddingsOpt = True, loss: LossOpt = None,
    weighting: WeightingOpt = None, lang: List[str] = LangOpt, recipe: RecipeOpt = None, batch_size: BatchOpt = None,
    temperature: TemperatureOpt = None, fixed_temperature: FixedTemperatureOpt = False, margin: MarginOpt = None,
    similarity: SimilarityOpt = "cosine", lexicon: Optional[Path] = LexiconOption,
    align_weight: Optional[float] = AlignWeightOption, align_k: Optional[int] = AlignKOption,
    align_form: Optional[str] = AlignFormOption, align_every: Optional[int] = AlignEveryOption,
    align_lr: Optional[float] = AlignLrOption, align_orthogonal: Optional[bool] = AlignOrthogonalOption,
    beta: BetaOpt = None,
    mlmme_form: MlmmeFormOpt = None, max_violation: MaxViolationOpt = None,
    hard_negatives: HardNegativesOpt = None, train_embedding: TrainEmbeddingOpt = True,
    val_split: ValSplitOpt = "val", val_images: ValImagesOpt = None, device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto", log_every: LogEveryOpt = None, tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False, settings: GivenSettings = None,
) -> None:
    """Train a multilingual text tower against frozen image embeddings with 1-to-K contrastive learning (or a
    baseline loss): MLA's acquirers (English stays the frozen CLIP), or CLL-CLIP's token table from a
    train-continual checkpoint (every language trains, English included). Writes a checkpoint of the same format
    that evaluate and index read. Hyper-parameters: recipe ccrk (mlmme for the MLMME baseline)."""
    from mltk import artifacts
    from mltk.train.ccrk import CcrkConfig, train_ccrk
    from mltk.train.step_log import step_logging

    routed = route_input(source, {"image-embeddings": images, "captions": captions}, default="image-embeddings",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = CcrkConfig(
        images=require(routed, "image-embeddings", "--images"), captions=require(routed, "captions", "--captions"),
        out=out, init=init, model=model, pretrained=pretrained, tokenizer=tokenizer, init_embeddings=init_embeddings,
        languages=split_list(lang), train_embedding=train_embedding, val_split=val_split, device=device,
        precision=precision, recipe=recipe, similarity=similarity,
        alignment=alignment_config(lexicon, align_weight, align_k, align_form, align_every, align_lr,
                                   align_orthogonal), loop=settings.loop,
        **config_values(settings, loss=loss, weighting=weighting, temperature=temperature, beta=beta,
                        batch_size=batch_size, margin=margin, mlmme_form=mlmme_form, max_violation=max_violation,
                        hard_negatives=hard_negatives, val_images=val_images,
                        learn_temperature=False if fixed_temperature else None))
    with step_logging(log_every, tensorboard):
        path = train_ccrk(config)
    manifest = artifacts.read_manifest(path, "checkpoint")
    emit(path, as_json, best_score=manifest.get("best_score"), best_step=manifest.get("best_step"),
         languages=manifest.get("languages"))


def register(app: typer.Typer) -> None:
    app.command("train-ccrk", epilog=EXAMPLE)(train_ccrk_command)
