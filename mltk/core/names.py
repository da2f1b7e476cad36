"""Names taken from data (a caption's ``lang``, an id, a vocabulary's file name) and output paths, checked before
they become part of a path or of mltk's one line of stdout.

A ``lang`` of ``x/../../somewhere`` joined into ``build_dir / f"00-{lang}"`` would write outside ``--out``; a
newline in ``--out`` would put two lines on stdout, and the next stage of a pipe would read the wrong artifact.
"""

from __future__ import annotations

import hashlib
import unicodedata
from pathlib import Path

from mltk.core.errors import ConfigError

MAX_NAME = 100  # characters: a language code, a task name
STEM_BYTES = 160  # an output name longer than this is shortened (plus a hash) in mltk's own names beside it


def sibling_stem(out: Path) -> str:
    """The name mltk's own names beside ``out`` start from (``.NAME.partial``, ``.NAME.lock``, ``.NAME.old-...``,
    ``.NAME.export-partial-...``): ``out.name``, or for a long one its first bytes and a hash of the whole, so that
    every such name stays within the file system's 255 bytes when ``out``'s own name does."""
    raw = Path(out).name.encode("utf-8", "surrogateescape")
    if len(raw) <= STEM_BYTES:
        return Path(out).name
    head = raw[: STEM_BYTES - 17].decode("utf-8", "ignore")
    return f"{head}~{hashlib.sha256(raw).hexdigest()[:16]}"


def control_characters(text: str) -> list[str]:
    """The control characters of ``text`` (newline, tab, NUL, DEL, U+2028 line separator ...), as escapes."""
    found = [ch for ch in text if unicodedata.category(ch) in ("Cc", "Zl", "Zp")]
    return [ascii(ch)[1:-1] for ch in dict.fromkeys(found)]


def one_line(text: str) -> str:
    """``text`` with each control character written as its escape (``\\n``), so that a file name holding a newline
    shows whole in an error's one line instead of cutting it."""
    return "".join(ascii(ch)[1:-1] if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)


def check_name(value: object, what: str, source: str | Path | None = None) -> str:
    """``value`` as a name that is safe as one path component: a non-empty string without ``/``, ``\\``,
    control characters, and not ``.`` or ``..``; else a ``ConfigError`` naming ``source``."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} {value!r} is not a non-empty name", source)
    bad = control_characters(value)
    if bad or "/" in value or "\\" in value or value in (".", "..") or len(value) > MAX_NAME:
        reason = (
            f"control character {bad[0]}"
            if bad
            else "a path separator or dot name"
            if len(value) <= MAX_NAME
            else f"more than {MAX_NAME} characters"
        )
        raise ConfigError(f"{what} {value[:MAX_NAME]!r} cannot name a file ({reason})", source)
    return value


def check_names(values, what: str, source: str | Path | None = None) -> list[str]:
    return [check_name(value, what, source) for value in values]


def check_output_path(path: str | Path, what: str = "--out") -> None:
    """Refuse an output path holding control characters (it is printed as the one line of stdout)."""
    bad = control_characters(str(path))
    if bad:
        raise ConfigError(
            f"{what} {str(path)!r} holds the control character {bad[0]}; refusing it (the path is "
            f"printed as one line of stdout)"
        )
