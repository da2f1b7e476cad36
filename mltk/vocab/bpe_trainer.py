"""Learning BPE merges on one language's text, CLIP style (the V̂_t of a CLL-CLIP task)."""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from mltk.vocab.tokenizer import SPECIAL_TOKENS, WORD_END, base_symbols, merge_pair, pre_tokenize


def word_frequencies(texts: Iterable[str]) -> Counter:
    """How often each byte-level pre-token occurs in ``texts`` (special-token strings are left out)."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(pre_tokenize(text))
    for special in SPECIAL_TOKENS:
        counts.pop(special, None)
    return counts


def train_bpe(word_counts: Mapping[str, int], size: int, min_frequency: int) -> list[tuple[str, str]]:
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
    return learn_merges(words, freqs, vocab, size, min_frequency)


def learn_merges(
    words: list[list[str]], freqs: list[int], vocab: set[str], size: int, min_frequency: int = 2
) -> list[tuple[str, str]]:
    """The merge loop of ``train_bpe`` on words already split into symbols (``words[i]`` occurs ``freqs[i]``
    times; ``vocab`` holds the base symbols and grows in place): merge the most frequent adjacent pair (ties: the
    lexicographically smallest) into the concatenation of its halves until ``vocab`` holds ``size`` tokens or no
    pair occurs ``min_frequency`` times. Shared by CLIP's byte-level BPE and the WordPiece trainer
    (``mltk.vocab.wordpiece``), which marks word starts so that plain concatenation keeps WordPiece's ``##``."""
    words = [list(word) for word in words]
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
            merged = merge_pair(word, *pair)
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
