"""What ``mltk encode-images`` reads: an images artifact (bytes or paths), a folder of image files, or a Parquet
table of ids and paths; and where the files of a large set are (``resolve_image_paths``: several image roots, or a
mapping file from image id to path), so that a set spread over folders (XTD10: COCO train2014 and val2014) is
encoded in one run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from mltk import artifacts
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.runtime import log
from mltk.core.user_files import require_file

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
NO_SPLIT = ""  # the split of images from a folder or a Parquet file without a ``split`` column


# ----------------------------------------------------------------------------------------------------------------
# Sources: an images artifact, an image folder, or a Parquet table of ids and paths
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class ImageRecords:
    """The images to encode, in source order: ids, splits, and either file paths or encoded bytes."""

    ids: list[str]
    splits: list[str]
    paths: list[str] | None = None
    blobs: pa.Array | None = None  # binary, one encoded image (PNG, JPEG, ...) per row

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, rows: Sequence[int]) -> ImageRecords:
        rows = list(rows)
        return ImageRecords(
            [self.ids[i] for i in rows],
            [self.splits[i] for i in rows],
            [self.paths[i] for i in rows] if self.paths is not None else None,
            self.blobs.take(pa.array(rows, pa.int64())) if self.blobs is not None else None,
        )


def read_image_source(source: str | os.PathLike) -> ImageRecords:
    """Read what ``encode-images`` accepts: an images artifact (bytes or paths), a folder of image files
    (recursive; ``image_id`` is the relative path without extension), or a Parquet file of ``image_id`` and
    ``path`` (or ``image`` bytes) with an optional ``split`` column."""
    source = Path(source)
    if not source.exists():
        raise ArtifactError("no such file or directory", source)
    if artifacts.is_artifact(source):
        return _records_from_table(artifacts.load_images(source), source)
    if source.is_dir():
        return _records_from_folder(source)
    if source.suffix == ".parquet":
        return _records_from_parquet(source)
    raise ArtifactError("not an images artifact, an image folder or a Parquet file of image paths", source)


def _records_from_folder(folder: Path) -> ImageRecords:
    """Image files under ``folder`` (hidden files and folders skipped), sorted by relative path."""
    root = folder.resolve()
    relative = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
        prefix = os.path.relpath(directory, root)
        relative += [
            name if prefix == "." else f"{prefix}/{name}"
            for name in names
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS
        ]
    if not relative:
        raise ArtifactError(f"no image files ({', '.join(sorted(IMAGE_EXTENSIONS))}) in the folder", folder)
    relative.sort()
    ids = [os.path.splitext(name)[0] for name in relative]
    return ImageRecords(ids, [NO_SPLIT] * len(ids), paths=[str(root / name) for name in relative])


def _records_from_parquet(path: Path) -> ImageRecords:
    table = artifacts.read_table(path)
    if "split" not in table.column_names:
        table = table.append_column("split", pa.array([NO_SPLIT] * table.num_rows, pa.string()))
    table = artifacts.validate_images(table, path)
    if "path" in table.column_names:
        resolved = [
            p if _is_absolute_or_url(p) else str((path.parent / p).resolve()) for p in table.column("path").to_pylist()
        ]
        table = table.set_column(table.schema.get_field_index("path"), "path", pa.array(resolved, pa.string()))
    return _records_from_table(table, path)


def _is_absolute_or_url(path: str) -> bool:
    return os.path.isabs(path) or "://" in path


def _records_from_table(table: pa.Table, origin: Path) -> ImageRecords:
    ids = table.column("image_id").to_pylist()
    splits = table.column("split").to_pylist()
    if "path" in table.column_names:
        paths = table.column("path").to_pylist()
        if any(p is None for p in paths):
            raise SchemaError("column path has null values", origin)
        return ImageRecords(ids, splits, paths=paths)
    blobs = table.column("image").combine_chunks()
    if not (pa.types.is_binary(blobs.type) or pa.types.is_large_binary(blobs.type)):
        raise SchemaError(f"column image has type {blobs.type}, expected binary (encoded image bytes)", origin)
    return ImageRecords(ids, splits, blobs=blobs)


def filter_splits(records: ImageRecords, splits: Sequence[str] | None, origin: Path) -> ImageRecords:
    """Keep the rows of the named splits (all rows when ``splits`` is empty)."""
    if not splits:
        return records
    wanted = set(splits)
    rows = [i for i, split in enumerate(records.splits) if split in wanted]
    if not rows:
        present = sorted(set(records.splits))
        raise ConfigError(
            f"no images in split(s) {', '.join(sorted(wanted))} (the source has {', '.join(repr(s) for s in present)})",
            origin,
        )
    return records.select(rows)


def check_unique_ids(records: ImageRecords, origin: Path) -> None:
    if len(set(records.ids)) != len(records.ids):
        seen, duplicates = set(), []
        for image_id in records.ids:
            if image_id in seen and len(duplicates) < 3:
                duplicates.append(image_id)
            seen.add(image_id)
        raise SchemaError(f"image_id values are not unique (e.g. {', '.join(map(repr, duplicates))})", origin)


# ----------------------------------------------------------------------------------------------------------------
# Where the files are: several roots, or a mapping from image id to path
# ----------------------------------------------------------------------------------------------------------------


def read_image_map(path: Path) -> dict[str, str]:
    """``image_id -> path`` from a Parquet file (columns ``image_id``, ``path``) or a text file of
    ``image_id<TAB>path`` lines (a header line ``image_id<TAB>path`` is allowed); relative paths are relative to
    the mapping file's folder."""
    path = Path(path)
    require_file(path, "an image map: image_id<TAB>path per line, or Parquet")
    if path.suffix == ".parquet":
        table = artifacts.read_table(path)
        artifacts.require_columns(table, ["image_id", "path"], path)
        pairs = list(zip(table.column("image_id").cast(pa.string()).to_pylist(), table.column("path").to_pylist()))
    else:
        pairs = []
        for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
            if not line.strip() or (
                number == 1 and line.strip().lower().replace(",", "\t").split("\t")[:2] == ["image_id", "path"]
            ):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not all(f.strip() for f in fields):
                raise SchemaError(f"line {number} is not image_id<TAB>path", path)
            pairs.append((fields[0].strip(), fields[1].strip()))
    mapping: dict[str, str] = {}
    for image_id, location in pairs:
        if image_id in mapping and mapping[image_id] != location:
            raise SchemaError(f"image_id {image_id!r} is mapped to two paths", path)
        mapping[image_id] = (
            location if "://" in location or os.path.isabs(location) else str((path.parent / location).resolve())
        )
    return mapping


