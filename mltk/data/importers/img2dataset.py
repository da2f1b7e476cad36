"""img2dataset's webdataset output (``mltk import-data webdataset SHARDS_DIR --lang en``): a folder of tar
shards whose samples hold ``KEY.jpg``, ``KEY.txt`` (the caption) and ``KEY.json`` (img2dataset's metadata).

Each sample becomes one caption: the image id and the caption_id are the sample key, the language is ``--lang``
(img2dataset does not record it), the split is the one ``--split`` names (``train`` by default: these sets are
training sets), and the ``shard`` column names the tar the image is in, which ``mltk encode-images SHARDS_DIR``
reads shard by shard. The captions are read through ``webdataset``; the images are not decoded here.

Nothing is dropped silently: a sample without a ``.txt`` or without an image file, a caption that is not UTF-8,
and a shard that breaks off (read up to the break) or holds fewer samples than img2dataset's ``NNNNN.parquet``
says it wrote are each named on stderr and in the manifest (``skipped_files``). A key that occurs twice in the set
is refused before anything is read.
"""

from __future__ import annotations

from pathlib import Path

from mltk.core.errors import ConfigError
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang
from mltk.data.webdataset_shards import (
    ShardReadError,
    check_unique_keys,
    image_bytes,
    list_shards,
    read_samples,
    shortfall,
)

DEFAULT_SPLIT = "train"


def import_webdataset(src: Path, request: ImportRequest) -> Imported:
    if not request.lang:
        raise ConfigError("import-data webdataset needs --lang (the language of the .txt captions)")
    if len(request.splits) > 1:
        raise ConfigError(f"import-data webdataset writes one split (--split NAME), got {', '.join(request.splits)}")
    shards = list_shards(src)
    check_unique_keys(shards, src)
    lang, split = normalize_lang(request.lang), (request.splits or (DEFAULT_SPLIT,))[0]
    imported = Imported()
    for shard in shards:
        _import_shard(shard, lang, split, imported)
    return imported


def _import_shard(shard: Path, lang: str, split: str, imported: Imported) -> None:
    read = 0
    try:
        for sample in read_samples(shard):
            read += 1
            problem = _add_sample(sample, shard.name, lang, split, imported)
            if problem:
                imported.skipped.append(f"{shard.name}: sample {sample['__key__']!r} {problem}")
    except ShardReadError as exc:
        imported.skipped.append(f"{shard.name}: {exc}")
        return
    missing = shortfall(shard, read)
    if missing:
        imported.skipped.append(f"{shard.name}: {missing}")


def _add_sample(sample: dict, shard_name: str, lang: str, split: str, imported: Imported) -> str | None:
    """Add the sample's caption; returns why it was not added, or None."""
    key = sample["__key__"]
    if "txt" not in sample:
        return "has no .txt caption"
    if image_bytes(sample) is None:
        return "has no image file (.jpg)"
    try:
        caption = sample["txt"].decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"has a .txt caption that is not UTF-8 ({exc.reason} at byte {exc.start})"
    imported.add(key, lang, caption, key, split, shard=shard_name)
    return None
