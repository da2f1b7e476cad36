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
in their language (``query_vectors_from_texts``, through ``mltk.encode.texts``).
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
    if len(vectors) == 0:
        raise ArtifactError("holds no vectors; an index of nothing would answer every query with nothing",
                            config.embeddings)
    vectors = normalized_float32(vectors)
    index, settings = _new_index(config, vectors)
    log(f"indexing {len(vectors)} vectors of dim {vectors.shape[1]} ({config.kind})")
    index.add(vectors)
    with artifacts.ArtifactWriter(config.out, "index", stage="index build", config=config,
                                  inputs=[config.embeddings]) as writer:
        artifacts.write_index_files(writer.dir, index, table)
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

    def search(self, vectors: np.ndarray, k: int = 10, exclude: Sequence[str] | None = None
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
            raise ArtifactError(f"query vectors have shape {tuple(queries.shape)}, the index has dim {self.index.d}",
                                self.path)
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


TILE_GAP, LABEL_LINES, SHEET_MARGIN = 8, 2, 12
SHEET_BACKGROUND, CARD_BACKGROUND, MISSING_TILE, INK, MUTED = "white", (255, 248, 225), (200, 200, 200), (25, 25, 25), \
    (105, 105, 105)


def check_contact_sheet(out_png: Path, sources: Sequence[Path | None], overwrite: bool = False) -> None:
    """Refuse a --contact-sheet path before any query work: inside an input or an artifact, behind a symlink, or
    an existing file without ``overwrite`` (``mltk.artifacts.loose``)."""
    loose.check_target(out_png, [s for s in sources if s is not None], what="--contact-sheet", overwrite=overwrite)


def write_contact_sheet(out_png: Path, query_ids: Sequence[str], results: Sequence[tuple[list[str], list[float]]],
                        images_path: Path, *, index: OpenIndex | None = None, thumb: int = 128,
                        max_rows: int = 20, inputs: Sequence[Path] = (), overwrite: bool | None = None) -> Path:
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
            sheet.paste(_thumbnail(images, query_id, thumb, thumb), (SHEET_MARGIN, top))
            _labels(draw, fonts, (SHEET_MARGIN, top + thumb + 2), first, ["query image", query_id])
        else:
            _text_card(draw, fonts, (SHEET_MARGIN, top, SHEET_MARGIN + first, top + thumb), query_id)
            _labels(draw, fonts, (SHEET_MARGIN, top + thumb + 2), first, ["text query"])
        for rank, (identifier, score) in enumerate(zip(ids, scores)):
            left = SHEET_MARGIN + first + TILE_GAP + rank * (thumb + TILE_GAP)
            image_id = to_image_id(identifier)
            sheet.paste(_thumbnail(images, image_id, thumb, thumb), (left, top))
            if image_id not in images:
                draw.text((left + thumb / 2, top + thumb / 2), "no image", font=fonts.font(), fill=MUTED, anchor="mm")
            name = image_id if image_id == identifier else f"{image_id} ({identifier})"
            _labels(draw, fonts, (left, top + thumb + 2), thumb, [f"#{rank + 1}  {score:.3f}", name])
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return loose.write_file(out_png, buffer.getvalue(), sources, what="--contact-sheet", overwrite=overwrite)


def _check_labels(query_ids, results, to_image_id, source: Path) -> None:
    """Every id drawn as a label is one line: a newline or other control character in an id is refused (naming
    the artifact it came from) rather than failing deep inside the text layout."""
    from mltk.core.names import control_characters

    for identifier in [*query_ids, *(i for ids, _ in results for i in ids), *(to_image_id(i) for ids, _ in results
                                                                             for i in ids)]:
        bad = control_characters(str(identifier))
        if bad:
            raise ArtifactError(f"id {str(identifier)[:60]!r} holds the control character {bad[0]}; the contact "
                                f"sheet cannot label it", source)


_ARABIC = ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF))
_KANA = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))
_CJK = ((0x2E80, 0x9FFF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF))


def _in(ranges, text: str) -> bool:
    return any(low <= ord(ch) <= high for ch in text for low, high in ranges)


