"""The ``lexicon`` artifact: one row per translation pair ``src_lang, src, tgt_lang, tgt`` (a word may have several
translations, as in MUSE's dictionaries), and its sources:

- ``import_muse``: MUSE's bilingual dictionaries (Conneau et al. 2018, ``de-en.txt``, ``de-en.0-5000.txt``), one
  pair per line, ``src tgt`` separated by whitespace (a space or a tab). Blank lines are skipped; a line with other
  than two fields is refused, naming the file and the line. Words are kept as written (MUSE's are lower-case).
- ``mltk.ame.world``: the embedded world's own dictionary (the generator knows every word's translation).
- ``mltk.ame.induce``: a dictionary induced from parallel captions (Dice coefficient, mutual best match).

Duplicate pairs are written once, in first-seen order. ``--vocab-from CAPTIONS`` keeps only the pairs whose source
word occurs in the source language's training captions and whose target word in the target language's (AME
filters MUSE's dictionaries "to the training words"; ``mltk.ame.vocabulary``): otherwise most pairs an alignment
step draws are words the captions never use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from mltk import artifacts
from mltk.ame.segment import tokenizer_name
from mltk.ame.vocabulary import vocabulary_words
from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.core.names import check_name
from mltk.core.user_files import require_file
from mltk.data.importers.common import normalize_lang, read_lines

Pair = tuple[str, str]


def lexicon_table(pairs: Iterable[Pair], src_lang: str, tgt_lang: str) -> pa.Table:
    """``(src, tgt)`` pairs -> the lexicon table (duplicates dropped, first-seen order kept)."""
    unique = list(dict.fromkeys((s, t) for s, t in pairs))
    columns = {
        "src_lang": [src_lang] * len(unique),
        "src": [s for s, _ in unique],
        "tgt_lang": [tgt_lang] * len(unique),
        "tgt": [t for _, t in unique],
    }
    return pa.table({name: pa.array(columns[name], pa.string()) for name in schema.LEXICON_COLUMNS})


def write_lexicon(
    out_dir: str | Path,
    table: pa.Table,
    *,
    stage: str,
    config: Any = None,
    inputs: Sequence[str | Path] = (),
    **manifest_fields: Any,
) -> Path:
    """Write a lexicon artifact (``lexicon.parquet`` + manifest); refuses an empty table, naming the input it was
    made from (the file to fix), not the output that was never written."""
    artifacts.require_columns(table, schema.LEXICON_COLUMNS, out_dir)
    if table.num_rows == 0:
        raise ArtifactError(
            f"yields no translation pair ({stage}): the lexicon would be empty", inputs[0] if inputs else out_dir
        )
    with artifacts.ArtifactWriter(out_dir, "lexicon", stage=stage, config=config, inputs=inputs) as writer:
        artifacts.write_table(writer.dir / schema.LEXICON_FILE, table.select(list(schema.LEXICON_COLUMNS)))
        writer.manifest["pairs"] = table.num_rows
        writer.manifest["src_words"] = len(set(table.column("src").to_pylist()))
        writer.manifest["languages"] = [table.column("src_lang")[0].as_py(), table.column("tgt_lang")[0].as_py()]
        writer.manifest.update(manifest_fields)
    return writer.path


def load_lexicon(path: str | Path) -> pa.Table:
    """Read a lexicon artifact; refuses one without rows or with more than one language pair."""
    path = Path(path)
    artifacts.read_manifest(path, "lexicon")
    table = artifacts.read_table(path / schema.LEXICON_FILE)
    artifacts.require_columns(table, schema.LEXICON_COLUMNS, path)
    pairs = set(zip(table.column("src_lang").to_pylist(), table.column("tgt_lang").to_pylist()))
    if len(pairs) != 1:
        raise SchemaError(f"a lexicon holds one language pair, found {len(pairs)}", path)
    return table


def lexicon_languages(table: pa.Table) -> tuple[str, str]:
    return table.column("src_lang")[0].as_py(), table.column("tgt_lang")[0].as_py()


def lexicon_pairs(table: pa.Table) -> list[Pair]:
    return list(zip(table.column("src").to_pylist(), table.column("tgt").to_pylist()))


def read_muse(path: Path) -> list[Pair]:
    """MUSE's ``src tgt`` lines -> pairs (see the module docstring)."""
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise SchemaError(f"line {number} has {len(fields)} field(s); MUSE's format is 'src tgt'", path)
        pairs.append((fields[0], fields[1]))
    return pairs


def check_pair_languages(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    if not src_lang or not tgt_lang:
        raise ConfigError("a lexicon needs its languages: give --src LANG and --tgt LANG")
    src_lang, tgt_lang = normalize_lang(src_lang), normalize_lang(tgt_lang)
    check_name(src_lang, "--src")  # a language is written into the manifest and names files downstream
    check_name(tgt_lang, "--tgt")
    if src_lang == tgt_lang:
        raise ConfigError(f"--src and --tgt name the same language ({src_lang})")
    return src_lang, tgt_lang


def in_vocabulary(pairs: list[Pair], captions: Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """The pairs whose words both occur in the captions' train rows of their language (see the module doc)."""
    source, target = (set(vocabulary_words([captions], lang)) for lang in (src_lang, tgt_lang))
    if not source or not target:
        missing = [lang for lang, words in ((src_lang, source), (tgt_lang, target)) if not words]
        raise ConfigError(f"--vocab-from has no captions in {', '.join(missing)}", captions)
    kept = [(s, t) for s, t in pairs if s in source and t in target]
    if not kept:
        raise ConfigError(
            f"no pair of the dictionary has both words in the {src_lang} and {tgt_lang} captions", captions
        )
    return kept


def import_muse(
    src: str | Path,
    out_dir: str | Path,
    src_lang: str | None,
    tgt_lang: str | None,
    vocab_from: str | Path | None = None,
) -> Path:
    """``mltk import-data lexicon FILE --src de --tgt en [--vocab-from CAPTIONS]``: MUSE's dictionary file -> a
    lexicon artifact (with ``vocab_from``, only the pairs of the captions' words)."""
    src = Path(src)
    src_lang, tgt_lang = check_pair_languages(src_lang, tgt_lang)
    require_file(src, "MUSE's 'src tgt' dictionary")
    config = {
        "importer": "muse",
        "source": str(src.resolve()),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "vocab_from": str(Path(vocab_from).resolve()) if vocab_from is not None else None,
    }
    if vocab_from is not None:  # the words the pairs were kept to, by each language's tokenizer
        config["words"] = {lang: tokenizer_name(lang) for lang in (src_lang, tgt_lang)}
    inputs = [src, *([Path(vocab_from)] if vocab_from is not None else [])]
    reused = artifacts.reusable(out_dir, "lexicon", stage="import-data", config=config, inputs=inputs)
    if reused is not None:
        return reused
    pairs = read_muse(src)
    if not pairs:
        raise SchemaError("holds no 'src tgt' line (MUSE's dictionary format): the lexicon would be empty", src)
    kept = in_vocabulary(pairs, Path(vocab_from), src_lang, tgt_lang) if vocab_from is not None else pairs
    table = lexicon_table(kept, src_lang, tgt_lang)
    return write_lexicon(
        out_dir,
        table,
        stage="import-data",
        config=config,
        inputs=inputs,
        format="muse",
        pairs_in_file=len(dict.fromkeys(pairs)),
    )
