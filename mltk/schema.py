"""The data contract between stages: artifact kinds, their files, Parquet columns and the schema version.

Every artifact is a directory holding ``manifest.json`` plus data files (``../shared/design.md``, section 2).
This module only *describes* artifacts; ``mltk.artifacts`` is the only code that reads or writes them.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1
NATIVE_LANG = "en"  # the language of the frozen CLIP; every other language is learnt
MANIFEST = "manifest.json"

KINDS = ("captions", "images", "embeddings", "vocab", "checkpoint", "index", "metrics")

# Fields every manifest carries (``read_manifest`` checks them).
MANIFEST_FIELDS = ("kind", "schema_version", "created_by", "mltk_version", "inputs", "created_at", "files")

# --- captions: long format, one row per caption --------------------------------------------------------------
CAPTIONS_FILE = "captions.parquet"
CAPTION_COLUMNS = ("image_id", "lang", "caption", "caption_id", "split")
CAPTIONS_SCHEMA = pa.schema([(name, pa.string()) for name in CAPTION_COLUMNS])

# --- images: one row per image; either encoded bytes (``image``) or a ``path`` -----------------------------
IMAGES_FILE = "images.parquet"
IMAGE_COLUMNS = ("image_id", "split")
IMAGE_SOURCE_COLUMNS = ("image", "path")  # exactly one of these

# --- embeddings: NPY shards row-aligned with Parquet shards that carry the ids ------------------------------
EMBEDDING_ID_COLUMN = "id"
EMBEDDING_DTYPES = ("float16", "float32")


def embedding_shard_names(index: int) -> tuple[str, str]:
    """File names (vectors, rows) of embedding shard ``index``."""
    return f"vectors-{index:05d}.npy", f"rows-{index:05d}.parquet"


# --- checkpoint: trained tensors only (safetensors) plus config.json naming the frozen base ----------------
CHECKPOINT_WEIGHTS = "model.safetensors"
CHECKPOINT_CONFIG = "config.json"

# --- metrics: one JSON document -------------------------------------------------------------------------------
METRICS_FILE = "metrics.json"
