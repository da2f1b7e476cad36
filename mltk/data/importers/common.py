"""What every importer shares: the rows it collects (``Imported``), how it reads files, where images are, and
what it was asked for (``ImportRequest``)."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, SchemaError
from mltk.core.user_files import MAX_CORPUS_BYTES, read_user_bytes

# Codes seen in public files that are not ISO 639-1 although an ISO 639-1 code exists.
LANGUAGE_ALIASES = {"jp": "ja", "cz": "cs", "gr": "el", "dk": "da", "iw": "he", "in": "id", "ji": "yi"}


def normalize_lang(code: str) -> str:
    """``jp`` -> ``ja``, ``zh-CN`` -> ``zh``, ``DE`` -> ``de``; ISO 639-3 codes without an ISO 639-1 equivalent
    (``fil``, ``quz`` in Crossmodal-3600) are kept."""
    base = re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]
    return LANGUAGE_ALIASES.get(base, base)


# What ``str.strip()`` strips (``str.isspace``), for Arrow's ``utf8_trim``.
PYTHON_WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())

NOT_LANGUAGES = frozenset(
    {"gz", "txt", "md", "csv", "tsv", "zip", "tar", "bz2", "xz", "json", "jpg", "png", "py", "sh"}
)


def is_language_code(code: str) -> bool:
    """Two or three lower-case letters that are not a common file extension (``val.txt`` is not Tatar)."""
    return re.fullmatch(r"[a-z]{2,3}", code) is not None and code not in NOT_LANGUAGES


class ImageRoots:
    """Folders a dataset's image names are relative to (``--images-root``, repeatable). A name resolves to the
    first root that holds the file (XTD10 mixes COCO train2014 and val2014 images, kept in two folders); a name
    found in no root resolves against the first root and is counted in ``missing`` (reported when several roots
    were given, since then the user expects every file to be found)."""

    def __init__(self, roots: Sequence[Path]):
        self.roots = [Path(root).resolve() for root in roots]
        self.missing = 0

    def path(self, name: str) -> str:
        if "://" in name or os.path.isabs(name):
            return name
        if len(self.roots) > 1:
            for root in self.roots:
                candidate = root / name
                if candidate.exists():
                    return str(candidate)
            self.missing += 1
        return str(self.roots[0] / name)

    def paths(self, names: pa.Array) -> pa.Array:
        """``path`` of every name of a string array: joined in Arrow under a single root when the name is a plain
        relative one (no ``.`` or empty part, no trailing slash), one by one otherwise."""
        names = pc.cast(names, pa.string())
        if len(self.roots) > 1:
            return pa.array([self.path(name) for name in names.to_pylist()], pa.string())
        odd = pc.match_substring_regex(names, r"^$|^/|://|//|/$|(^|/)\.(/|$)")
        joined = pc.binary_join_element_wise(str(self.roots[0]).rstrip("/") + "/", names, "")
        if not pc.any(odd).as_py():
            return joined
        values = [self.path(name) for name in pc.filter(names, odd).to_pylist()]
        return pc.replace_with_mask(joined, odd, pa.array(values, pa.string()))


@dataclass(frozen=True)
class ImportRequest:
    """What the user asked for besides the source: splits to keep, the language of a single file, and where
    the images are."""

    images: ImageRoots
    splits: tuple[str, ...] = ()
    lang: str | None = None
    image_list: Path | None = None  # import-data lines: the image of each line
    translation_of: str | None = None  # import-data lines: the language the lines translate ...
    parent: Path | None = None  # ... in this captions artifact
    test_list: Path | None = None  # import-data msrvtt: the 1K-A test list (JSFusion's CSV)
    task: str | None = None  # import-data multi30k: task1 (translations) or task2 (descriptions)

    def wants(self, split: str) -> bool:
        return not self.splits or split in self.splits


@dataclass
class Imported:
    """Caption rows (long format) and the images they reference, in reading order."""

    rows: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in schema.CAPTION_COLUMNS})
    extra: dict[str, list[str]] = field(default_factory=dict)
    images: dict[str, tuple[str, str]] = field(default_factory=dict)  # image_id -> (split, path)
    dropped_empty: Counter = field(default_factory=Counter)  # lang -> captions dropped because empty
    image_split_conflicts: int = 0
    skipped: list[str] = field(default_factory=list)  # files not read, each with why (logged by the stage)
    read: list[Path] = field(default_factory=list)  # caption files read (named on stderr by the stage)
    notes: list[str] = field(default_factory=list)  # what the user should know about the import (stderr)
    caption_tables: list[pa.Table] = field(default_factory=list)  # rows added a column at a time, after ``rows``
    image_table: pa.Table | None = None  # image_id, split, path: the images of an importer that works in columns

    caption_pieces: Iterator[pa.Table] | None = None  # rows streamed to the writer, after ``rows``; see ``column_rows``
    image_pieces: Callable[[], Iterator[pa.Table]] | None = None  # the images table a block at a time, instead
    image_rows: int = 0  # ... and its rows
    cleanup: Callable[[], None] | None = None  # what the importer leaves to remove once the artifacts are written

    def add_columns(self, image_id: pa.Array, lang: str, caption: pa.Array, caption_id: pa.Array, split: str) -> None:
        """``add`` for whole columns (Arrow arrays of one length): captions stripped as ``str.strip`` does, empty
        ones dropped and counted."""
        self.caption_tables.append(self.column_rows(image_id, lang, caption, caption_id, split))

    def column_rows(
        self, image_id: pa.Array, lang: str, caption: pa.Array, caption_id: pa.Array, split: str
    ) -> pa.Table:
        """The caption rows of whole columns, as ``add_columns`` keeps them (empty captions dropped and counted)."""
        text = pc.utf8_trim(pc.fill_null(caption, ""), PYTHON_WHITESPACE)
        empty = pc.equal(pc.utf8_length(text), 0)
        dropped = pc.sum(empty).as_py() or 0
        if dropped:
            self.dropped_empty[lang] += dropped
        rows = pa.table(
            {
                "image_id": image_id,
                "lang": pa.nulls(len(text), pa.string()).fill_null(lang),
                "caption": text,
                "caption_id": caption_id,
                "split": pa.nulls(len(text), pa.string()).fill_null(split),
            }
        )
        return rows.filter(pc.invert(empty)) if dropped else rows

    def image_count(self) -> int:
        if self.image_pieces is not None:
            return self.image_rows
        return self.image_table.num_rows if self.image_table is not None else len(self.images)

    def add(self, image_id: str, lang: str, caption: str | None, caption_id: str, split: str, **extra: str) -> None:
        text = (caption or "").strip()
        if not text:
            self.dropped_empty[lang] += 1
            return
        for name, value in zip(schema.CAPTION_COLUMNS, (image_id, lang, text, caption_id, split)):
            self.rows[name].append(value)
        for name, value in extra.items():
            self.extra.setdefault(name, [None] * (len(self.rows["lang"]) - 1)).append(value)
        for name, values in self.extra.items():  # columns some rows lack stay aligned (null there)
            if len(values) < len(self.rows["lang"]):
                values.append(None)

    def add_image(self, image_id: str, split: str, path: str) -> None:
        known = self.images.setdefault(image_id, (split, path))
        if known[0] != split:
            self.image_split_conflicts += 1

    def captions_table(self) -> pa.Table:
        columns = {**self.rows, **self.extra}
        table = pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})
        if not self.caption_tables:
            return table
        parts = ([table] if table.num_rows else []) + self.caption_tables
        return pa.concat_tables(parts, promote_options="default").combine_chunks()

    def images_table(self) -> pa.Table:
        if self.image_table is not None:
            return self.image_table
        ids = list(self.images)
        return pa.table(
            {
                "image_id": pa.array(ids, pa.string()),
                "split": pa.array([self.images[i][0] for i in ids], pa.string()),
                "path": pa.array([self.images[i][1] for i in ids], pa.string()),
            }
        )


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (optionally gzipped), without a trailing CR. Splits on ``\\n`` only: captions
    may contain other Unicode line separators, and ``str.splitlines`` would cut them. Read up to
    ``MAX_CORPUS_BYTES`` (a FIFO, a device or a gzip bomb no further), a directory or a special file said as such."""
    lines = _decoded(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines_array(path: Path) -> pa.Array:
    """``read_lines`` as an Arrow string array, split by Arrow (no Python string per line)."""
    text = _decoded(path)
    lines = pc.list_flatten(pc.split_pattern(pa.array([text], pa.large_string()), "\n"))
    if len(lines) and lines[-1].as_py() == "":
        lines = lines.slice(0, len(lines) - 1)
    return pc.replace_substring_regex(lines, "\r$", "").cast(pa.string())


LINE_BLOCK_BYTES = 1 << 22  # bytes of a caption file split into lines at once (its Arrow temporaries: about 8x)


def iter_line_blocks(path: Path, block_bytes: int | None = None) -> Iterator[pa.Array]:
    """``read_lines_array`` a block of whole lines at a time (about ``block_bytes`` of text each): the lines of a
    file of any size with memory for one block. A file ``read_lines`` refuses (not UTF-8, too large, a broken gzip
    stream, not a file) is read by it once more, so that the refusal is the same."""
    started = False
    try:
        for block in _line_blocks(path, block_bytes or LINE_BLOCK_BYTES):
            started = True
            yield block
    except _NotPlain:
        if not started:  # a FIFO, a device, or a file the whole-file reader refuses
            yield read_lines_array(path)
            return
        _decoded(path)  # raises the whole-file reader's message
        raise ArtifactError("changed while it was read", path) from None


class _NotPlain(Exception):
    """A file the block reader leaves to the whole-file reader's refusal."""


def _line_blocks(path: Path, block_bytes: int) -> Iterator[pa.Array]:
    if not path.is_file():
        raise _NotPlain
    try:
        raw = open(path, "rb")
    except OSError:
        raise _NotPlain from None
    with raw, gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw as handle:
        carry, total, first = b"", 0, True
        while True:
            try:
                chunk = handle.read(max(block_bytes, 3) if first else block_bytes)  # the BOM whole
            except (OSError, EOFError):
                raise _NotPlain from None
            total += len(chunk)
            if total > MAX_CORPUS_BYTES:
                raise _NotPlain
            data = carry + chunk
            if first and data[:3] == b"\xef\xbb\xbf":
                data = data[3:]
            first = False
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                yield _split_block(data[:cut], last=not chunk)
            if not chunk:
                return


def _split_block(data: bytes, last: bool) -> pa.Array:
    """The lines of ``data`` (whole lines; the file's last block may lack the final line feed)."""
    try:
        text = pa.array([data], pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:
        raise _NotPlain from None
    lines = pc.list_flatten(pc.split_pattern(text, "\n"))
    if len(lines) and (not last or data.endswith(b"\n")):
        lines = lines.slice(0, len(lines) - 1)  # what follows the block's last line feed
    return pc.replace_substring_regex(lines, "\r$", "").cast(pa.string())


def _decoded(path: Path) -> str:
    data = read_user_bytes(path, what="dataset file", max_bytes=MAX_CORPUS_BYTES)
    try:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
                data = handle.read(MAX_CORPUS_BYTES + 1)
            if len(data) > MAX_CORPUS_BYTES:
                raise ArtifactError(
                    f"unpacks to more than {MAX_CORPUS_BYTES:,} bytes, the most mltk reads of one dataset file", path
                )
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"is not UTF-8 text ({exc.reason} at byte {exc.start})", path)
    except (OSError, EOFError) as exc:
        raise ArtifactError(f"cannot read ({exc})", path)


def read_text(path: Path) -> str:
    return "\n".join(read_lines(Path(path)))


def read_json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"line {number} is not valid JSON ({exc.msg})", path)
        if not isinstance(record, dict):
            raise ArtifactError(f"line {number} is not a JSON object", path)
        yield number, record


def text_file(folder: Path, name: str) -> Path | None:
    """``folder/name`` or its gzipped form."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def require_aligned(lines: Sequence[str] | pa.Array, expected: int, path: Path, reference: Path) -> None:
    if len(lines) != expected:
        raise SchemaError(
            f"has {len(lines)} lines but {reference.name} has {expected}; the files are aligned "
            f"by line, so their line counts must be equal",
            path,
        )
