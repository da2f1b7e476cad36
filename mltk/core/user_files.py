"""Reading a JSON file a user hands to mltk: bounded in size and depth, and checked field by field.

Every JSON file mltk reads from a user (a recipe, a zero-shot task, an MSR-VTT annotation file, a lexicon, a
translations file) goes through :func:`read_user_json` and its fields through :func:`expect`, so that a bad file
fails with exit code 2 and one line naming the file, the key and what was expected, never with a traceback.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError

MAX_JSON_BYTES = 512 * 1024 * 1024
"""Larger than any annotation file mltk reads (MSR-VTT's is about 30 MB); a bigger one is refused unread."""

MAX_JSON_DEPTH = 32
"""Deeper than any schema mltk reads; deeper nesting is refused before it can exhaust the stack."""

MAX_TEXT_BYTES = 256 * 1024 * 1024
"""Sentences or queries one command encodes (``encode-texts --lines``, ``index query --text-file``): a corpus larger
than this belongs in a captions artifact (``mltk import-data``), which is read in batches."""

MAX_CORPUS_BYTES = 4 * 1024 * 1024 * 1024
"""A dataset's caption or annotation file read whole by an importer (COCO's is about 100 MB, CC3M's TSV 500 MB)."""

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


def not_a_file(path: str | Path) -> str | None:
    """What ``path`` is when it is no regular file, in the words a user recognises ("no such file or directory",
    "a directory", "a FIFO (named pipe)", ...); None for a regular file."""
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return "no such file or directory"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if stat.S_ISREG(mode):
        return None
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    return "is " + next((name for test, name in kinds.items() if test(mode)), "a special file") + ", not a regular file"


def require_file(path: str | Path, expected: str) -> Path:
    """``path`` when it is a regular file, else an error saying what it is and what was expected."""
    problem = not_a_file(path)
    if problem is not None:
        raise ConfigError(f"{problem} (expected {expected})", path)
    return Path(path)


def read_user_bytes(path: str | Path, *, what: str = "file", max_bytes: int | None = None) -> bytes:
    """The bytes of a file a user names, read up to ``max_bytes``: a FIFO, a device or an endless file (``/dev/zero``)
    is read no further than a regular file could be, and refused past the bound; a missing path, a directory and an
    unreadable file are each said as what they are."""
    path, max_bytes = Path(path), MAX_TEXT_BYTES if max_bytes is None else max_bytes
    if not path.exists():
        raise ConfigError(f"cannot read this {what}: no such file or directory", path)
    if path.is_dir():
        raise ConfigError(f"this {what} is a directory, not a file", path)
    try:
        with _open_without_waiting(path) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise ConfigError(f"cannot read this {what}: {error.strerror or error}", path) from None
    if len(data) > max_bytes:
        raise ConfigError(
            f"this {what} holds more than {max_bytes:,} bytes, the most mltk reads of one; it was not read further",
            path,
        )
    return data


def _open_without_waiting(path: Path):
    """``open(path, "rb")`` that never waits for a writer: a FIFO nobody writes to reads as empty at once (opening
    it blocking would hang the command for ever); one with a writer reads as a pipe does."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def read_user_text(
    path: str | Path, *, what: str = "file", max_bytes: int | None = None, encoding: str = "utf-8"
) -> str:
    """``read_user_bytes`` decoded as UTF-8, a byte that is not UTF-8 named by its offset."""
    try:
        return read_user_bytes(path, what=what, max_bytes=max_bytes).decode(encoding)
    except UnicodeDecodeError as error:
        raise ConfigError(f"this {what} is not UTF-8 text ({error.reason} at byte {error.start})", path) from None


def read_user_json(
    path: str | Path, *, what: str = "JSON file", max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """Parse ``path`` as UTF-8 JSON, refusing a missing, oversized, undecodable or too deeply nested file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ConfigError(f"cannot read this {what}: {error.strerror or error}", path) from None
    if path.is_file() and size > max_bytes:
        raise ConfigError(f"this {what} is {size:,} bytes, over the limit of {max_bytes:,}", path)
    text = read_user_text(path, what=what, max_bytes=max_bytes)
    depth = json_nesting_depth(text)
    if depth > max_depth:
        raise ConfigError(f"this {what} nests {depth} levels deep, over the limit of {max_depth}", path)
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ConfigError(f"this {what} is not valid JSON: {error}", path) from None
    except DuplicateKeyError as error:
        raise ConfigError(
            f"this {what} gives the key {error.key!r} twice in one object (JSON keeps the last one "
            f"silently); give it once",
            path,
        ) from None


class DuplicateKeyError(ValueError):
    """A JSON object naming one key twice (``json`` would keep the last value without a word)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKeyError(key)
        seen.add(key)
    return dict(pairs)


def json_nesting_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, counted without parsing (brackets in strings are skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def expect(value: Any, expected: type | tuple[type, ...], key: str, path: str | Path, *, what: str = "file") -> Any:
    """Return ``value`` if it has the expected JSON type, else raise naming the file, the key and the type.

    ``bool`` is not accepted where a number is expected (JSON's ``true`` is not a step count), and an integer is
    accepted where a float is.
    """
    kinds = expected if isinstance(expected, tuple) else (expected,)
    is_bool = isinstance(value, bool)
    matches = any(
        (kind is bool and is_bool)
        or (kind is float and isinstance(value, (int, float)) and not is_bool)
        or (kind not in (bool, float) and isinstance(value, kind) and not (is_bool and kind is int))
        for kind in kinds
    )
    if not matches:
        wanted = " or ".join(_TYPE_NAMES.get(kind, kind.__name__) for kind in kinds)
        raise ConfigError(f"{what} key {key!r} must be {wanted}, not {json.dumps(value)[:60]}", path)
    return value
