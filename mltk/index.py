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
in their language (``query_vectors_from_texts``, through ``mltk.encoders``).
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

from mltk import artifacts, schema
from mltk.errors import ArtifactError, ConfigError
from mltk.runtime import log, resolve_runtime

INDEX_FILE = "index.faiss"
IDS_FILE = "ids.parquet"
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
    existing = artifacts.reusable(config.out, "index", stage="index build", config=config,
                                  inputs=[config.embeddings])
    if existing is not None:
        return existing
    table, vectors = artifacts.load_embeddings(config.embeddings)
    vectors = normalized_float32(vectors)
    index, settings = _new_index(config, vectors)
    log(f"indexing {len(vectors)} vectors of dim {vectors.shape[1]} ({config.kind})")
    index.add(vectors)
    with artifacts.ArtifactWriter(config.out, "index", stage="index build", config=config,
                                  inputs=[config.embeddings]) as writer:
        faiss.write_index(index, str(writer.dir / INDEX_FILE))
        artifacts.write_table(writer.dir / IDS_FILE, table)
        writer.manifest.update(index_kind=config.kind, count=int(index.ntotal), dim=int(vectors.shape[1]),
                               metric="inner_product", normalized=True, **settings)
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
    ids: np.ndarray          # [count] str
    table: pa.Table          # ids.parquet (id plus the embedding table's other columns)
    manifest: dict

    def search(self, vectors: np.ndarray, k: int = 10) -> list[tuple[list[str], list[float]]]:
        """Top-``k`` ``(ids, scores)`` per query vector [Q, d], best first (fewer when the index holds fewer)."""
        if k < 1:
            raise ConfigError(f"--k must be >= 1, got {k}")
        queries = np.asarray(vectors)
        if queries.ndim != 2 or queries.shape[1] != self.index.d:
            raise ArtifactError(f"query vectors have shape {tuple(queries.shape)}, the index has dim {self.index.d}",
                                self.path)
        scores, positions = self.index.search(normalized_float32(queries), min(k, self.index.ntotal))
        return [(self.ids[row[row >= 0]].tolist(), score[row >= 0].tolist()) for row, score in zip(positions, scores)]


def open_index(path: Path) -> OpenIndex:
    """Load an index artifact (validated manifest, the FAISS file, and its id rows)."""
    path = Path(path)
    manifest = artifacts.read_manifest(path, "index")
    try:
        index = faiss.read_index(str(path / INDEX_FILE))
    except RuntimeError as exc:
        raise ArtifactError(f"cannot read {INDEX_FILE} ({str(exc).splitlines()[0]})", path)
    table = artifacts.read_table(path / IDS_FILE)
    artifacts.require_columns(table, [schema.EMBEDDING_ID_COLUMN], path / IDS_FILE)
    if table.num_rows != index.ntotal:
        raise ArtifactError(f"{IDS_FILE} has {table.num_rows} rows but the index holds {index.ntotal} vectors", path)
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
    table, vectors = artifacts.load_embeddings(path)
    all_ids = [str(i) for i in table.column(schema.EMBEDDING_ID_COLUMN).to_pylist()]
    if not ids:
        return all_ids, np.asarray(vectors)
    position = {identifier: row for row, identifier in enumerate(all_ids)}
    missing = [i for i in ids if i not in position]
    if missing:
        raise ArtifactError(f"no row with id {missing[0]!r} ({len(missing)} id(s) not found)", path)
    return list(ids), np.asarray(vectors[[position[i] for i in ids]])


def query_vectors_from_texts(texts: Sequence[str], lang: str, model: str, *, pretrained: str | None = None,
                             device: str = "auto", precision: str = "auto", batch_size: int = 256
                             ) -> tuple[list[str], np.ndarray]:
    """Text queries of one language encoded through ``model`` (a checkpoint artifact of any format that
    ``mltk.encoders`` reads, or an open_clip name with ``pretrained``), by that language's own path. The query
    ids are the texts; vectors [Q, d] are L2-normalised float32."""
    from mltk.encoders import encode_texts
    from mltk.evaluate import check_model_languages, load_model_encoder

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
    path = Path(path)
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except FileNotFoundError:
        raise ArtifactError("no such file or directory", path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"cannot read the query lines ({exc})", path)
    lines = [line for line in lines if line]
    if not lines:
        raise ArtifactError("holds no query (every line is blank)", path)
    return lines


def query_vectors_from_npy(path: Path) -> tuple[list[str], np.ndarray]:
    """Query vectors from a plain ``.npy`` file [Q, d]; the query ids are the row numbers."""
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"cannot read a NumPy array ({exc})", path)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    if vectors.ndim != 2 or not np.isfinite(vectors).all():
        raise ArtifactError(f"expected a finite [queries, dim] array, got shape {vectors.shape}", path)
    return [str(i) for i in range(len(vectors))], vectors


# ----------------------------------------------------------------------------------------------------------------
# Contact sheet
# ----------------------------------------------------------------------------------------------------------------


def write_contact_sheet(out_png: Path, query_ids: Sequence[str], results: Sequence[tuple[list[str], list[float]]],
                        images_path: Path, *, index: OpenIndex | None = None, thumb: int = 128,
                        max_rows: int = 20) -> Path:
    """A PNG grid: one row per query (at most ``max_rows``), the query image first when the images artifact has
    it, then the retrieved images labelled with rank and score. Retrieved ids map to images through the index's
    ``image_id`` column when it has one (a caption index), else they are image ids."""
    from PIL import Image, ImageDraw

    images = _image_lookup(images_path)
    to_image_id = _image_id_mapper(index)
    columns = 1 + max((len(ids) for ids, _ in results), default=0)
    rows = min(len(results), max_rows)
    sheet = Image.new("RGB", (columns * thumb, max(rows, 1) * (thumb + 14)), "white")
    draw = ImageDraw.Draw(sheet)
    for row, (query_id, (ids, scores)) in enumerate(zip(query_ids[:rows], results[:rows])):
        top = row * (thumb + 14)
        cells = [(query_id, f"query {query_id}")] + [(to_image_id(i), f"{rank + 1}: {score:.3f}")
                                                     for rank, (i, score) in enumerate(zip(ids, scores))]
        for column, (image_id, label) in enumerate(cells):
            sheet.paste(_thumbnail(images, image_id, thumb), (column * thumb, top))
            draw.text((column * thumb + 2, top + thumb), label[:22], fill="black")
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    tmp = out_png.with_name(out_png.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(out_png)
    return out_png


def _image_lookup(images_path: Path) -> dict:
    table = artifacts.load_images(images_path)
    source = "image" if "image" in table.column_names else "path"
    return dict(zip(table.column("image_id").to_pylist(), table.column(source).to_pylist()))


def _image_id_mapper(index: OpenIndex | None):
    if index is None or "image_id" not in index.table.column_names:
        return lambda identifier: identifier
    mapping = dict(zip(index.ids.tolist(), index.table.column("image_id").cast(pa.string()).to_pylist()))
    return lambda identifier: mapping.get(identifier, identifier)


def _thumbnail(images: dict, image_id: str, size: int):
    """The image as a ``size`` x ``size`` tile (letterboxed); a grey tile when it is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    tile = Image.new("RGB", (size, size), (200, 200, 200))
    source = images.get(image_id)
    if source is None:
        return tile
    try:
        picture = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source).convert("RGB")
    except (OSError, UnidentifiedImageError):
        return tile
    picture.thumbnail((size, size))
    tile.paste(picture, ((size - picture.width) // 2, (size - picture.height) // 2))
    return tile
