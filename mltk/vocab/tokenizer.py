"""CLIP's byte-level BPE tokenizer over any (grown) vocabulary, and CLIP's own vocabulary, the root of every chain.

Pre-processing is CLIP's, reimplemented here (byte for byte the functions of open_clip's ``tokenizer.py``, which
the tests compare against) so that this module does not import open_clip (a 6 s import):
``ftfy.fix_text``, ``html.unescape`` twice, whitespace collapsed, lower-cased, split with CLIP's regex, each piece
turned into byte-level symbols (``bytes_to_unicode``) with ``</w>`` appended to its last symbol.

Why a tokenizer of our own instead of open_clip's ``SimpleTokenizer``: it reads a fixed number of merges from a
gzip file, so a grown vocabulary cannot be loaded into it. ``ClipBpeTokenizer`` applies a complete merge list of
any length.
"""

from __future__ import annotations

import gzip
import html
import importlib.util
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import ftfy
import regex
import torch

from mltk.core.errors import ArtifactError, ConfigError

SOT_TOKEN = "<start_of_text>"
EOT_TOKEN = "<end_of_text>"
SPECIAL_TOKENS = (SOT_TOKEN, EOT_TOKEN)
WORD_END = "</w>"
DEFAULT_CONTEXT_LENGTH = 77
CLIP_BPE_FILE = "bpe_simple_vocab_16e6.txt.gz"
CLIP_MERGE_COUNT = 49152 - 256 - 2  # open_clip reads exactly these merge lines (after the header)
CLIP_ROOT_NAME = f"openai-clip:{CLIP_BPE_FILE}"

# ----------------------------------------------------------------------------------------------------------------
# CLIP's pre-processing (same as open_clip/tokenizer.py: basic_clean, whitespace_clean, bytes_to_unicode, pat)
# ----------------------------------------------------------------------------------------------------------------


@lru_cache()
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible map from the 256 byte values to printable unicode characters."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in codes)))


def clean_text(text: str) -> str:
    """CLIP's 'lower' cleaning: ftfy, HTML unescaped twice, whitespace collapsed, lower-cased."""
    text = html.unescape(html.unescape(ftfy.fix_text(text))).strip()
    return " ".join(text.split()).strip().lower()


def clip_pattern(special_tokens: Sequence[str] = SPECIAL_TOKENS) -> regex.Pattern:
    """CLIP's pre-tokenisation regex (special tokens first, contractions, letter runs, single digits, others)."""
    special = "|".join(special_tokens)
    return regex.compile(special + r"""|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""", regex.IGNORECASE)


_PATTERN = clip_pattern()


def pre_tokenize(text: str) -> list[str]:
    """Clean ``text`` and split it into CLIP's pre-tokens, each as a string of byte-level symbols."""
    byte_encoder = bytes_to_unicode()
    return ["".join(byte_encoder[b] for b in piece.encode("utf-8")) for piece in _PATTERN.findall(clean_text(text))]


def base_symbols() -> list[str]:
    """The 512 base tokens of every vocabulary: the 256 byte symbols, then the same with ``</w>``."""
    symbols = list(bytes_to_unicode().values())
    return symbols + [s + WORD_END for s in symbols]


def merge_pair(word: list[str], first: str, second: str) -> list[str]:
    """``word`` with every occurrence of ``first second`` (left to right, not overlapping) joined."""
    merged, i = [], 0
    while i < len(word):
        if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
            merged.append(first + second)
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return merged


# ----------------------------------------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------------------------------------


