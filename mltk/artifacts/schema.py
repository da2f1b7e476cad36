"""The data contract between stages: artifact kinds, their files, Parquet columns and the schema version.

Every artifact is a directory holding ``manifest.json`` plus data files. The manifest says what the artifact is
(``kind``, ``schema_version``), how it was made (``created_by``: the stage and its full configuration,
``mltk_version``, ``created_at``) and from what (``inputs``: path and content fingerprint of each input); it is
written last, so a directory without one is never mistaken for a finished artifact.

This module only *describes* artifacts: each kind's files (``ARTIFACT_FILES``), each checkpoint format's files
(``CHECKPOINT_FORMATS``), the Parquet columns. ``mltk.artifacts`` is the only code that reads or writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1
NATIVE_LANG = "en"  # the language of the frozen CLIP; every other language is learnt
MANIFEST = "manifest.json"

KINDS = ("captions", "images", "embeddings", "vocab", "checkpoint", "index", "metrics", "lexicon")

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
CHECKPOINT_CONFIG = "config.json"  # its "format" field names one of CHECKPOINT_FORMATS
CHECKPOINT_HISTORY = "history.json"  # the training loop's validation/log records (trained checkpoints only)
CHECKPOINT_STATE_DIR = "state"  # the loop's resumable state, kept beside the weights (trained checkpoints only)

FORMAT_OPEN_CLIP = "open_clip"  # a whole open_clip CLIP
FORMAT_MLA = "mla"  # MLA: per-language acquirers plus the non-native embedding over a frozen CLIP
FORMAT_CLL = "cll"  # CLL-CLIP: an expandable token table (plus temperature, method tensors) over a frozen CLIP
CLL_VOCAB_DIR = "vocab"  # a ``cll`` checkpoint carries its vocabulary as a vocab artifact in this folder


@dataclass(frozen=True)
class CheckpointFormat:
    """One value of ``config.json``'s ``format``: what the weights hold and which files sit beside them."""

    name: str
    holds: str  # what ``model.safetensors`` holds
    written_by: tuple[str, ...]  # the stages that write it
    files: tuple[str, ...]  # always present
    loop_files: tuple[str, ...] = ()  # present when one run of the training loop wrote it (pretrain, train-nlt,
    # train-le, train-ccrk); import-mla writes none, train-continual its own (CONTINUAL_* below)


_LOOP_FILES = (CHECKPOINT_HISTORY, CHECKPOINT_STATE_DIR + "/")

CHECKPOINT_FORMATS = {
    FORMAT_OPEN_CLIP: CheckpointFormat(
        FORMAT_OPEN_CLIP,
        "every tensor of an open_clip CLIP under its own key names; config.json names the architecture (``model``)",
        ("pretrain", "import-mla"),
        (CHECKPOINT_WEIGHTS, CHECKPOINT_CONFIG),
        _LOOP_FILES,
    ),
    FORMAT_MLA: CheckpointFormat(
        FORMAT_MLA,
        "``acquirers.{lang}.{block}.*`` and ``embedding.{table,proj}.*``; config.json names the base "
        "CLIP, the languages, the non-native tokenizer and the acquirer width",
        ("train-nlt", "train-le", "train-ccrk", "import-mla"),
        (CHECKPOINT_WEIGHTS, CHECKPOINT_CONFIG),
        _LOOP_FILES,
    ),
    FORMAT_CLL: CheckpointFormat(
        FORMAT_CLL,
        "``table`` [V, W], ``logit_scale`` and ``method.*``; config.json names the base CLIP, the "
        "vocabulary folder, the method and the languages",
        ("train-continual", "train-ccrk"),
        (CHECKPOINT_WEIGHTS, CHECKPOINT_CONFIG, CLL_VOCAB_DIR + "/"),
        _LOOP_FILES,
    ),
}

# --- vocab: CLIP-style byte-level BPE grown one language at a time (CLL-CLIP) --------------------------------
VOCAB_MERGES_FILE = "merges.txt"  # a header line, then one merge ``left right`` per line, highest priority first
VOCAB_MERGES_HEADER = "#version: mltk-clip-bpe 1 (one merge per line, highest priority first)"
VOCAB_TOKENS_FILE = "vocab.json"  # {token: id}, ids 0..V-1
VOCAB_PRIOR_COUNTS_FILE = "prior_task_counts.npy"  # int64 [V]: earlier tasks whose text held token j (TEIR's c_j)
VOCAB_TASK_FREQ_FILE = "task_token_freq.npy"  # int64 [V]: occurrences of token j in this task's text
# TEIR's token sets by vocabulary membership (the paper's wording; optional files, absent in older artifacts):
VOCAB_PRIOR_MEMBER_FILE = "prior_vocab_counts.npy"  # int64 [V]: earlier tasks whose new vocabulary held token j
VOCAB_TASK_MEMBER_FILE = "task_vocab_member.npy"  # int64 [V]: 1 where token j is in this task's new vocabulary

# --- index: FAISS over an embeddings artifact ---------------------------------------------------------------------
INDEX_FILE = "index.faiss"  # faiss.write_index, never pickle
INDEX_IDS_FILE = "ids.parquet"  # row i (``id`` and the embeddings' other columns) belongs to the index's vector i

# --- train-continual: files of its ``cll`` checkpoint besides the format's own ------------------------------------
CONTINUAL_FILE = "continual.json"  # tasks, the accuracy matrix, AR, F, per-task metrics and history
CONTINUAL_MATRIX_PNG = "continual_matrix.png"
CONTINUAL_CURVE_PNG = "continual_curve.png"
CONTINUAL_VOCABS_DIR = "vocabs"  # the vocabularies built on the way, ``NN-lang``
# While the run is under way (inside the partial directory; removed when it completes):
CONTINUAL_TASKS_DIR = "tasks"  # each finished task as a complete ``cll`` checkpoint, ``NN-lang``
CONTINUAL_TRAIN_DIR = "train"  # the running task's loop state, ``NN-lang``
CONTINUAL_TRAINING_STATE = "training_state.safetensors"  # a task checkpoint's method state (Fisher, memory)
CONTINUAL_TRAINING_INFO = "training_state.json"
CONTINUAL_TASK_FILE = "task.json"
CONTINUAL_RUN_FILE = "run.json"

# --- lexicon: a bilingual word list (MUSE's dictionaries, one induced from parallel captions, the world's own) ----
LEXICON_FILE = "lexicon.parquet"
LEXICON_COLUMNS = ("src_lang", "src", "tgt_lang", "tgt")  # one row per translation pair; a word may have several

# --- metrics: one JSON document -------------------------------------------------------------------------------
METRICS_FILE = "metrics.json"

# Every artifact kind and the files it holds besides manifest.json ("NAME/" is a folder; embedding shards are
# numbered, see ``embedding_shard_names``; checkpoints add their format's files, see ``CHECKPOINT_FORMATS``).
ARTIFACT_FILES = {
    "captions": (CAPTIONS_FILE,),
    "images": (IMAGES_FILE,),
    "embeddings": embedding_shard_names(0),
    "vocab": (VOCAB_MERGES_FILE, VOCAB_TOKENS_FILE, VOCAB_PRIOR_COUNTS_FILE, VOCAB_TASK_FREQ_FILE),
    "checkpoint": (CHECKPOINT_WEIGHTS, CHECKPOINT_CONFIG),
    "index": (INDEX_FILE, INDEX_IDS_FILE),
    "metrics": (METRICS_FILE,),
    "lexicon": (LEXICON_FILE,),
}