def resolve_image_paths(
    records: ImageRecords, roots: Sequence[Path] = (), image_map: Path | None = None, origin: Path | None = None
) -> ImageRecords:
    """Point each record at its file. The mapping (by image id) wins; otherwise a path that exists is kept and
    one that does not is looked up under each root in order, as given (``train2014/x.jpg``) and by file name.
    Files found nowhere keep their path and are reported as unreadable by the encoder, never dropped here."""
    if records.paths is None:
        if roots or image_map:
            raise ConfigError(
                "--images-root and --image-map apply to images given by path, but the source holds image bytes", origin
            )
        return records
    mapping = read_image_map(image_map) if image_map is not None else {}
    roots = [Path(root).resolve() for root in roots]
    for root in roots:
        if not root.is_dir():
            raise ArtifactError("no such folder (--images-root)", root)
    paths, moved = [], 0
    for image_id, location in zip(records.ids, records.paths):
        found = mapping.get(image_id) or _under_roots(location, roots)
        moved += found is not None and found != location
        paths.append(found or location)
    if roots or mapping:
        log(
            f"encode-images: {moved} of {len(paths)} image path(s) resolved through "
            f"{'the image map' if mapping else ''}{' and ' if mapping and roots else ''}"
            f"{f'{len(roots)} image root(s)' if roots else ''}"
        )
    return ImageRecords(records.ids, records.splits, paths=paths)


def _under_roots(location: str, roots: Sequence[Path]) -> str | None:
    if "://" in location or not roots or (os.path.isabs(location) and os.path.exists(location)):
        return None
    names = [location] if not os.path.isabs(location) else []
    names.append(os.path.basename(location))
    for root in roots:
        for name in names:
            candidate = root / name
            if candidate.is_file():
                return str(candidate)
    return None
