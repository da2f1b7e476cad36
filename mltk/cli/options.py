"""Option aliases shared by commands, each written once (huggingface_hub's ``cli/_cli_utils.py`` is the model):
``model: ModelOpt = None`` gives a command ``-m/--model`` with its help. The names follow
``mltk.cli.common.VOCABULARY``; ``tests/test_cli_vocabulary.py`` walks these aliases.

The hyper-parameter options of the training commands default to None, "from the recipe" (``--recipe``, default
the stage's own, ``mltk.recipes``); ``given`` keeps the ones the user gave, for ``mltk.recipes.loop_from_options``
and the stage's config.

Imported by ``mltk --help``: no torch, numpy or pyarrow here.
"""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

# --- inputs -----------------------------------------------------------------------------------------------------
ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="The base model: an open_clip name (with --pretrained) or hf-hub: name, a checkpoint "
    "artifact (mltk pretrain, a trained one where a command reads it), or a transformers / sentence-transformers "
    "folder (a text-only tower such as all-MiniLM-L6-v2).")]
PretrainedOpt = Annotated[Optional[str], typer.Option(
    "--pretrained", help="open_clip pretrained tag (openai, laion2b_s34b_b79k) or weights file of --model.")]
TokenizerOpt = Annotated[Optional[str], typer.Option(
    "--tokenizer", help="Non-native tokenizer of fresh acquirers (without --init): a vocab artifact (mltk "
    "build-vocab), a transformers name such as bert-base-multilingual-cased, or 'tower': the tower's own with a "
    "trainable copy of its word table (the default on a Hugging Face tower).")]
InitOpt = Annotated[Optional[Path], typer.Option(
    "--init", help="A trained checkpoint to start from: MLA (train-nlt, train-le; languages it lacks get fresh "
    "acquirers) or, for train-ccrk, CLL-CLIP (train-continual).")]
InitEmbeddingsOpt = Annotated[bool, typer.Option(
    "--init-embeddings/--no-init-embeddings", help="Initialise the shared embedding from the transformers model's "
    "word embeddings (the paper's M-BERT init) when --tokenizer is a transformers model (a vocabulary artifact has "
    "none to copy).")]
ImagesOpt = Annotated[Optional[Path], typer.Option(
    "--images", help="Image embeddings (mltk encode-images), instead of the positional input or stdin.")]
CaptionsOpt = Annotated[Optional[Path], typer.Option(
    "--captions", help="Captions artifact; parallel captions share caption_id (the English one is each caption's "
    "translation / teacher). pretrain reads its English rows, by default from the captions that the images "
    "artifact names.")]
CacheDirOpt = Annotated[Optional[Path], typer.Option(
    "--cache-dir", help="Cache root (default: $MLTK_CACHE_DIR or ~/.cache/mltk).")]

# --- the recipe and the hyper-parameters it holds -------------------------------------------------------------
RecipeOpt = Annotated[Optional[str], typer.Option(
    "--recipe", help="The hyper-parameters every option below leaves out: a recipe shipped with mltk (mla-nlt, "
    "mla-le, mla-nlt-le, cll-clip, teir-minilm, ccrk, mlmme, real-text-minilm, clip-pretrain) or a JSON file of "
    "the same form (mltk/recipes/*.json). Default: the command's own (on a transformers / sentence-transformers "
    "tower: real-text-minilm for train-nlt, teir-minilm for train-continual). The values used are recorded in "
    "the manifest.")]
StepsOpt = Annotated[Optional[int], typer.Option("--steps", min=1, help="Optimizer steps (default: the recipe's).")]
BatchOpt = Annotated[Optional[int], typer.Option("--batch-size", min=2, help="Examples per step (default: the "
                                                 "recipe's).")]
LrOpt = Annotated[Optional[float], typer.Option("--lr", help="Peak learning rate, after a linear warm-up "
                                                "(default: the recipe's).")]
WeightDecayOpt = Annotated[Optional[float], typer.Option(
    "--weight-decay", help="Decoupled (AdamW) weight decay on weight matrices (default: the recipe's).")]
GradClipOpt = Annotated[Optional[float], typer.Option(
    "--grad-clip", help="Gradient norm clip, per tensor or global as the recipe says (0: off; default: the "
    "recipe's).")]
WarmupOpt = Annotated[Optional[float], typer.Option(
    "--warmup", help="Fraction of the steps of linear warm-up (default: the recipe's).")]
EvalEveryOpt = Annotated[Optional[int], typer.Option(
    "--eval-every", help="Validate every N steps (default: at the end only; train-continual: every epoch); the "
    "best validation state is kept.")]
MseFormOpt = Annotated[Optional[str], typer.Option(
    "--mse-form", help="The MSE to the English teacher: mean over elements (the authors' code) or sum (over D, "
    "the written form); default: the recipe's (mean).")]
ValImagesOpt = Annotated[int, typer.Option("--val-images", help="At most this many validation images.")]

# --- running and output ---------------------------------------------------------------------------------------
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed; the same seed gives the same result on the "
                                      "CPU.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto (CUDA when available), cpu or cuda.")]
PrecisionOpt = Annotated[str, typer.Option(
    "--precision", help="auto (bf16/fp16 autocast on CUDA, fp32 on CPU), fp32, bf16 or fp16.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the bare artifact path.")]
LogEveryOpt = Annotated[Optional[int], typer.Option(
    "--log-every", help="Steps between stderr log lines and steps.csv rows (default 10).")]
TensorboardOpt = Annotated[Optional[Path], typer.Option(
    "--tensorboard", help="Also write TensorBoard event files under this directory (needs the tensorboard extra).")]

ALIASES = {name: value for name, value in dict(globals()).items() if name.endswith("Opt")}


def as_default(alias: Any, default: Any) -> Any:
    """``alias`` in the older default style (``as_json: bool = as_default(JsonOpt, False)``), derived from it."""
    info = copy.copy(typing.get_args(alias)[1])
    info.param_decls, info.default = (info.default, *info.param_decls), default  # Annotated keeps the names apart
    return info


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave (not None): the rest come from the recipe."""
    return {name: value for name, value in values.items() if value is not None}