class SheetFonts:
    """The contact sheet's fonts at one size: Noto Sans (Latin, Greek, Cyrillic), Noto Sans CJK SC for Han and
    its JP face for text with kana, and Noto Sans Arabic, set right to left through raqm where Pillow has it
    (raqm also joins the letters). Without the font packages Pillow's own font is used (Latin only)."""

    def __init__(self, size: int):
        from PIL import ImageFont, features

        self.size = size
        self.bidi = features.check("raqm")
        self.layout = ImageFont.Layout.RAQM if self.bidi else ImageFont.Layout.BASIC
        try:
            import fontpkg_noto_sans
            import fontpkg_noto_sans_arabic
            import noto_cjk_sans_otc

            cjk = str(noto_cjk_sans_otc.FONT_PATH)  # a collection: face 0 is JP, face 2 SC
            arabic = str(next((fontpkg_noto_sans_arabic.ROOT / "files").glob("NotoSansArabic*.ttf")))
            sans = str(next((fontpkg_noto_sans.ROOT / "files").glob("NotoSans[[]*.ttf")))
            self.faces = {"sans": (sans, 0), "sc": (cjk, 2), "jp": (cjk, 0), "arabic": (arabic, 0)}
        except (ImportError, StopIteration):
            self.faces = {}
        self._cache: dict = {}
        self.line_height = round(size * 1.35)

    def font(self, text: str = "", size: int | None = None):
        """The face that covers ``text`` (Arabic, kana, Han, or else Noto Sans), at ``size``."""
        from PIL import ImageFont

        face = "arabic" if _in(_ARABIC, text) else "jp" if _in(_KANA, text) else "sc" if _in(_CJK, text) else "sans"
        key = (face, size or self.size)
        if key not in self._cache:
            if face in self.faces:
                path, index = self.faces[face]
                self._cache[key] = ImageFont.truetype(path, key[1], index=index, layout_engine=self.layout)
            else:
                self._cache[key] = ImageFont.load_default(size=key[1])
        return self._cache[key]

    def direction(self, text: str) -> str | None:
        """``rtl`` for Arabic where raqm can lay it out (it also joins the letters), else the default."""
        return "rtl" if self.bidi and _in(_ARABIC, text) else None


def _wrap(text: str, font, width: float, direction: str | None) -> list[str]:
    """Greedy line breaking at spaces, and between any two CJK characters, to fit ``width`` pixels."""
    import re

    units = re.findall(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef][\s\u3000-\u303f\uff01-\uff0f]*|[^\s\u2e80-\u9fff"
                       r"\uf900-\ufaff\uff00-\uffef]+\s*|\s+", text)
    lines, line = [], ""
    for unit in units:
        if line and font.getlength((line + unit).rstrip(), direction=direction) > width:
            lines.append(line.rstrip())
            line = unit.lstrip()
        else:
            line += unit
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _text_card(draw, fonts: SheetFonts, box: tuple[int, int, int, int], text: str) -> None:
    """The whole of ``text`` wrapped into ``box``, at the largest size (down to 8 px) at which it fits."""
    left, top, right, bottom = box
    draw.rectangle(box, fill=CARD_BACKGROUND, outline=(225, 205, 150))
    pad, direction = 8, fonts.direction(text)
    for size in range(round(fonts.size * 1.5), 7, -1):
        font = fonts.font(text, size)
        lines = _wrap(text, font, right - left - 2 * pad, direction)
        line_height = round(size * 1.35)
        if len(lines) * line_height <= bottom - top - 2 * pad:
            break
    y = top + (bottom - top - len(lines) * line_height) / 2
    for line in lines:
        x, anchor = (right - pad, "ra") if direction == "rtl" else (left + pad, "la")
        draw.text((x, y), line, font=font, fill=INK, anchor=anchor, direction=direction)
        y += line_height


def _labels(draw, fonts: SheetFonts, origin: tuple[int, int], width: int, lines: list[str]) -> None:
    """Label lines under a tile, each shortened with an ellipsis only when it is wider than the tile."""
    x, y = origin
    for n, line in enumerate(lines[:LABEL_LINES]):
        font = fonts.font(line)
        while len(line) > 1 and font.getlength(line) > width:
            line = line[:-2] + "…"
        draw.text((x, y + n * fonts.line_height), line, font=font, fill=INK if n == 0 else MUTED)


def _image_lookup(images_path: Path) -> dict:
    table = artifacts.load_images(images_path)
    source = "image" if "image" in table.column_names else "path"
    return dict(zip(table.column("image_id").to_pylist(), table.column(source).to_pylist()))


def _image_id_mapper(index: OpenIndex | None):
    if index is None or "image_id" not in index.table.column_names:
        return lambda identifier: identifier
    mapping = dict(zip(index.ids.tolist(), index.table.column("image_id").cast(pa.string()).to_pylist()))
    return lambda identifier: mapping.get(identifier, identifier)


def _thumbnail(images: dict, image_id: str, width: int, height: int):
    """The image scaled (up or down, aspect kept) to fill a ``width`` x ``height`` tile, centred on a light
    background; a grey tile when it is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    tile = Image.new("RGB", (width, height), MISSING_TILE)
    source = images.get(image_id)
    if source is None:
        return tile  # the label under it names the id
    try:
        picture = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source).convert("RGB")
    except (OSError, UnidentifiedImageError):
        return tile
    scale = min(width / picture.width, height / picture.height)
    size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
    picture = picture.resize(size, Image.Resampling.LANCZOS if scale < 1 else Image.Resampling.BICUBIC)
    tile.paste((240, 240, 240), (0, 0, width, height))
    tile.paste(picture, ((width - size[0]) // 2, (height - size[1]) // 2))
    return tile
