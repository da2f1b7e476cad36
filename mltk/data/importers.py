"""Convert caption datasets researchers already have on disk into mltk's captions (and images) artifacts.

One small function per format reads the files and returns an ``Imported`` (caption rows plus the images they
reference); ``import_dataset`` writes ``DIR/captions`` and ``DIR/images``. The formats:

- ``multi30k``: the Multi30K repository (Elliott et al. 2016; 2017; Barrault et al. 2018). Task 1: line i of
  ``task1/raw/SPLIT.LANG`` is a translation of line i of the English file, and line i of
  ``task1/image_splits/SPLIT.txt`` names its Flickr30K image, so the alignment *is* the line number: all files of a
  split must have the same number of lines, and the translations share ``caption_id = f"{split}-{i}"``.
  Task 2: ``task2/raw/SPLIT.K.LANG`` holds the K-th of five descriptions written independently per image in
  English and German; each gets its own caption_id. Files may be gzipped (``.gz``).
- ``coco-karpathy``: ``dataset_coco.json`` (Karpathy and Fei-Fei 2015 splits); ``restval`` joins ``train``.
- ``xtd10``: XTD10 (Aggarwal and Kale 2020): ``test_1kcaptions_LANG.txt`` aligned by line with
  ``test_image_names.txt``; the files beside the image list (XTD10/) are translations of the English captions and
  share caption_ids, files in other folders (MIC/ for de and fr, STAIR/ for ``jp`` = ``ja``) are independent.
- ``crossmodal3600``: ``captions.jsonl`` of Crossmodal-3600 (Thapliyal et al. 2022), one object per image with
  ``image/key`` and per-language ``{"caption": [...]}``; captions of different languages are independent.
- ``xflickrco``: IGLUE xFlickr&CO (Bugliarello et al. 2022), ``LANG/SPLIT.jsonl`` with ``sentences``, ``id``
  (an int for COCO images, a string for Flickr30K ones) and ``img_path``.
- ``cc``: Conceptual Captions TSV (Sharma et al. 2018), ``caption<TAB>url`` per line without a header; the image
  id is the 0-based row number and the path is the URL.

Instances are matched by id wherever the format has ids; line alignment is used only where the format defines it
(Multi30K, XTD10), and then the line counts are checked. Empty captions are dropped and counted
(``dropped_empty``); surrounding whitespace and a trailing carriage return are stripped; every file is UTF-8.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from mltk import artifacts, schema
from mltk.errors import ArtifactError, ConfigError, SchemaError
from mltk.runtime import log

CAPTIONS_DIR = "captions"
IMAGES_DIR = "images"

# Codes seen in public files that are not ISO 639-1 although an ISO 639-1 code exists.
LANGUAGE_ALIASES = {"jp": "ja", "cz": "cs", "gr": "el", "dk": "da", "iw": "he", "in": "id", "ji": "yi"}


def normalize_lang(code: str) -> str:
    """``jp`` -> ``ja``, ``zh-CN`` -> ``zh``, ``DE`` -> ``de``; ISO 639-3 codes without an ISO 639-1 equivalent
    (``fil``, ``quz`` in Crossmodal-3600) are kept."""
    base = re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]
    return LANGUAGE_ALIASES.get(base, base)


@dataclass
class Imported:
    """Caption rows (long format) and the images they reference, in reading order."""

    rows: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in schema.CAPTION_COLUMNS})
    extra: dict[str, list[str]] = field(default_factory=dict)
    images: dict[str, tuple[str, str]] = field(default_factory=dict)  # image_id -> (split, path)
    dropped_empty: Counter = field(default_factory=Counter)  # lang -> captions dropped because empty
    image_split_conflicts: int = 0

    def add(self, image_id: str, lang: str, caption: str | None, caption_id: str, split: str, **extra: str) -> None:
        text = (caption or "").strip()
        if not text:
            self.dropped_empty[lang] += 1
            return
        for name, value in zip(schema.CAPTION_COLUMNS, (image_id, lang, text, caption_id, split)):
            self.rows[name].append(value)
        for name, value in extra.items():
            self.extra.setdefault(name, []).append(value)

    def add_image(self, image_id: str, split: str, path: str) -> None:
        known = self.images.setdefault(image_id, (split, path))
        if known[0] != split:
            self.image_split_conflicts += 1

    def captions_table(self) -> pa.Table:
        columns = {**self.rows, **self.extra}
        return pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})

    def images_table(self) -> pa.Table:
        ids = list(self.images)
        return pa.table({"image_id": pa.array(ids, pa.string()),
                         "split": pa.array([self.images[i][0] for i in ids], pa.string()),
                         "path": pa.array([self.images[i][1] for i in ids], pa.string())})


# ----------------------------------------------------------------------------------------------------------------
# Reading files
# ----------------------------------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (optionally gzipped), without a trailing CR. Splits on ``\\n`` only: captions
    may contain other Unicode line separators, and ``str.splitlines`` would cut them."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                text = handle.read().decode("utf-8-sig")
        else:
            text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"is not UTF-8 text ({exc.reason} at byte {exc.start})", path)
    except OSError as exc:
        raise ArtifactError(f"cannot read ({exc})", path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


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


def _text_file(folder: Path, name: str) -> Path | None:
    """``folder/name`` or its gzipped form."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _require_aligned(lines: list[str], expected: int, path: Path, reference: Path) -> None:
    if len(lines) != expected:
        raise SchemaError(f"has {len(lines)} lines but {reference.name} has {expected}; the files are aligned "
                          f"by line, so their line counts must be equal", path)


