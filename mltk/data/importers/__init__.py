"""Convert caption datasets researchers already have on disk into mltk's captions (and images) artifacts.

One module per dataset family reads the files and returns an ``Imported`` (caption rows plus the images they
reference); ``import_dataset`` writes ``DIR/captions`` and ``DIR/images``. The formats (details in each module):

- ``multi30k`` (``mltk.data.importers.multi30k``): task 1 translations by line, task 2 independent descriptions.
- ``coco-karpathy`` (``.coco``): ``dataset_coco.json``; ``restval`` joins ``train``.
- ``xtd10`` (``.xtd10``): XTD10/ and MIC/ translate the English line (shared caption_id), STAIR/ is independent.
- ``crossmodal3600`` (``.crossmodal3600``): ``captions.jsonl``; languages independent.
- ``xflickrco`` (``.xflickrco``): IGLUE ``LANG/SPLIT.jsonl``; the machine-translated folder is labelled ``en``.
- ``cc`` (``.cc``): ``caption<TAB>url`` TSV, both columns checked.
- ``msrvtt`` (``.msrvtt``): ``MSRVTT_data.json`` and ``translations/LANG.json`` (shared ``sen_id``); videos by id.
- ``lines`` (``.lines``): plain caption files aligned with an image list, for any language.
- ``webdataset`` (``.img2dataset``): img2dataset's tar shards (``KEY.jpg``/``.txt``/``.json``); the key is the
  image id, the ``shard`` column names the tar (``mltk encode-images SHARDS_DIR`` reads the images).

Image ids are canonical (``mltk.data.importers.image_ids``): ``coco:000000391895``, ``flickr30k:1000092795``,
so the same picture has one id in every importer. Instances are matched by id wherever the format has ids; line
alignment is used only where the format defines it (Multi30K, XTD10, lines), and then the line counts are
checked. Empty captions are dropped and counted (``dropped_empty``); files that are not read are named on stderr;
surrounding whitespace and a trailing carriage return are stripped; every file is UTF-8.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts.caption_rules import refuse_caption_ids_on_several_images
from mltk.artifacts.caption_stream import CaptionSink, SinkChecks, write_captions_stream
from mltk.artifacts.columns import first_rows, value_counts
from mltk.artifacts.table_stream import write_images_stream
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.runtime import log
from mltk.data.importers.cc import import_cc
from mltk.data.importers.coco import import_coco_karpathy
from mltk.data.importers.common import (
    LANGUAGE_ALIASES,
    ImageRoots,
    Imported,
    ImportRequest,
    normalize_lang,
    read_json_lines,
    read_lines,
    read_text,
)
from mltk.data.importers.crossmodal3600 import import_crossmodal3600
from mltk.data.importers.image_ids import canonical_image_id
from mltk.data.importers.img2dataset import import_webdataset
from mltk.data.importers.lines import import_lines
from mltk.data.importers.merge import merge_captions
from mltk.data.importers.msrvtt import import_msrvtt
from mltk.data.importers.multi30k import DEFAULT_TASK, import_multi30k, multi30k_split_name
from mltk.data.importers.xflickrco import import_xflickrco
from mltk.data.importers.xtd10 import import_xtd10

__all__ = [
    "CAPTIONS_DIR",
    "IMAGES_DIR",
    "FORMATS",
    "LANGUAGE_ALIASES",
    "ImageRoots",
    "ImportRequest",
    "Imported",
    "canonical_image_id",
    "import_dataset",
    "merge_captions",
    "multi30k_split_name",
    "normalize_lang",
    "read_json_lines",
    "read_lines",
    "read_text",
]

CAPTIONS_DIR = "captions"
IMAGES_DIR = "images"

Importer = Callable[[Path, ImportRequest], Imported]
FORMATS: dict[str, Importer] = {
    "multi30k": import_multi30k,
    "coco-karpathy": import_coco_karpathy,
    "xtd10": import_xtd10,
    "crossmodal3600": import_crossmodal3600,
    "xflickrco": import_xflickrco,
    "cc": import_cc,
    "msrvtt": import_msrvtt,
    "lines": import_lines,  # takes several files
    "webdataset": import_webdataset,
}
MULTI_FILE_FORMATS = frozenset({"lines"})


def import_dataset(
    fmt: str,
    src: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    splits: Sequence[str] | None = None,
    images_root: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    lang: str | None = None,
    image_list: str | os.PathLike | None = None,
    translation_of: str | None = None,
    parent: str | os.PathLike | None = None,
    test_list: str | os.PathLike | None = None,
    task: str | None = None,
) -> Path:
    """Import ``src`` in format ``fmt`` into ``out_dir/captions`` (a captions artifact) and ``out_dir/images``
    (an images artifact of absolute paths: the dataset's names resolved against ``images_root``, one folder or
    several tried in order; by default the folder of ``src``). ``lang`` names the language of a single file
    (xflickrco, lines); ``image_list``, ``translation_of`` and ``parent`` are for ``lines``; ``test_list`` for
    ``msrvtt`` (the 1K-A test split, ``mltk.data.importers.msrvtt``); ``task`` for ``multi30k`` (``task1``, the
    translations, by default, or ``task2``, the independent descriptions: one task per import, since the two are
    different benchmarks on the same images). Returns ``out_dir``."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    sources = _sources(fmt, src)
    _check_format_options(fmt, test_list, task)
    if fmt == "multi30k":
        task = task or DEFAULT_TASK
    for source in [*sources, *(Path(p) for p in (image_list, parent, test_list) if p is not None)]:
        if not source.exists():
            raise ArtifactError("no such file or directory", source)
    first = sources[0]
    roots = _roots(images_root, first if first.is_dir() else first.parent)
    request = ImportRequest(
        ImageRoots(roots),
        tuple(splits or ()),
        lang,
        *_optional_paths(image_list),
        translation_of,
        *_optional_paths(parent, test_list),
        task,
    )
    inputs = [*sources, *(path for path in (request.parent, request.test_list) if path is not None)]
    config = _recorded_config(fmt, sources, splits, request, image_list, parent)
    reused = artifacts.reusable(
        Path(out_dir) / CAPTIONS_DIR, "captions", stage="import-data", config=config, inputs=inputs
    )
    if reused is not None:  # the same import, already done: nothing to read again
        return Path(out_dir).resolve()
    imported = FORMATS[fmt](sources if fmt in MULTI_FILE_FORMATS else first, request)
    for skipped in imported.skipped:
        log(f"import-data ({fmt}): skipped {skipped}")
    for note in imported.notes:
        log(f"import-data ({fmt}): {note}")
    if imported.caption_pieces is not None:
        return _write_streamed(imported, fmt, first, Path(out_dir), splits, request, config, inputs)
    table = imported.captions_table()
    if table.num_rows == 0:
        raise ArtifactError(
            f"no captions found for format {fmt}" + (f" in split(s) {', '.join(splits)}" if splits else ""), first
        )
    _check_unique_caption_ids(table, first)
    refuse_caption_ids_on_several_images(table, first)  # here, so that the message names the input
    _report(
        imported,
        table.num_rows,
        value_counts(table.column("lang")),
        value_counts(table.column("split")),
        fmt,
        request.images,
    )
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ArtifactError("exists and is not a directory", out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dropped = sum(imported.dropped_empty.values())
    artifacts.write_captions(
        out_dir / CAPTIONS_DIR,
        table,
        stage="import-data",
        config=config,
        inputs=inputs,
        format=fmt,
        dropped_empty=dropped,
        dropped_empty_by_lang=dict(imported.dropped_empty),
        splits=value_counts(table.column("split")),
        skipped_files=imported.skipped,
        **({"test_protocol": "1k-a"} if request.test_list is not None else {}),
    )
    if imported.image_count():
        artifacts.write_images(
            out_dir / IMAGES_DIR,
            imported.images_table(),
            stage="import-data",
            config=config,
            inputs=inputs,
            format=fmt,
            images_root=[str(r) for r in request.images.roots],
        )
    return out_dir.resolve()


def _write_streamed(
    imported: Imported,
    fmt: str,
    first: Path,
    out_dir: Path,
    splits: Sequence[str] | None,
    request: ImportRequest,
    config: dict,
    inputs: list[Path],
) -> Path:
    """``import_dataset``'s writing for an importer whose rows arrive a block at a time: the same checks, in the
    same order, on the rows as they are written (``write_captions_stream``), and the same artifacts."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ArtifactError("exists and is not a directory", out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        _write_streamed_artifacts(imported, fmt, first, out_dir, splits, request, config, inputs)
    except BaseException:
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()  # a refused import leaves no folder behind, as the whole-table path did
        raise
    finally:
        if imported.cleanup is not None:
            imported.cleanup()
    return out_dir.resolve()


def _write_streamed_artifacts(
    imported: Imported,
    fmt: str,
    first: Path,
    out_dir: Path,
    splits: Sequence[str] | None,
    request: ImportRequest,
    config: dict,
    inputs: list[Path],
) -> None:
    def some_rows(sink: CaptionSink) -> None:
        if sink.rows == 0:
            raise ArtifactError(
                f"no captions found for format {fmt}" + (f" in split(s) {', '.join(splits)}" if splits else ""), first
            )

    def fields(sink: CaptionSink) -> dict:
        _report(imported, sink.rows, sink.langs, sink.splits, fmt, request.images)
        return {
            "format": fmt,
            "dropped_empty": sum(imported.dropped_empty.values()),
            "dropped_empty_by_lang": dict(imported.dropped_empty),
            "splits": dict(sink.splits),
            "skipped_files": imported.skipped,
            **({"test_protocol": "1k-a"} if request.test_list is not None else {}),
        }

    checks = SinkChecks(rows=some_rows, unique_keys=lambda keys: _check_unique_caption_ids(keys, first), source=first)
    write_captions_stream(
        out_dir / CAPTIONS_DIR,
        imported.caption_pieces,
        stage="import-data",
        config=config,
        inputs=inputs,
        checks=checks,
        fields=fields,
    )
    if imported.image_count():
        streamed = imported.image_pieces is not None  # the images table a block at a time (import-data lines)
        (write_images_stream if streamed else artifacts.write_images)(
            out_dir / IMAGES_DIR,
            imported.image_pieces() if streamed else imported.images_table(),
            stage="import-data",
            config=config,
            inputs=inputs,
            format=fmt,
            images_root=[str(r) for r in request.images.roots],
        )


def _check_format_options(fmt: str, test_list: str | os.PathLike | None, task: str | None) -> None:
    if test_list is not None and fmt != "msrvtt":
        raise ConfigError(f"--test-list is for msrvtt (the 1K-A test list), not {fmt}")
    if task is not None and fmt != "multi30k":
        raise ConfigError(f"--task is for multi30k (task1 or task2), not {fmt}")


def _optional_paths(*values: str | os.PathLike | None) -> list[Path | None]:
    return [Path(value) if value is not None else None for value in values]


def _roots(images_root, default: Path) -> list[Path]:
    if images_root is None:
        return [default]
    roots = [Path(images_root)] if isinstance(images_root, (str, os.PathLike)) else [Path(r) for r in images_root]
    return roots or [default]


def _sources(fmt: str, src: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """The source paths of an import, as many as the format reads."""
    sources = [Path(p) for p in ([src] if isinstance(src, (str, os.PathLike)) else src)]
    if not sources:
        raise ConfigError(f"import-data {fmt} needs a source")
    if len(sources) > 1 and fmt not in MULTI_FILE_FORMATS:
        raise ConfigError(f"import-data {fmt} reads one source, got {len(sources)}")
    return sources


def _recorded_config(
    fmt: str,
    sources: list[Path],
    splits: Sequence[str] | None,
    request: ImportRequest,
    image_list: str | os.PathLike | None,
    parent: str | os.PathLike | None,
) -> dict:
    """The import's settings as its manifest records them (and as a rerun compares them)."""
    return {
        "format": fmt,
        "source": [str(s.resolve()) for s in sources] if len(sources) > 1 else str(sources[0].resolve()),
        "splits": list(splits or []),
        "images_root": [str(r) for r in request.images.roots],
        "lang": request.lang,
        "image_list": str(image_list) if image_list else None,
        "translation_of": request.translation_of,
        "parent": str(parent) if parent else None,
        **({"test_list": str(request.test_list.resolve())} if request.test_list is not None else {}),
        **({"task": request.task} if request.task is not None else {}),
    }


def _short_names(paths: Sequence[Path]) -> list[str]:
    """File names with their parent folder (``raw/train.de``): enough to tell the files apart on one line."""
    return [f"{path.parent.name}/{path.name}" for path in paths]


def _check_unique_caption_ids(table: pa.Table, src: Path) -> None:
    """Refuse a (caption_id, lang) pair on two rows, naming the repeated pair that appears first."""
    first = first_rows(table.column("caption_id"), table.column("lang"))
    repeats = np.flatnonzero(first != np.arange(len(first)))
    if len(repeats):
        pairs = len(np.unique(first[repeats]))
        row = int(first[repeats].min())
        caption_id, lang = table.column("caption_id")[row].as_py(), table.column("lang")[row].as_py()
        raise SchemaError(
            f"{pairs} caption_id/lang pair(s) occur more than once (e.g. {caption_id!r} in "
            f"{lang}); the source repeats an id",
            src,
        )


def _report(imported: Imported, rows: int, per_lang: dict, per_split: dict, fmt: str, images: ImageRoots) -> None:
    """What was imported, on stderr: the files read (where the importer names them), captions per language and
    per split, images."""
    if imported.read:
        log(f"import-data ({fmt}): read {len(imported.read)} caption file(s): {', '.join(_short_names(imported.read))}")
    log(
        f"import-data ({fmt}): {rows} captions in {len(per_lang)} language(s) "
        f"({', '.join(f'{lang} {n}' for lang, n in sorted(per_lang.items()))}), {imported.image_count()} images"
    )
    log(f"import-data ({fmt}): captions per split: {', '.join(f'{split} {n}' for split, n in per_split.items())}")
    dropped = sum(imported.dropped_empty.values())
    if dropped:
        detail = ", ".join(f"{lang} {n}" for lang, n in sorted(imported.dropped_empty.items()))
        log(f"import-data ({fmt}): dropped {dropped} empty caption(s) ({detail})")
    if imported.image_split_conflicts:
        log(
            f"import-data ({fmt}): {imported.image_split_conflicts} image reference(s) name an image already seen "
            f"in another split; the images table keeps the first split"
        )
    if images.missing:
        log(
            f"import-data ({fmt}): {images.missing} image file(s) were found under none of the "
            f"{len(images.roots)} --images-root folders; their paths use the first"
        )
