"""Test images that are also training images, by canonical image id (``mltk check-overlap``, and a warning in
``evaluate`` and the training stages).

About 800 of XTD10's 1,000 images are COCO train2014 pictures, which COCO Karpathy train and CC-style COCO
translations contain; a model trained on those and tested on XTD10 has seen the test images. Ids are compared
in their canonical form (``mltk.data.importers.image_ids``), so artifacts imported before ids were canonical
(``COCO_train2014_000000000081``) still match ``coco:000000000081``, and in Unicode normal form C, so an id spelled
with a precomposed letter (``café``, NFC: macOS keeps names so, most Linux tools do too) and the same id spelled with
a combining accent (``cafe`` + U+0301, NFD: what HFS+ and some archives write) are one id.

The image ids of an artifact: a captions artifact's ``image_id`` (for a training set only its ``train`` rows when
it has a ``train`` split, since one import often holds every split), an images artifact's ``image_id``, an
embeddings artifact's ``image_id`` (text) or ``id`` (images).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk import artifacts
from mltk.artifacts import schema
from mltk.artifacts.caption_stream import captions_file, iter_caption_batches
from mltk.artifacts.tables import as_string_columns
from mltk.core.errors import ArtifactError
from mltk.core.names import check_names
from mltk.core.runtime import log
from mltk.data.importers.image_ids import canonical_image_id, canonical_image_ids

TRAINING_STAGE_PREFIXES = ("train", "pretrain")
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class OverlapReport:
    train: list[str]
    test: list[str]
    train_images: int
    test_images: int
    overlapping: int
    examples: list[str]

    @property
    def fraction(self) -> float:
        return self.overlapping / self.test_images if self.test_images else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "fraction": self.fraction}


def image_ids(path: str | os.PathLike, *, training: bool = False) -> set[str]:
    """Canonical image ids of a captions, images or embeddings artifact (or a captions Parquet file)."""
    return set(image_id_array(path, training=training).to_pylist())


def image_id_array(path: str | os.PathLike, *, training: bool = False) -> pa.Array:
    """``image_ids`` as an Arrow array of distinct keys (``overlap_key``), computed on the column at once; a
    captions or images table is read a batch at a time (``_streamed_keys``)."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return _streamed_keys(path, path, training, checked=False)
    kind = artifacts.read_manifest(path)["kind"]
    if kind == "captions":
        return _streamed_keys(captions_file(path), path, training, checked=True)
    if kind == "images":
        return _streamed_keys(path / schema.IMAGES_FILE, path, training=False, checked=False)
    if kind != "embeddings":
        raise ArtifactError(f"is a {kind} artifact; check-overlap reads captions, images or embeddings", path)
    table, _ = artifacts.load_embeddings(path, check_finite=False, lazy=True)  # the vectors are not read
    column = "image_id" if "image_id" in table.column_names else "id"
    if column not in table.column_names:
        raise ArtifactError("has no image_id (or id) column", path)
    return overlap_keys(pc.drop_null(table.column(column).cast(pa.string())))


def _streamed_keys(file: Path, path: Path, training: bool, checked: bool) -> pa.Array:
    """The distinct keys of a Parquet table's image ids (``image_id``, else ``id``), read a batch of rows at a
    time: memory follows a batch and the distinct images, not the rows. Only the columns compared are read (and,
    of a captions artifact, ``checked`` as ``load_captions`` checks them: strings, no nulls, language names); with
    ``training``, only the rows of split ``train`` when there are any."""
    try:
        names = pq.ParquetFile(file).schema_arrow.names
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"cannot read Parquet ({str(exc).splitlines()[0]})", file) from None
    column = "image_id" if "image_id" in names else "id"
    if column not in names:
        raise ArtifactError("has no image_id (or id) column", path)
    wanted = [column] + [name for name in ("lang", "split") if name in names and (checked or name == "split")]
    every, train = _DistinctKeys(), _DistinctKeys()
    for batch in iter_caption_batches(file, wanted):
        if checked:
            batch = as_string_columns(batch, [c for c in wanted if c in schema.CAPTION_COLUMNS], path)
            if "lang" in wanted:
                check_names(pc.unique(batch.column("lang")).to_pylist(), "caption lang", path)
        ids = batch.column(column).cast(pa.string())
        if training and "split" in wanted:
            chosen = pc.equal(batch.column("split"), "train")
            if pc.any(chosen).as_py() or train.seen:
                train.add(overlap_keys(pc.drop_null(ids.filter(chosen))), seen=True)
        if not train.seen:  # keys of every row, while no training row is known
            every.add(overlap_keys(pc.drop_null(ids)))
    return (train if train.seen else every).array()


class _DistinctKeys:
    """A union of distinct key arrays, made distinct again whenever the arrays added since outgrow it (so each key
    is sorted into the union a few times at most)."""

    def __init__(self) -> None:
        self.parts: list[pa.Array] = []
        self.pending, self.size, self.seen = 0, 0, False

    def add(self, keys: pa.Array, seen: bool = False) -> None:
        self.seen = self.seen or seen
        self.parts.append(keys)
        self.pending += len(keys)
        if self.pending > max(self.size, 1 << 16):
            self._compact()

    def _compact(self) -> None:
        merged = _union(self.parts)
        self.parts, self.size, self.pending = [merged], len(merged), 0

    def array(self) -> pa.Array:
        self._compact()
        return self.parts[0]


