"""FAISS indexes over embeddings artifacts: build, query, and a contact sheet of what a query retrieved.

An index artifact (kind ``index``) holds ``index.faiss`` (``faiss.write_index``, never pickle) and ``ids.parquet``,
row i of which (``id`` plus the embedding table's other columns, e.g. ``image_id``, ``lang``) belongs to the
index's vector i. Scores are inner products; vectors (and queries) are L2-normalised first, so they are cosines.

- ``flat`` (default): ``IndexFlatIP``, exact; its results equal brute force.
- ``ivf``: ``IndexIVFFlat`` with ``nlist`` inverted lists trained by k-means on the vectors; ``nprobe`` lists
  are visited per query (more: slower, closer to exact).
- ``hnsw``: ``IndexHNSWFlat`` with ``hnsw_m`` neighbours per node; ``ef_search`` trades speed for recall.

``query(index_path, vectors, k)`` is the one search entry point: image queries pass image vectors
(``query_vectors_from_embeddings``, ``query_vectors_from_npy``); text queries pass texts encoded by a checkpoint
in their language (``query_vectors_from_texts``, through ``mltk.encode.texts``). ``write_contact_sheet`` lays out
what queries retrieved; ``mltk.index.sheet_drawing`` draws its tiles.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts import loose, schema
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log, resolve_runtime
from mltk.index.sheet_drawing import (  # noqa: F401 (API)
    CARD_BACKGROUND,
    INK,
    LABEL_LINES,
    MISSING_TILE,
    MUTED,
    SHEET_BACKGROUND,
    SHEET_MARGIN,
    TILE_GAP,
    SheetFonts,
    text_card,
    thumbnail,
    tile_labels,
)

INDEX_KINDS = ("flat", "ivf", "hnsw")


@dataclass(frozen=True)
class IndexConfig:
    """``mltk index build`` options (``nlist`` 0 picks about 4 * sqrt(count))."""

    embeddings: Path
    out: Path
    kind: str = "flat"
    nlist: int = 0
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 64
    seed: int = 0


# ----------------------------------------------------------------------------------------------------------------
# Build
# ----------------------------------------------------------------------------------------------------------------


def build_index(config: IndexConfig) -> Path:
    """Index the vectors of an embeddings artifact; returns the index artifact path."""
    if config.kind not in INDEX_KINDS:
        raise ConfigError(f"--kind must be one of {', '.join(INDEX_KINDS)}, got {config.kind!r}")
    existing = artifacts.reusable(config.out, "index", stage="index build", config=config, inputs=[config.embeddings])
    if existing is not None:
        return existing
    table, vectors = artifacts.load_embeddings(config.embeddings, lazy=True)  # one copy: float32, below
    if len(vectors) == 0:
        raise ArtifactError(
            "holds no vectors; an index of nothing would answer every query with nothing", config.embeddings
        )
    vectors = normalized_float32(vectors)
    index, settings = _new_index(config, vectors)
    log(f"indexing {len(vectors)} vectors of dim {vectors.shape[1]} ({config.kind})")
    index.add(vectors)
    with artifacts.ArtifactWriter(
        config.out, "index", stage="index build", config=config, inputs=[config.embeddings]
    ) as writer:
        artifacts.write_index_files(writer.dir, index, table)
        writer.manifest.update(
            index_kind=config.kind,
            count=int(index.ntotal),
            dim=int(vectors.shape[1]),
            metric="inner_product",
            normalized=True,
            **settings,
        )
    return writer.path


def normalized_float32(vectors: np.ndarray) -> np.ndarray:
    """Contiguous float32 rows of unit L2 norm (FAISS wants float32; cosine needs the norm)."""
    vectors = np.array(vectors, dtype=np.float32, order="C", copy=True)
    faiss.normalize_L2(vectors)
    return vectors


def _new_index(config: IndexConfig, vectors: np.ndarray) -> tuple[faiss.Index, dict]:
    count, dim = vectors.shape
    if config.kind == "flat":
        return faiss.IndexFlatIP(dim), {}
    if config.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = config.ef_search
        return index, {"hnsw_m": config.hnsw_m, "ef_search": config.ef_search}
    nlist = config.nlist or max(1, min(int(4 * math.sqrt(count)), count // 39 or 1))
    if nlist > count:
        raise ConfigError(f"--nlist {nlist} exceeds the {count} vectors to index; use a smaller --nlist or --kind flat")
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = config.seed
    index.train(vectors)
    index.nprobe = min(config.nprobe, nlist)  # the faiss wrapper keeps the quantizer alive with the index
    return index, {"nlist": nlist, "nprobe": index.nprobe}


# ----------------------------------------------------------------------------------------------------------------
# Query
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class OpenIndex:
    """A loaded index artifact: the FAISS index and the id row of each of its vectors."""

    path: Path
    index: faiss.Index
    ids: np.ndarray  # [count] str
    table: pa.Table  # ids.parquet (id plus the embedding table's other columns)
    manifest: dict

    def search(
        self, vectors: np.ndarray, k: int = 10, exclude: Sequence[str] | None = None
    ) -> list[tuple[list[str], list[float]]]:
        """Top-``k`` ``(ids, scores)`` per query vector [Q, d], best first (fewer when the index holds fewer).

        ``exclude`` (one id per query) leaves that id out of its query's results: a query taken from the indexed
        embeddings is its own nearest neighbour (cosine 1), which says nothing; one more is searched instead."""
        if k < 1:
            raise ConfigError(f"--k must be >= 1, got {k}")
        if self.index.ntotal == 0:
            raise ArtifactError("the index holds no vectors; there is nothing to search", self.path)
        queries = np.asarray(vectors)
        if queries.ndim != 2 or queries.shape[1] != self.index.d:
            raise ArtifactError(
                f"query vectors have shape {tuple(queries.shape)}, the index has dim {self.index.d}", self.path
            )
        if exclude is not None and len(exclude) != len(queries):
            raise ValueError(f"{len(exclude)} ids to exclude for {len(queries)} queries")
        wanted = min(k + (exclude is not None), self.index.ntotal)
        scores, positions = self.index.search(normalized_float32(queries), wanted)  # [Q, wanted] each
        results = []
        for number, (row, score) in enumerate(zip(positions, scores)):
            ids, kept = self.ids[row[row >= 0]].tolist(), score[row >= 0].tolist()
            if exclude is not None:
                pairs = [(i, s) for i, s in zip(ids, kept) if i != exclude[number]]
                ids, kept = [i for i, _ in pairs], [s for _, s in pairs]
            results.append((ids[:k], kept[:k]))
        return results


def open_index(path: Path) -> OpenIndex:
    """Load an index artifact (validated manifest, the FAISS file, and its id rows)."""
    path = Path(path)
    manifest, index, table = artifacts.read_index(path)
    if "nprobe" in manifest:
        faiss.extract_index_ivf(index).nprobe = manifest["nprobe"]
    if "ef_search" in manifest:
        index.hnsw.efSearch = manifest["ef_search"]
    ids = np.asarray(table.column(schema.EMBEDDING_ID_COLUMN).cast(pa.string()).to_pylist(), dtype=object)
    return OpenIndex(path, index, ids, table, manifest)


def query(index_path: Path, vectors: np.ndarray, k: int = 10) -> list[tuple[list[str], list[float]]]:
    """Search an index artifact: for each query vector [Q, d], its top-``k`` ``(ids, scores)``, best first."""
    return open_index(index_path).search(vectors, k)


def query_vectors_from_embeddings(path: Path, ids: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """Query ids and vectors from an embeddings artifact: the rows named by ``ids`` (all rows when empty)."""
    table, vectors = artifacts.load_embeddings(path, lazy=True)  # the rows asked for gathered from the shards
    all_ids = [str(i) for i in table.column(schema.EMBEDDING_ID_COLUMN).to_pylist()]
    if not ids:
        return all_ids, np.asarray(vectors)
    position = {identifier: row for row, identifier in enumerate(all_ids)}
    missing = [i for i in ids if i not in position]
    if missing:
        raise ArtifactError(f"no row with id {missing[0]!r} ({len(missing)} id(s) not found)", path)
    return list(ids), np.asarray(vectors[[position[i] for i in ids]])


def query_vectors_from_texts(
    texts: Sequence[str],
    lang: str,
    model: str,
    *,
    pretrained: str | None = None,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 256,
) -> tuple[list[str], np.ndarray]:
    """Text queries of one language encoded through ``model`` (a checkpoint artifact of any format that
    ``mltk.encode.texts`` reads, or an open_clip name with ``pretrained``), by that language's own path. The query
    ids are the texts; vectors [Q, d] are L2-normalised float32."""
    from mltk.encode.text_encoders import check_model_languages, load_model_encoder
    from mltk.encode.texts import encode_texts

    texts = [text.strip() for text in texts]
    if not texts or not all(texts):
        raise ConfigError("text queries must not be empty (give --text or a --text-file with non-blank lines)")
    runtime = resolve_runtime(device, precision)
    encoder = load_model_encoder(model, pretrained, runtime.device)
    check_model_languages(encoder, [lang], model)
    log(f"encoding {len(texts)} {lang} text quer{'y' if len(texts) == 1 else 'ies'} with {model}")
    return texts, encode_texts(encoder, texts, lang, runtime, batch_size, description=f"encoding {lang} queries")


def read_query_lines(path: Path) -> list[str]:
    """The non-blank lines of a UTF-8 text file, stripped (one query per line; blank lines are skipped)."""
    from mltk.core.user_files import read_user_text

    path = Path(path)
    lines = [line.strip() for line in read_user_text(path, what="--text-file of queries").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise ArtifactError("holds no query (every line is blank)", path)
    return lines


def query_vectors_from_npy(path: Path) -> tuple[list[str], np.ndarray]:
    """Query vectors from a plain ``.npy`` file [Q, d]; the query ids are the row numbers."""
    vectors = artifacts.load_array(path)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    if vectors.ndim != 2 or not np.isfinite(vectors).all():
        raise ArtifactError(f"expected a finite [queries, dim] array, got shape {vectors.shape}", path)
    return [str(i) for i in range(len(vectors))], vectors


# ----------------------------------------------------------------------------------------------------------------
# Contact sheet
# ----------------------------------------------------------------------------------------------------------------


def check_contact_sheet(out_png: Path, sources: Sequence[Path | None], overwrite: bool = False) -> None:
    """Refuse a --contact-sheet path before any query work: inside an input or an artifact, behind a symlink, or
    an existing file without ``overwrite`` (``mltk.artifacts.loose``)."""
    loose.check_target(out_png, [s for s in sources if s is not None], what="--contact-sheet", overwrite=overwrite)


def write_contact_sheet(
    out_png: Path,
    query_ids: Sequence[str],
    results: Sequence[tuple[list[str], list[float]]],
    images_path: Path,
    *,
    index: OpenIndex | None = None,
    thumb: int = 128,
    max_rows: int = 20,
    inputs: Sequence[Path] = (),
    overwrite: bool | None = None,
) -> Path:
    """A PNG grid: one row per query (at most ``max_rows``). The first tile is the query: its image when the
    images artifact has one with that id, else a card with the whole query text (wrapped; a text query's id is
    its text). Then the retrieved images, scaled to fill their tiles, each labelled with rank, score and image id
    (and the caption id, for a caption index). Text is set in Noto Sans CJK and Noto Sans Arabic (the fonts come
    as Python packages), so every script of the embedded world renders. Retrieved ids map to images through the
    index's ``image_id`` column when it has one (a caption index), else they are image ids."""
    from PIL import Image, ImageDraw

    sources = [images_path, *inputs, *([index.path] if index is not None else [])]
    loose.check_target(out_png, sources, what="--contact-sheet", overwrite=overwrite)  # before drawing
    images = _image_lookup(images_path)
    to_image_id = _image_id_mapper(index)
    _check_labels(query_ids[:max_rows], results[:max_rows], to_image_id, index.path if index else images_path)
    fonts = SheetFonts(max(11, thumb // 10))
    rows = min(len(results), max_rows)
    shown = [(query_id, ids, scores) for query_id, (ids, scores) in zip(query_ids[:rows], results[:rows])]
    text_queries = any(query_id not in images for query_id, _, _ in shown)
    first = 2 * thumb if text_queries else thumb  # a text card gets two tiles' width
    columns = max((len(ids) for _, ids, _ in shown), default=0)
    label = LABEL_LINES * fonts.line_height + 4
    width = 2 * SHEET_MARGIN + first + columns * (thumb + TILE_GAP)
    height = 2 * SHEET_MARGIN + max(rows, 1) * (thumb + label + TILE_GAP)
    sheet = Image.new("RGB", (width, height), SHEET_BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    for row, (query_id, ids, scores) in enumerate(shown):
        top = SHEET_MARGIN + row * (thumb + label + TILE_GAP)
        if query_id in images:
            sheet.paste(thumbnail(images, query_id, thumb, thumb), (SHEET_MARGIN, top))
            tile_labels(draw, fonts, (SHEET_MARGIN, top + thumb + 2), first, ["query image", query_id])
        else:
            text_card(draw, fonts, (SHEET_MARGIN, top, SHEET_MARGIN + first, top + thumb), query_id)
            tile_labels(draw, fonts, (SHEET_MARGIN, top + thumb + 2), first, ["text query"])
        for rank, (identifier, score) in enumerate(zip(ids, scores)):
            left = SHEET_MARGIN + first + TILE_GAP + rank * (thumb + TILE_GAP)
            image_id = to_image_id(identifier)
            sheet.paste(thumbnail(images, image_id, thumb, thumb), (left, top))
            if image_id not in images:
                draw.text((left + thumb / 2, top + thumb / 2), "no image", font=fonts.font(), fill=MUTED, anchor="mm")
            name = image_id if image_id == identifier else f"{image_id} ({identifier})"
            tile_labels(draw, fonts, (left, top + thumb + 2), thumb, [f"#{rank + 1}  {score:.3f}", name])
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return loose.write_file(out_png, buffer.getvalue(), sources, what="--contact-sheet", overwrite=overwrite)


def _check_labels(query_ids, results, to_image_id, source: Path) -> None:
    """Every id drawn as a label is one line: a newline or other control character in an id is refused (naming
    the artifact it came from) rather than failing deep inside the text layout."""
    from mltk.core.names import control_characters

    for identifier in [
        *query_ids,
        *(i for ids, _ in results for i in ids),
        *(to_image_id(i) for ids, _ in results for i in ids),
    ]:
        bad = control_characters(str(identifier))
        if bad:
            raise ArtifactError(
                f"id {str(identifier)[:60]!r} holds the control character {bad[0]}; the contact sheet cannot label it",
                source,
            )


def _image_lookup(images_path: Path) -> dict:
    table = artifacts.load_images(images_path)
    source = "image" if "image" in table.column_names else "path"
    return dict(zip(table.column("image_id").to_pylist(), table.column(source).to_pylist()))


def _image_id_mapper(index: OpenIndex | None):
    if index is None or "image_id" not in index.table.column_names:
        return lambda identifier: identifier
    mapping = dict(zip(index.ids.tolist(), index.table.column("image_id").cast(pa.string()).to_pylist()))
    return lambda identifier: mapping.get(identifier, identifier)