def _image_path(images_root: Path, name: str) -> str:
    if "://" in name or os.path.isabs(name):
        return name
    return str((images_root / name).resolve())


# ----------------------------------------------------------------------------------------------------------------
# Multi30K
# ----------------------------------------------------------------------------------------------------------------

MULTI30K_SPLITS = {"train": "train", "val": "val", "test_2016_flickr": "test", "test_2016": "test"}


def multi30k_split_name(stem: str) -> str:
    """Multi30K file stems -> mltk split names (``test_2016_flickr`` is the usual test set; later test sets such
    as ``test_2017_flickr`` keep their names)."""
    return MULTI30K_SPLITS.get(stem, stem)


def import_multi30k(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    root = src / "data" if (src / "data" / "task1").is_dir() else src
    if not (root / "task1").is_dir() and not (root / "task2").is_dir():
        raise ArtifactError("not a Multi30K folder (no task1/ or task2/ inside)", src)
    imported = Imported()
    if (root / "task1").is_dir():
        _multi30k_task1(root / "task1", images_root, splits, imported)
    if (root / "task2").is_dir():
        _multi30k_task2(root / "task2", images_root, splits, imported)
    return imported


def _multi30k_task1(task: Path, images_root: Path, splits: Sequence[str] | None, imported: Imported) -> None:
    for image_list in sorted((task / "image_splits").glob("*.txt")):
        stem, split = image_list.stem, multi30k_split_name(image_list.stem)
        if splits and split not in splits:
            continue
        names = read_lines(image_list)
        language_files = _multi30k_language_files(task / "raw", stem)
        if not language_files:
            continue
        for name in names:
            imported.add_image(Path(name).stem, split, _image_path(images_root, name))
        for lang, path in language_files.items():
            lines = read_lines(path)
            _require_aligned(lines, len(names), path, image_list)
            for i, (name, caption) in enumerate(zip(names, lines)):
                imported.add(Path(name).stem, lang, caption, f"{split}-{i}", split, source="task1")


def _multi30k_language_files(raw: Path, stem: str) -> dict[str, Path]:
    """``raw/STEM.LANG`` (or ``.LANG.gz``) -> {lang: path}; the language is the two- or three-letter suffix."""
    found = {}
    for path in sorted(raw.glob(f"{stem}.*")):
        suffix = path.name[len(stem) + 1:].removesuffix(".gz")
        if re.fullmatch(r"[a-z]{2,3}", suffix):
            found[normalize_lang(suffix)] = path
    return found


def _multi30k_task2(task: Path, images_root: Path, splits: Sequence[str] | None, imported: Imported) -> None:
    pattern = re.compile(r"(?P<stem>.+)\.(?P<k>[1-9])\.(?P<lang>[a-z]{2,3})(\.gz)?$")
    groups: dict[str, list[tuple[int, str, Path]]] = {}
    for path in sorted((task / "raw").glob("*")):
        match = pattern.match(path.name)
        if match:
            groups.setdefault(match["stem"], []).append((int(match["k"]), normalize_lang(match["lang"]), path))
    for stem, files in groups.items():
        split = multi30k_split_name(stem)
        if splits and split not in splits:
            continue
        image_list = _text_file(task / "image_splits", f"{stem}_images.txt") or _text_file(task, f"{stem}_images.txt")
        if image_list is None:
            raise ArtifactError(f"task2 descriptions for {stem} found but no image list ({stem}_images.txt in "
                                f"task2/image_splits/ or task2/)", task)
        names = read_lines(image_list)
        for name in names:
            imported.add_image(Path(name).stem, split, _image_path(images_root, name))
        for k, lang, path in files:
            lines = read_lines(path)
            _require_aligned(lines, len(names), path, image_list)
            for i, (name, caption) in enumerate(zip(names, lines)):
                imported.add(Path(name).stem, lang, caption, f"task2-{split}-{i}-{k}-{lang}", split, source="task2")


# ----------------------------------------------------------------------------------------------------------------
# COCO Karpathy
# ----------------------------------------------------------------------------------------------------------------

KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "val", "test": "test"}


