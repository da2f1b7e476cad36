"""img2dataset's output, read through the ``webdataset`` package: a folder of tar shards (``00000.tar``,
``00001.tar``, ...), each holding samples ``KEY.jpg`` / ``KEY.txt`` / ``KEY.json``, beside img2dataset's own
``00000.parquet`` (one row per URL tried, with its ``status``) and ``00000_stats.json`` (counts of successes and
failures).

``mltk import-data webdataset`` reads the captions; ``mltk encode-images`` streams the images shard by shard. Both
check first that every sample key occurs once in the whole set (the key becomes the image id), reading only the
tar headers, and both report a shard that cannot be read to its end (a truncated download) by name, with the
samples read before the break kept.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

from mltk.core.errors import ArtifactError, ConfigError, SchemaError

SHARD_SUFFIX = ".tar"
IMAGE_SUFFIXES = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff")  # webdataset suffixes, no dot
MAX_ERROR_CHARS = 300


def require_webdataset():
    """The ``webdataset`` module, or one line naming the extra that installs it."""
    try:
        import webdataset
    except ImportError:
        # not 'mltk[shards]': the name mltk on the public package index is another project
        raise ConfigError(
            "reading webdataset shards needs the webdataset package (pip install webdataset, or "
            "pip install -e '.[shards]' in the mltk checkout)"
        ) from None
    return webdataset


def is_shard_folder(path: Path) -> bool:
    """A folder with ``.tar`` files and no image files directly inside it (img2dataset's
    ``output_format=webdataset``); a folder of images that happens to hold a tar stays a folder of images."""
    if not path.is_dir():
        return False
    suffixes = {child.suffix.lower() for child in path.iterdir() if child.is_file()}
    return SHARD_SUFFIX in suffixes and not suffixes & {f".{suffix}" for suffix in IMAGE_SUFFIXES}


def list_shards(folder: Path) -> list[Path]:
    """The ``.tar`` shards of ``folder`` sorted by name, which is img2dataset's shard order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ArtifactError("no such folder (expected img2dataset's webdataset output: 00000.tar, ...)", folder)
    shards = sorted(
        child
        for child in folder.iterdir()
        if child.suffix == SHARD_SUFFIX and child.is_file() and not child.name.startswith(".")
    )
    if not shards:
        raise ArtifactError("no .tar shards in the folder (expected img2dataset's webdataset output)", folder)
    return shards


def shard_keys(shard: Path) -> list[str]:
    """The sample keys of one shard in order, from the tar headers alone (tarfile seeks over the file bodies),
    one entry per sample: consecutive members with one key form a sample, as webdataset groups them. A key
    repeated inside one sample (``a.jpg`` twice) counts twice. A shard that breaks off gives the keys before."""
    webdataset = require_webdataset()
    keys: list[str] = []
    current, suffixes = None, set()
    try:
        with tarfile.open(shard, "r:") as archive:
            for member in archive:
                key, suffix = webdataset.tariterators.base_plus_ext(member.name)
                if not member.isreg() or key is None:
                    continue
                if key != current or suffix.lower() in suffixes:
                    keys.append(key)
                    current, suffixes = key, set()
                suffixes.add(suffix.lower())
    except (tarfile.TarError, OSError):
        pass  # reported, with the samples it still holds, when the shard is read
    return keys


def check_unique_keys(shards: list[Path], folder: Path) -> int:
    """Refuse a shard set in which a sample key occurs twice (it would be two images under one id); returns the
    number of samples."""
    seen: dict[str, str] = {}
    for shard in shards:
        for key in shard_keys(shard):
            if key in seen:
                where = f"twice in {shard.name}" if seen[key] == shard.name else f"in {seen[key]} and {shard.name}"
                raise SchemaError(
                    f"sample key {key!r} occurs {where}; keys are image ids and must be unique across the shard set",
                    folder,
                )
            seen[key] = shard.name
    return len(seen)


class ShardReadError(Exception):
    """A shard that could not be read to its end; ``samples`` were read before the break."""

    def __init__(self, shard: Path, samples: int, cause: BaseException):
        self.shard, self.samples = shard, samples
        reason = str(cause).split(" @ <")[0]  # webdataset appends the stream's repr
        super().__init__(f"unreadable after {samples} sample(s): {type(cause).__name__}: {reason}"[:MAX_ERROR_CHARS])


