"""What every captions table must satisfy (applied by ``validate_captions``, so on every write and every read of a
captions artifact or Parquet file), and what a stage that turns text into vectors or a vocabulary drops first:

- **control characters** (NUL and the other C0/C1 controls except tab, line feed and carriage return) are
  replaced with a space: BERT's normaliser deletes them, which glued the words on both sides into one
  ("roter\\x00kreis" -> "roterkreis"); the count is logged;
- **empty or whitespace-only captions** are dropped, counted per language and logged, by every reader that
  encodes or learns from the text (``load_captions(..., drop_empty=True)``: encode-texts, evaluate, build-vocab,
  the training stages): encoded, they all give the same vector, which ties with every other and once scored R@1
  100; a vocabulary built from them has 0 tokens. Importers drop them at import; an artifact that holds some
  (``translate`` keeps a failed translation as an empty row and counts it) keeps them;
- **one caption_id on two images** is refused (``SchemaError`` naming the file): translations share a
  caption_id, so an id naming two images makes MRV and caption-to-caption hits depend on which row is read.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from mltk.core.errors import SchemaError
from mltk.core.runtime import log

CONTROL_CHARACTERS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+"


def apply_caption_rules(table: pa.Table, path: object, drop_empty: bool = False) -> pa.Table:
    """``table`` (captions schema, string columns) with control characters replaced (and empty captions dropped
    when ``drop_empty``); a caption_id on two images raises."""
    table = _replace_control_characters(table, path)
    if drop_empty:
        table = drop_empty_captions(table, path)
    refuse_caption_ids_on_several_images(table, path)
    return table


def _replace_control_characters(table: pa.Table, path: object) -> pa.Table:
    captions = table.column("caption")
    found = pc.sum(pc.match_substring_regex(captions, CONTROL_CHARACTERS)).as_py() or 0
    if not found:
        return table
    log(f"{path}: NUL or other control characters replaced with a space in {found} caption(s)")
    cleaned = pc.replace_substring_regex(captions, CONTROL_CHARACTERS, " ")
    return table.set_column(table.schema.get_field_index("caption"), "caption", cleaned)


def drop_empty_captions(table: pa.Table, path: object) -> pa.Table:
    """``table`` without its empty or whitespace-only captions (their count per language logged)."""
    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(table.column("caption"))), 0)
    count = pc.sum(empty).as_py() or 0
    if not count:
        return table
    per_lang = pc.value_counts(table.filter(empty).column("lang")).to_pylist()
    detail = ", ".join(f"{item['values']} {item['counts']}" for item in sorted(per_lang, key=lambda i: i["values"]))
    log(f"{path}: dropped {count} empty or whitespace caption(s) ({detail})")
    return table.filter(pc.invert(empty))


def refuse_caption_ids_on_several_images(table: pa.Table, path: object) -> None:
    """``SchemaError`` naming ``path`` when one caption_id has rows on two image_ids (also used on text
    embeddings, whose rows carry both columns)."""
    if table.num_rows == 0:
        return
    images = table.select(["caption_id", "image_id"]).group_by("caption_id").aggregate([("image_id", "count_distinct")])
    shared = images.filter(pc.greater(images.column("image_id_count_distinct"), 1))
    if shared.num_rows:
        caption_id = shared.column("caption_id")[0].as_py()
        names = sorted(
            set(table.filter(pc.equal(table.column("caption_id"), caption_id)).column("image_id").to_pylist())
        )
        raise SchemaError(
            f"{shared.num_rows} caption_id(s) name more than one image (e.g. {caption_id!r} on "
            f"{', '.join(map(repr, names[:3]))}); a caption_id is one sentence of one image",
            path,
        )
