"""Row bookkeeping shared by both translation backends: which rows are sources, which translations already
exist, how a translated row is made from its source row, and how the result is checked and assembled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from mltk.core.errors import ConfigError
from mltk.translate.guards import QualityReport

ORIGIN_COLUMN = "source"  # "human" for input rows, "mt:<model>" or "join:<file>" for rows added here
HUMAN = "human"


def with_origin_column(table: pa.Table) -> pa.Table:
    """Add ``source`` = "human" to the input rows (filling nulls when the column is already there)."""
    if ORIGIN_COLUMN not in table.column_names:
        return table.append_column(ORIGIN_COLUMN, pa.array([HUMAN] * table.num_rows, pa.string()))
    column = table.column(ORIGIN_COLUMN).cast(pa.string()).fill_null(HUMAN)
    return table.set_column(table.schema.get_field_index(ORIGIN_COLUMN), ORIGIN_COLUMN, column)


def source_row_indices(table: pa.Table, source_lang: str, path: str | Path) -> list[int]:
    """Indices of the rows in ``source_lang``; a ``ConfigError`` naming the languages present when none are."""
    langs = table.column("lang").to_pylist()
    indices = [i for i, lang in enumerate(langs) if lang == source_lang]
    if not indices:
        present = ", ".join(sorted(set(langs))) or "none"
        raise ConfigError(f"has no captions in the source language {source_lang!r} (languages: {present})", path)
    return indices


def existing_translations(table: pa.Table) -> set[tuple[str, str]]:
    """(caption_id, lang) pairs already in the input; those are kept and never translated again."""
    return set(zip(table.column("caption_id").to_pylist(), table.column("lang").to_pylist()))


def make_rows(
    table: pa.Table,
    row_indices: Sequence[int],
    lang: str,
    captions: Sequence[str],
    caption_ids: Sequence[str],
    origin: str,
) -> pa.Table:
    """Translated rows: ``image_id``, ``split`` and any extra columns copied from the source rows
    ``row_indices``; ``lang``, ``caption``, ``caption_id`` and ``source`` set here."""
    rows = table.take(pa.array(row_indices, pa.int64()))
    count = len(row_indices)
    replacements = {
        "lang": pa.array([lang] * count, pa.string()),
        "caption": pa.array(list(captions), pa.string()),
        "caption_id": pa.array(list(caption_ids), pa.string()),
        ORIGIN_COLUMN: pa.array([origin] * count, pa.string()),
    }
    for name, column in replacements.items():
        rows = rows.set_column(rows.schema.get_field_index(name), name, column)
    return rows


def guarded(report: QualityReport, rows: pa.Table, references: Sequence[str | None]) -> pa.Table:
    """Run the quality guards on one language's translated ``rows`` (against their source ``references``) and
    drop the flagged ones when the report says so."""
    if rows.num_rows == 0:
        return rows
    lang = rows.column("lang")[0].as_py()
    keep = report.check_rows(lang, references, rows.column("caption").to_pylist())
    return rows if all(keep) else rows.filter(pa.array(keep, pa.bool_()))


def assemble(table: pa.Table, parts: Sequence[pa.Table]) -> pa.Table:
    """The input rows followed by the translated rows of each target language."""
    return pa.concat_tables([table, *parts]) if parts else table
