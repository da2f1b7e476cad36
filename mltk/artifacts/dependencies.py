"""What a checkpoint depends on outside itself, pinned by content: its frozen base model (or base weights file) and
its tokenizer.

A checkpoint of acquirers (MLA), of a grown table (CLL-CLIP) or of CCR_k holds only what was trained; its
checkpoint config names the frozen base it was trained on (``base.model``, ``base.pretrained``) and the non-native
tokenizer (``non_native.source``). Named by path only, a checkpoint would silently change meaning when the base is
retrained in place (``pretrain --overwrite``), and would be lost when the directory tree moves. So when a checkpoint
is committed (``ArtifactWriter.commit``, one place no stage can forget) its config gets a ``depends_on`` block, one
record per dependency::

    "depends_on": {"base.model": {"role": "base model", "location": "/abs/runs/native",
                                  "relative": "../native", "fingerprint": "sha256:..."},
                   "non_native.source": {"role": "tokenizer", "name": "bert-base-multilingual-cased",
                                         "fingerprint": null, "note": NAME_NOTE}}

``relative`` is relative to the checkpoint itself. On load (``resolve``) each fingerprinted dependency is looked
for at the places given with ``--base`` (``policy.BASE_PATHS``), then at ``relative`` (the tree moved together),
then at ``location``; the first whose content fingerprint matches is used and written into the config the loader
sees. One that is found only with another fingerprint is refused ("base model changed since this checkpoint was
made"); one found nowhere is refused naming the dependency and ``--base``. A dependency that is a name (an open_clip
architecture or pretrained tag, an ``hf-hub:`` or Hugging Face hub name) has no local files to fingerprint: it is
recorded as a name and said to be so. Checkpoints written before this record are read as they are.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from mltk.artifacts import schema
from mltk.artifacts.content_check import check_content
from mltk.artifacts.integrity import sha256_file
from mltk.artifacts.manifest import fingerprint, is_artifact
from mltk.core import policy
from mltk.core.errors import ArtifactError, ConfigError

DEPENDS_ON = "depends_on"
ROLES = {"base.model": "base model", "base.pretrained": "base weights", "non_native.source": "tokenizer"}
LOCAL_SCHEME = "local-dir:"  # open_clip's name for a local folder; the folder is what is pinned
NAME_NOTE = (
    "a name (open_clip architecture or pretrained tag, hub name), not local files: no fingerprint is "
    "possible; the name is trusted"
)
NOT_A_DEPENDENCY = ("tower",)  # the MLA tokenizer 'tower' is the base's own

MAX_FOLDER_FILES = 10_000  # a model or tokenizer folder holds a few files; a crafted relative path may name "/"

_memo: dict[tuple, str] = {}


def content_fingerprint(path: str | os.PathLike) -> str:
    """The content of a dependency: an mltk artifact by the sha256 its manifest records for each file (resume
    state left out), a file by its bytes, a plain folder (a transformers model) by the name and sha256 of every
    file in it, hidden ones (``.cache/``, ``.DS_Store``) left out. Memoised per process on each file's size and
    modification time (about 0.7 s for all-MiniLM-L6-v2's 88 MB on a loaded CPU)."""
    path = Path(path).resolve()
    if is_artifact(path):
        return _artifact_content(path)
    if path.is_file():
        return fingerprint(path)
    files = folder_files(path)
    key = (str(path), tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _memo:
        digest = hashlib.sha256()
        for child in files:
            digest.update(f"{child.relative_to(path).as_posix()}\0{sha256_file(child)}\n".encode())
        _memo[key] = "sha256:" + digest.hexdigest()
    return _memo[key]


def folder_files(path: Path) -> list[Path]:
    """The regular files of a plain folder (hidden ones left out), sorted; walked without following links and
    given up past ``MAX_FOLDER_FILES`` files or an unreadable folder, so that ``--base /`` is refused at once."""
    files: list[Path] = []

    def unreadable(error: OSError) -> None:
        raise ConfigError(f"cannot read {error.filename} ({error.strerror}): not a model or tokenizer folder", path)

    for directory, subfolders, names in os.walk(path, onerror=unreadable, followlinks=False):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        for name in names:
            child = Path(directory) / name
            if not name.startswith(".") and stat.S_ISREG(child.lstat().st_mode):
                files.append(child)
        if len(files) > MAX_FOLDER_FILES:
            raise ConfigError(f"holds more than {MAX_FOLDER_FILES} files: not a model or tokenizer folder", path)
    return sorted(files)


def _artifact_content(path: Path) -> str:
    """An artifact by its kind and the sha256 of each file its manifest records, resume state (``state/``) left
    out: ``mltk prune`` of a base does not change what it is. An artifact without checksums (an older mltk) by
    ``fingerprint`` (its manifest, names, sizes and times)."""
    manifest = json.loads((path / schema.MANIFEST).read_text(encoding="utf-8"))
    checksums = manifest.get("checksums") if isinstance(manifest, dict) else None
    if not isinstance(checksums, dict):
        return fingerprint(path)
    digest = hashlib.sha256(f"{manifest.get('kind')}\n".encode())
    for name in sorted(checksums):
        if name.split("/")[0] != schema.CHECKPOINT_STATE_DIR and isinstance(checksums[name], dict):
            digest.update(f"{name}\0{checksums[name].get('sha256')}\n".encode())
    return "sha256:" + digest.hexdigest()


def _kind(path: Path) -> str:
    return "artifact" if is_artifact(path) else "file" if path.is_file() else "folder"


def _get(config: dict, field: str) -> Any:
    value: Any = config
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _set(config: dict, field: str, value: Any) -> None:
    *parents, last = field.split(".")
    for part in parents:
        config = config[part]
    config[last] = value


def field_value(config: dict, field: str) -> Any:
    """The value of the dotted ``field`` of a checkpoint config (``base.model``), None where it is absent."""
    return _get(config, field)


def set_field(config: dict, field: str, value: Any) -> dict:
    """``config`` with the dotted ``field`` set to ``value`` (in place)."""
    _set(config, field, value)
    return config


def _local_path(location: str) -> tuple[str, Path] | None:
    """``(scheme, path)`` when ``location`` names existing local files (``local-dir:`` kept apart), else None."""
    scheme = LOCAL_SCHEME if location.startswith(LOCAL_SCHEME) else ""
    raw = location[len(scheme) :]
    if not raw or "\n" in raw or "\x00" in raw or (not scheme and raw.startswith("hf-hub:")):
        return None
    path = Path(raw)
    return (scheme, path) if path.exists() else None


def dependency_fields(config: dict) -> list[str]:
    """The config fields of ``config`` that name something outside the checkpoint."""
    return [
        field
        for field in ROLES
        if isinstance(_get(config, field), str) and _get(config, field) and _get(config, field) not in NOT_A_DEPENDENCY
    ]


def pin(config: dict, checkpoint: str | os.PathLike) -> dict:
    """``config`` with its ``depends_on`` block for a checkpoint that will lie at ``checkpoint``; local
    dependencies are written as absolute paths."""
    config = copy.deepcopy(config)
    checkpoint = Path(checkpoint).resolve()
    records = {}
    for field in dependency_fields(config):
        value = _get(config, field)
        local = _local_path(value)
        if local is None:
            records[field] = {"role": ROLES[field], "name": value, "fingerprint": None, "note": NAME_NOTE}
            continue
        scheme, path = local[0], local[1].resolve()
        _set(config, field, scheme + str(path))
        records[field] = {
            "role": ROLES[field],
            "location": scheme + str(path),
            "kind": _kind(path),
            "relative": os.path.relpath(path, checkpoint),
            "fingerprint": content_fingerprint(path),
        }
        if scheme:
            records[field]["scheme"] = scheme
    if records:
        config[DEPENDS_ON] = records
    return config


def _short(fingerprint_text: str | None) -> str:
    text = str(fingerprint_text)
    return text[:19] if text.startswith("sha256:") else text  # "sha256:" + 12 hex digits


def _candidates(record: dict, checkpoint: Path, given: tuple[str, ...]) -> list[tuple[Path, bool]]:
    """Where to look, in order, each with whether the user named it (``--base``)."""
    scheme = record.get("scheme", "")
    places = [(Path(p), True) for p in given]
    if isinstance(record.get("relative"), str):
        places.append((Path(os.path.normpath(checkpoint / record["relative"])), False))
    places.append((Path(str(record.get("location", ""))[len(scheme) :]), False))
    return places


def locate(record: dict, checkpoint: Path, given: tuple[str, ...] = ()) -> tuple[Path | None, list[tuple]]:
    """The first place holding the pinned content, and the places that exist with other content
    ``[(path, fingerprint, named_by_user)]``."""
    seen, other = set(), []
    for place, named in _candidates(record, checkpoint, given):
        if not str(place) or not place.exists() or place.resolve() in seen:
            continue
        if record.get("kind") not in (None, _kind(place)):  # never hash a folder where a file or artifact was
            other.append((place.resolve(), f"a {_kind(place)}", named))
            continue
        seen.add(place.resolve())
        try:
            now = content_fingerprint(place)
        except ConfigError:  # a --base such as "/": too large or unreadable to be a model or tokenizer folder
            if not named:
                raise
            other.append((place.resolve(), "not a model or tokenizer folder", named))
            continue
        if now == record.get("fingerprint"):
            return place.resolve(), other
        other.append((place.resolve(), now, named))
    return None, other


def resolve(config: dict, checkpoint: str | os.PathLike) -> dict:
    """``config`` with every fingerprinted dependency at the place where its pinned content now lies (see the
    module docstring); raises ``ConfigError`` naming the dependency when it changed or cannot be found."""
    records = config.get(DEPENDS_ON)
    if not isinstance(records, dict):
        return config
    checkpoint = Path(checkpoint).resolve()
    config = copy.deepcopy(config)
    pinned = {r.get("fingerprint") for r in records.values() if isinstance(r, dict)}
    problems = []  # every dependency that cannot be found, so that one message names them all
    for field, record in records.items():
        if field not in dependency_fields(config) or not isinstance(record, dict) or not record.get("fingerprint"):
            continue
        found, other = locate(record, checkpoint, policy.BASE_PATHS.get())
        if found is None:  # a --base that holds another dependency is not "not it"
            problems.append(_missing_message(record, checkpoint, [o for o in other if o[1] not in pinned]))
            continue
        _set(config, field, record.get("scheme", "") + str(found))
    if len(problems) > 1:
        parts = [
            problem.removeprefix(f"checkpoint {checkpoint} depends on ")
            .removeprefix(f"{checkpoint}: ")
            .removesuffix("; pass --base PATH where it now lies")
            for problem in problems
        ]
        raise ConfigError(
            f"checkpoint {checkpoint} misses {len(problems)} dependencies: "
            + "; and ".join(parts)
            + "; pass --base PATH,PATH where they now lie (repeat or comma-separate)"
        )
    if problems:
        raise ConfigError(problems[0])
    return config


def local_dependencies(config: dict) -> list[tuple[Path, str]]:
    """``(path, role)`` of each local file or folder a checkpoint config depends on, where it now lies and where it
    was recorded: what an output of a command reading the checkpoint must never overwrite."""
    places = []
    for field in dependency_fields(config):
        local = _local_path(_get(config, field))
        if local is not None:
            places.append((local[1].resolve(), ROLES[field]))
    records = config.get(DEPENDS_ON)
    for record in records.values() if isinstance(records, dict) else ():
        if isinstance(record, dict) and isinstance(record.get("location"), str):
            local = _local_path(record["location"])
            if local is not None:
                places.append((local[1].resolve(), str(record.get("role", "dependency"))))
    return list(dict.fromkeys(places))


def _missing_message(record: dict, checkpoint: Path, other: list[tuple]) -> str:
    role, pinned = record.get("role", "dependency"), _short(record.get("fingerprint"))
    changed = [(path, now) for path, now, named in other if not named]
    refused = "".join(f"; --base {path} is not it ({_short(now)})" for path, now, named in other if named)
    if changed:
        path, now = changed[0]
        return (
            f"{checkpoint}: {role} changed since this checkpoint was made ({path} is now {_short(now)}, the "
            f"checkpoint was made with {pinned}){refused}; train the checkpoint again on it, or pass --base "
            f"PATH of the original"
        )
    places = " nor at ".join(dict.fromkeys(str(p) for p, _ in _candidates(record, checkpoint, ())))
    return (
        f"checkpoint {checkpoint} depends on {role} {record.get('location')} ({pinned}), which is not at "
        f"{places}{refused}; pass --base PATH where it now lies"
    )


def report(config: dict, checkpoint: str | os.PathLike) -> list[dict]:
    """What ``mltk inspect`` shows: each recorded dependency with its ``status`` (``unchanged``, ``found at
    PATH``, ``changed``, ``is gone``, ``a name``); an empty list for a checkpoint that records none."""
    records = config.get(DEPENDS_ON)
    if not isinstance(records, dict):
        return []
    checkpoint = Path(checkpoint).resolve()
    rows = []
    for field, record in records.items():
        if not isinstance(record, dict):
            continue
        row = {"field": field, "role": record.get("role"), "fingerprint": record.get("fingerprint")}
        if not record.get("fingerprint"):
            rows.append({**row, "name": record.get("name"), "status": "a name", "note": record.get("note")})
            continue
        found, other = locate(record, checkpoint, policy.BASE_PATHS.get())
        location = str(record.get("location"))
        if found is not None:
            status = "unchanged" if record.get("scheme", "") + str(found) == location else f"found at {found}"
            replaced = _replaced_file(found, row["role"]) if record.get("kind") == "artifact" else None
            if replaced:  # its manifest is the pinned one, one of its files is not what that manifest records
                status, other = "changed", [(found, replaced, False)]
        else:
            status = "changed" if other else "is gone"
        rows.append(
            {
                **row,
                "location": location,
                "status": status,
                **({"now": other[0][1]} if status in ("changed", "is gone") and other else {}),
            }
        )
    return rows


def _replaced_file(artifact: Path, role: str) -> str | None:
    """What ``inspect`` says of an artifact dependency whose files are hashed (never the cache): None when each
    holds the bytes its manifest records, else the file that does not."""
    try:
        check_content(artifact, role, use_cache=False)
    except ArtifactError as error:
        return f"{error.path} does not hold the bytes its manifest records"
    return None
