"""WordPiece growth that never changes how the words of earlier tasks split.

WordPiece segments a word by greedy longest match (``tokenizers``' ``WordPiece`` model): from position i it takes
the longest vocabulary piece that matches there (``##``-prefixed after the word's start), moves past it, and
repeats; a word with a position where nothing matches becomes ``[UNK]`` as a whole. Appending pieces to the
vocabulary can therefore re-segment an earlier language's word: after a German task ``hundred`` went from
``h ##u ##nd ##r ##e ##d`` to ``hund ##r ##e ##d``, changing ids the earlier tasks' rows were trained for, a
forgetting that TEIR's per-row regularisation cannot see.

The rule that prevents it (``keep_segmentations``): walk each protected word with the parent vocabulary, noting at
every position i it visits the length L_i of the piece it takes there (0 where the walk fails). A new piece p
changes the word only if it is chosen at one of these positions, which greedy matching does exactly when p matches
the word at i and is longer than L_i. So a new piece is kept iff, for every protected word and every visited
position i, it is not ``word[i:i+k]`` (with ``##`` when i > 0) for some k > L_i. Every walk then visits the same
positions and takes the same pieces as before: the protected words keep their ids exactly, whatever else the new
vocabulary holds. Pieces that only occur elsewhere (the new language's own words) are unaffected.

The protected words are the words (after the tower's normaliser and pre-tokeniser) of every earlier task's
training text, recorded in the vocabulary artifact (``protected_words.json``) and extended by each task, plus the
words of ``--protect-lang``'s captions when given. Words of an earlier language that occur only in its validation
or test text are not recorded, so those could still split differently.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

WORDPIECE_GROWTH = ("keep", "resegment")  # protect earlier tasks' words (default), or plain V_{t-1} ∪ V̂_t
MAX_WORD_CHARS = 100  # tokenizers' WordPiece max_input_chars_per_word: longer words are [UNK] whatever the vocabulary


def greedy_walk(word: str, vocab: Collection[str], prefix: str = "##") -> list[tuple[int, int]]:
    """The positions greedy longest match visits in ``word`` with ``vocab`` and the length of the piece taken at
    each: ``[(i, L_i), ...]``; where nothing matches the walk ends with ``(i, 0)`` (the word is then [UNK])."""
    visited, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and ((prefix if start else "") + word[start:end]) not in vocab:
            end -= 1
        visited.append((start, end - start))
        if end == start:
            break
        start = end
    return visited


def segmentation(word: str, vocab: Collection[str], prefix: str = "##") -> list[str] | None:
    """The pieces of ``word`` by greedy longest match (None: [UNK])."""
    if len(word) > MAX_WORD_CHARS:
        return None
    walk = greedy_walk(word, vocab, prefix)
    if walk and walk[-1][1] == 0:
        return None
    return [(prefix if i else "") + word[i : i + length] for i, length in walk]


def changing_pieces(
    candidates: Iterable[str], protected_words: Iterable[str], vocab: Collection[str], prefix: str = "##"
) -> set[str]:
    """The candidate pieces that greedy longest match would take at some position of some protected word where the
    parent vocabulary ``vocab`` takes a shorter piece (or none): the pieces that would re-segment it."""
    candidates = set(candidates)
    if not candidates:
        return set()
    longest = max(len(c) for c in candidates)
    changing: set[str] = set()
    for word in protected_words:
        if len(word) > MAX_WORD_CHARS:
            continue  # [UNK] by length, which no new piece changes
        for start, length in greedy_walk(word, vocab, prefix):
            head = prefix if start else ""
            for end in range(start + length + 1, min(len(word), start + longest) + 1):
                piece = head + word[start:end]
                if piece in candidates:
                    changing.add(piece)
    return changing


def keep_segmentations(
    new_pieces: Sequence[str], protected_words: Iterable[str], vocab: Collection[str], prefix: str = "##"
) -> tuple[list[str], list[str]]:
    """``(kept, dropped)``: the new pieces (in order) that leave every protected word's segmentation with ``vocab``
    unchanged, and those that would change one."""
    changing = changing_pieces(new_pieces, protected_words, vocab, prefix)
    return [p for p in new_pieces if p not in changing], [p for p in new_pieces if p in changing]