def overlap_key(image_id: str) -> str:
    """The form in which two ids are compared: canonical (``mltk.data.importers.image_ids``) and NFC."""
    return unicodedata.normalize("NFC", canonical_image_id(image_id))


def overlap_keys(ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The distinct ``overlap_key`` of a column of ids."""
    distinct = pc.unique(ids)
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    return pc.unique(pc.utf8_normalize(canonical_image_ids(distinct), "NFC"))


def check_overlap(
    train_paths: Sequence[str | os.PathLike],
    test_paths: Sequence[str | os.PathLike] = (),
    *,
    test_ids: Iterable[str] = (),
) -> OverlapReport:
    """How many of the test images (those of ``test_paths`` plus ``test_ids``) appear in the training artifacts."""
    train = _union([image_id_array(p, training=True) for p in train_paths])
    test = _union([image_id_array(p) for p in test_paths] + [overlap_keys(pa.array(list(test_ids), pa.string()))])
    shared = shared_ids(train, test)
    return OverlapReport(
        [str(p) for p in train_paths],
        [str(p) for p in test_paths],
        len(train),
        len(test),
        len(shared),
        shared[:MAX_EXAMPLES].to_pylist(),
    )


def shared_ids(train: pa.Array, test: pa.Array) -> pa.Array:
    """The ids in both, sorted (by code point, as Python sorts strings)."""
    shared = test.filter(pc.is_in(test, value_set=train))
    return shared.take(pc.sort_indices(shared))


def _union(arrays: list[pa.Array]) -> pa.Array:
    if not arrays:
        return pa.array([], pa.string())
    return pc.unique(pa.chunked_array(arrays, pa.string()).combine_chunks())


def describe(report: OverlapReport) -> str:
    if not report.overlapping:
        return f"none of the {report.test_images} test images is among the {report.train_images} training images"
    return (
        f"{report.overlapping} of {report.test_images} test images ({100 * report.fraction:.1f}%) are also "
        f"training images (e.g. {', '.join(report.examples)}; training data: {', '.join(report.train)})"
    )


def warn_if_overlap(
    train_paths: Sequence[str | os.PathLike],
    test_paths: Sequence[str | os.PathLike] = (),
    *,
    test_ids: Iterable[str] = (),
    stage: str = "mltk",
) -> OverlapReport | None:
    """Log a warning on stderr when test images are training images; returns the report (None when there is
    nothing to compare). Training stages call it with their training captions and their validation/test inputs;
    ``evaluate`` with the training data found through the manifests (``training_data_of``). Never raises for an
    input it cannot read (the stage reports that itself)."""
    test_ids = list(test_ids)
    if not train_paths or not (test_paths or test_ids):
        return None
    try:
        report = check_overlap(train_paths, test_paths, test_ids=test_ids)
    except ArtifactError:
        return None
    if report.overlapping:
        log(f"{stage}: warning: {describe(report)}")
    return report


def training_data_of(paths: Iterable[str | os.PathLike], max_depth: int = 8) -> list[Path]:
    """The captions artifacts a model was trained on, found through the manifests' ``inputs``: starting from
    ``paths`` (a checkpoint, or embeddings written by one), every captions input of a training stage
    (``train-*``, ``pretrain``) up the lineage."""
    found: dict[str, Path] = {}
    seen: set[str] = set()
    frontier = [Path(p) for p in paths]
    for _ in range(max_depth):
        following = []
        for path in frontier:
            key = str(path.resolve())
            if key in seen or not artifacts.is_artifact(path):
                continue
            seen.add(key)
            manifest = artifacts.read_json(path / schema.MANIFEST)
            stage = str(manifest.get("created_by", {}).get("stage", ""))
            for entry in manifest.get("inputs", []):
                source = Path(entry.get("path", ""))
                if stage.startswith(TRAINING_STAGE_PREFIXES) and entry.get("kind") == "captions" and source.exists():
                    found.setdefault(str(source), source)
                following.append(source)
        frontier = following
    return list(found.values())


def run_check_overlap(
    train: str | os.PathLike, test: str | os.PathLike, out: str | os.PathLike | None = None
) -> tuple[OverlapReport, Path | None]:
    """``mltk check-overlap TRAIN TEST [--out M]``: the report on stderr, and with ``out`` a metrics artifact
    whose ``overlap`` section lists every shared image id."""
    train_keys, test_keys = image_id_array(train, training=True), image_id_array(test)
    shared = shared_ids(train_keys, test_keys)
    report = OverlapReport(
        [str(train)], [str(test)], len(train_keys), len(test_keys), len(shared), shared[:MAX_EXAMPLES].to_pylist()
    )
    log(f"check-overlap: {describe(report)}")
    if out is None:
        return report, None
    shared = shared.to_pylist()
    path = artifacts.write_metrics(
        out,
        {"overlap": {**report.as_dict(), "shared_image_ids": shared}},
        stage="check-overlap",
        config={"train": str(train), "test": str(test)},
        inputs=[train, test],
    )
    return report, path
