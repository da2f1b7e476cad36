"""``translate-data --backend join``: add translations users already have (CC6L, XM3600 translations, a
spreadsheet from a translation service) to a captions artifact, without a model.

A translations file is a table with ``lang``, ``caption`` and a key: ``caption_id`` (a translation of that
caption; it keeps the id) or ``image_id`` (a caption of that image; it takes the caption id of the image's only
source caption, or a new id ``<image_id>#<lang>-<k>`` when the image has several). Accepted formats, chosen by
the file suffix: ``.csv``, ``.tsv``/``.tab``, ``.jsonl``/``.ndjson`` (one object per line), ``.parquet``, or a
captions artifact directory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from mltk import artifacts
from mltk.core.errors import ConfigError, MltkError, SchemaError
from mltk.core.runtime import log
from mltk.translate import rows as R
from mltk.translate.guards import GuardConfig, QualityReport
from mltk.translate.languages import check_language_code

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
KEY_COLUMNS = ("caption_id", "image_id")  # the first one present is the key


@dataclass(frozen=True)
class JoinConfig:
    """``targets`` empty: every language of the files except the source language."""

    translations: tuple[str, ...]
    source_lang: str = "en"
    targets: tuple[str, ...] = ()
    drop_bad: bool = False
    guards: GuardConfig = field(default_factory=GuardConfig)
    captions: str | Path | None = None  # the captions artifact to add the translations to (``translate_data``)
    out: str | Path | None = None  # the captions artifact to write (``translate_data``)


def join_translations(input_path: str | Path, out_dir: str | Path, config: JoinConfig) -> Path:
    """Add the rows of ``config.translations`` files to the captions of ``input_path``; returns the new
    captions artifact (input rows plus joined rows)."""
    config = _validated(config)
    table = R.with_origin_column(artifacts.load_captions(input_path))
    sources = R.source_row_indices(table, config.source_lang, input_path)
    report = QualityReport(config.guards, config.drop_bad)
    joiner = _Joiner(table, sources, config)
    parts, stats = [], {}
    for path in config.translations:
        file_parts, file_stats = joiner.join_file(read_translations(path), Path(path), report)
        parts.extend(file_parts)
        stats[str(Path(path).resolve())] = file_stats
    settings = artifacts.settings_without(config, "captions", "out")  # where it reads and writes: not settings
    existing = artifacts.reusable(
        out_dir, "captions", stage="translate-data", config=settings, inputs=[input_path, *config.translations]
    )
    if existing is not None:  # checked once every file is known to be readable (joining itself is cheap)
        return existing
    result = R.assemble(table, parts)
    out = artifacts.write_captions(
        out_dir,
        result,
        stage="translate-data",
        config=settings,
        inputs=[input_path, *config.translations],
        translation={"backend": "join", "source_lang": config.source_lang, "by_file": stats},
        quality=report.to_manifest(),
    )
    return out


def _validated(config: JoinConfig) -> JoinConfig:
    if not config.translations:
        raise ConfigError("--backend join needs at least one --translations FILE")
    source = check_language_code(config.source_lang, "--source-lang")
    targets = tuple(dict.fromkeys(check_language_code(t, "--target") for t in config.targets))
    if source in targets:
        raise ConfigError(f"--target {source} is the source language")
    return replace(config, source_lang=source, targets=targets)


def read_translations(path: str | Path) -> pa.Table:
    """Read a translations file into a table of string columns: the key (``caption_id`` or ``image_id``),
    ``lang`` and ``caption``."""
    path = Path(path)
    if not path.exists():
        raise MltkError("no such translations file", path)
    if path.is_dir():
        table = artifacts.load_captions(path)
    else:
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise ConfigError(f"unknown translations format {path.suffix!r} (use one of {', '.join(FORMATS)})", path)
        table = _read_format(path, fmt)
    key = next((c for c in KEY_COLUMNS if c in table.column_names), None)
    if key is None:
        raise SchemaError(f"needs a caption_id or image_id column (has {', '.join(table.column_names)})", path)
    artifacts.require_columns(table, ["lang", "caption"], path)
    columns = {}
    for name in (key, "lang", "caption"):
        column = table.column(name)
        if column.null_count:
            raise SchemaError(f"column {name} has {column.null_count} empty value(s)", path)
        try:
            columns[name] = column.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SchemaError(f"column {name} has type {column.type}, expected text", path)
    return pa.table(columns)


def _read_format(path: Path, fmt: str) -> pa.Table:
    try:
        if fmt == "parquet":
            return artifacts.read_table(path)
        if fmt == "jsonl":
            return pajson.read_json(path)
        strings = {name: pa.string() for name in (*KEY_COLUMNS, "lang", "caption")}  # ids stay text: "007"
        parse = pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", quote_char=False if fmt == "tsv" else '"')
        return pacsv.read_csv(path, parse_options=parse, convert_options=pacsv.ConvertOptions(column_types=strings))
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"cannot read as {fmt} ({str(exc).splitlines()[0]})", path) from exc


class _Joiner:
    """Matches translation rows to the input's source captions by caption_id or image_id."""

    def __init__(self, table: pa.Table, sources: Sequence[int], config: JoinConfig):
        self.table = table
        self.config = config
        self.texts = table.column("caption").to_pylist()
        self.caption_ids = table.column("caption_id").to_pylist()
        image_ids = table.column("image_id").to_pylist()
        self.by_caption = {self.caption_ids[i]: i for i in sources}
        self.sources_by_image: dict[str, list[int]] = defaultdict(list)
        for i in sources:
            self.sources_by_image[image_ids[i]].append(i)
        self.any_row_by_image = {image_id: i for i, image_id in reversed(list(enumerate(image_ids)))}
        self.existing = R.existing_translations(table)

    def join_file(self, translations: pa.Table, path: Path, report: QualityReport):
        key = translations.column_names[0]
        langs = [check_language_code(lang, f"lang in {path.name}") for lang in translations.column("lang").to_pylist()]
        keys = translations.column(key).to_pylist()
        captions = translations.column("caption").to_pylist()
        wanted = set(self.config.targets) if self.config.targets else set(langs) - {self.config.source_lang}
        grouped: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for k, lang, caption in zip(keys, langs, captions):
            if lang in wanted:
                grouped[lang].append((k, caption))
        parts, stats = [], {"key": key}
        for lang in sorted(grouped):
            match = self._match_caption if key == "caption_id" else self._match_image
            rows, ids, texts, references, counts = match(grouped[lang], lang, path)
            part = R.make_rows(self.table, rows, lang, texts, ids, origin=f"join:{path.name}")
            parts.append(R.guarded(report, part, references))
            stats[lang] = counts
            log(
                f"joined {counts['joined']} {lang} rows from {path.name} "
                f"({counts['unmatched']} unmatched, {counts['kept_existing']} already present)"
            )
        return parts, stats

    def _match_caption(self, entries, lang, path):
        """One translated row per source caption with the same caption_id."""
        rows, ids, texts, references = [], [], [], []
        counts = {"joined": 0, "unmatched": 0, "kept_existing": 0}
        seen = set()
        for caption_id, caption in entries:
            if caption_id in seen:
                raise MltkError(f"caption_id {caption_id} has more than one {lang} caption", path)
            seen.add(caption_id)
            if (caption_id, lang) in self.existing:
                counts["kept_existing"] += 1
            elif caption_id not in self.by_caption:
                counts["unmatched"] += 1
            else:
                row = self.by_caption[caption_id]
                rows.append(row), ids.append(caption_id), texts.append(caption), references.append(self.texts[row])
                counts["joined"] += 1
        return rows, ids, texts, references, counts

    def _match_image(self, entries, lang, path):
        """Captions of an image: the id of the image's only source caption, else new ids ``<image>#<lang>-<k>``
        (then no source text to compare with, so only the source-free guards run)."""
        rows, ids, texts, references = [], [], [], []
        counts = {"joined": 0, "unmatched": 0, "kept_existing": 0}
        per_image: dict[str, int] = defaultdict(int)
        for image_id, caption in entries:
            own = self.sources_by_image.get(image_id, [])
            if image_id not in self.any_row_by_image:
                counts["unmatched"] += 1
                continue
            if len(own) == 1:
                row, caption_id, reference = own[0], self.caption_ids[own[0]], self.texts[own[0]]
                if (caption_id, lang) in self.existing:
                    counts["kept_existing"] += 1
                    continue
                if per_image[image_id]:
                    caption_id, reference = f"{image_id}#{lang}-{per_image[image_id]}", None
            else:
                row, reference = self.any_row_by_image[image_id], None
                caption_id = f"{image_id}#{lang}-{per_image[image_id]}"
            per_image[image_id] += 1
            rows.append(row), ids.append(caption_id), texts.append(caption), references.append(reference)
            counts["joined"] += 1
        return rows, ids, texts, references, counts
