"""The words of captions, AME's notion of a model's vocabulary (the authors build it from the training captions):
what ``import-data lexicon --vocab-from`` keeps a dictionary to and what ``evaluate --metric bli`` searches.

A caption's words are its lower-cased ``\\w+`` runs (Unicode letters and digits).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow.compute as pc

from mltk import artifacts

WORD = re.compile(r"\w+", re.UNICODE)


def caption_words(text: str) -> frozenset[str]:
    return frozenset(WORD.findall(text.lower()))


def vocabulary_words(captions_paths: Sequence[str | Path], lang: str) -> list[str]:
    """The distinct words (``caption_words``) of the ``train`` rows (all rows when no row is ``train``) of
    ``lang``'s captions, sorted."""
    words: set[str] = set()
    for path in captions_paths:
        table = artifacts.load_captions(path)
        table = table.filter(pc.equal(table.column("lang"), lang))
        if "split" in table.column_names and "train" in set(table.column("split").to_pylist()):
            table = table.filter(pc.equal(table.column("split"), "train"))
        for text in table.column("caption").to_pylist():
            words.update(caption_words(text or ""))
    return sorted(words)
