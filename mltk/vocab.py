"""Growing CLIP's BPE vocabulary one language at a time (CLL-CLIP, ``../shared/design.md`` section 3).

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning"
(AAAI 2024) learn languages in sequence. Before task t they train a BPE vocabulary V̂_t (10K tokens) on the
task's text with CLIP's own pre-processing and merge it into the previous vocabulary:

    V_t = V_{t-1} ∪ V̂_t        old ids unchanged, tokens of V̂_t missing from V_{t-1} appended in V̂_t's order,
    merges_t = merges_{t-1} + [m in merges(V̂_t) not already in merges_{t-1}]   (old merges keep priority)

The first parent is CLIP's own vocabulary (``bpe_simple_vocab_16e6.txt.gz`` inside open_clip: 256 byte symbols,
the same 256 with ``</w>``, 48,894 merges, then ``<start_of_text>`` = 49406 and ``<end_of_text>`` = 49407).
The start and end tokens keep their ids, so after expansion the end token is no longer the largest id (pool at
the first end token, not at argmax).

Why a tokenizer of our own instead of open_clip's ``SimpleTokenizer``: it reads a fixed number of merges from a
gzip file, so a grown vocabulary cannot be loaded into it. The authors' code reloaded the merged tokenizer in a
way that kept only the merges of the first task, so every later task's new tokens existed in the embedding table
but were never produced. Here the artifact stores the complete merge list and ``ClipBpeTokenizer`` applies all of
it; the tests check that the new tokens of every task are produced after a reload.

Pre-processing is CLIP's, reimplemented here (byte for byte the functions of open_clip's ``tokenizer.py``, which
the tests compare against) so that this module does not import open_clip (a 6 s import):
``ftfy.fix_text``, ``html.unescape`` twice, whitespace collapsed, lower-cased, split with CLIP's regex, each piece
turned into byte-level symbols (``bytes_to_unicode``) with ``</w>`` appended to its last symbol.

Two consequences of "old merges keep priority" that the paper's scheme has and mltk measures:

- A learned merge can also fire on text of an earlier language (English included) wherever the earlier
  tokenization leaves its two halves side by side: a rare English word that CLIP splits ("bal" "ding</w>") is
  re-merged by a vocabulary that learned "balding</w>" that way. Words CLIP encodes as one token never change.
  On Multi30K, an English task's own V̂ changes the ids of 92 of the 1,014 validation captions, and a German V̂
  alone about 1% of them. ``protected_texts`` (CLI ``--protect-lang en``) drops exactly the learned merges that
  would change the parent's ids for the protected words, so those captions keep CLIP's ids.
- Not every new token is reachable: old merges first join the bytes their own way (CLIP already merges the two
  UTF-8 bytes of most Cyrillic letters), so a learned path from raw bytes may never form. The manifest's
  ``new_tokens_produced`` counts the new tokens that occur in the task's tokenised text (about 40% on
  Multi30K German); the others get lambda 0 under TEIR.

The vocabulary artifact (kind ``vocab``) holds:

- ``merges.txt``: a header line, then one merge ``left right`` per line in priority order;
- ``vocab.json``: ``{token: id}`` with ids 0..V-1;
- ``prior_task_counts.npy`` (int64 [V]): c_j, the number of tasks *before* this one whose tokenised training
  text contained token j, with CLIP's original vocabulary counted as one earlier task for all its tokens (TEIR's
  lambda_j = 1 / (1 + c_j), see ``mltk.teir``);
- ``task_token_freq.npy`` (int64 [V]): how often each token occurs in this task's tokenised training text
  (nonzero = the token is present in the current task);
- the manifest: ``lang``, ``languages`` and ``tasks`` so far, and ``sizes`` (old, new-vocabulary, overlapping,
  new, total) plus merge counts.
"""

from __future__ import annotations

import gzip
import heapq
import html
import importlib.util
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import ftfy
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex
import torch

from mltk import artifacts
from mltk.errors import ArtifactError, ConfigError, SchemaError
from mltk.runtime import log

