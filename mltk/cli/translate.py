"""``mltk translate-data``: captions plus their machine translations (or joined existing translations)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mltk.cli.common import either, emit, examples, hidden_alias, out_option, resolve_input, split_list
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt
from mltk.core.errors import ConfigError

BACKENDS = ("seq2seq", "join")
# mltk.translate.DEFAULT_MODEL (importing it would import torch for --help; a test keeps them equal)
DEFAULT_MODEL = "Helsinki-NLP/opus-mt-{src}-{tgt}"
EXAMPLE = examples(
    "mltk translate-data world/captions -t de,fr -o data/caps-mt",
    "mltk translate-data caps --backend join --translations de.tsv -o caps-de",
)


TargetOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--target",
        "-t",
        metavar="A[,B...]",
        help="Target ISO 639-1 code; repeat it or give a comma list (de,fr). With "
        "--backend join, leaving it out takes every language in the files.",
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend", help="seq2seq (a transformers model) or join (existing translations from --translations files)."
    ),
]
Seq2SeqModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="Hub name or local directory of a transformers seq2seq model: M2M-100 "
        "(facebook/m2m100_418M), NLLB (facebook/nllb-200-distilled-600M; ISO codes are mapped to NLLB's, e.g. de -> "
        "deu_Latn) or Marian/OPUS-MT, where {src} and {tgt} are filled per language pair.",
    ),
]
FamilyOpt = Annotated[
    str,
    typer.Option(
        "--family",
        help="Model family: auto (from the model's files or name), "
        "marian, m2m100, nllb or seq2seq (no language codes).",
    ),
]
TranslationsOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--translations",
        help="For --backend join (repeatable): a table with columns caption_id (or image_id), lang "
        "and caption, as .csv, .tsv/.tab (tab-separated, no quoting), .jsonl/.ndjson (one JSON object per line), "
        ".parquet, or a captions artifact directory. A caption_id key keeps the id (a translation of that caption); an "
        "image_id key takes the id of the image's only source caption, or a new id <image_id>#<lang>-<k> when the "
        "image has several.",
    ),
]
ShardSizeOpt = Annotated[
    int, typer.Option("--shard-size", help="Unique captions per resumable shard (a rerun skips finished shards).")
]
TranslateCacheOpt = Annotated[
    Optional[str],
    typer.Option(
        "--cache-dir",
        help="Translation cache directory (SQLite, keyed by model, decoding settings, languages and "
        "source text); default $MLTK_CACHE_DIR/translate or ~/.cache/mltk/translate.",
    ),
]
DropBadOpt = Annotated[
    bool,
    typer.Option(
        "--drop-bad",
        help="Drop translations failing a quality guard (empty, over-long, identical to the source, "
        "repeated n-gram loop); they are counted in the manifest's quality field either way.",
    ),
]
LengthRatioOpt = Annotated[
    float, typer.Option("--max-length-ratio", help="Over-long guard: translation chars / source chars above this.")
]


def translate_data(
    captions: Optional[str] = typer.Argument(
        None, help="Captions artifact (or a captions Parquet file); - or nothing reads its path from stdin."
    ),
    out: str = out_option("Output captions artifact directory."),
    source_lang: str = typer.Option("en", "--source-lang", help="ISO 639-1 code of the captions to translate."),
    target: TargetOpt = None,
    backend: BackendOpt = "seq2seq",
    model: Seq2SeqModelOpt = DEFAULT_MODEL,
    family: FamilyOpt = "auto",
    translations: TranslationsOpt = None,
    beams: int = typer.Option(4, "--beams", help="Beam size."),
    max_length: int = typer.Option(128, "--max-length", help="Most tokens read from a caption and generated."),
    batch_size: int = typer.Option(32, "--batch-size", help="Captions per batch (batches hold similar lengths)."),
    shard_size: ShardSizeOpt = 1024,
    cache_dir: TranslateCacheOpt = None,
    cache: Optional[str] = hidden_alias("--cache"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the translation cache."),
    drop_bad: DropBadOpt = False,
    max_length_ratio: LengthRatioOpt = 3.0,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Translate captions into target languages for translate-train data, keeping caption_id.

    Writes a captions artifact with the input rows plus one row per translation (same image_id, caption_id and
    split; lang = target; a source column says human, mt:<model> or join:<file>). Identical captions are
    translated once; a cache and resumable shards make reruns and interrupted runs translate nothing twice.
    """
    from mltk import artifacts
    from mltk.translate import GuardConfig, JoinConfig, TranslateConfig, translate_data

    input_path = resolve_input(captions, what="captions artifact")
    guards = GuardConfig(max_length_ratio=max_length_ratio)
    if backend not in BACKENDS:
        raise ConfigError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "join":
        path = translate_data(
            JoinConfig(
                translations=tuple(translations or ()),
                source_lang=source_lang,
                targets=split_list(target),
                drop_bad=drop_bad,
                guards=guards,
                captions=input_path,
                out=out,
            )
        )
    elif translations:
        raise ConfigError("--translations needs --backend join")
    else:
        path = translate_data(
            TranslateConfig(
                targets=split_list(target),
                source_lang=source_lang,
                model=model,
                family=family,
                beams=beams,
                max_length=max_length,
                batch_size=batch_size,
                shard_size=shard_size,
                device=device,
                precision=precision,
                cache_dir=either(cache_dir, cache, "--cache-dir", "--cache"),
                use_cache=not no_cache,
                drop_bad=drop_bad,
                guards=guards,
                captions=input_path,
                out=out,
            )
        )
    manifest = artifacts.read_manifest(path, "captions")
    emit(path, as_json, rows=manifest["rows"], languages=manifest["languages"], quality=manifest["quality"]["total"])


def register(app: typer.Typer) -> None:
    app.command("translate-data", epilog=EXAMPLE)(translate_data)
