"""The only reader and writer of mltk artifacts.

An artifact is a directory with data files and ``manifest.json``. Writes are atomic: the directory is built
under a hidden ``.NAME.partial`` sibling, the manifest is written last, and the directory is renamed into
place, so an interrupted run never leaves something that looks complete. Stages that resume (shards,
training state) keep their partial directory between runs and pick up what is already there.
"""

from mltk.artifacts.files import (
    VocabFiles,
    checkpoint_format,
    load_checkpoint,
    load_images,
    load_metrics,
    load_tensors,
    read_checkpoint_config,
    read_index,
    read_vocab_files,
    save_tensors,
    validate_images,
    verify_artifact,
    write_checkpoint,
    write_images,
    write_index_files,
    write_metrics,
    write_vocab_files,
)
from mltk.artifacts.manifest import (
    PathLike,
    canonical_settings,
    describe_input,
    fingerprint,
    is_artifact,
    jsonable,
    read_json,
    read_manifest,
    settings_without,
    write_json,
)
from mltk.artifacts.tables import (
    as_string_columns,
    finish_embeddings,
    load_array,
    load_captions,
    load_embeddings,
    read_table,
    require_columns,
    save_array,
    validate_captions,
    write_captions,
    write_embedding_shard,
    write_embeddings,
    write_table,
)
from mltk.artifacts.writer import (
    PARTIAL_SETTINGS,
    ArtifactWriter,
    disk_full,
    is_our_partial,
    partial_dir,
    reusable,
)

__all__ = [
    "canonical_settings", "describe_input", "fingerprint", "is_artifact", "jsonable", "PathLike", "read_json",
    "read_manifest", "settings_without", "write_json", "ArtifactWriter", "disk_full", "is_our_partial", "partial_dir",
    "PARTIAL_SETTINGS", "reusable", "as_string_columns", "finish_embeddings", "load_array", "load_captions",
    "load_embeddings", "read_table", "require_columns", "save_array", "validate_captions", "write_captions",
    "write_embedding_shard", "write_embeddings", "write_table", "checkpoint_format", "load_checkpoint",
    "load_images", "load_metrics", "load_tensors", "read_checkpoint_config", "read_index", "read_vocab_files",
    "save_tensors", "validate_images", "verify_artifact", "VocabFiles", "write_checkpoint", "write_images",
    "write_index_files", "write_metrics", "write_vocab_files",
]