SOT_TOKEN = "<start_of_text>"
EOT_TOKEN = "<end_of_text>"
SPECIAL_TOKENS = (SOT_TOKEN, EOT_TOKEN)
WORD_END = "</w>"
DEFAULT_CONTEXT_LENGTH = 77
DEFAULT_NEW_VOCAB_SIZE = 10000
CLIP_BPE_FILE = "bpe_simple_vocab_16e6.txt.gz"
CLIP_MERGE_COUNT = 49152 - 256 - 2  # open_clip reads exactly these merge lines (after the header)
CLIP_ROOT_NAME = f"openai-clip:{CLIP_BPE_FILE}"

MERGES_FILE = "merges.txt"
VOCAB_FILE = "vocab.json"
PRIOR_COUNTS_FILE = "prior_task_counts.npy"
TASK_FREQ_FILE = "task_token_freq.npy"
MERGES_HEADER = "#version: mltk-clip-bpe 1 (one merge per line, highest priority first)"


# ----------------------------------------------------------------------------------------------------------------
# CLIP's pre-processing (same as open_clip/tokenizer.py: basic_clean, whitespace_clean, bytes_to_unicode, pat)
# ----------------------------------------------------------------------------------------------------------------


@lru_cache()
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible map from the 256 byte values to printable unicode characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
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
    return regex.compile(special + r"""|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
                         regex.IGNORECASE)


_PATTERN = clip_pattern()


def pre_tokenize(text: str) -> list[str]:
    """Clean ``text`` and split it into CLIP's pre-tokens, each as a string of byte-level symbols."""
    byte_encoder = bytes_to_unicode()
    return ["".join(byte_encoder[b] for b in piece.encode("utf-8")) for piece in _PATTERN.findall(clean_text(text))]


def base_symbols() -> list[str]:
    """The 512 base tokens of every vocabulary: the 256 byte symbols, then the same with ``</w>``."""
    symbols = list(bytes_to_unicode().values())
    return symbols + [s + WORD_END for s in symbols]


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

    def __init__(self, tokens: Sequence[str], merges: Sequence[tuple[str, str]],
                 context_length: int = DEFAULT_CONTEXT_LENGTH):
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
            word = _merge_pair(word, *best)
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
            result[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
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
    merges = tuple(tuple(line.split()) for line in lines[1:CLIP_MERGE_COUNT + 1])
    tokens = base_symbols() + ["".join(m) for m in merges] + list(SPECIAL_TOKENS)
    return tuple(tokens), merges


def clip_tokenizer(context_length: int = DEFAULT_CONTEXT_LENGTH) -> ClipBpeTokenizer:
    """CLIP's original tokenizer (49,408 tokens), identical in its ids to open_clip's ``SimpleTokenizer``."""
    tokens, merges = _clip_tokens_and_merges()
    return ClipBpeTokenizer(tokens, merges, context_length)


# ----------------------------------------------------------------------------------------------------------------
# BPE training on one language
# ----------------------------------------------------------------------------------------------------------------


def word_frequencies(texts: Iterable[str]) -> Counter:
    """How often each byte-level pre-token occurs in ``texts`` (special-token strings are left out)."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(pre_tokenize(text))
    for special in SPECIAL_TOKENS:
        counts.pop(special, None)
    return counts


def _merge_pair(word: list[str], first: str, second: str) -> list[str]:
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


def train_bpe(word_counts: Mapping[str, int], size: int = DEFAULT_NEW_VOCAB_SIZE,
              min_frequency: int = 2) -> list[tuple[str, str]]:
    """Learn BPE merges on word counts, CLIP style, until the vocabulary V̂ holds ``size`` tokens.

    V̂ counts like CLIP's own 49,408: the 512 byte-level base symbols, the two special tokens, and one token per
    merge with a new result. Each step merges the most frequent adjacent pair (ties: the lexicographically
    smallest pair, so the result is deterministic) in every word; it stops early when no pair occurs
    ``min_frequency`` times. Pair counts are updated incrementally, only in the words that contain the merged
    pair, with a lazy max-heap: a few seconds for ~30K captions.
    """
    vocab = set(base_symbols()) | set(SPECIAL_TOKENS)
    words: list[list[str]] = []
    freqs: list[int] = []
    for piece, count in sorted(word_counts.items()):
        if piece and piece not in SPECIAL_TOKENS:
            words.append(list(piece[:-1]) + [piece[-1] + WORD_END])
            freqs.append(int(count))
    pair_counts: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freqs[index]
            where[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    learned: set[tuple[str, str]] = set()
    while len(vocab) < size and heap:
        negative_count, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -negative_count:
            continue  # stale heap entry
        if -negative_count < max(min_frequency, 1):
            break
        if pair not in learned:  # a pair can reappear when another path rebuilds one of its halves
            merges.append(pair)
            learned.add(pair)
            vocab.add(pair[0] + pair[1])
        delta: Counter = Counter()
        for index in where.pop(pair, ()):
            word = words[index]
            merged = _merge_pair(word, *pair)
            if len(merged) == len(word):
                continue  # stale membership: the pair left this word earlier
            for old in zip(word, word[1:]):
                delta[old] -= freqs[index]
            for new in zip(merged, merged[1:]):
                delta[new] += freqs[index]
                where[new].add(index)
            words[index] = merged
        for changed, difference in delta.items():
            if difference:
                pair_counts[changed] += difference
                if pair_counts[changed] > 0:
                    heapq.heappush(heap, (-pair_counts[changed], changed))
                else:
                    del pair_counts[changed]
    return merges


# ----------------------------------------------------------------------------------------------------------------
# Merging V̂_t into V_{t-1}, and the vocabulary of one task
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeSizes:
    """Sizes of the parts of V_t = V_{t-1} ∪ V̂_t (tokens) and of the merge lists."""

    old: int  # |V_{t-1}|
    new_vocab: int  # |V̂_t|, the vocabulary trained on this task's text
    overlap: int  # |V̂_t ∩ V_{t-1}|
    new: int  # |V̂_t \ V_{t-1}|, appended with ids old .. old + new - 1
    total: int  # |V_t|
    merges_parent: int
    merges_learned: int
    merges_duplicate: int  # learned merges already in the parent, dropped
    merges_total: int
    merges_protected: int = 0  # learned merges dropped to keep a protected language's tokenization


def merge_vocabularies(parent_tokens: Sequence[str], parent_merges: Sequence[tuple[str, str]],
                       new_merges: Sequence[tuple[str, str]]) -> tuple[list[str], list[tuple[str, str]], MergeSizes]:
    """V_t and its merges from the parent's and the new vocabulary's merges (rules in the module docstring)."""
    parent_ids = {token: index for index, token in enumerate(parent_tokens)}
    new_vocab_order = list(dict.fromkeys(base_symbols() + ["".join(m) for m in new_merges] + list(SPECIAL_TOKENS)))
    appended = [token for token in new_vocab_order if token not in parent_ids]
    parent_merge_set = set(map(tuple, parent_merges))
    kept = [tuple(m) for m in dict.fromkeys(map(tuple, new_merges)) if tuple(m) not in parent_merge_set]
    tokens = list(parent_tokens) + appended
    merges = [tuple(m) for m in parent_merges] + kept
    sizes = MergeSizes(
        old=len(parent_tokens), new_vocab=len(new_vocab_order), overlap=len(new_vocab_order) - len(appended),
        new=len(appended), total=len(tokens), merges_parent=len(parent_merges), merges_learned=len(new_merges),
        merges_duplicate=len(new_merges) - len(kept), merges_total=len(merges),
    )
    return tokens, merges, sizes


def drop_merges_changing(parent: ClipBpeTokenizer, new_merges: Sequence[tuple[str, str]],
                         protected_pieces: Iterable[str]) -> list[tuple[str, str]]:
    """The learned merges that leave the parent's tokenization of every protected word unchanged.

    Why this is exact: with the parent's merges ranked first, a word always reaches its parent segmentation S
    before any new merge can fire, and a new merge then fires only if its pair sits side by side in S. So dropping
    the new merges that are adjacent pairs of some protected word's S keeps those words' ids, and nothing else.
    Merges whose operand can no longer be formed (it came from a dropped merge) are dropped with it.
    """
    touching: set[tuple[str, str]] = set()
    for piece in protected_pieces:
        symbols = parent.bpe(piece)
        touching.update(zip(symbols, symbols[1:]))
    available = set(parent.tokens)
    kept = []
    for merge in map(tuple, new_merges):
        if merge in parent.bpe_ranks:
            kept.append(merge)  # a duplicate; merge_vocabularies drops it and counts it
        elif merge not in touching and merge[0] in available and merge[1] in available:
            kept.append(merge)
            available.add(merge[0] + merge[1])
    return kept


@dataclass
class Vocabulary:
    """A vocabulary after a task: the tokenizer plus the per-token task counts TEIR needs.

    ``prior_task_counts[j]`` = c_j, the number of earlier tasks whose tokenised training text contained token j
    (CLIP's original vocabulary counts as one earlier task for its 49,408 tokens); ``task_token_freq[j]`` = the
    occurrences of token j in this task's tokenised training text. ``tasks`` lists the tasks so far, this one
    last; the root (CLIP alone) has none.
    """

    tokenizer: ClipBpeTokenizer
    prior_task_counts: np.ndarray  # int64 [V]
    task_token_freq: np.ndarray  # int64 [V]
    tasks: list[dict] = field(default_factory=list)
    sizes: MergeSizes | None = None
    path: Path | None = None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def parent_size(self) -> int:
        """|V_{t-1}|: rows of the embedding table that exist before this task (the rest are new)."""
        return self.sizes.old if self.sizes is not None else self.vocab_size

    @property
    def languages(self) -> list[str]:
        return [task["lang"] for task in self.tasks]

    def present_token_ids(self) -> np.ndarray:
        """Ids of the tokens that occur in this task's tokenised training text (int64, ascending)."""
        return np.flatnonzero(self.task_token_freq)

    def counts_after_task(self) -> np.ndarray:
        """c_j for the *next* task: the earlier tasks' counts plus one where this task's text has token j."""
        return self.prior_task_counts + (self.task_token_freq > 0).astype(np.int64)


def clip_vocabulary() -> Vocabulary:
    """The root of every chain: CLIP's vocabulary, counted as one task for all of its tokens, and no task yet."""
    tokenizer = clip_tokenizer()
    size = tokenizer.vocab_size
    # After the root "task" every CLIP token has been seen once; there is no current task text.
    return Vocabulary(tokenizer, np.zeros(size, np.int64), np.ones(size, np.int64))


def minimum_vocabulary_size() -> int:
    """A trained vocabulary holds at least the byte-level base symbols and the special tokens."""
    return len(base_symbols()) + len(SPECIAL_TOKENS)


def vocabulary_size_problem(size: int, option: str) -> str | None:
    """The one-line complaint about a too small vocabulary size given as ``option``, or None when it is fine."""
    if size < minimum_vocabulary_size():
        return (f"{option} must be at least {minimum_vocabulary_size()} (the byte-level base symbols and the special "
                f"tokens), got {size}")
    return None


def train_vocabulary(texts: Sequence[str], lang: str, parent: Vocabulary | None = None,
                     size: int = DEFAULT_NEW_VOCAB_SIZE, min_frequency: int = 2,
                     protected_texts: Sequence[str] = ()) -> Vocabulary:
    """Train V̂_t on ``texts`` (one language's training captions), merge it into ``parent`` (CLIP's vocabulary
    when None), and count the tokens of the texts tokenised with the merged vocabulary.

    ``protected_texts`` (e.g. the English captions): learned merges that would change the parent's ids for any of
    their words are dropped (``drop_merges_changing``), so those texts keep exactly the parent's ids. Off by
    default, as in the paper, where later vocabularies may re-merge rare words of earlier languages.
    """
    if problem := vocabulary_size_problem(size, "--size"):
        raise ConfigError(problem)
    if not texts:
        raise ConfigError(f"no captions to train a vocabulary for language {lang!r}")
    parent = parent if parent is not None else clip_vocabulary()
    counts = word_frequencies(texts)
    learned = train_bpe(counts, size, min_frequency)
    new_merges = learned
    if protected_texts:
        new_merges = drop_merges_changing(parent.tokenizer, learned, word_frequencies(protected_texts))
    tokens, merges, sizes = merge_vocabularies(parent.tokenizer.tokens, parent.tokenizer.merges, new_merges)
    sizes = replace(sizes, merges_learned=len(learned), merges_protected=len(learned) - len(new_merges))
    tokenizer = ClipBpeTokenizer(tokens, merges, parent.tokenizer.context_length)
    freq = np.zeros(len(tokens), np.int64)
    for piece, count in counts.items():
        np.add.at(freq, np.fromiter(tokenizer.encode_piece(piece), np.int64), count)
    prior = np.zeros(len(tokens), np.int64)
    prior[:sizes.old] = parent.counts_after_task()
    produced = int(np.count_nonzero(freq[sizes.old:]))
    task = {
        "lang": lang, "captions": len(texts), "new_vocab_size": sizes.new_vocab, "new_tokens": sizes.new,
        "new_tokens_produced": produced, "first_new_id": sizes.old, "merges_added": sizes.merges_total -
        sizes.merges_parent, "merges_protected": sizes.merges_protected, "min_frequency": min_frequency,
    }
    log(f"vocab {lang}: {len(texts)} captions, {len(counts)} distinct words; V̂ {sizes.new_vocab} tokens "
        f"({sizes.overlap} already known, {sizes.new} new, {produced} of them produced on the task text); "
        f"vocabulary {sizes.old} -> {sizes.total}")
    return Vocabulary(tokenizer, prior, freq, list(parent.tasks) + [task], sizes)


# ----------------------------------------------------------------------------------------------------------------
# The vocab artifact
# ----------------------------------------------------------------------------------------------------------------


def write_vocabulary(vocabulary: Vocabulary, out_dir: artifacts.PathLike, *, config=None,
                     inputs: Iterable[artifacts.PathLike] = ()) -> Path:
    """Write ``vocabulary`` as a vocab artifact (files listed in the module docstring)."""
    tokenizer = vocabulary.tokenizer
    with artifacts.ArtifactWriter(out_dir, "vocab", stage="build-vocab", config=config, inputs=inputs) as writer:
        lines = [MERGES_HEADER] + [f"{a} {b}" for a, b in tokenizer.merges]
        (writer.dir / MERGES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
        artifacts.write_json(writer.dir / VOCAB_FILE, tokenizer.encoder)
        np.save(writer.dir / PRIOR_COUNTS_FILE, vocabulary.prior_task_counts.astype(np.int64))
        np.save(writer.dir / TASK_FREQ_FILE, vocabulary.task_token_freq.astype(np.int64))
        writer.manifest.update(
            lang=vocabulary.tasks[-1]["lang"] if vocabulary.tasks else None,
            languages=vocabulary.languages,
            tasks=vocabulary.tasks,
            root=CLIP_ROOT_NAME,
            vocab_size=tokenizer.vocab_size,
            sizes=vocabulary.sizes,
            special_tokens={SOT_TOKEN: tokenizer.sot_token_id, EOT_TOKEN: tokenizer.eot_token_id},
            context_length=tokenizer.context_length,
        )
    return writer.path


def load_vocabulary(path: artifacts.PathLike | None) -> Vocabulary:
    """Read a vocab artifact (None gives CLIP's own vocabulary, the root of every chain)."""
    if path is None:
        return clip_vocabulary()
    path = Path(path)
    manifest = artifacts.read_manifest(path, "vocab")
    try:
        lines = (path / MERGES_FILE).read_text(encoding="utf-8").split("\n")
        encoder = json.loads((path / VOCAB_FILE).read_text(encoding="utf-8"))
        prior = np.load(path / PRIOR_COUNTS_FILE, allow_pickle=False)
        freq = np.load(path / TASK_FREQ_FILE, allow_pickle=False)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"cannot read the vocabulary files ({exc})", path)
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    tokens = sorted(encoder, key=encoder.__getitem__)
    if [encoder[t] for t in tokens] != list(range(len(tokens))):
        raise SchemaError(f"{VOCAB_FILE} ids are not 0..{len(tokens) - 1}", path)
    bad = next((m for m in merges if len(m) != 2 or m[0] + m[1] not in encoder), None)
    if bad is not None:
        raise SchemaError(f"{MERGES_FILE} has a merge whose result is not in the vocabulary: {' '.join(bad)!r}",
                          path)
    for name, array in ((PRIOR_COUNTS_FILE, prior), (TASK_FREQ_FILE, freq)):
        if array.shape != (len(tokens),) or not np.issubdtype(array.dtype, np.integer):
            raise SchemaError(f"{name} has shape {array.shape} and dtype {array.dtype}, expected "
                              f"integers of shape ({len(tokens)},)", path)
    try:
        sizes = MergeSizes(**manifest["sizes"]) if manifest.get("sizes") else None
        context_length = int(manifest.get("context_length", DEFAULT_CONTEXT_LENGTH))
        tasks = list(manifest.get("tasks", []))
    except (TypeError, ValueError):
        raise ArtifactError("manifest.json: malformed sizes, context_length or tasks", path) from None
    tokenizer = ClipBpeTokenizer(tokens, merges, context_length)
    return Vocabulary(tokenizer, prior.astype(np.int64), freq.astype(np.int64), tasks, sizes, path.resolve())


def load_tokenizer(path: artifacts.PathLike | None) -> ClipBpeTokenizer:
    """The tokenizer of a vocab artifact (None: CLIP's own). ``encode(text)`` gives ids without start/end."""
    return load_vocabulary(path).tokenizer


def select_captions(table: pa.Table, lang: str, split: str | None = "train",
                    source: artifacts.PathLike = "<captions>") -> list[str]:
    """The caption strings of one language (and split; None for all splits) of a captions table."""
    mask = pc.equal(table.column("lang"), lang)
    if split is not None:
        mask = pc.and_(mask, pc.equal(table.column("split"), split))
    selected = table.filter(mask).column("caption").to_pylist()
    if not selected:
        langs = sorted(set(table.column("lang").to_pylist()))
        splits = sorted(set(table.column("split").to_pylist()))
        raise ConfigError(f"no captions with lang={lang!r}" + (f" and split={split!r}" if split else "") +
                          f" (languages: {', '.join(langs)}; splits: {', '.join(splits)})", source)
    return selected


def build_vocab(captions: artifacts.PathLike | pa.Table, lang: str, out_dir: artifacts.PathLike, *,
                parent: artifacts.PathLike | None = None, size: int = DEFAULT_NEW_VOCAB_SIZE,
                split: str | None = "train", min_frequency: int = 2, protect_lang: str | None = None) -> Path:
    """``mltk build-vocab``: train V̂ on one language's captions (a captions artifact, Parquet file or table),
    merge it into ``parent`` (CLIP's vocabulary when None) and write the vocab artifact; returns its path.

    ``protect_lang`` (e.g. ``en``): keep the parent's ids for every word of that language's captions in the same
    table, all splits (see ``train_vocabulary``).
    """
    if isinstance(captions, pa.Table):
        table, source, inputs = artifacts.validate_captions(captions), "<captions table>", []
    else:
        table, source, inputs = artifacts.load_captions(captions), captions, [captions]
    config = {"lang": lang, "size": size, "split": split, "min_frequency": min_frequency,
              "protect_lang": protect_lang,
              "parent": str(Path(parent).resolve()) if parent is not None else CLIP_ROOT_NAME}
    inputs += [parent] if parent is not None else []
    existing = artifacts.reusable(out_dir, "vocab", stage="build-vocab", config=config, inputs=inputs)
    if existing is not None and inputs:  # a table handed in directly is not in the settings
        return existing
    texts = select_captions(table, lang, split, source)
    protected = select_captions(table, protect_lang, None, source) if protect_lang else []
    parent_vocabulary = load_vocabulary(parent)
    if lang in parent_vocabulary.languages:
        log(f"note: language {lang!r} was already a task of the parent vocabulary; learning it again")
    vocabulary = train_vocabulary(texts, lang, parent_vocabulary, size, min_frequency, protected)
    return write_vocabulary(vocabulary, out_dir, config=config, inputs=inputs)
