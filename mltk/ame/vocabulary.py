"""The words of captions, AME's notion of a model's vocabulary (the authors build it from the training captions):
what ``import-data lexicon --vocab-from`` keeps a dictionary to and what ``evaluate --metric bli`` searches.

A caption's words are those of its language's tokenizer (``mltk.ame.segment``: MeCab for Japanese, jieba for
Chinese, Moses for the others), lower-cased, punctuation dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.compute as pc

from mltk import artifacts
from mltk.ame.segment import caption_words, require_tokenizer

__all__ = ["caption_words", "vocabulary_words"]


def vocabulary_words(captions_paths: Sequence[str | Path], lang: str) -> list[str]:
    """The distinct words (``caption_words``) of the ``train`` rows (all rows when no row is ``train``) of
    ``lang``'s captions, sorted. Refused before any caption is read when ``lang``'s tokenizer is not installed."""
    require_tokenizer(lang)
    words: set[str] = set()
    for path in captions_paths:
        table = artifacts.load_captions(path)
        table = table.filter(pc.equal(table.column("lang"), lang))
        if "split" in table.column_names and "train" in set(table.column("split").to_pylist()):
            table = table.filter(pc.equal(table.column("split"), "train"))
        for text in table.column("caption").to_pylist():
            words.update(caption_words(text or "", lang))
    return sorted(words)
