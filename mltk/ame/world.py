"""The embedded world's bilingual dictionary: the generator knows every word's translation.

For each concept of the world (``content.COLOURS``, ``SIZES``, ``SHAPES``, the numerals 2 and 3) every surface
form a language module can write is paired with every form of the other language: ``Kreise -> circles`` and
``Kreise -> circle`` alike, as MUSE pairs inflections. Forms are taken from the modules' tables
(``COLOUR``, ``SIZE``, ``SHAPE``, ``NUMBER``/``COUNTER``): a plain string, or the strings of a tuple without its
gender tags (``m``, ``f``, ``n``). German adjectives add their declined forms (``rot`` -> ``rote, roten, roter,
rotes``). Left out, because the tables hold stems rather than words: Russian and Greek declined adjectives (their
indeclinable colours are kept) and the Chinese measure words. Relation phrases are multi-word and left out.
"""

from __future__ import annotations

from pathlib import Path

from mltk import artifacts
from mltk.ame.lexicon import Pair, check_pair_languages, lexicon_table, write_lexicon
from mltk.core.errors import ConfigError
from mltk.data import lang as languages
from mltk.data.lang.content import COLOURS, SHAPES, SIZES

GENDER_TAGS = frozenset({"m", "f", "n"})
STEM_ADJECTIVES = frozenset({"ru", "el"})  # COLOUR / SIZE tables hold stems plus a declension tag
FIRST_ONLY = {("zh", "SHAPE")}  # (noun, measure word): the noun only


def _forms(value, code: str, table: str) -> list[str]:
    """The words of one table entry (see the module docstring)."""
    if isinstance(value, str):
        return [value]
    if (code, table) in FIRST_ONLY:
        return [value[0]]
    if code in STEM_ADJECTIVES and table in ("COLOUR", "SIZE"):
        return []  # (stem, declension) -- not a word
    return [v for v in value if isinstance(v, str) and v not in GENDER_TAGS]


def _declined(code: str, module, base: str, table: str) -> list[str]:
    if code != "de" or table not in ("COLOUR", "SIZE"):
        return []
    endings = set(module.MIXED_ENDING.values()) | set(module.STRONG_PLURAL_ENDING.values())
    return [base + ending for ending in sorted(endings)]


def concept_forms(code: str) -> dict[str, list[str]]:
    """Concept (``colour:red``, ``shape:circle``, ``number:2``) -> the distinct words language ``code`` uses."""
    module = languages.LANGUAGES[code]
    concepts: dict[str, list[str]] = {}
    for table, keys, prefix in (("COLOUR", COLOURS, "colour"), ("SIZE", SIZES, "size"), ("SHAPE", SHAPES, "shape")):
        entries = getattr(module, table)
        for key in keys:
            words = []
            for form in _forms(entries[key], code, table):
                words += [form, *_declined(code, module, form, table)]
            concepts[f"{prefix}:{key}"] = list(dict.fromkeys(w for w in words if w and " " not in w))
    numbers = getattr(module, "NUMBER", None) or getattr(module, "COUNTER", {})
    for key, word in numbers.items():
        count = key[0] if isinstance(key, tuple) else key
        if count in (2, 3):
            concepts.setdefault(f"number:{count}", [])
            if word not in concepts[f"number:{count}"]:
                concepts[f"number:{count}"].append(word)
    return concepts


def world_pairs(src_lang: str, tgt_lang: str) -> list[Pair]:
    """Every (source form, target form) of every concept both languages name."""
    for code in (src_lang, tgt_lang):
        if code not in languages.LANGUAGES:
            raise ConfigError(
                f"the embedded world has no language {code!r} (has {', '.join(languages.LANGUAGE_CODES)})"
            )
    source, target = concept_forms(src_lang), concept_forms(tgt_lang)
    return [(s, t) for concept, words in source.items() for s in words for t in target.get(concept, [])]


def import_world_lexicon(world: str | Path, out_dir: str | Path, src_lang: str | None, tgt_lang: str | None) -> Path:
    """``mltk import-data synth-lexicon WORLD --src de --tgt en``: the world's dictionary as a lexicon artifact.
    WORLD (a ``synth-data`` folder) must hold captions in both languages."""
    src_lang, tgt_lang = check_pair_languages(src_lang, tgt_lang)
    world = Path(world)
    captions = world / "captions"
    held = artifacts.read_manifest(captions, "captions").get("languages", [])
    missing = [code for code in (src_lang, tgt_lang) if code not in held]
    if missing:
        raise ConfigError(f"the world has no captions in {', '.join(missing)} (has {', '.join(held)})", world)
    config = {"importer": "synth-lexicon", "world": str(world.resolve()), "src_lang": src_lang, "tgt_lang": tgt_lang}
    reused = artifacts.reusable(out_dir, "lexicon", stage="import-data", config=config, inputs=[captions])
    if reused is not None:
        return reused
    table = lexicon_table(world_pairs(src_lang, tgt_lang), src_lang, tgt_lang)
    return write_lexicon(out_dir, table, stage="import-data", config=config, inputs=[captions], format="synth-lexicon")