class ClipBpeTokenizer:
    """CLIP's byte-level BPE over an arbitrary (grown) vocabulary and merge list.

    ``encode`` applies the merges exactly like open_clip's ``SimpleTokenizer.bpe``: within each pre-token,
    repeatedly merge every occurrence (left to right) of the adjacent pair with the lowest merge rank.
    ``__call__`` returns ``LongTensor [B, context_length]`` with start and end tokens and zero padding; too long
    texts are cut and end with the end token, as in open_clip.
    """

    kind = "clip-bpe"

    def __init__(
        self, tokens: Sequence[str], merges: Sequence[tuple[str, str]], context_length: int = DEFAULT_CONTEXT_LENGTH
    ):
        self.tokens = list(tokens)
        self.encoder = {token: index for index, token in enumerate(self.tokens)}
        if len(self.encoder) != len(self.tokens):
            raise ArtifactError("vocabulary has duplicate tokens")
        missing = [t for t in SPECIAL_TOKENS if t not in self.encoder]
        if missing:
            raise ArtifactError(f"vocabulary lacks the special token(s) {', '.join(missing)}")
        self.merges = [tuple(m) for m in merges]
        self.bpe_ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.context_length = context_length
        self.sot_token_id = self.encoder[SOT_TOKEN]
        self.eot_token_id = self.encoder[EOT_TOKEN]
        self.all_special_ids = [self.sot_token_id, self.eot_token_id]
        self._cache: dict[str, tuple[int, ...]] = {t: (self.encoder[t],) for t in SPECIAL_TOKENS}
        self._byte_decoder = {v: k for k, v in bytes_to_unicode().items()}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def bpe(self, piece: str) -> list[str]:
        """The BPE symbols of one byte-level pre-token (see the class docstring for the rule)."""
        word = list(piece[:-1]) + [piece[-1] + WORD_END]
        ranks = self.bpe_ranks
        while len(word) > 1:
            best_rank, best = None, None
            for pair in zip(word, word[1:]):
                rank = ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best = rank, pair
            if best is None:
                break
            word = merge_pair(word, *best)
        return word

    def encode_piece(self, piece: str) -> tuple[int, ...]:
        """Ids of one byte-level pre-token (cached: captions repeat their words)."""
        ids = self._cache.get(piece)
        if ids is None:
            try:
                ids = tuple(self.encoder[symbol] for symbol in self.bpe(piece))
            except KeyError as exc:
                raise ArtifactError(f"merge result {exc.args[0]!r} is not in the vocabulary (corrupt vocab)")
            self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without start and end tokens."""
        ids: list[int] = []
        for piece in pre_tokenize(text):
            ids.extend(self.encode_piece(piece))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (as open_clip decodes: bytes back to UTF-8, word ends to spaces)."""
        text = "".join(self.tokens[int(i)] for i in ids)
        raw = bytearray(self._byte_decoder[c] for c in text)
        return raw.decode("utf-8", errors="replace").replace(WORD_END, " ")

    def __call__(self, texts: str | Sequence[str], context_length: int | None = None) -> torch.LongTensor:
        if isinstance(texts, str):
            texts = [texts]
        context_length = context_length or self.context_length
        if context_length < 2:
            raise ConfigError(f"context_length must be at least 2, got {context_length}")
        result = torch.zeros(len(texts), context_length, dtype=torch.long)
        for row, text in enumerate(texts):
            ids = [self.sot_token_id] + self.encode(text) + [self.eot_token_id]
            if len(ids) > context_length:
                ids = ids[:context_length]
                ids[-1] = self.eot_token_id
            result[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return result


# ----------------------------------------------------------------------------------------------------------------
# CLIP's own vocabulary (the root of every chain)
# ----------------------------------------------------------------------------------------------------------------


def clip_bpe_path() -> Path:
    """``bpe_simple_vocab_16e6.txt.gz`` inside the installed open_clip (found without importing open_clip)."""
    spec = importlib.util.find_spec("open_clip")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / CLIP_BPE_FILE
        if candidate.is_file():
            return candidate
    raise ArtifactError(f"CLIP's BPE file {CLIP_BPE_FILE} was not found in the installed open_clip package")


@lru_cache(maxsize=1)
def _clip_tokens_and_merges() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    lines = gzip.open(clip_bpe_path()).read().decode("utf-8").split("\n")
    merges = tuple(tuple(line.split()) for line in lines[1 : CLIP_MERGE_COUNT + 1])
    tokens = base_symbols() + ["".join(m) for m in merges] + list(SPECIAL_TOKENS)
    return tuple(tokens), merges


def clip_tokenizer(context_length: int = DEFAULT_CONTEXT_LENGTH) -> ClipBpeTokenizer:
    """CLIP's original tokenizer (49,408 tokens), identical in its ids to open_clip's ``SimpleTokenizer``."""
    tokens, merges = _clip_tokens_and_merges()
    return ClipBpeTokenizer(tokens, merges, context_length)
