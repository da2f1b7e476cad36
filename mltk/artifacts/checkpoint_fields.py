"""The types of the fields a checkpoint's ``config.json`` hands to mltk's loaders, checked when it is read.

A checkpoint names what rebuilds it: the base model (an open_clip name, a folder, an hf-hub repo), the non-native
tokenizer, the vocabulary folder inside it. A whole CLIP names only its architecture: a hub repository there
(``hf-hub:ORG/NAME``) would make any reader, ``mltk export`` included, reach the network on the checkpoint's word.
A crafted ``config.json`` with a list where a name belongs, a number
for a path, or a vocabulary name that climbs out of the artifact is refused here with one line naming the file,
before any loader acts on it. (Whatever the names point to is loaded without running code it carries:
``mltk.core.no_remote_code``.)
"""

from __future__ import annotations

from pathlib import Path

from mltk.artifacts import integrity, schema
from mltk.core.errors import ArtifactError
from mltk.core.names import check_name, control_characters

TEXT, OPTIONAL_TEXT, COUNT, NAMES, FILE_NAME = "text", "optional text", "count", "names", "file name"
ARCHITECTURE = "architecture"  # a whole CLIP's model: the open_clip architecture it was trained as
BASE = {"base": dict, "base.model": TEXT, "base.pretrained": OPTIONAL_TEXT}
FIELDS = {  # format -> dotted field -> what it must be
    "open_clip": {"model": ARCHITECTURE},
    "mla": {
        **BASE,
        "native_lang": TEXT,
        "languages": NAMES,
        "non_native": dict,
        "non_native.kind": TEXT,
        "non_native.source": TEXT,
        "non_native.vocab_size": COUNT,
        "non_native.embed_dim": COUNT,
        "acquirer_hidden": COUNT,
    },
    "cll": {**BASE, "vocab": FILE_NAME, "method": dict, "method.name": TEXT},
}


def check_checkpoint_fields(config: dict, path: Path) -> dict:
    """``config`` (a checkpoint's config.json) when every field its ``format`` names has the right type."""
    where = Path(path) / schema.CHECKPOINT_CONFIG
    fmt = config.get("format")
    if fmt is not None and not isinstance(fmt, str):
        raise ArtifactError(f"'format' is {type(fmt).__name__}, not a name", where)
    for field, kind in FIELDS.get(fmt, {}).items():
        value, present = _lookup(config, field)
        if not present:
            if kind == OPTIONAL_TEXT:
                continue
            raise ArtifactError(f"a {fmt} checkpoint's config lacks '{field}'", where)
        problem = _problem(value, kind, path)
        if problem:
            raise ArtifactError(f"'{field}' {problem}", where)
    return config


def _lookup(config: dict, field: str):
    value = config
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True


def _problem(value, kind, path: Path) -> str | None:
    if isinstance(kind, type):
        return None if isinstance(value, kind) else f"is {type(value).__name__}, expected an object"
    if kind == OPTIONAL_TEXT and value is None:
        return None
    if kind == ARCHITECTURE and isinstance(value, str) and any(mark in value for mark in (":", "/", "\\")):
        return (
            f"is {value[:80]!r}, a hub repository or a folder, not an open_clip architecture: a whole CLIP "
            f"names the architecture it was trained as, and mltk never fetches what a checkpoint names"
        )
    if kind in (TEXT, OPTIONAL_TEXT, ARCHITECTURE):
        if not isinstance(value, str) or not value.strip():
            return f"is {type(value).__name__} {str(value)[:40]!r}, expected a non-empty name"
        return f"holds the control character {control_characters(value)[0]}" if control_characters(value) else None
    if kind == COUNT:
        return (
            None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0
            else f"is {str(value)[:40]!r}, expected a positive integer"
        )
    if kind == NAMES:
        if not isinstance(value, list):
            return f"is {type(value).__name__}, expected a list of languages"
        for item in value:
            check_name(item, "language", path / schema.CHECKPOINT_CONFIG)
        return None
    try:  # FILE_NAME: a folder of the artifact itself
        integrity.member(path, value)
    except ArtifactError as exc:
        return str(exc).split(": ", 1)[-1]
    return None
