"""``mltk import-mla``: the MLA authors' released checkpoint -> mltk artifacts (a whole-CLIP base + an MLA
checkpoint) that ``mltk evaluate`` and ``mltk index`` take."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from mltk.cli.common import emit, examples, lang_option, out_option, split_list
from mltk.cli.options import JsonOpt

# mltk.export.import_mla's defaults (importing it would import torch for --help)
DEFAULT_ARCHITECTURE, DEFAULT_TOKENIZER = "ViT-B-32-quickgelu", "bert-base-multilingual-cased"
EXAMPLE = examples("mltk import-mla mla_checkpoint.pt -o runs/mla-authors --lang de,fr,zh")


def import_mla(
    checkpoint: Path = typer.Argument(
        ...,
        help="The authors' checkpoint: a PyTorch state dict (.pt/.pth/.bin/pytorch_model.bin.N, plain, "
        "wrapped in state_dict/model, or with DDP's module. prefix; read with weights_only=True) or .safetensors.",
    ),
    out: Path = out_option("Output folder: OUT/base (the whole CLIP) and OUT/mla (acquirers + embedding)."),
    model: str = typer.Option(
        DEFAULT_ARCHITECTURE,
        "--model",
        "-m",
        help="open_clip architecture of the CLIP inside the checkpoint "
        "(OpenAI ViT-B/32 weights need ViT-B-32-quickgelu).",
    ),
    tokenizer: str = typer.Option(
        DEFAULT_TOKENIZER,
        "--tokenizer",
        help="Non-native tokenizer: a transformers name or local folder (its "
        "vocabulary must match the embedding rows), or an mltk vocabulary artifact.",
    ),
    lang: List[str] = lang_option(
        "Import only these languages (repeat or comma-separate); required, and copied to each, "
        "when the checkpoint has one acquirer stack shared by all languages."
    ),
    as_json: JsonOpt = False,
) -> None:
    """Import an authors' MLA checkpoint; prints OUT/mla, the artifact to pass to evaluate/index."""
    from mltk.export.import_mla import import_mla_checkpoint

    result = import_mla_checkpoint(
        checkpoint, out, model=model, tokenizer=tokenizer, languages=list(split_list(lang)) or None
    )
    emit(
        result.mla,
        as_json,
        base=str(result.base),
        languages=list(result.languages),
        tokenizer_checked=result.tokenizer_checked,
    )


def register(app: typer.Typer) -> None:
    app.command("import-mla", epilog=EXAMPLE)(import_mla)
