"""``mltk export``: a checkpoint as an open_clip, transformers, sentence-transformers or standalone MLA folder."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import BaseOption, emit, examples, out_option, resolve_input
from mltk.cli.options import JsonOpt

EXAMPLE = examples(
    "mltk export runs/native --format open_clip -o export/clip",
    "mltk export runs/real-text/full-de --format sentence-transformers \\",
    "  -o export/minilm-de",
    "mltk export runs/real-text/mla-de --format mla -o export/mla-de",
)


def export_command(
    checkpoint: Optional[str] = typer.Argument(
        None,
        metavar="[CHECKPOINT]",
        help="Checkpoint artifact (mltk "
        "pretrain, train-nlt/train-le, train-continual on a text-only "
        "Hugging Face tower), or - / nothing to read its path from stdin.",
    ),
    export_format: str = typer.Option(
        ...,
        "--format",
        "-f",
        metavar="open_clip|transformers|sentence-transformers|mla",
        help="What to write (see above); a format that does not apply to the "
        "checkpoint is refused (exit 2, one line saying why).",
    ),
    out: Path = out_option(
        "Folder to write (a plain folder the other tool reads, not an mltk artifact); an existing "
        "one is replaced (--overwrite) only if it is an earlier export or empty."
    ),
    base: Optional[List[str]] = BaseOption,
    as_json: JsonOpt = False,
) -> None:
    """Export CHECKPOINT as a folder that open_clip, transformers or sentence-transformers load with no mltk code.

    open_clip: a whole CLIP (mltk pretrain) as an open_clip local-dir: folder: open_clip_config.json (the full
    model_cfg and preprocess_cfg) and open_clip_model.safetensors, i.e. both towers, the logit scale and the eval
    transform.

    transformers: a train-nlt --train full student or a CLL-CLIP table (cll-clip, oewc, er, der) on a text-only
    Hugging Face tower as an AutoModel folder: the trained encoder with the non-native table folded into its word
    embeddings (table @ proj.T + bias), the base's pooler and the tokenizer (a grown WordPiece vocabulary
    included); pool as mltk_export.json says.

    sentence-transformers: the same plus modules.json, Pooling, the tower's Dense and Normalize modules and
    max_seq_length, so SentenceTransformer.encode gives mltk's vectors.

    mla: MLA acquirers, which cannot be folded into a tower, as a self-contained folder: the base (an open_clip
    local-dir: or transformers folder), acquirers.safetensors (the non-native embedding and every language's
    acquirers), the non-native tokenizer and mla_loader.py, a standalone loader (torch, safetensors,
    open_clip/transformers; no mltk)."""
    from mltk.export import ExportConfig, export_checkpoint

    source = resolve_input(checkpoint, what="checkpoint")
    emit(
        export_checkpoint(ExportConfig(checkpoint=source, format=export_format, out=out)), as_json, format=export_format
    )


def register(app: typer.Typer) -> None:
    app.command("export", epilog=EXAMPLE)(export_command)
