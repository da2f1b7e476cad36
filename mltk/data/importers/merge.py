"""``mltk merge-captions A B ... --out C``: the union of captions artifacts.

Refused with one line naming both inputs: the same (caption_id, lang) in two places (a duplicate row, e.g. the
same set merged twice), one caption_id naming different images (conflicting ids), and one image in different
splits (a test image that would also train). Columns beyond the schema are kept; rows of an input that lacks
one hold null there.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.runtime import log


def merge_captions(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> Path:
    """``mltk merge-captions``: the union of several captions artifacts (a row in two of them is refused)."""
    if len(paths) < 2:
        raise ConfigError("merge-captions needs at least two captions artifacts")
    tables = [(Path(p), artifacts.load_captions(p)) for p in paths]
    seen: dict[tuple[str, str], Path] = {}
    image_of: dict[str, tuple[str, Path]] = {}
    split_of: dict[str, tuple[str, Path]] = {}
    for path, table in tables:
        columns = table.select(["image_id", "lang", "caption_id", "split"]).to_pydict()
        for image_id, lang, caption_id, split in zip(*columns.values()):
            key = (caption_id, lang)
            if key in seen:
                where = "twice in it" if seen[key] == path else f"also in {seen[key]}"
                raise SchemaError(f"caption_id {caption_id!r} in {lang} is {where} (duplicate row)", path)
            seen[key] = path
            known = image_of.setdefault(caption_id, (image_id, path))
            if known[0] != image_id:
                raise SchemaError(f"caption_id {caption_id!r} names image {image_id!r} here but {known[0]!r} in "
                                  f"{known[1]} (conflicting ids)", path)
            known_split = split_of.setdefault(image_id, (split, path))
            if known_split[0] != split:
                raise SchemaError(f"image {image_id!r} is in split {split!r} here but {known_split[0]!r} in "
                                  f"{known_split[1]}", path)
    merged = pa.concat_tables([_with_columns(table, _all_columns(tables)) for _, table in tables])
    langs = Counter(merged.column("lang").to_pylist())
    log(f"merge-captions: {merged.num_rows} captions from {len(tables)} artifacts "
        f"({', '.join(f'{lang} {n}' for lang, n in sorted(langs.items()))})")
    return artifacts.write_captions(out_dir, merged, stage="merge-captions",
                                    config={"inputs": [str(p) for p, _ in tables]}, inputs=[p for p, _ in tables])


def _all_columns(tables: list[tuple[Path, pa.Table]]) -> list[str]:
    names = list(schema.CAPTION_COLUMNS)
    for _, table in tables:
        names += [name for name in table.column_names if name not in names]
    return names


def _with_columns(table: pa.Table, names: list[str]) -> pa.Table:
    return pa.table({name: table.column(name).cast(pa.string()) if name in table.column_names
                     else pa.nulls(table.num_rows, pa.string()) for name in names})
