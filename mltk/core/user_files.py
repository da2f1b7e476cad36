"""Reading a JSON file a user hands to mltk: bounded in size and depth, and checked field by field.

Every JSON file mltk reads from a user (a recipe, a zero-shot task, an MSR-VTT annotation file, a lexicon, a
translations file) goes through :func:`read_user_json` and its fields through :func:`expect`, so that a bad file
fails with exit code 2 and one line naming the file, the key and what was expected, never with a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError

MAX_JSON_BYTES = 512 * 1024 * 1024
"""Larger than any annotation file mltk reads (MSR-VTT's is about 30 MB); a bigger one is refused unread."""

MAX_JSON_DEPTH = 32
"""Deeper than any schema mltk reads; deeper nesting is refused before it can exhaust the stack."""

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
               dict: "an object"}


def read_user_json(path: str | Path, *, what: str = "JSON file", max_bytes: int = MAX_JSON_BYTES,
                   max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse ``path`` as UTF-8 JSON, refusing a missing, oversized, undecodable or too deeply nested file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ConfigError(f"cannot read this {what}: {error.strerror or error}", path) from None
    if not path.is_file():
        raise ConfigError(f"this {what} is not a regular file", path)
    if size > max_bytes:
        raise ConfigError(f"this {what} is {size:,} bytes, over the limit of {max_bytes:,}", path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read this {what} as UTF-8 text: {error}", path) from None
    depth = json_nesting_depth(text)
    if depth > max_depth:
        raise ConfigError(f"this {what} nests {depth} levels deep, over the limit of {max_depth}", path)
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ConfigError(f"this {what} is not valid JSON: {error}", path) from None
    except DuplicateKeyError as error:
        raise ConfigError(f"this {what} gives the key {error.key!r} twice in one object (JSON keeps the last one "
                          f"silently); give it once", path) from None


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
