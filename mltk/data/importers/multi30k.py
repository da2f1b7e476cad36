"""Multi30K (Elliott et al. 2016; 2017; Barrault et al. 2018) as its repository distributes it.

Task 1: line i of ``task1/raw/SPLIT.LANG`` is a translation of line i of the English file, and line i of
``task1/image_splits/SPLIT.txt`` names its Flickr30K image, so the alignment *is* the line number: all files of a
split must have as many lines as the image list, and the translations share ``caption_id = f"{split}-{i}"``.
Task 2: ``task2/raw/SPLIT.K.LANG`` holds the K-th description (numbered from 1, or from 0 in some copies) of each
image of ``task2/image_splits/SPLIT_images.txt``, written independently per language: each gets its own
caption_id. Files may be gzipped (``.gz``). A caption file without its image list is an error naming both; a
file whose name fits neither pattern is skipped and named in the log.

One import reads one task (``ImportRequest.task``, ``task1`` by default). The two are different benchmarks on
the same 1,000 test images: merged into one ``test`` split, every image would hold one translated caption and five
independent descriptions per language, and caption-to-caption retrieval would score a blend of translation
retrieval and description retrieval (AME reports task 2 alone). Import each task into its own folder instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from mltk.core.errors import ArtifactError, ConfigError
from mltk.data.importers.common import (
    Imported,
    ImportRequest,
    is_language_code,
    normalize_lang,
    read_lines,
    require_aligned,
    text_file,
)
from mltk.data.importers.image_ids import FLICKR30K, canonical_image_id

MULTI30K_TASKS = ("task1", "task2")
DEFAULT_TASK = "task1"
_TASK_NAMES = {"task1": "translations", "task2": "independent descriptions"}
MULTI30K_SPLITS = {"train": "train", "val": "val", "test_2016_flickr": "test", "test_2016": "test", "test": "test"}
_TASK1_FILE = re.compile(r"^(?P<stem>.+?)\.(?P<lang>[a-z]{2,3})(\.gz)?$")
_TASK2_FILE = re.compile(r"^(?P<stem>.+?)\.(?P<k>\d)\.(?P<lang>[a-z]{2,3})(\.gz)?$")


def multi30k_split_name(stem: str) -> str:
    """Multi30K file stems -> mltk split names (``test_2016_flickr`` is the usual test set; later test sets such
    as ``test_2017_flickr`` keep their names)."""
    return MULTI30K_SPLITS.get(stem, stem)


def image_id(name: str) -> str:
    """Multi30K names Flickr30K files (and, for test_2017_mscoco, COCO files): canonical ids for both."""
    return canonical_image_id(name, FLICKR30K)


def import_multi30k(src: Path, request: ImportRequest) -> Imported:
    root = src / "data" if (src / "data" / "task1").is_dir() or (src / "data" / "task2").is_dir() else src
    if not (root / "task1").is_dir() and not (root / "task2").is_dir():
        raise ArtifactError("not a Multi30K folder (no task1/ or task2/ inside)", src)
    task = request.task or DEFAULT_TASK
    if task not in MULTI30K_TASKS:
        raise ConfigError(f"--task {task!r} is not a Multi30K task; expected one of {', '.join(MULTI30K_TASKS)}")
    if not (root / task).is_dir():
        raise ArtifactError(f"has no {task}/ folder (--task {task})", src)
    imported = Imported()
    {"task1": _task1, "task2": _task2}[task](root / task, request, imported)
    for other in MULTI30K_TASKS:
        if other != task and (root / other).is_dir():
            imported.notes.append(
                f"{root / other} not imported ({_TASK_NAMES[other]}; --task {other} imports it "
                f"into a folder of its own)"
            )
    return imported


def _caption_files(raw: Path, pattern: re.Pattern, imported: Imported) -> list[tuple[re.Match, Path]]:
    if not raw.is_dir():
        return []
    found = []
    for path in sorted(p for p in raw.iterdir() if p.is_file() and not p.name.startswith(".")):
        match = pattern.match(path.name)
        if match and is_language_code(match["lang"]):
            found.append((match, path))
        else:
            imported.skipped.append(f"{path} (not a {pattern.pattern} caption file name)")
    return found


def _task1(task: Path, request: ImportRequest, imported: Imported) -> None:
    groups: dict[str, dict[str, Path]] = {}
    for match, path in _caption_files(task / "raw", _TASK1_FILE, imported):
        if _TASK2_FILE.match(path.name):  # SPLIT.K.LANG belongs to task 2, not here
            imported.skipped.append(f"{path} (a task 2 file name in task1/raw)")
            continue
        groups.setdefault(match["stem"], {})[normalize_lang(match["lang"])] = path
    for stem, files in groups.items():
        split = multi30k_split_name(stem)
        if not (request.wants(split) or request.wants(stem)):  # --split test or --split test_2016_flickr
            continue
        image_list = text_file(task / "image_splits", f"{stem}.txt")
        if image_list is None:
            first = next(iter(files.values()))
            raise ArtifactError(
                f"has no image list (expected {task.name}/image_splits/{stem}.txt); without it "
                f"the captions cannot be matched to images (use --split to import other splits)",
                first,
            )
        names = read_lines(image_list)
        for name in names:
            imported.add_image(image_id(name), split, request.images.path(name))
        for lang, path in files.items():
            lines = read_lines(path)
            require_aligned(lines, len(names), path, image_list)
            imported.read.append(path)
            for i, (name, caption) in enumerate(zip(names, lines)):
                imported.add(image_id(name), lang, caption, f"{split}-{i}", split, source="task1")


def _task2(task: Path, request: ImportRequest, imported: Imported) -> None:
    groups: dict[str, list[tuple[int, str, Path]]] = {}
    for match, path in _caption_files(task / "raw", _TASK2_FILE, imported):
        groups.setdefault(match["stem"], []).append((int(match["k"]), normalize_lang(match["lang"]), path))
    for stem, files in groups.items():
        split = multi30k_split_name(stem)
        if not (request.wants(split) or request.wants(stem)):  # --split test or --split test_2016_flickr
            continue
        image_list = text_file(task / "image_splits", f"{stem}_images.txt") or text_file(task, f"{stem}_images.txt")
        if image_list is None:
            raise ArtifactError(
                f"has no image list ({stem}_images.txt in task2/image_splits/ or task2/); without "
                f"it the descriptions cannot be matched to images",
                files[0][2],
            )
        names = read_lines(image_list)
        for name in names:
            imported.add_image(image_id(name), split, request.images.path(name))
        for k, lang, path in files:
            lines = read_lines(path)
            require_aligned(lines, len(names), path, image_list)
            imported.read.append(path)
            for i, (name, caption) in enumerate(zip(names, lines)):
                imported.add(image_id(name), lang, caption, f"task2-{split}-{i}-{k}-{lang}", split, source="task2")