def read_samples(shard: Path, suffixes: set[str] | None = None) -> Iterator[dict]:
    """The samples of one shard in order, as webdataset groups them: ``{"__key__": KEY, SUFFIX: bytes, ...}``
    holding only ``suffixes`` (every file when None). Where the tar breaks off, the samples complete before the
    break are yielded and then ``ShardReadError`` is raised; the sample cut in two is not yielded (it would
    lack files it had)."""
    webdataset = require_webdataset()
    names: list[str] = []  # every member whose body was read, or was being read when the tar broke
    failures: list[tuple[BaseException, bool]] = []  # (error, whether it broke inside the body of names[-1])
    count, held = 0, None
    try:
        with open(shard, "rb") as stream:
            files = _files_until_failure(webdataset, stream, shard, names, failures)
            for sample in webdataset.tariterators.group_by_keys(files, suffixes=suffixes):
                if held is not None:  # a sample is complete once the next one starts
                    count += 1
                    yield held
                held = sample
    except (OSError, ValueError) as exc:  # the file cannot be opened; a file name twice in one sample
        raise ShardReadError(shard, count, exc) from exc
    if held is not None and not _cut_by(held, names, failures, webdataset):
        count += 1
        yield held
    if failures:
        raise ShardReadError(shard, count, failures[0][0])


def _files_until_failure(
    webdataset, stream, shard: Path, names: list[str], failures: list[tuple[BaseException, bool]]
) -> Iterator[dict]:
    """webdataset's files of one tar, ending quietly at the first error (recorded in ``failures``)."""

    def note(name: str) -> str:
        names.append(name)
        return name

    def stop_in_body(exc: BaseException) -> bool:
        failures.append((exc, True))
        return False

    try:
        for item in webdataset.tariterators.tar_file_iterator(stream, handler=stop_in_body, rename_files=note):
            yield {**item, "__url__": str(shard)}
    except (tarfile.TarError, OSError) as exc:  # a broken header between two members
        failures.append((exc, False))


def _cut_by(sample: dict, names: list[str], failures: list[tuple[BaseException, bool]], webdataset) -> bool:
    """Whether the last sample may lack files because the tar broke while it was being read."""
    if not failures:
        return False
    _, in_body = failures[0]
    return not in_body or webdataset.tariterators.base_plus_ext(names[-1])[0] == sample["__key__"]


def image_bytes(sample: dict) -> bytes | None:
    """The image file of a sample (img2dataset writes ``.jpg`` unless told another format)."""
    return next((sample[suffix] for suffix in IMAGE_SUFFIXES if suffix in sample), None)


def expected_samples(shard: Path) -> int | None:
    """How many samples img2dataset wrote into ``shard``: the rows with ``status == "success"`` in its
    ``NNNNN.parquet``, else ``successes`` in its ``NNNNN_stats.json``; None without either. A tar cut off between
    two members reads as complete, so this count is what shows it."""
    table_path = shard.with_suffix(".parquet")
    if table_path.is_file():
        import pyarrow.parquet as pq

        try:
            statuses = pq.read_table(table_path, columns=["status"]).column("status").to_pylist()
        except Exception as exc:  # a broken metadata file is named, not fatal to the stage
            raise ArtifactError(
                f"is not img2dataset's shard table with a status column ({exc})"[:MAX_ERROR_CHARS], table_path
            ) from None
        return sum(status == "success" for status in statuses)
    stats = _read_stats(shard)
    return stats.get("successes") if stats is not None and isinstance(stats.get("successes"), int) else None


def _read_stats(shard: Path) -> dict | None:
    path = shard.with_name(f"{shard.stem}_stats.json")
    if not path.is_file():
        return None
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise ArtifactError(f"is not readable JSON ({exc})", path) from None
    if not isinstance(stats, dict):
        raise ArtifactError("is not a JSON object (expected img2dataset's shard statistics)", path)
    return stats


def shortfall(shard: Path, read: int) -> str | None:
    """Why ``shard`` is incomplete when img2dataset says it wrote more samples than ``read`` were found."""
    expected = expected_samples(shard)
    if expected is not None and read < expected:
        return f"holds {read} sample(s) but img2dataset wrote {expected} (a truncated tar)"
    return None
