"""AME's words: each caption cut into words by the tokenizer the AME paper used for its language, because a word
list is what AME's lexicon filtering (``import-data lexicon --vocab-from``), its map's neighbourhoods and BLI
compare with a dictionary's entries.

- **Japanese**: MeCab, as the paper, through ``fugashi`` with the ``unidic-lite`` dictionary.
- **Chinese**: ``jieba``'s word segmentation (AME has no Chinese; jieba is the segmenter Chinese caption sets
  are commonly cut with).
- **Every other language**: the Moses tokenizer (the paper's Europarl tokenizer for English and German) through
  ``sacremoses``, with the language's non-breaking prefixes where Moses has them.

A word is a token holding at least one letter or digit (``\\w``), lower-cased; punctuation tokens are dropped.
Splitting on ``\\w+`` alone, mltk's earlier rule, makes a whole Japanese or Chinese clause one "word" (neither
script puts spaces between words), so no dictionary entry ever matched it.

The tokenizers are the optional extra ``words`` (``pip install 'mltk[words]'``); a language whose tokenizer is
missing fails with one line naming the extra and the package, before any caption is read.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
from collections.abc import Callable
from pathlib import Path

from mltk.core.errors import ConfigError

WORDS_EXTRA = "words"
WORD_CHARACTER = re.compile(r"\w", re.UNICODE)
# the packages each language's tokenizer needs (import names); every language not listed here uses Moses
SEGMENTER_PACKAGES = {"ja": ("fugashi", "unidic_lite"), "zh": ("jieba",)}
MOSES_PACKAGES = ("sacremoses",)


def base_language(lang: str) -> str:
    """``zh`` for ``zh-CN`` or ``zh_tw``: the tokenizer goes by the language, not the region."""
    return re.split(r"[-_]", lang.strip().lower())[0]


def require_tokenizer(lang: str) -> None:
    """ConfigError (one line, naming the extra) unless the packages of ``lang``'s tokenizer are installed."""
    packages = SEGMENTER_PACKAGES.get(base_language(lang), MOSES_PACKAGES)
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"AME's {lang} words need the tokenizer package(s) {', '.join(missing)}: pip install 'mltk[{WORDS_EXTRA}]'"
        )


@functools.lru_cache(maxsize=None)
def tokenizer(lang: str) -> Callable[[str], list[str]]:
    """``lang``'s tokenizer: a text -> its tokens (punctuation included). Built once per language."""
    require_tokenizer(lang)
    base = base_language(lang)
    if base == "ja":
        return _mecab()
    if base == "zh":
        import jieba

        jieba.setLogLevel(logging.WARNING)  # its dictionary-loading lines would reach stderr on every run
        return jieba.lcut
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=base)
    return functools.partial(moses.tokenize, escape=False)


def _mecab() -> Callable[[str], list[str]]:
    """MeCab with unidic-lite named explicitly, so that another dictionary installed beside it changes nothing."""
    import fugashi
    import unidic_lite

    dicdir = Path(unidic_lite.DICDIR)
    tagger = fugashi.Tagger(f'-d "{dicdir}" -r "{dicdir / "mecabrc"}"')
    return lambda text: [word.surface for word in tagger(text)]


def tokenizer_name(lang: str) -> str:
    """The word rule of ``lang`` as manifests record it (``mecab-unidic-lite``, ``jieba``, ``moses``)."""
    return {"ja": "mecab-unidic-lite", "zh": "jieba"}.get(base_language(lang), "moses")


def caption_words(text: str, lang: str) -> frozenset[str]:
    """The distinct words of a caption in ``lang``: its tokens that hold a letter or digit, lower-cased."""
    return frozenset(token.lower() for token in tokenizer(lang)(text) if WORD_CHARACTER.search(token))
