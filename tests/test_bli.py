"""``evaluate --metric bli`` as AME scores its alignment: cosine nearest neighbour over all the model's target
words, both directions, out-of-vocabulary source words counted as misses; CSLS beside it as MUSE's convention;
scored in blocks so that a MUSE-scale dictionary never builds a queries x candidates matrix."""

from __future__ import annotations

import torch

from mltk.ame.bli import bli_scores, csls_scores, mean_top_k, nearest


def _unit(*values):
    return torch.nn.functional.normalize(torch.tensor(values, dtype=torch.float32), dim=0)


def test_an_out_of_vocabulary_source_word_is_a_miss():
    source = {"rot": _unit(1, 0), "blau": _unit(0, 1)}
    target = {"red": _unit(1, 0.1), "blue": _unit(0.1, 1)}
    pairs = [("rot", "red"), ("blau", "blue"), ("grün", "green")]  # grün: the model never saw it
    result = bli_scores(source, target, pairs)
    assert result["source_words"] == 3 and result["out_of_vocabulary"] == 1 and result["queries"] == 2
    assert abs(result["P@1"] - 200 / 3) < 1e-9  # 2 of 3, not 2 of 2
    assert result["P@1_csls"] == 100.0  # MUSE's convention scores the known queries only
    assert result["target_words"] == 3 and result["out_of_vocabulary_reverse"] == 1  # green: unknown in English


def test_candidates_are_all_the_models_words_not_only_the_lexicons():
    source = {"rot": _unit(1, 0)}
    target = {"red": _unit(1, 0.5), "crimson": _unit(1, 0.1)}  # crimson is nearer and in no lexicon pair
    result = bli_scores(source, target, [("rot", "red")])
    assert result["P@1"] == 0.0 and result["candidates"] == 2


def test_both_directions_are_reported():
    source = {"rot": _unit(1, 0), "rote": _unit(1, 0.05)}
    target = {"red": _unit(1, 0.04)}
    result = bli_scores(source, target, [("rot", "red"), ("rote", "red")])
    assert result["P@1"] == 100.0  # each German form finds red
    assert result["P@1_reverse"] == 100.0 and result["target_words"] == 1  # red finds rote, one of its sources
    assert bli_scores(source, target, [("rot", "red")])["P@1_reverse"] == 0.0  # rote is nearer, not a translation


def test_blocks_give_the_unblocked_result_on_a_large_lexicon():
    """8,000 pairs over 5,000 x 6,000 words: the old code held full 5,000 x 6,000 matrices (several, 120 MB each);
    blocks of 331 give the same numbers as one block."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randn(5000, 32, generator=generator)
    tgt = torch.randn(6000, 32, generator=generator)
    truth = torch.randint(0, 6000, (5000,), generator=generator)
    src[:2500] = tgt[truth[:2500]] + 0.8 * torch.randn(2500, 32, generator=generator)  # half are near a translation
    source = {f"s{i}": v for i, v in enumerate(src)}
    target = {f"t{j}": v for j, v in enumerate(tgt)}
    pairs = [(f"s{i}", f"t{int(truth[i])}") for i in range(5000)]
    pairs += [(f"s{i}", f"t{(int(truth[i]) + 1) % 6000}") for i in range(3000)]
    pairs += [(f"oov{i}", "t0") for i in range(10)]
    small, whole = bli_scores(source, target, pairs, chunk=331), bli_scores(source, target, pairs, chunk=10**6)
    assert small == whole
    assert 40 < small["P@1"] < 60 and small["out_of_vocabulary"] == 10


def test_blocked_helpers_equal_the_whole_matrix():
    generator = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(300, 8, generator=generator), dim=-1)
    y = torch.nn.functional.normalize(torch.randn(400, 8, generator=generator), dim=-1)
    cos = x @ y.T
    assert torch.allclose(mean_top_k(x, y, 10, chunk=7), cos.topk(10, dim=1).values.mean(1), atol=1e-6)
    assert torch.equal(nearest(x, y, chunk=7), cos.argmax(dim=1))
    r_target, r_source = mean_top_k(x, y, 10, chunk=7), mean_top_k(y, x, 10, chunk=7)
    assert torch.equal(nearest(x, y, 7, r_target, r_source), csls_scores(x, y, 10).argmax(dim=1))
