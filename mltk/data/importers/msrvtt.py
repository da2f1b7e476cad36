"""MSR-VTT (Xu et al. 2016) and its translations, the video-text retrieval set of MLA's evaluation.

Layout read (the official release, with translations beside it):

- ``MSRVTT_data.json`` (or ``train_val_videodatainfo.json`` / ``test_videodata.json``): ``videos[]`` with
  ``video_id`` and ``split`` (``train``, ``validate``, ``test``), ``sentences[]`` with ``sen_id``, ``video_id`` and
  ``caption`` (20 English captions per video);
- translations: ``translations/LANG.json`` next to it, each with ``sentences[]`` of ``sen_id`` and ``caption`` (the
  same ``sen_id`` as the English sentence it translates, as the multilingual MSR-VTT of Huang et al. 2021
  distributes machine translations), so a translation shares the English caption's ``caption_id``;
- videos ``VIDEO_ID.mp4`` under the images root (``--images-root MSRVTT/videos/all``; default: the json's folder).

``validate`` becomes ``val``. Video ids are kept as they are (``video7010``), so captions and video embeddings
(``mltk encode-videos``) match by id. Every field is checked against the schema above (a bad one names the file
and the key), and a video id must be a plain file name: it becomes part of a path under the images root.

**The 1K-A test split** (``--test-list MSRVTT_JSFUSION_test.csv``): MLA, like most video-text retrieval papers
since Yu et al. 2018 (JSFusion), tests on 1,000 videos with one caption each, not on the official 2,990-video test
with 20 captions each (a gallery three times larger, so its recalls are not comparable). The public list is a CSV
with the columns ``key,vid_key,video_id,sentence``; with it, the ``test`` split holds exactly the listed videos,
each with the listed sentence. A sentence found among the video's English captions keeps that caption's
``sen_id`` (``msrvtt:SEN_ID``), so its translations come along; one that is not keeps English only
(``msrvtt-1k-a:KEY``).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from mltk.core.errors import ArtifactError, SchemaError
from mltk.core.names import check_name
from mltk.core.runtime import log
from mltk.core.user_files import expect, read_user_json
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang, read_text

DATA_FILES = ("MSRVTT_data.json", "train_val_videodatainfo.json", "test_videodata.json")
SPLITS = {"train": "train", "validate": "val", "val": "val", "test": "test"}
TEST_SPLIT = "test"
TEST_LIST_COLUMNS = ("video_id", "sentence")  # of key,vid_key,video_id,sentence (JSFusion's MSRVTT_JSFUSION_test.csv)
WHAT = "MSR-VTT annotation file"


@dataclass
class Sentences:
    """The English sentences read: which video each ``sen_id`` describes, and the ids whose rows were kept (only
    their translations are imported)."""

    video_of: dict[str, str] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)
    by_text: dict[tuple[str, str], str] = field(default_factory=dict)  # (video_id, caption) -> its first sen_id


def import_msrvtt(src: Path, request: ImportRequest) -> Imported:
    data_path = _data_file(src)
    data = _annotation_object(data_path)
    videos = expect(data.get("videos"), list, "videos", data_path, what=WHAT)
    sentences = expect(data.get("sentences"), list, "sentences", data_path, what=WHAT)
    imported = Imported()
    split_of, described = _read_videos(videos, data_path, request, imported)
    known = _read_sentences(sentences, data_path, imported, split_of)
    if request.test_list is not None and request.wants(TEST_SPLIT):
        _add_test_list(read_test_list(request.test_list), request, imported, known, described)
    for lang, path in _translation_files(data_path.parent):
        _add_translations(imported, lang, path, known, split_of)
    _warn_missing_videos(imported, request)
    return imported


def _read_videos(
    videos: list, data_path: Path, request: ImportRequest, imported: Imported
) -> tuple[dict[str, str], set[str]]:
    """``videos[]`` -> ``{video_id: split}`` of the wanted splits (each video registered as an image; with a test
    list, the official test videos are left to it) and every video id the file describes."""
    split_of: dict[str, str] = {}
    described: set[str] = set()
    for number, video in enumerate(videos):
        expect(video, dict, f"videos[{number}]", data_path, what=WHAT)
        video_id = _video_id(video.get("video_id"), f"videos[{number}].video_id", data_path)
        described.add(video_id)
        split = expect(video.get("split"), str, f"videos[{number}].split", data_path, what=WHAT)
        split = SPLITS.get(split, split)
        if request.wants(split) and not (split == TEST_SPLIT and request.test_list is not None):
            split_of[video_id] = split
            imported.add_image(video_id, split, request.images.path(f"{video_id}.mp4"))
    return split_of, described


def _read_sentences(sentences: list, data_path: Path, imported: Imported, split_of: dict[str, str]) -> Sentences:
    """The English captions of the videos in ``split_of``; every sentence is checked, kept or not."""
    known = Sentences()
    for number, sentence in enumerate(sentences):
        key = f"sentences[{number}]"
        expect(sentence, dict, key, data_path, what=WHAT)
        sen_id = _sen_id(sentence.get("sen_id"), f"{key}.sen_id", data_path)
        video = _video_id(sentence.get("video_id"), f"{key}.video_id", data_path)
        caption = expect(sentence.get("caption"), str, f"{key}.caption", data_path, what=WHAT)
        if sen_id in known.video_of:
            raise SchemaError(f"{key}.sen_id {sen_id!r} occurs twice; a sen_id names one sentence", data_path)
        known.video_of[sen_id] = video
        known.by_text.setdefault((video, caption.strip()), sen_id)
        if video in split_of:
            known.kept.add(sen_id)
            imported.add(video, "en", caption, f"msrvtt:{sen_id}", split_of[video])
    return known


def _add_translations(imported: Imported, lang: str, path: Path, known: Sentences, split_of: dict) -> None:
    what = "MSR-VTT translation file"
    check_name(lang, "the language named by the translation file", path)
    sentences = expect(_annotation_object(path, what).get("sentences"), list, "sentences", path, what=what)
    seen: set[str] = set()
    for number, sentence in enumerate(sentences):
        key = f"sentences[{number}]"
        expect(sentence, dict, key, path, what=what)
        sen_id = _sen_id(sentence.get("sen_id"), f"{key}.sen_id", path, what)
        caption = expect(sentence.get("caption"), str, f"{key}.caption", path, what=what)
        video = known.video_of.get(sen_id)
        if video is None:
            raise SchemaError(
                f"{key} translates sen_id {sentence['sen_id']!r}, which the English data does not have", path
            )
        if sen_id in seen:
            raise SchemaError(f"{key}.sen_id {sen_id!r} is translated twice in this file", path)
        seen.add(sen_id)
        if sen_id in known.kept:
            imported.add(video, lang, caption, f"msrvtt:{sen_id}", split_of.get(video, TEST_SPLIT))


def read_test_list(path: Path) -> list[dict[str, str]]:
    """The rows of a JSFusion-style test list (``key,vid_key,video_id,sentence``), each video once."""
    text = read_text(Path(path))
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in TEST_LIST_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise SchemaError(
            f"the test list lacks the column(s) {', '.join(missing)} (expected the header "
            f"key,vid_key,video_id,sentence of MSRVTT_JSFUSION_test.csv)",
            path,
        )
    rows, seen = [], set()
    for line, row in enumerate(reader, start=2):
        video = _video_id(row.get("video_id"), f"line {line} video_id", path, "test list")
        if video in seen:
            raise SchemaError(
                f"line {line}: video {video!r} is listed twice; the 1K-A split has one caption per video", path
            )
        if not (row.get("sentence") or "").strip():
            raise SchemaError(f"line {line}: video {video!r} has no sentence", path)
        seen.add(video)
        rows.append(
            {
                "key": (row.get("key") or "").strip() or str(line - 1),
                "video_id": video,
                "sentence": row["sentence"].strip(),
            }
        )
    if not rows:
        raise SchemaError("the test list names no video", path)
    return rows


def _add_test_list(
    listed: list[dict[str, str]], request: ImportRequest, imported: Imported, known: Sentences, described: set[str]
) -> None:
    """The ``test`` split as the list gives it: each listed video with its one sentence, keeping the English
    caption's ``sen_id`` when the sentence is one of the video's captions (then its translations follow)."""
    for row in listed:
        video = row["video_id"]
        if video not in described:
            raise SchemaError(
                f"the test list names video {video!r}, which the MSR-VTT annotation file does not describe",
                request.test_list,
            )
        sen_id = known.by_text.get((video, row["sentence"]))
        imported.add_image(video, TEST_SPLIT, request.images.path(f"{video}.mp4"))
        if sen_id is not None:
            known.kept.add(sen_id)
            imported.add(video, "en", row["sentence"], f"msrvtt:{sen_id}", TEST_SPLIT)
        else:
            imported.add(video, "en", row["sentence"], f"msrvtt-1k-a:{row['key']}", TEST_SPLIT)
    log(
        f"import-data (msrvtt): test split = {len(listed)} videos of the test list {request.test_list} "
        f"(one caption each: JSFusion's 1K-A)"
    )


def _warn_missing_videos(imported: Imported, request: ImportRequest) -> None:
    """Say so when the images artifact would list videos that are not on disk (a wrong ``--images-root``)."""
    paths = [path for _, path in imported.images.values() if "://" not in path]
    missing = [path for path in paths if not Path(path).is_file()]
    if not missing:
        return
    roots = ", ".join(str(root) for root in request.images.roots)
    if len(missing) == len(paths):
        log(
            f"import-data (msrvtt): warning: none of the {len(paths)} videos is under --images-root {roots} "
            f"(e.g. {missing[0]}); give the folder of VIDEO_ID.mp4 files (MSRVTT/videos/all) before encode-videos"
        )
    else:
        log(
            f"import-data (msrvtt): warning: {len(missing)} of the {len(paths)} videos are not under "
            f"--images-root {roots} (e.g. {missing[0]})"
        )


def _video_id(value: object, key: str, path: Path, what: str = WHAT) -> str:
    """A video id as a string that can be one file name under the images root (never ``../x`` or ``/x``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    expect(value, str, key, path, what=what)
    return check_name(value.strip(), key, path)


def _sen_id(value: object, key: str, path: Path, what: str = WHAT) -> str:
    return str(expect(value, (int, str), key, path, what=what))


def _data_file(src: Path) -> Path:
    if src.is_file():
        return src
    for name in DATA_FILES:
        if (src / name).is_file():
            return src / name
    raise ArtifactError(f"holds none of {', '.join(DATA_FILES)}", src)


def _translation_files(folder: Path) -> list[tuple[str, Path]]:
    directory = folder / "translations"
    if not directory.is_dir():
        return []
    return [(normalize_lang(path.stem), path) for path in sorted(directory.glob("*.json"))]


def _annotation_object(path: Path, what: str = WHAT) -> dict:
    data = read_user_json(path, what=what)
    return expect(data, dict, "(top level)", path, what=what)
