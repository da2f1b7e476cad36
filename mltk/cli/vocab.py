"""``mltk build-vocab``: grow CLIP's BPE vocabulary by one language (CLL-CLIP)."""

from __future__ import annotations

from typing import Optional

import typer

from mltk.cli.common import emit, examples, out_option, resolve_input
from mltk.cli.options import JsonOpt
from mltk.core.errors import ConfigError

DEFAULT_NEW_VOCAB_SIZE = 10000  # mltk.vocab.DEFAULT_NEW_VOCAB_SIZE (importing it would import torch for --help)
EXAMPLE = examples("mltk build-vocab world/captions --lang de -o vocab/de",
                   "mltk build-vocab world/captions --lang zh --parent vocab/de -o vocab/zh")


def build_vocab(
    captions: Optional[str] = typer.Argument(
        None, help="Captions artifact (or Parquet file), or - / nothing to read its path from stdin."),
    lang: str = typer.Option(..., "--lang", help="Language whose captions train the new vocabulary."),
    out: str = out_option("Directory of the vocab artifact to write."),
    parent: Optional[str] = typer.Option(
        None, "--parent", help="Vocab artifact of the previous task; CLIP's own vocabulary when left out."),
    size: int = typer.Option(DEFAULT_NEW_VOCAB_SIZE, "--size",
                             help="Tokens of the new vocabulary V̂ (512 byte symbols + 2 special tokens + merges)."),
    split: str = typer.Option("train", "--split",
                              help="Split whose captions train the vocabulary ('all' for every split)."),
    min_frequency: int = typer.Option(2, "--min-frequency", help="Stop when no pair occurs this often."),
    protect_lang: Optional[str] = typer.Option(
        None, "--protect-lang",
        help="Keep the parent's token ids for every word of this language's captions (e.g. en); off as in the paper."),
    as_json: JsonOpt = False,
) -> None:
    """Train a BPE vocabulary on one language's captions with CLIP's pre-processing and merge it into the parent
    vocabulary (old ids and merges kept, new tokens appended); writes tokenizer files and TEIR's token counts."""
    from mltk import artifacts, vocab

    if size < 1:
        raise ConfigError(f"--size must be positive, got {size}")
    source = resolve_input(captions, what="captions artifact")
    path = vocab.build_vocab(source, lang, out, parent=parent, size=size, split=None if split == "all" else split,
                             min_frequency=min_frequency, protect_lang=protect_lang)
    manifest = artifacts.read_manifest(path, "vocab")
    emit(path, as_json, vocab_size=manifest["vocab_size"], sizes=manifest["sizes"], languages=manifest["languages"])


def register(app: typer.Typer) -> None:
    app.command("build-vocab", epilog=EXAMPLE)(build_vocab)
