"""Caption grammars of the synthetic world, one module per language.

Every module exposes ``CODE``, ``NAME``, ``SCRIPT`` and ``render(content: CaptionContent) -> str``; all render the
same ``content.N_FRAMES`` sentence frames, so one sampled content yields a caption and its exact translations.
"""

from __future__ import annotations

from types import ModuleType

from mltk.core.errors import ConfigError
from mltk.data.lang import ar, de, el, en, es, fr, it, ja, ru, zh
from mltk.data.lang.content import CaptionContent

LANGUAGES: dict[str, ModuleType] = {m.CODE: m for m in (en, de, fr, es, it, ru, el, zh, ja, ar)}
LANGUAGE_CODES: tuple[str, ...] = tuple(LANGUAGES)


def render(content: CaptionContent, lang: str) -> str:
    """The caption of ``content`` in language ``lang``."""
    return LANGUAGES[lang].render(content)


def parse_languages(spec: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"en,de,fr"`` (or a list) -> validated, de-duplicated codes in the given order; ``"all"`` -> every one."""
    codes = [c.strip() for c in spec.split(",")] if isinstance(spec, str) else [str(c).strip() for c in spec]
    codes = [c for c in codes if c]
    if codes == ["all"]:
        return LANGUAGE_CODES
    unknown = [c for c in codes if c not in LANGUAGES]
    if unknown:
        raise ConfigError(f"unknown language(s) {', '.join(unknown)}; available: {', '.join(LANGUAGE_CODES)}")
    if not codes:
        raise ConfigError(f"no language given; available: {', '.join(LANGUAGE_CODES)}")
    return tuple(dict.fromkeys(codes))
