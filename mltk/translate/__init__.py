"""Machine translation of captions for translate-train data (``mltk translate-data``).

Two backends produce the same thing, a captions artifact holding the input rows plus translated rows that keep
``caption_id``: ``translate_captions`` runs a transformers seq2seq model (M2M-100, NLLB, Marian/OPUS-MT) with
deduplication, length-sorted batches, a persistent cache and resumable shards; ``join_translations`` joins
translations users already have from CSV/TSV/JSONL/Parquet files. Both run the quality guards of
``mltk.translate.guards``.
"""

from mltk.translate.guards import GuardConfig
from mltk.translate.join import JoinConfig, join_translations
from mltk.translate.pipeline import DEFAULT_MODEL, TranslateConfig, translate_captions, translate_data

__all__ = [
    "DEFAULT_MODEL",
    "GuardConfig",
    "JoinConfig",
    "TranslateConfig",
    "join_translations",
    "translate_captions",
    "translate_data",
]
