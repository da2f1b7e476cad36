"""``mltk encode-texts``: captions -> a text embeddings artifact, with any supported text model."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import LIST_METAVAR, BaseOption, emit, examples, lang_option, out_option, resolve_input, split_list
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt

EXAMPLE = examples(
    "mltk encode-texts world/captions -m runs/nlt --split test -o txt",
    "mltk encode-texts world/captions -m path/to/all-MiniLM-L6-v2 \\",
    "    --lang en,de -o txt",
    "mltk encode-texts -m runs/le --lang de --text 'Ein roter Kreis.' \\",
    "    --text 'Zwei Quadrate.' -o s",
    "mltk encode-texts -m ./all-MiniLM-L6-v2 --text 'A red circle.' -o s2",
)


def encode_texts_command(
    captions: Optional[str] = typer.Argument(
        None, help="Captions artifact, or - (or nothing) to read its path from stdin."
    ),
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="A checkpoint (MLA, train-continual, train-ccrk, a whole CLIP), an open_clip "
        "name (with --pretrained), an hf-hub: name, or a transformers / sentence-transformers folder.",
    ),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag or weights file."),
    base: Optional[List[str]] = BaseOption,
    lang: List[str] = lang_option(
        "Only these languages (repeat or comma-separate); default: every language the "
        "model reads (the others are named on stderr). With --text / --lines: the "
        "sentences' one language (default en)."
    ),
    text: List[str] = typer.Option(
        [],
        "--text",
        help="A sentence to encode instead of a captions artifact "
        "(repeat for more); ids LANG:1, LANG:2, ... in the order given.",
    ),
    lines: Optional[Path] = typer.Option(
        None,
        "--lines",
        help="A UTF-8 file of sentences to encode instead of a "
        "captions artifact, one a line (blank lines skipped); ids LANG:LINE.",
    ),
    split: List[str] = typer.Option(
        [], "--split", metavar=LIST_METAVAR, help="Only these splits (repeat or comma-separate); default: every split."
    ),
    out: str = out_option("Output embeddings artifact directory."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, help="Captions per forward pass."),
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Encode captions into L2-normalised text embeddings (rows: id = lang:caption_id, with lang, image_id,
    caption_id, split), each language through the model's own path; read by `evaluate --texts` and `index`.
    Or plain sentences (--text, --lines) in one language, without a captions artifact."""
    from mltk.encode.texts import write_text_embeddings

    sentences = bool(text) or lines is not None  # then no captions artifact, not even from stdin
    path = write_text_embeddings(
        captions if sentences else resolve_input(captions, what="captions"),
        model,
        Path(out),
        pretrained=pretrained,
        languages=list(split_list(lang)) or None,
        splits=list(split_list(split)) or None,
        device=device,
        precision=precision,
        batch_size=batch_size,
        texts=list(text),
        lines=lines,
    )
    emit(path, as_json)


def register(app: typer.Typer) -> None:
    app.command("encode-texts", epilog=EXAMPLE)(encode_texts_command)
