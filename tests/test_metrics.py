"""Retrieval metrics against small hand-computed cases: ranks by counting, ties, several captions per image,
missing languages, MRV (the worked example of the design notes), caption-to-caption retrieval, continual metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mltk.core.errors import ConfigError
from mltk.metrics import ranks as M
from mltk.metrics.retrieval import evaluate_retrieval

# Scores of 3 images (rows) against 5 captions (columns); captions 0, 1 describe image 0, caption 2 image 1,
# captions 3, 4 image 2. With one-hot image vectors, the caption vectors are the columns: S = eye(3) @ R.T.
SCORES = np.array(
    [
        [0.9, 0.2, 0.95, 0.1, 0.3],
        [0.1, 0.5, 0.8, 0.7, 0.2],
        [0.3, 0.6, 0.4, 0.9, 0.5],
    ],
    dtype=np.float32,
)
OWNERS = [0, 0, 1, 2, 2]


def test_ranks_count_scores_above_the_best_caption_and_the_one_image():
    image_ranks, caption_ranks = M.bidirectional_ranks(np.eye(3, dtype=np.float32), SCORES.T, OWNERS)
    # image 0: best own caption 0.9, only caption 2 (0.95) above it; images 1 and 2 have their best on top.
    assert image_ranks.tolist() == [1, 0, 0]
    # caption 1's image scores 0.2 in a column [0.2, 0.5, 0.6]: two images above; caption 2: 0.95 above 0.8.
    assert caption_ranks.tolist() == [0, 2, 1, 0, 0]


def test_recall_and_ranks_from_hand_computed_ranks():
    i2t = M.rank_summary([1, 0, 0])
    t2i = M.rank_summary([0, 2, 1, 0, 0])
    assert i2t == pytest.approx({"R@1": 200 / 3, "R@5": 100.0, "R@10": 100.0, "median_rank": 1.0, "mean_rank": 4 / 3})
    assert t2i == pytest.approx({"R@1": 60.0, "R@5": 100.0, "R@10": 100.0, "median_rank": 1.0, "mean_rank": 1.6})
    assert M.average_recall(i2t, t2i) == pytest.approx((200 / 3 + 100 + 100 + 60 + 100 + 100) / 6)
    assert M.recall_at_k([0, 3, 7, 12], 5) == 50.0
    assert M.recall_at_k([0, 3, 7, 12], (1, 5, 10)) == {"R@1": 25.0, "R@5": 50.0, "R@10": 75.0}
    assert M.rank_summary([0, 3, 7, 12])["median_rank"] == 6.0  # 1-based ranks 1, 4, 8, 13


def test_ties_count_against_the_ground_truth_and_are_flagged():
    scores = np.array([[0.5, 0.5, 0.75, 0.25], [0.5, 0.25, 0.5, 0.5]], dtype=np.float32)
    result = M.rank_both_directions(np.eye(2, dtype=np.float32), scores.T, [0, 1, 1, 0])
    # image 0 owns captions 0 and 3 (best 0.5): caption 1 ties at 0.5 and counts, as does caption 2 (0.75).
    # image 1 owns captions 1 and 2 (best 0.5, its own captions do not push each other down): captions 0 and 3
    # tie at 0.5 and both count.
    assert result.left.tolist() == [2, 2] and result.left_tied.tolist() == [True, True]
    # caption 0 (image 0, 0.5) ties with image 1: rank 1. Captions 1 (0.25 < 0.5), 2 (0.5 < 0.75) and
    # 3 (0.25 < 0.5) each have the other image strictly above, without a tie.
    assert result.right.tolist() == [1, 1, 1, 1] and result.right_tied.tolist() == [True, False, False, False]
    assert M.ranks_from_scores(scores, [[0, 3], [1, 2]]).tolist() == [2, 2]
    assert [r.tolist() for r in M.bidirectional_ranks(np.eye(2, dtype=np.float32), scores.T, [0, 1, 1, 0])] == [
        [2, 2],
        [1, 1, 1, 1],
    ]


def engine_inputs(engine: str, *arrays: np.ndarray) -> list:
    """The ranking engine's inputs for ``engine``: numpy arrays (the CPU's numpy pass) or torch tensors (the torch
    pass, as on CUDA)."""
    return [torch.from_numpy(a) if engine == "torch" else a for a in arrays]


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_chunked_ranks_equal_a_full_matrix_reference(engine):
    rng = np.random.default_rng(0)
    images = rng.standard_normal((97, 8)).astype(np.float32)
    captions = rng.standard_normal((300, 8)).astype(np.float32)
    owners = rng.integers(0, 90, size=300)  # images 90..96 own no caption
    threads = torch.get_num_threads()
    image_ranks, caption_ranks = M.bidirectional_ranks(
        *engine_inputs(engine, images, captions), owners, chunk_mb=0.01
    )  # 8-row chunks
    assert torch.get_num_threads() == threads  # the one-thread pre-pass gives the caller's threads back
    scores = torch.from_numpy(images) @ torch.from_numpy(captions).T
    expected_images = M.ranks_from_scores(scores, [np.flatnonzero(owners == i) for i in range(97)])
    expected_captions = M.ranks_from_scores(scores.T, [[o] for o in owners])
    assert image_ranks.tolist() == expected_images.tolist()
    assert caption_ranks.tolist() == expected_captions.tolist()
    assert (image_ranks[90:] == -1).all()


def test_the_numpy_and_torch_passes_give_the_same_ranks_and_ties():
    """Quantised vectors make many exact ties: both engines count them alike, in both directions."""
    rng = np.random.default_rng(2)
    images = np.round(rng.standard_normal((60, 4)) * 2).astype(np.float32) / 2
    captions = np.round(rng.standard_normal((240, 4)) * 2).astype(np.float32) / 2
    owners = rng.integers(0, 60, size=240)
    results = [
        M.rank_both_directions(*engine_inputs(engine, images, captions), owners, chunk_mb=0.005)
        for engine in ("numpy", "torch")
    ]
    assert results[0].right_tied.any() and results[0].left_tied.any()
    for field in ("left", "right", "left_tied", "right_tied"):
        assert getattr(results[0], field).tolist() == getattr(results[1], field).tolist()


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_a_ground_truth_score_that_differs_in_the_last_bit_is_re_ranked(monkeypatch, engine):
    """If the small pre-pass products disagree with the big one (another BLAS kernel), ranks stay exact."""
    rng = np.random.default_rng(1)
    images = rng.standard_normal((40, 6)).astype(np.float32)
    captions = rng.standard_normal((120, 6)).astype(np.float32)
    owners = np.arange(120) // 3
    original = M._owner_scores

    def one_bit_lower(*args, **kwargs):
        scores = original(*args, **kwargs)
        if isinstance(scores, torch.Tensor):
            return torch.nextafter(scores, torch.tensor(-math.inf))
        return np.nextafter(scores, np.float32(-np.inf))

    monkeypatch.setattr(M, "_owner_scores", one_bit_lower)
    _, caption_ranks = M.bidirectional_ranks(*engine_inputs(engine, images, captions), owners, chunk_mb=0.01)
    scores = torch.from_numpy(images) @ torch.from_numpy(captions).T
    assert caption_ranks.tolist() == M.ranks_from_scores(scores.T, [[o] for o in owners]).tolist()


def test_mrv_worked_example_from_the_design_notes():
    ranks = [[0, 2], [1, 1], [0, 4]]
    assert M.mean_rank_variance(ranks) == pytest.approx(5 / 3)
    assert M.mean_rank_variance(ranks, "code") == pytest.approx(1.0)
    # shift-invariant: 1-based ranks give the same values
    assert M.mean_rank_variance(np.array(ranks) + 1) == pytest.approx(5 / 3)
    # an instance missing a language (NaN) is left out
    assert M.mean_rank_variance([[0, 2], [1, 1], [0, 4], [3, math.nan]]) == pytest.approx(5 / 3)
    with pytest.raises(ValueError):
        M.mean_rank_variance(ranks, "median")


def test_align_instance_ranks_matches_ids_not_positions():
    matrix, ids, excluded = M.align_instance_ranks(
        {
            "en": (["a", "b", "c"], [0, 1, 0]),
            "de": (["b", "a"], [1, 2]),  # other order, no "c"
        }
    )
    assert ids == ["a", "b"] and excluded == 1
    assert matrix.tolist() == [[0, 2], [1, 1]]


def _two_language_world():
    """3 one-hot images; en has a caption for every image, de lacks image 2 (hand-computed ranks in the test)."""
    image_table = {"id": ["i0", "i1", "i2"]}
    image_vectors = np.eye(3, dtype=np.float32)
    text_vectors = np.array(
        [
            [0.9, 0.1, 0.2],  # en a -> i0
            [0.3, 0.2, 0.8],  # en b -> i1
            [0.1, 0.4, 0.7],  # en c -> i2
            [0.2, 0.6, 0.0],  # de a -> i0
            [0.0, 0.9, 0.3],  # de b -> i1
        ],
        dtype=np.float32,
    )
    text_table = {
        "id": ["en-a", "en-b", "en-c", "de-a", "de-b"],
        "image_id": ["i0", "i1", "i2", "i0", "i1"],
        "lang": ["en", "en", "en", "de", "de"],
        "caption_id": ["a", "b", "c", "a", "b"],
    }
    return image_table, image_vectors, text_table, text_vectors


def test_evaluate_retrieval_per_language_and_mrv_with_a_missing_language():
    result = evaluate_retrieval(*_two_language_world(), metrics=("recall", "mrv"))
    en, de = result["per_language"]["en"], result["per_language"]["de"]
    # en: i2t ranks [0, 1, 1], t2i ranks [0, 2, 0]
    assert en["i2t"] == pytest.approx(
        {"R@1": 100 / 3, "R@5": 100.0, "R@10": 100.0, "median_rank": 2.0, "mean_rank": 5 / 3}
    )
    assert en["t2i"] == pytest.approx(
        {"R@1": 200 / 3, "R@5": 100.0, "R@10": 100.0, "median_rank": 1.0, "mean_rank": 5 / 3}
    )
    # de: image 2 has no de caption, so 2 i2t queries, ranks [0, 0]; t2i ranks [1, 0]
    assert de["i2t"]["R@1"] == 100.0 and de["t2i"]["R@1"] == 50.0 and de["t2i"]["median_rank"] == 1.5
    assert result["settings"]["counts"]["per_language"]["de"] == {"i2t_queries": 2, "t2i_queries": 2}
    mrv = result["mrv"]
    # i2t instances i0 (0, 0) and i1 (1, 0): variances 0, 0.25; t2i a (0, 1), b (2, 0): variances 0.25, 1
    assert mrv["i2t"] == pytest.approx(0.125) and mrv["t2i"] == pytest.approx(0.625)
    assert mrv["instances"] == {"i2t": 2, "t2i": 2} and mrv["excluded_instances"] == {"i2t": 1, "t2i": 1}
    code = evaluate_retrieval(*_two_language_world(), metrics=("mrv",), mrv_variant="code")["mrv"]
    assert code["i2t"] == pytest.approx(0.25) and code["t2i"] == pytest.approx(0.75)
    assert "pessimistic" in result["settings"]["tie_rule"] and "1-based" in result["settings"]["rank_base"]


def test_caption_to_caption_retrieval_between_two_languages():
    # en captions are one-hot, so S[en_i, de_j] = de_j[i]
    text_vectors = np.vstack(
        [
            np.eye(3, dtype=np.float32),
            np.array(
                [
                    [0.5, 0.9, 0.1],  # de a
                    [0.8, 0.6, 0.2],  # de b
                    [0.1, 0.3, 0.9],
                ],
                dtype=np.float32,
            ),
        ]
    )  # de c
    text_table = {
        "id": [f"{lang}{c}" for lang in ("en", "de") for c in "abc"],
        "image_id": ["i0", "i1", "i2"] * 2,
        "lang": ["en"] * 3 + ["de"] * 3,
        "caption_id": ["a", "b", "c"] * 2,
    }
    result = evaluate_retrieval(
        {"id": ["i0", "i1", "i2"]}, np.eye(3, dtype=np.float32), text_table, text_vectors, metrics=("c2c",)
    )
    pair = result["c2c"]["de-en"]
    # en a: de scores [0.5, 0.8, 0.1], its translation 0.5 -> rank 1; en b: [0.9, 0.6, 0.3] -> rank 1; en c -> 0
    assert pair["en->de"]["R@1"] == pytest.approx(100 / 3) and pair["en->de"]["mean_rank"] == pytest.approx(5 / 3)
    # de a scores en [0.5, 0.9, 0.1] -> rank 1; de b [0.8, 0.6, 0.2] -> rank 1; de c -> 0
    assert pair["de->en"]["R@1"] == pytest.approx(100 / 3) and pair["queries"] == {"en->de": 3, "de->en": 3}


def test_evaluate_retrieval_rejects_bad_input():
    image_table, image_vectors, text_table, text_vectors = _two_language_world()
    with pytest.raises(ConfigError, match="at least 2 languages"):
        evaluate_retrieval(image_table, image_vectors, text_table, text_vectors, metrics=("mrv",), languages=["en"])
    with pytest.raises(ConfigError, match="unknown --metric"):
        evaluate_retrieval(image_table, image_vectors, text_table, text_vectors, metrics=("ndcg",))
    orphan = dict(text_table, image_id=["i0", "i1", "i9", "i0", "i1"])
    with pytest.raises(Exception, match="i9"):
        evaluate_retrieval(image_table, image_vectors, orphan, text_vectors)


def test_continual_metrics_hand_computed():
    nan = math.nan
    result = M.continual_metrics([[50, nan, nan], [40, 60, nan], [45, 30, 70]])
    assert result["AR"] == pytest.approx([50, 50, (45 + 30 + 70) / 3])
    # F_1 = a00 - a10 = 10; F_2 = mean(max(50-45, 40-45), max(60-30)) = mean(5, 30)
    assert result["F"][0] is None
    assert result["F"][1:] == pytest.approx([10, 17.5])
    assert result["matrix"][0] == [50, None, None]


def test_continual_forgetting_ignores_zero_shot_values_before_a_task_is_learnt():
    # a[0][1] = 70 is task 1 measured zero-shot before it was trained: not a value it can forget (k in [i, j-1])
    result = M.continual_metrics([[50, 70, 10], [40, 60, 20], [45, 40, 70]])
    # F_2 = mean(max(50-45, 40-45), 60-40) = mean(5, 20) = 12.5 (every k < j would give max(70-40, 20) = 30: 17.5)
    assert result["F"][1:] == pytest.approx([10, 12.5])
    assert result["AR"][2] == pytest.approx((45 + 40 + 70) / 3)


def test_split_selection_follows_the_table_that_has_splits():
    image_table, image_vectors, text_table, text_vectors = _two_language_world()
    images_without_splits = dict(image_table, split=["", "", ""])  # encoded from a folder: no split known
    texts_with_splits = dict(text_table, split=["test", "test", "train", "test", "test"])
    result = evaluate_retrieval(images_without_splits, image_vectors, texts_with_splits, text_vectors, split="test")
    # image i2 is only described by a train caption, so the gallery is {i0, i1}
    assert result["settings"]["counts"]["images"] == 2
    assert result["settings"]["counts"]["per_language"]["en"] == {"i2t_queries": 2, "t2i_queries": 2}
    with pytest.raises(ConfigError, match="neither"):
        evaluate_retrieval(image_table, image_vectors, text_table, text_vectors, split="test")
