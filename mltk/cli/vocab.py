"""``mltk build-vocab``: grow CLIP's BPE vocabulary by one language (CLL-CLIP)."""

from __future__ import annotations

from typing import Optional

import typer

from mltk.cli.common import emit, examples, out_option, resolve_input
from mltk.cli.options import JsonOpt
from mltk.core.errors import ConfigError

EXAMPLE = examples(
    "mltk build-vocab world/captions --lang de -o vocab/de",
    "mltk build-vocab world/captions --lang zh --parent vocab/de -o vocab/zh",
)


def build_vocab(
    captions: Optional[str] = typer.Argument(
        None, help="Captions artifact (or Parquet file), or - / nothing to read its path from stdin."
    ),
    lang: str = typer.Option(..., "--lang", help="Language whose captions train the new vocabulary."),
    out: str = out_option("Directory of the vocab artifact to write."),
    parent: Optional[str] = typer.Option(
        None, "--parent", help="Vocab artifact of the previous task; CLIP's own vocabulary when left out."
    ),
    size: Optional[int] = typer.Option(
        None,
        "--size",
        help="Tokens of the new vocabulary V̂ (512 byte symbols + 2 special tokens + merges); default: "
        "the cll-clip recipe's vocab_size (mltk recipes show cll-clip).",
    ),
    split: str = typer.Option(
        "train", "--split", help="Split whose captions train the vocabulary ('all' for every split)."
    ),
    min_frequency: Optional[int] = typer.Option(
        None,
        "--min-frequency",
        help="Stop when no pair occurs this often; default: the cll-clip recipe's vocab_min_frequency.",
    ),
    protect_lang: Optional[str] = typer.Option(
        None,
        "--protect-lang",
        help="Keep the parent's token ids for every word of this language's captions (e.g. en); off as in the paper.",
    ),
    as_json: JsonOpt = False,
) -> None:
    """Train a BPE vocabulary on one language's captions with CLIP's pre-processing and merge it into the parent
    vocabulary (old ids and merges kept, new tokens appended); writes tokenizer files and TEIR's token counts."""
    from mltk import artifacts
    from mltk.settings.vocab import build_vocab as build_vocabulary

    if size is not None and size < 1:
        raise ConfigError(f"--size must be positive, got {size}")
    if min_frequency is not None and min_frequency < 1:
        raise ConfigError(f"--min-frequency must be at least 1, got {min_frequency}")
    source = resolve_input(captions, what="captions artifact")
    path = build_vocabulary(
        source,
        lang,
        out,
        parent=parent,
        size=size,
        split=None if split == "all" else split,
        min_frequency=min_frequency,
        protect_lang=protect_lang,
    )
    manifest = artifacts.read_manifest(path, "vocab")
    emit(path, as_json, vocab_size=manifest["vocab_size"], sizes=manifest["sizes"], languages=manifest["languages"])


def register(app: typer.Typer) -> None:
    app.command("build-vocab", epilog=EXAMPLE)(build_vocab)
