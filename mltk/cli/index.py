"""``mltk index build`` and ``mltk index query``: FAISS search over embeddings artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (
    HELP_SETTINGS,
    BaseOption,
    artifact_role,
    either,
    emit,
    examples,
    hidden_alias,
    out_option,
    resolve_input,
    split_list,
)
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt, PretrainedOpt, SeedOpt
from mltk.core.errors import ConfigError

index_app = typer.Typer(
    help="Build a FAISS index over embeddings and query it.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings=HELP_SETTINGS,
)
BUILD_EXAMPLE = examples("mltk encode-images world/images -m runs/native -o emb \\", "  | mltk index build -o idx")
QUERY_EXAMPLE = examples(
    "mltk index query idx --text 'ein roter Kreis' --lang de --model runs/le",
    "mltk index query idx --images emb --ids test-000003 \\",
    "    --contact-sheet sheet.png --image-source world/images",
)


@index_app.command("build", epilog=BUILD_EXAMPLE)
def build(
    embeddings: Optional[str] = typer.Argument(None, help="Embeddings artifact, or - / nothing to read it from stdin."),
    out: Path = out_option("Directory of the index artifact to write."),
    kind: str = typer.Option("flat", "--kind", help="flat (exact inner product), ivf or hnsw (approximate)."),
    nlist: int = typer.Option(0, "--nlist", help="IVF lists (0: about 4 * sqrt(count))."),
    nprobe: int = typer.Option(16, "--nprobe", help="IVF lists visited per query."),
    hnsw_m: int = typer.Option(32, "--hnsw-m", help="HNSW neighbours per node."),
    ef_search: int = typer.Option(64, "--ef-search", help="HNSW search breadth."),
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Index the vectors of an embeddings artifact (cosine similarity) and print the index artifact path."""
    from mltk.index.faiss_index import IndexConfig, build_index  # faiss is imported only by the index commands

    path = resolve_input(embeddings, what="embeddings")
    config = IndexConfig(
        embeddings=path, out=out, kind=kind, nlist=nlist, nprobe=nprobe, hnsw_m=hnsw_m, ef_search=ef_search, seed=seed
    )
    emit(build_index(config), as_json)


@index_app.command("query", epilog=QUERY_EXAMPLE)
def query(
    index: str = typer.Argument(..., help="Index artifact."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings holding the queries."),
    image_emb: Optional[Path] = hidden_alias("--image-emb"),
    ids: List[str] = typer.Option(
        [],
        "--ids",
        metavar="A[,B...]",
        help="Ids of the query rows in --images (default: all rows); repeat or comma-separate.",
    ),
    vectors: Optional[Path] = typer.Option(None, "--vectors", help="Query vectors as a [queries, dim] .npy file."),
    text: List[str] = typer.Option([], "--text", help="A text query (repeatable), encoded by --model in --lang."),
    text_file: Optional[Path] = typer.Option(
        None, "--text-file", help="A UTF-8 file of text queries, one per line (blank lines skipped)."
    ),
    lang: str = typer.Option("en", "--lang", help="Language of the text queries (its own path through --model)."),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        "-m",
        help="Checkpoint (MLA, train-continual, a whole CLIP) or open_clip name for text queries.",
    ),
    pretrained: PretrainedOpt = None,
    base: Optional[List[str]] = BaseOption,
    k: int = typer.Option(10, "--k", help="Results per query."),
    contact_sheet: Optional[Path] = typer.Option(None, "--contact-sheet", help="Also write a PNG grid of results."),
    image_source: Optional[Path] = typer.Option(
        None, "--image-source", help="Images artifact (raw images) that --contact-sheet draws from."
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        envvar="MLTK_OVERWRITE",
        help="Replace a --contact-sheet mltk wrote earlier (never a file it did not make).",
    ),
    keep_self: bool = typer.Option(
        False,
        "--keep-self",
        help="--images queries: keep the query's own id in its "
        "results (left out by default: a query is its own first hit).",
    ),
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
) -> None:
    """Print one JSON line per query on stdout: {"query": id, "results": [{"id": ..., "score": ...}, ...]}.

    Queries are image vectors (--images or --vectors) or texts (--text / --text-file with --model and --lang;
    the query id is the text). An --images query's own id is left out of its results unless --keep-self."""
    from mltk.core.runtime import log
    from mltk.evaluate.scorer import refuse_unless_cosine
    from mltk.index.faiss_index import check_contact_sheet, open_index, write_contact_sheet

    if contact_sheet is not None and image_source is None:
        raise ConfigError("--contact-sheet needs --image-source (the images artifact to draw from)")
    image_emb = either(images, image_emb, "--images", "--image-emb")
    opened = open_index(resolve_input(index, what="index"))
    refuse_unless_cosine("index query", [model, opened.path, image_emb])  # a FAISS index ranks by cosine only
    sheet_inputs = [p for p in (image_emb, vectors, text_file) if p is not None]
    if contact_sheet is not None:  # refused before any query work (inside an input, an existing file)
        check_contact_sheet(contact_sheet, [image_source, opened.path, *sheet_inputs], overwrite)
    query_ids, query_matrix = _query_vectors(
        image_emb, ids, vectors, text, text_file, lang, model, pretrained, device, precision
    )
    results = opened.search(query_matrix, k, exclude=query_ids if image_emb is not None and not keep_self else None)
    if contact_sheet is not None:  # first: a refused sheet leaves stdout empty
        sheet = write_contact_sheet(
            contact_sheet, query_ids, results, image_source, index=opened, inputs=sheet_inputs, overwrite=overwrite
        )
        log(f"contact sheet written to {sheet}")
    for query_id, (result_ids, scores) in zip(query_ids, results):
        typer.echo(
            json.dumps(
                {"query": query_id, "results": [{"id": i, "score": s} for i, s in zip(result_ids, scores)]},
                ensure_ascii=False,
            )
        )


def _query_vectors(
    image_emb: Path | None,
    ids: List[str],
    vectors: Path | None,
    text: List[str],
    text_file: Path | None,
    lang: str,
    model: str | None,
    pretrained: str | None,
    device: str,
    precision: str,
):
    """The query ids and vectors of exactly one kind of query: image embeddings, a .npy file or texts."""
    from mltk.index.faiss_index import (
        query_vectors_from_embeddings,
        query_vectors_from_npy,
        query_vectors_from_texts,
        read_query_lines,
    )

    if image_emb is not None and artifact_role(image_emb) == "images":  # --images once named raw images
        raise ConfigError(
            f"--images takes image embeddings, and {image_emb} holds raw images; the images that "
            "--contact-sheet draws are --image-source"
        )
    texts = list(text) + (read_query_lines(text_file) if text_file is not None else [])
    if sum((image_emb is not None, vectors is not None, bool(texts))) != 1:
        raise ConfigError("give exactly one kind of query: --images, --vectors, or --text/--text-file")
    if texts and model is None:
        raise ConfigError("text queries need --model (the checkpoint that encodes them)")
    if model is not None and not texts:
        raise ConfigError("--model encodes text queries; give --text or --text-file")
    if texts:
        return query_vectors_from_texts(texts, lang, model, pretrained=pretrained, device=device, precision=precision)
    if image_emb is not None:
        return query_vectors_from_embeddings(image_emb, list(split_list(ids)))
    return query_vectors_from_npy(vectors)


def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")