def import_coco_karpathy(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    """``dataset_coco.json`` (or ``dataset_flickr30k.json``): ``images[]`` with ``filename``, optional
    ``filepath``, ``split``, ``cocoid`` and ``sentences[]`` with ``raw`` and ``sentid``. The image id is the
    ``cocoid`` where present (as xFlickr&CO uses it), else the file name without extension."""
    path = src / "dataset_coco.json" if src.is_dir() else src
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"is not valid JSON ({exc.msg} at line {exc.lineno})", path)
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise SchemaError("has no 'images' list (expected Karpathy's dataset_coco.json)", path)
    imported = Imported()
    for number, image in enumerate(data["images"]):
        if "filename" not in image or "split" not in image:
            raise SchemaError(f"images[{number}] lacks 'filename' or 'split'", path)
        split = KARPATHY_SPLITS.get(image["split"], image["split"])
        if splits and split not in splits:
            continue
        image_id = str(image["cocoid"]) if "cocoid" in image else Path(image["filename"]).stem
        relative = "/".join(p for p in (image.get("filepath", ""), image["filename"]) if p)
        imported.add_image(image_id, split, _image_path(images_root, relative))
        sentids = image.get("sentids", [])
        for k, sentence in enumerate(image.get("sentences", [])):
            sentid = sentence.get("sentid", sentids[k] if k < len(sentids) else f"{image_id}-{k}")
            imported.add(image_id, "en", sentence.get("raw"), str(sentid), split)
    return imported


def read_text(path: Path) -> str:
    if not path.is_file():
        raise ArtifactError("no such file", path)
    return "\n".join(read_lines(path))


# ----------------------------------------------------------------------------------------------------------------
# XTD10
# ----------------------------------------------------------------------------------------------------------------

XTD10_IMAGE_LIST = "test_image_names.txt"


