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
(``mltk encode-videos``) match by id.
"""

from __future__ import annotations

import json
from pathlib import Path

from mltk.core.errors import ArtifactError, SchemaError
from mltk.data.importers.common import ImportRequest, Imported, normalize_lang, read_text

DATA_FILES = ("MSRVTT_data.json", "train_val_videodatainfo.json", "test_videodata.json")
SPLITS = {"train": "train", "validate": "val", "val": "val", "test": "test"}


def import_msrvtt(src: Path, request: ImportRequest) -> Imported:
    data_path = _data_file(src)
    data = _json(data_path)
    if not isinstance(data.get("videos"), list) or not isinstance(data.get("sentences"), list):
        raise SchemaError("has no 'videos' and 'sentences' lists (expected MSRVTT_data.json)", data_path)
    imported = Imported()
    split_of = {}
    for number, video in enumerate(data["videos"]):
        if not isinstance(video, dict) or "video_id" not in video or "split" not in video:
            raise SchemaError(f"videos[{number}] lacks 'video_id' or 'split'", data_path)
        split = SPLITS.get(video["split"], video["split"])
        if request.wants(split):
            split_of[str(video["video_id"])] = split
            imported.add_image(str(video["video_id"]), split, request.images.path(f"{video['video_id']}.mp4"))
    video_of = {}
    for number, sentence in enumerate(data["sentences"]):
        if not isinstance(sentence, dict) or not {"sen_id", "video_id", "caption"} <= set(sentence):
            raise SchemaError(f"sentences[{number}] lacks 'sen_id', 'video_id' or 'caption'", data_path)
        video = str(sentence["video_id"])
        video_of[str(sentence["sen_id"])] = video
        if video in split_of:
            imported.add(video, "en", sentence["caption"], f"msrvtt:{sentence['sen_id']}", split_of[video])
    for lang, path in _translation_files(data_path.parent):
        _add_translations(imported, lang, path, video_of, split_of)
    return imported


def _add_translations(imported: Imported, lang: str, path: Path, video_of: dict, split_of: dict) -> None:
    sentences = _json(path).get("sentences")
    if not isinstance(sentences, list):
        raise SchemaError("has no 'sentences' list", path)
    for number, sentence in enumerate(sentences):
        if not isinstance(sentence, dict) or "sen_id" not in sentence or "caption" not in sentence:
            raise SchemaError(f"sentences[{number}] lacks 'sen_id' or 'caption'", path)
        video = video_of.get(str(sentence["sen_id"]))
        if video is None:
            raise SchemaError(f"sentences[{number}] translates sen_id {sentence['sen_id']!r}, which the English "
                              f"data does not have", path)
        if video in split_of:
            imported.add(video, lang, sentence["caption"], f"msrvtt:{sentence['sen_id']}", split_of[video])


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


def _json(path: Path) -> dict:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"is not valid JSON ({exc.msg} at line {exc.lineno})", path)
    if not isinstance(data, dict):
        raise SchemaError("is not a JSON object", path)
    return data
