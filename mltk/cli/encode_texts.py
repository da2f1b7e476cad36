"""``mltk encode-texts``: captions -> a text embeddings artifact, with any supported text model."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import DeviceOption, JsonOption, PrecisionOption, emit, resolve_input


def encode_texts_command(
    captions: Optional[str] = typer.Argument(None, help="Captions artifact, or - to read its path from stdin."),
    model: str = typer.Option(
        ..., "--model", "-m", help="A checkpoint (MLA, train-continual, train-ccrk, a whole CLIP), an open_clip "
        "name (with --pretrained), an hf-hub: name, or a transformers / sentence-transformers folder."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag or weights file."),
    lang: List[str] = typer.Option([], "--lang", help="Only these languages (repeat or comma-separate)."),
    split: List[str] = typer.Option([], "--split", help="Only this split (repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output embeddings artifact directory."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, help="Captions per forward pass."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    as_json: bool = JsonOption,
) -> None:
    """Encode captions into L2-normalised text embeddings (rows: id = lang:caption_id, with lang, image_id,
    caption_id, split), each language through the model's own path; read by `evaluate --texts` and `index`."""
    from mltk.encode_texts import write_text_embeddings

    languages = [item.strip() for value in lang for item in value.split(",") if item.strip()]
    path = write_text_embeddings(resolve_input(captions, what="captions"), model, out, pretrained=pretrained,
                                 languages=languages or None, splits=list(split) or None, device=device,
                                 precision=precision, batch_size=batch_size)
    emit(path, as_json)


def register(app: typer.Typer) -> None:
    app.command("encode-texts")(encode_texts_command)