def import_xtd10(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    """SRC is the XTD10 repository (XTD10/, MIC/, STAIR/) or its XTD10 folder. Captions in the folder of
    ``test_image_names.txt`` are translations of the English ones (shared caption_id ``test-i``); captions in
    sibling folders (MIC, STAIR) were written independently (caption_id ``test-i-FOLDER``)."""
    image_list = next((p for p in (src / XTD10_IMAGE_LIST, src / "XTD10" / XTD10_IMAGE_LIST) if p.is_file()), None)
    if image_list is None:
        raise ArtifactError(f"no {XTD10_IMAGE_LIST} here or in XTD10/", src)
    imported = Imported()
    if splits and "test" not in splits:
        return imported
    names = read_lines(image_list)
    for name in names:
        imported.add_image(Path(name).stem, "test", _image_path(images_root, name))
    translations = image_list.parent
    caption_files = sorted(translations.glob("test_1kcaptions_*.txt"))
    caption_files += sorted(p for p in translations.parent.glob("*/test_1kcaptions_*.txt") if p.parent != translations)
    for path in caption_files:
        lang = normalize_lang(path.stem.removeprefix("test_1kcaptions_"))
        lines = read_lines(path)
        _require_aligned(lines, len(names), path, image_list)
        suffix = "" if path.parent == translations else f"-{path.parent.name}"
        for i, (name, caption) in enumerate(zip(names, lines)):
            imported.add(Path(name).stem, lang, caption, f"test-{i}{suffix}", "test")
    return imported


# ----------------------------------------------------------------------------------------------------------------
# Crossmodal-3600
# ----------------------------------------------------------------------------------------------------------------


def import_crossmodal3600(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    """Every image is a test image; its file is ``KEY.jpg`` under the images root."""
    path = src / "captions.jsonl" if src.is_dir() else src
    if not path.is_file():
        raise ArtifactError("no such file (expected Crossmodal-3600 captions.jsonl)", path)
    imported = Imported()
    if splits and "test" not in splits:
        return imported
    for number, record in read_json_lines(path):
        key = record.get("image/key")
        if key is None:
            raise SchemaError(f"line {number} has no 'image/key'", path)
        image_id = str(key)
        imported.add_image(image_id, "test", _image_path(images_root, f"{image_id}.jpg"))
        for code, value in record.items():
            if not isinstance(value, dict) or "caption" not in value:
                continue
            lang = normalize_lang(code)
            captions = value["caption"] if isinstance(value["caption"], list) else [value["caption"]]
            for k, caption in enumerate(captions):
                imported.add(image_id, lang, caption, f"{image_id}-{lang}-{k}", "test")
    return imported


# ----------------------------------------------------------------------------------------------------------------
# IGLUE xFlickr&CO
# ----------------------------------------------------------------------------------------------------------------


def import_xflickrco(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    """SRC is the annotations folder (``LANG/SPLIT.jsonl``; ``--split`` picks the files, default ``test``; the
    few-shot files are ``train_100`` and so on) or one ``LANG/SPLIT.jsonl`` file. Captions of different languages
    were written independently, so each gets its own caption_id."""
    wanted = list(splits) if splits else ["test"]
    if src.is_file():
        files = [(normalize_lang(src.parent.name), src.stem, src)]
    else:
        files = [(normalize_lang(p.parent.name), p.stem, p) for p in sorted(src.glob("*/*.jsonl"))
                 if p.stem in wanted]
        if not files:
            raise ArtifactError(f"no LANG/{{{','.join(wanted)}}}.jsonl files (expected the xFlickr&CO annotations "
                                f"folder)", src)
    imported = Imported()
    for lang, split, path in files:
        if not re.fullmatch(r"[a-z]{2,3}", lang):
            raise ConfigError(f"cannot tell the language from the folder name {path.parent.name!r} (expected "
                              f"LANG/SPLIT.jsonl)", path)
        seen: Counter = Counter()
        for number, record in read_json_lines(path):
            if "id" not in record or "sentences" not in record:
                raise SchemaError(f"line {number} lacks 'id' or 'sentences'", path)
            image_id = str(record["id"])  # ints for COCO images, strings for Flickr30K ones
            imported.add_image(image_id, split, _image_path(images_root, record.get("img_path") or f"{image_id}.jpg"))
            sentences = record["sentences"] if isinstance(record["sentences"], list) else [record["sentences"]]
            for caption in sentences:
                k = seen[image_id]
                seen[image_id] += 1
                imported.add(image_id, lang, caption, f"{split}-{image_id}-{lang}-{k}", split)
    return imported


# ----------------------------------------------------------------------------------------------------------------
# Conceptual Captions
# ----------------------------------------------------------------------------------------------------------------


def import_cc(src: Path, images_root: Path, splits: Sequence[str] | None) -> Imported:
    """``caption<TAB>url`` per line, no header, no quoting. The split comes from the file name (``*train*`` ->
    train, ``*valid*``/``*val*`` -> val), train otherwise."""
    if not src.is_file():
        raise ArtifactError("no such file (expected a Conceptual Captions TSV, caption<TAB>url per line)", src)
    name = src.name.lower()
    split = "val" if "valid" in name or re.search(r"(^|[^a-z])val([^a-z]|$)", name) else "train"
    imported = Imported()
    if splits and split not in splits:
        return imported
    for row, line in enumerate(read_lines(src)):
        fields = line.split("\t")
        if len(fields) < 2:
            raise SchemaError(f"line {row + 1} has no tab (expected caption<TAB>url)", src)
        caption, url = fields[0], fields[1].strip()
        image_id = str(row)
        if caption.strip():  # an image whose only caption is empty is of no use; the caption is counted below
            imported.add_image(image_id, split, _image_path(images_root, url))
        imported.add(image_id, "en", caption, f"cc-{row}", split)
    return imported


# ----------------------------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------------------------

Importer = Callable[[Path, Path, "Sequence[str] | None"], Imported]
FORMATS: dict[str, Importer] = {
    "multi30k": import_multi30k,
    "coco-karpathy": import_coco_karpathy,
    "xtd10": import_xtd10,
    "crossmodal3600": import_crossmodal3600,
    "xflickrco": import_xflickrco,
    "cc": import_cc,
}


def import_dataset(fmt: str, src: str | os.PathLike, out_dir: str | os.PathLike, *,
                   splits: Sequence[str] | None = None, images_root: str | os.PathLike | None = None) -> Path:
    """Import ``src`` in format ``fmt`` into ``out_dir/captions`` (a captions artifact) and ``out_dir/images``
    (an images artifact of absolute paths: ``images_root`` joined with the names the dataset gives; by default
    the folder of ``src``). Returns ``out_dir``."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    src = Path(src)
    if not src.exists():
        raise ArtifactError("no such file or directory", src)
    root = Path(images_root) if images_root is not None else (src if src.is_dir() else src.parent)
    config = {"format": fmt, "source": str(src.resolve()), "splits": list(splits or []), "images_root": str(root)}
    reused = [artifacts.reusable(Path(out_dir) / name, kind, stage="import-data", config=config, inputs=[src])
              for name, kind in ((CAPTIONS_DIR, "captions"), (IMAGES_DIR, "images"))]
    if reused[0] is not None:
        return Path(out_dir).resolve()
    imported = FORMATS[fmt](src, root.resolve(), list(splits) if splits else None)
    table = imported.captions_table()
    if table.num_rows == 0:
        raise ArtifactError(f"no captions found for format {fmt}"
                            + (f" in split(s) {', '.join(splits)}" if splits else ""), src)
    _check_unique_caption_ids(table, src)
    _report(imported, table, fmt)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ArtifactError("exists and is not a directory", out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dropped = sum(imported.dropped_empty.values())
    artifacts.write_captions(out_dir / CAPTIONS_DIR, table, stage="import-data", config=config, inputs=[src],
                             format=fmt, dropped_empty=dropped, dropped_empty_by_lang=dict(imported.dropped_empty),
                             splits=dict(Counter(table.column("split").to_pylist())))
    if imported.images:
        artifacts.write_images(out_dir / IMAGES_DIR, imported.images_table(), stage="import-data", config=config,
                               inputs=[src], format=fmt, images_root=str(root))
    return out_dir.resolve()


def _check_unique_caption_ids(table: pa.Table, src: Path) -> None:
    keys = Counter(zip(table.column("caption_id").to_pylist(), table.column("lang").to_pylist()))
    repeated = [key for key, count in keys.items() if count > 1]
    if repeated:
        caption_id, lang = repeated[0]
        raise SchemaError(f"{len(repeated)} caption_id/lang pair(s) occur more than once (e.g. {caption_id!r} in "
                          f"{lang}); the source repeats an id", src)


def _report(imported: Imported, table: pa.Table, fmt: str) -> None:
    per_lang = Counter(table.column("lang").to_pylist())
    log(f"import-data ({fmt}): {table.num_rows} captions in {len(per_lang)} language(s) "
        f"({', '.join(f'{lang} {n}' for lang, n in sorted(per_lang.items()))}), {len(imported.images)} images")
    dropped = sum(imported.dropped_empty.values())
    if dropped:
        detail = ", ".join(f"{lang} {n}" for lang, n in sorted(imported.dropped_empty.items()))
        log(f"import-data ({fmt}): dropped {dropped} empty caption(s) ({detail})")
    if imported.image_split_conflicts:
        log(f"import-data ({fmt}): {imported.image_split_conflicts} image reference(s) name an image already seen "
            f"in another split; the images table keeps the first split")
