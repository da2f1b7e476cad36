"""``mltk merge-captions A B ... --out C``: the union of captions artifacts.

Refused with one line naming both inputs: the same (caption_id, lang) in two places (a duplicate row, e.g. the
same set merged twice), one caption_id naming different images (conflicting ids), and one image in different
splits (a test image that would also train). Columns beyond the schema are kept; rows of an input that lacks
one hold null there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mltk import artifacts
from mltk.artifacts import key_hashes, schema
from mltk.artifacts.caption_rules import CONTROL_CHARACTERS
from mltk.artifacts.caption_stream import captions_file, iter_caption_batches, write_captions_stream
from mltk.artifacts.columns import first_rows, key_codes, value_counts
from mltk.core.errors import ConfigError, MltkError, SchemaError
from mltk.core.names import check_names
from mltk.core.runtime import log


def merge_captions(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> Path:
    """``mltk merge-captions``: the union of several captions artifacts (a row in two of them is refused).

    Streamed: the inputs are read a batch at a time, twice. The first pass checks the three refusals on 64-bit
    hashes of the key columns (``mltk.artifacts.key_hashes``, counted by ``DistinctCounter``, on disk past a
    bound); the second writes the rows a row group at a time (``write_captions_stream``): memory follows a batch
    and a row group, not the rows. Anything the hashes or a batch cannot settle alone (a
    repeated key, which may be a hash collision; a null, a non-string column, a bad language name, bytes that are
    not UTF-8) sends the merge to ``merge_in_memory``, which reads the whole tables and refuses with the
    message naming the row and both inputs, or merges them when the repeat was a collision."""
    if len(paths) < 2:
        raise ConfigError("merge-captions needs at least two captions artifacts")
    paths = [Path(p) for p in paths]
    try:
        columns, langs = _streamed_checks(paths)
        log(
            f"merge-captions: {sum(langs.values())} captions from {len(paths)} artifacts "
            f"({', '.join(f'{lang} {n}' for lang, n in sorted(langs.items()))})"
        )
        return write_captions_stream(
            out_dir,
            _merged_pieces(paths, columns),
            stage="merge-captions",
            config={"inputs": [str(p) for p in paths]},
            inputs=paths,
            check_caption_ids=False,  # the first pass refused a caption_id on two images
            combine_chunks=False,
        )
    except _Unsettled:
        return merge_in_memory(paths, out_dir)


class _Unsettled(Exception):
    """What the streamed merge leaves to ``merge_in_memory`` (which gives the exact refusal)."""


def _streamed_checks(paths: list[Path]) -> tuple[list[str], dict[str, int]]:
    """(the merged columns, rows per language) when no input breaks a rule; ``_Unsettled`` otherwise."""
    columns = list(schema.CAPTION_COLUMNS)
    try:
        for path in paths:
            found = pq.ParquetFile(captions_file(path)).schema_arrow
            types = [found.field(c).type if c in found.names else None for c in schema.CAPTION_COLUMNS]
            if not all(t is not None and pa.types.is_string(t) for t in types):
                raise _Unsettled  # a missing column, or ids stored as numbers: the whole-table path says or casts
            columns += [name for name in found.names if name not in columns]
    except (MltkError, pa.ArrowInvalid, OSError):
        raise _Unsettled from None
    langs: dict[str, int] = {}
    if not _unique(paths, ["caption_id", "lang"], lambda h: key_hashes.combine(h[0], h[1]), langs):
        raise _Unsettled
    for key, value in (("caption_id", "image_id"), ("image_id", "split")):
        if not _one_value(paths, key, value):
            raise _Unsettled
    return columns, langs


def _hashed_batches(paths: list[Path], names: list[str]):
    """Per batch of every input in order: the hashes of the columns ``names`` (``_Unsettled`` on a null, bytes
    that are not UTF-8, or a language name ``validate_captions`` refuses)."""
    for path in paths:
        try:
            for batch in iter_caption_batches(path, names):
                if any(batch.column(name).null_count for name in names):
                    raise _Unsettled
                if "lang" in names:
                    check_names(pc.unique(batch.column("lang")).to_pylist(), "caption lang", path)
                yield batch, [key_hashes.string_hashes(batch.column(name)) for name in names]
        except MltkError:
            raise _Unsettled from None


def _unique(paths: list[Path], names: list[str], key, langs: dict[str, int]) -> bool:
    """No key (the hashes of ``names`` combined by ``key``) repeats across the inputs; counts rows per language."""
    keys = key_hashes.DistinctCounter()
    for batch, hashes in _hashed_batches(paths, names):
        keys.add(key(hashes))
        for item in pc.value_counts(batch.column("lang")).to_pylist():
            langs[item["values"]] = langs.get(item["values"], 0) + item["counts"]
    return keys.all_distinct()


def _one_value(paths: list[Path], key: str, value: str) -> bool:
    """Every value of column ``key`` has one value of column ``value`` across the inputs."""
    keys, pairs = key_hashes.DistinctCounter(), key_hashes.DistinctCounter()
    for _, (key_hash, value_hash) in _hashed_batches(paths, [key, value]):
        keys.add(key_hash)
        pairs.add(key_hashes.combine(key_hash, value_hash))
    return pairs.distinct() == keys.distinct()


def _merged_pieces(paths: list[Path], columns: list[str]):
    """The inputs' rows a batch at a time, with every column of the merge (null where an input lacks one) and
    control characters replaced (counted per input, as ``load_captions`` does)."""
    rows = 0
    for path in paths:
        replaced = 0
        for batch in _settled(iter_caption_batches(path)):
            rows += batch.num_rows
            captions = batch.column("caption")
            found = pc.sum(pc.match_substring_regex(captions, CONTROL_CHARACTERS)).as_py() or 0
            if found:
                replaced += found
                batch = batch.set_column(
                    batch.schema.get_field_index("caption"),
                    "caption",
                    pc.replace_substring_regex(captions, CONTROL_CHARACTERS, " "),
                )
            yield _with_columns(batch, columns)
        if replaced:
            log(f"{path}: NUL or other control characters replaced with a space in {replaced} caption(s)")
    if not rows:  # an empty merge still has its columns
        yield pa.table({name: pa.array([], pa.string()) for name in columns})


def _settled(batches):
    """``batches``, with a read error (bytes that are not UTF-8 in the captions) left to ``merge_in_memory``."""
    try:
        yield from batches
    except MltkError:
        raise _Unsettled from None


def merge_in_memory(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> Path:
    """The merge on whole tables: what ``merge_captions`` falls back to when its streamed checks cannot settle a
    row (a refusal names the first offending row, in input order, and both inputs)."""
    tables = [(Path(p), artifacts.load_captions(p)) for p in paths]
    merged = pa.concat_tables([_with_columns(table, _all_columns(tables)) for _, table in tables])
    source = np.repeat(np.arange(len(tables)), [table.num_rows for _, table in tables])  # [rows] input of each row
    _refuse_first_conflict(merged, source, [path for path, _ in tables])
    langs = value_counts(merged.column("lang"))
    log(
        f"merge-captions: {merged.num_rows} captions from {len(tables)} artifacts "
        f"({', '.join(f'{lang} {n}' for lang, n in sorted(langs.items()))})"
    )
    return artifacts.write_captions(
        out_dir,
        merged,
        stage="merge-captions",
        config={"inputs": [str(p) for p, _ in tables]},
        inputs=[p for p, _ in tables],
    )


def _refuse_first_conflict(merged: pa.Table, source: np.ndarray, paths: list[Path]) -> None:
    """Refuse the first row, in input order, that repeats an earlier (caption_id, lang), gives an earlier
    caption_id another image, or puts an earlier image in another split (checked in that order on one row)."""
    column = merged.column
    checks = []  # (row, order of the check, message, input named)
    first = first_rows(column("caption_id"), column("lang"))
    row = _first_mismatch(first, np.arange(len(first)))
    if row is not None:
        earlier = paths[source[first[row]]]
        where = "twice in it" if earlier == paths[source[row]] else f"also in {earlier}"
        checks.append(
            (
                row,
                0,
                f"caption_id {column('caption_id')[row].as_py()!r} in {column('lang')[row].as_py()} "
                f"is {where} (duplicate row)",
            )
        )

    def value(name: str, row: int) -> str:
        return column(name)[row].as_py()

    changed = (  # (order of the check, column whose value must not change, key column, message)
        (
            1,
            "image_id",
            "caption_id",
            lambda row, earlier: (
                f"caption_id {value('caption_id', row)!r} names image {value('image_id', row)!r} here but "
                f"{value('image_id', earlier)!r} in {paths[source[earlier]]} (conflicting ids)"
            ),
        ),
        (
            2,
            "split",
            "image_id",
            lambda row, earlier: (
                f"image {value('image_id', row)!r} is in split {value('split', row)!r} here but "
                f"{value('split', earlier)!r} in {paths[source[earlier]]}"
            ),
        ),
    )
    for order, name, key, message in changed:
        found = _first_changed(column(name), column(key))
        if found is not None:
            checks.append((found[0], order, message(*found)))
    if checks:
        row, _, message = min(checks)
        raise SchemaError(message, paths[source[row]])


def _first_changed(values: pa.ChunkedArray, keys: pa.ChunkedArray) -> tuple[int, int] | None:
    """(row, first row of its key) of the first row whose value differs from that of its key's first row."""
    codes, first = key_codes(values), first_rows(keys)
    row = _first_mismatch(codes[first], codes)
    return None if row is None else (row, int(first[row]))


def _first_mismatch(expected: np.ndarray, actual: np.ndarray) -> int | None:
    """The first index where the two [rows] arrays differ, or None."""
    rows = np.flatnonzero(expected != actual)
    return int(rows[0]) if len(rows) else None


def _all_columns(tables: list[tuple[Path, pa.Table]]) -> list[str]:
    names = list(schema.CAPTION_COLUMNS)
    for _, table in tables:
        names += [name for name in table.column_names if name not in names]
    return names


def _with_columns(table: pa.Table, names: list[str]) -> pa.Table:
    return pa.table(
        {
            name: table.column(name).cast(pa.string())
            if name in table.column_names
            else pa.nulls(table.num_rows, pa.string())
            for name in names
        }
    )
