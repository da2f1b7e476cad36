"""Option aliases shared by commands, each written once (huggingface_hub's ``cli/_cli_utils.py`` is the model):
``model: ModelOpt = None`` gives a command ``-m/--model`` with its help. The names follow
``mltk.cli.common.VOCABULARY``; ``tests/test_cli_vocabulary.py`` walks these aliases.

The hyper-parameter options of the training commands are not here: they are generated from the fields of
``LoopConfig`` and of each stage's config (``mltk.cli.config_options``), default to None, "from the recipe"
(``--recipe``, default the stage's own, ``mltk.recipes``), and their help ends with the recipe's value.

Imported by ``mltk --help``: no torch, numpy or pyarrow here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mltk.settings.loop import LOG_EVERY

# --- inputs -----------------------------------------------------------------------------------------------------
ModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        help="The base model: an open_clip name (with --pretrained) or hf-hub: name, a checkpoint "
        "artifact (mltk pretrain, a trained one where a command reads it), or a transformers / sentence-transformers "
        "folder (a text-only tower such as all-MiniLM-L6-v2).",
    ),
]
PretrainedOpt = Annotated[
    Optional[str],
    typer.Option(
        "--pretrained", help="open_clip pretrained tag (openai, laion2b_s34b_b79k) or weights file of --model."
    ),
]
TokenizerOpt = Annotated[
    Optional[str],
    typer.Option(
        "--tokenizer",
        help="Non-native tokenizer of fresh acquirers (without --init): a vocab artifact (mltk "
        "build-vocab), a transformers name such as bert-base-multilingual-cased, or 'tower': the tower's own with a "
        "trainable copy of its word table (the default on a Hugging Face tower).",
    ),
]
InitOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--init",
        help="A trained checkpoint to start from: MLA (train-nlt, train-le; languages it lacks get fresh "
        "acquirers) or, for train-ccrk, CLL-CLIP (train-continual).",
    ),
]
InitEmbeddingsOpt = Annotated[
    bool,
    typer.Option(
        "--init-embeddings/--no-init-embeddings",
        help="Initialise the shared embedding from the transformers model's "
        "word embeddings (the paper's M-BERT init) when --tokenizer is a transformers model (a vocabulary artifact has "
        "none to copy).",
    ),
]
ImagesOpt = Annotated[
    Optional[Path],
    typer.Option("--images", help="Image embeddings (mltk encode-images), instead of the positional input or stdin."),
]
CaptionsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--captions",
        help="Captions artifact; parallel captions share caption_id (the English one is each caption's "
        "translation / teacher). pretrain reads its English rows, by default from the captions that the images "
        "artifact names.",
    ),
]
CacheDirOpt = Annotated[
    Optional[Path], typer.Option("--cache-dir", help="Cache root (default: $MLTK_CACHE_DIR or ~/.cache/mltk).")
]

# --- the recipe and the hyper-parameters it holds -------------------------------------------------------------
RecipeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--recipe",
        help="The hyper-parameters every option below leaves out: a recipe shipped with mltk (mltk recipes "
        "list; mltk recipes show NAME for its values) or a JSON file of the same form (mltk recipes cp NAME FILE). "
        "Default: the command's own (on a transformers / sentence-transformers "
        "tower: real-text-minilm for train-nlt, teir-minilm for train-continual). The values used are recorded in "
        "the manifest.",
    ),
]

# --- running and output ---------------------------------------------------------------------------------------
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed; the same seed gives the same result on the CPU.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto (CUDA when available), cpu or cuda.")]
PrecisionOpt = Annotated[
    str,
    typer.Option(
        "--precision",
        help="auto (bf16/fp16 autocast on CUDA; on the CPU fp32, or bf16 autocast where the recipe "
        "sets cpu_bf16 and the CPU multiplies bf16 in hardware, AMX or AVX512-BF16, confirmed by a calibration cached "
        "per machine), fp32, bf16 or fp16.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the bare artifact path.")]
LogEveryOpt = Annotated[
    Optional[int],
    typer.Option("--log-every", help=f"Steps between stderr log lines and steps.csv rows (default {LOG_EVERY})."),
]
TensorboardOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--tensorboard", help="Also write TensorBoard event files under this directory (needs the tensorboard extra)."
    ),
]

ALIASES = {name: value for name, value in dict(globals()).items() if name.endswith("Opt")}
