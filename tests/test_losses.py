"""mltk.losses (one class per loss, ``LossOutput`` with named terms) against values computed here in plain Python
(math, lists), never by the same formula in torch."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mltk import losses
from mltk.core.errors import ConfigError

# ---------------------------------------------------------------------------------------------------------------
# Plain-Python reference arithmetic
# ---------------------------------------------------------------------------------------------------------------


def dot(u, v):
    return sum(x * y for x, y in zip(u, v))


def unit(u):
    norm = math.sqrt(dot(u, u))
    return [x / norm for x in u]


def neg_log_softmax(row, index):
    return -(row[index] - math.log(sum(math.exp(x) for x in row)))


def py_info_nce(a, b, scale):
    logits = [[scale * dot(x, y) for y in b] for x in a]
    columns = [list(col) for col in zip(*logits)]
    a_to_b = sum(neg_log_softmax(logits[i], i) for i in range(len(a))) / len(a)
    b_to_a = sum(neg_log_softmax(columns[i], i) for i in range(len(a))) / len(a)
    return (a_to_b + b_to_a) / 2


def py_hinge(x, y, margin, max_violation=False):
    n = len(x)
    s = [[dot(x[i], y[j]) for j in range(n)] for i in range(n)]
    rows = [[max(0.0, margin - s[i][i] + s[i][j]) for j in range(n) if j != i] for i in range(n)]
    cols = [[max(0.0, margin - s[i][i] + s[j][i]) for j in range(n) if j != i] for i in range(n)]
    if max_violation:
        return sum(max(r) for r in rows) + sum(max(c) for c in cols)
    return sum(map(sum, rows)) + sum(map(sum, cols))


def py_one_to_k_terms(images, captions, temperature, present):
    """captions[j][k] = caption of image j in language k; present[j][k] bool.
    Returns (per-image sums of -log p_i2t over own positives, per-image present counts, list of t2i CE)."""
    columns = [(i, k) for i in range(len(captions)) for k in range(len(captions[i])) if present[i][k]]
    i2t_sums, counts, t2i = [], [], []
    for j, v in enumerate(images):
        row = [dot(v, captions[i][k]) / temperature for i, k in columns]
        own = [c for c, (i, _) in enumerate(columns) if i == j]
        i2t_sums.append(sum(neg_log_softmax(row, c) for c in own))
        counts.append(len(own))
    for i, k in columns:
        column = [dot(v, captions[i][k]) / temperature for v in images]
        t2i.append(neg_log_softmax(column, i))
    return i2t_sums, counts, t2i


def tensor(values):
    return torch.tensor(values, dtype=torch.float64)


# Tiny fixtures: 2-dim unit vectors, B = 2 or 3, K = 2
IMAGES = [[1.0, 0.0], [0.0, 1.0], unit([1.0, 1.0])]
CAPTIONS = [  # [B=3][K=2][D=2]
    [[0.6, 0.8], [1.0, 0.0]],
    [[0.8, 0.6], [0.0, 1.0]],
    [unit([1.0, 2.0]), [-0.6, 0.8]],
]

# ---------------------------------------------------------------------------------------------------------------
# InfoNCE
# ---------------------------------------------------------------------------------------------------------------


def test_info_nce_closed_form_on_a_symmetric_pair():
    # logits = 2 * [[0.6, 0.8], [0.8, 0.6]]: every row and column is softmax([1.2, 1.6]) with the target on 1.2
    a, b = tensor([[1.0, 0.0], [0.0, 1.0]]), tensor([[0.6, 0.8], [0.8, 0.6]])
    assert losses.info_nce(a, b, 2.0).item() == pytest.approx(math.log(1 + math.exp(0.4)), abs=1e-12)


def test_info_nce_matches_hand_computed_on_three_asymmetric_pairs():
    a = IMAGES
    b = [CAPTIONS[0][0], CAPTIONS[1][1], CAPTIONS[2][1]]
    assert losses.info_nce(tensor(a), tensor(b), 3.0).item() == pytest.approx(py_info_nce(a, b, 3.0), abs=1e-12)
    # the two directions differ here, so a transposed implementation would not pass: check one direction alone
    logits = [[3.0 * dot(x, y) for y in b] for x in a]
    a_to_b = sum(neg_log_softmax(logits[i], i) for i in range(3)) / 3
    assert a_to_b != pytest.approx(py_info_nce(a, b, 3.0), abs=1e-3)


def test_info_nce_loss_with_a_fixed_scale_buffer_at_100():
    scale = losses.LogitScale(0.01, learnable=False)
    assert list(scale.parameters()) == []
    assert float(scale()) == pytest.approx(100.0)
    a, b = tensor(IMAGES).float(), tensor([c[0] for c in CAPTIONS]).float()
    expected = py_info_nce(IMAGES, [c[0] for c in CAPTIONS], 100.0)
    loss, terms = losses.InfoNCELoss()(a, b, scale())
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert list(terms) == ["infonce"] and terms["infonce"] is loss


def test_learnable_logit_scale_starts_at_one_over_007_and_is_clamped_at_100():
    scale = losses.LogitScale(0.07, learnable=True)
    assert float(scale.log_scale.detach()) == pytest.approx(math.log(1 / 0.07))
    assert scale.temperature == pytest.approx(0.07)
    assert float(losses.LogitScale(0.001, learnable=True)().detach()) == pytest.approx(100.0)
    with pytest.raises(ConfigError):
        losses.LogitScale(0.0)


# ---------------------------------------------------------------------------------------------------------------
# 1-to-K
# ---------------------------------------------------------------------------------------------------------------


def test_one_to_k_paper_weighting_matches_hand_computed():
    images, captions, temperature = IMAGES[:2], CAPTIONS[:2], 0.5
    # spelled out for B = 2, K = 2: image j's row holds its 2 positives and the other image's 2 captions
    row0 = [dot(images[0], c) / temperature for c in captions[0] + captions[1]]
    i2t_image0 = (neg_log_softmax(row0, 0) + neg_log_softmax(row0, 1)) / 2
    row1 = [dot(images[1], c) / temperature for c in captions[0] + captions[1]]
    i2t_image1 = (neg_log_softmax(row1, 2) + neg_log_softmax(row1, 3)) / 2
    t2i = []
    for i in range(2):
        for k in range(2):
            column = [dot(v, captions[i][k]) / temperature for v in images]
            t2i.append(neg_log_softmax(column, i))
    expected = ((i2t_image0 + i2t_image1) / 2 + sum(t2i) / 4) / 2

    got = losses.one_to_k_contrastive(tensor(images), tensor(captions), temperature)
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_one_to_k_code_weighting_is_the_authors_sum_over_both_directions_divided_by_k():
    temperature, present = 0.2, [[True, True]] * 3
    i2t_sums, _, t2i = py_one_to_k_terms(IMAGES, CAPTIONS, temperature, present)
    i2t = sum(i2t_sums) / 3  # unit weight on each of the K positives (the code's labels), mean over images
    t2i_mean = sum(t2i) / len(t2i)
    slots = 2
    expected = (i2t + t2i_mean) / 2 / slots  # res_loss = (loss_i2t + loss_t2i) / 2, then / tsz

    got = losses.one_to_k_contrastive(tensor(IMAGES), tensor(CAPTIONS), temperature, weighting="code")
    assert got.item() == pytest.approx(expected, abs=1e-12)
    # equivalently: the paper's image->text half plus text->image down-weighted by 1/K
    paper_i2t = sum(s / slots for s in i2t_sums) / 3
    assert got.item() == pytest.approx(paper_i2t / 2 + t2i_mean / (2 * slots), abs=1e-12)
    paper = losses.one_to_k_contrastive(tensor(IMAGES), tensor(CAPTIONS), temperature)
    assert paper.item() == pytest.approx((paper_i2t + t2i_mean) / 2, abs=1e-12)


def test_one_to_k_with_missing_languages_matches_hand_computed():
    temperature = 0.3
    present = [[True, False], [True, True], [False, True]]
    i2t_sums, counts, t2i = py_one_to_k_terms(IMAGES, CAPTIONS, temperature, present)
    assert counts == [1, 2, 1]
    expected = (sum(s / c for s, c in zip(i2t_sums, counts)) / 3 + sum(t2i) / 4) / 2

    got = losses.one_to_k_contrastive(tensor(IMAGES), tensor(CAPTIONS), temperature, torch.tensor(present))
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_one_to_k_leaves_images_without_captions_out_of_the_image_to_text_mean():
    temperature = 0.3
    present = [[True, True], [True, True], [False, False]]
    i2t_sums, counts, t2i = py_one_to_k_terms(IMAGES, CAPTIONS, temperature, present)
    expected = (sum(s / c for s, c in zip(i2t_sums[:2], counts[:2])) / 2 + sum(t2i) / 4) / 2
    got = losses.one_to_k_contrastive(tensor(IMAGES), tensor(CAPTIONS), temperature, torch.tensor(present))
    assert got.item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weighting", ["paper", "code"])
def test_one_to_k_with_one_language_equals_info_nce(weighting):
    generator = torch.Generator().manual_seed(0)
    image = F.normalize(torch.randn(5, 8, generator=generator, dtype=torch.float64), dim=-1)
    text = F.normalize(torch.randn(5, 1, 8, generator=generator, dtype=torch.float64), dim=-1)
    got = losses.one_to_k_contrastive(image, text, 0.07, weighting=weighting)
    assert got.item() == pytest.approx(losses.info_nce(image, text[:, 0], 1 / 0.07).item(), abs=1e-12)


@pytest.mark.parametrize("garbage", [1e6, float("nan"), float("inf")])
def test_masked_languages_change_nothing_even_when_garbage(garbage):
    generator = torch.Generator().manual_seed(1)
    image = F.normalize(torch.randn(4, 6, generator=generator, dtype=torch.float64), dim=-1)
    text = F.normalize(torch.randn(4, 3, 6, generator=generator, dtype=torch.float64), dim=-1)
    mask = torch.tensor([[1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1]], dtype=torch.bool)
    garbled = torch.where(mask.unsqueeze(-1), text, torch.full_like(text, garbage))

    def loss_and_grads(features, weighting):
        image_leaf, text_leaf = image.clone().requires_grad_(), features.clone().requires_grad_()
        loss = losses.one_to_k_contrastive(image_leaf, text_leaf, 0.1, mask, weighting)
        loss.backward()
        return loss.detach(), image_leaf.grad, text_leaf.grad

    for weighting in ("paper", "code"):
        clean, garbled_result = loss_and_grads(text, weighting), loss_and_grads(garbled, weighting)
        torch.testing.assert_close(garbled_result[0], clean[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(garbled_result[1], clean[1], rtol=0, atol=1e-12)
        torch.testing.assert_close(garbled_result[2], clean[2], rtol=0, atol=1e-12)
        assert bool((garbled_result[2][~mask] == 0).all())


def test_one_to_k_memory_is_linear_in_k():
    """The largest tensor autograd keeps is the [B, B*K] logits (or the [B, K, D] input), never [B*K, B*K]."""
    batch, slots, dim = 4, 8, 2
    image = F.normalize(torch.randn(batch, dim), dim=-1).requires_grad_()
    text = F.normalize(torch.randn(batch, slots, dim), dim=-1).requires_grad_()
    largest = 0

    def pack(saved):
        nonlocal largest
        largest = max(largest, saved.numel())
        return saved

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
        losses.OneToKLoss(0.07)(image, text).loss.backward()
    assert largest == batch * batch * slots  # 128; a K x K blow-up would save (B*K)^2 = 1024


def test_one_to_k_rejects_an_unknown_weighting_and_bad_shapes():
    with pytest.raises(ConfigError, match="weighting"):
        losses.OneToKLoss(0.07, weighting="average")
    with pytest.raises(ValueError, match="\\[B, K, D\\]"):
        losses.one_to_k_contrastive(tensor(IMAGES), tensor(IMAGES), 0.07)
    with pytest.raises(ValueError, match="text_mask"):
        losses.one_to_k_contrastive(tensor(IMAGES), tensor(CAPTIONS), 0.07, torch.ones(3, 3, dtype=torch.bool))


def test_gradient_reaches_every_learnable_temperature():
    generator = torch.Generator().manual_seed(2)
    image = F.normalize(torch.randn(4, 5, generator=generator), dim=-1)
    text = F.normalize(torch.randn(4, 3, 5, generator=generator), dim=-1)
    own_scale, given_scale = losses.LogitScale(0.07), losses.LogitScale(0.07)
    scales_and_calls = [  # the contrastive losses of CCR_k own their scale; InfoNCE and CLL-CLIP are given one
        (lambda m: m.logit_scale, losses.OneToKLoss(0.07), lambda m: m(image, text)),
        (lambda m: m.logit_scale, losses.OneToKLoss(0.07, weighting="code"), lambda m: m(image, text)),
        (
            lambda m: m.logit_scale,
            losses.OneToOneLoss(0.07),
            lambda m: m(image, text, generator=torch.Generator().manual_seed(0)),
        ),
        (lambda m: own_scale, losses.InfoNCELoss(), lambda m: m(image, text[:, 0], own_scale())),
        (
            lambda m: given_scale,
            losses.CLLCLIPLoss(0.01, 1.0),
            lambda m: m(image * 3, text[:, 0] * 2, text[:, 1], given_scale()),
        ),
    ]
    for scale_of, module, call in scales_and_calls:
        call(module).loss.backward()
        grad = scale_of(module).log_scale.grad
        assert grad is not None and torch.isfinite(grad) and float(grad) != 0.0, type(module).__name__


def test_contrastive_losses_name_their_term_and_their_scale():
    image, text = tensor(IMAGES), tensor(CAPTIONS)
    for module, name in ((losses.OneToKLoss(0.5), "one_to_k"), (losses.OneToOneLoss(0.5), "one_to_one")):
        loss, terms = module.double()(image, text, torch.tensor([[True, False]] * 3))
        assert list(terms) == [name, "logit_scale"] and terms[name] is loss
        assert terms["logit_scale"].item() == pytest.approx(2.0, rel=1e-6)
    # one present language per image: 1-to-K and 1-to-1 are the same InfoNCE at T = 0.5
    expected = py_info_nce(IMAGES, [c[0] for c in CAPTIONS], 2.0)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# 1-to-1 baseline
# ---------------------------------------------------------------------------------------------------------------


def test_one_to_one_matches_hand_computed_when_one_language_is_present_per_image():
    present = [[False, True], [True, False], [False, True]]
    chosen = [CAPTIONS[0][1], CAPTIONS[1][0], CAPTIONS[2][1]]
    expected = py_info_nce(IMAGES, chosen, 1 / 0.25)
    got = losses.one_to_one_contrastive(
        tensor(IMAGES), tensor(CAPTIONS), 0.25, torch.tensor(present), torch.Generator().manual_seed(0)
    )
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_one_to_one_drops_images_without_captions():
    present = [[True, False], [False, False], [False, True]]
    expected = py_info_nce([IMAGES[0], IMAGES[2]], [CAPTIONS[0][0], CAPTIONS[2][1]], 1 / 0.25)
    got = losses.one_to_one_contrastive(tensor(IMAGES), tensor(CAPTIONS), 0.25, torch.tensor(present))
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_sampled_language_is_uniform_over_present_ones_and_reproducible():
    mask = torch.tensor([[True, False, True, True]] * 6000)
    picks = losses.sample_one_language(mask, torch.Generator().manual_seed(3))
    counts = torch.bincount(picks, minlength=4).tolist()
    assert counts[1] == 0
    for language in (0, 2, 3):
        assert abs(counts[language] / 6000 - 1 / 3) < 0.03
    again = losses.sample_one_language(mask, torch.Generator().manual_seed(3))
    assert torch.equal(picks, again)
    with pytest.raises(ValueError, match="at least one"):
        losses.sample_one_language(torch.tensor([[False, False]]))


# ---------------------------------------------------------------------------------------------------------------
# English bridge
# ---------------------------------------------------------------------------------------------------------------


def test_english_bridge_mse_matches_hand_computed_and_detaches_english():
    # B = 2, K = 3, English in slot 1; image 1 lacks language 2
    text = [[[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]], [[0.5, 0.5], [1.0, 1.0], [9.0, 9.0]]]
    mask = torch.tensor([[True, True, True], [True, True, False]])
    squared_errors = [(1 - 0) ** 2 + (2 - 0) ** 2, (3 - 0) ** 2 + (-1 - 0) ** 2, (0.5 - 1) ** 2 + (0.5 - 1) ** 2]
    expected = sum(squared_errors) / (3 * 2)  # 3 pairs x D = 2 elements

    leaf = tensor(text).requires_grad_()
    got = losses.english_bridge_mse(leaf, english_index=1, text_mask=mask)
    assert got.item() == pytest.approx(expected, abs=1e-12)
    got.backward()
    assert bool((leaf.grad[:, 1] == 0).all())  # English is the teacher
    assert bool((leaf.grad[1, 2] == 0).all())  # the missing language
    # d/dt of (t - e)^2 / 6 for image 0, language 0: 2 * (t - e) / 6
    assert leaf.grad[0, 0].tolist() == pytest.approx([2 * 1 / 6, 2 * 2 / 6])


def test_english_bridge_without_english_is_zero_and_keeps_a_graph():
    text = tensor([[[1.0, 2.0], [3.0, 4.0]]]).requires_grad_()
    got, terms = losses.EnglishBridgeLoss(english_index=0)(text, torch.tensor([[False, True]]))
    assert got.item() == 0.0 and list(terms) == ["english_bridge_mse"]
    got.backward()


def test_english_bridge_to_a_teacher_pulls_english_too():
    # B = 1, K = 2 (English in slot 0): with a teacher, English is a student like the other language
    text = tensor([[[1.0, 2.0], [3.0, 4.0]]]).requires_grad_()
    teacher = tensor([[0.0, 1.0]])
    got, _ = losses.EnglishBridgeLoss(english_index=0)(text, torch.tensor([[True, True]]), teacher)
    expected = ((1 - 0) ** 2 + (2 - 1) ** 2 + (3 - 0) ** 2 + (4 - 1) ** 2) / (2 * 2)  # 2 pairs x D = 2
    assert got.item() == pytest.approx(expected, abs=1e-12)
    got.backward()
    assert text.grad[0, 0].tolist() == pytest.approx([2 * 1 / 4, 2 * 1 / 4])


# ---------------------------------------------------------------------------------------------------------------
# Pairwise ranking hinge and MLMME
# ---------------------------------------------------------------------------------------------------------------


def test_pairwise_ranking_hinge_matches_hand_computed():
    # scores [[0.6, 0.8], [0.8, 0.6]], positives 0.6; every violation is 0.2 - 0.6 + 0.8 = 0.4, four of them
    x, y = [[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.8], [0.8, 0.6]]
    assert losses.pairwise_ranking_hinge(tensor(x), tensor(y), 0.2).item() == pytest.approx(1.6, abs=1e-12)
    # three pairs, some negatives inside the margin and some outside
    y3 = [CAPTIONS[0][0], CAPTIONS[1][1], CAPTIONS[2][0]]
    for max_violation in (False, True):
        expected = py_hinge(IMAGES, y3, 0.2, max_violation)
        got, terms = losses.PairwiseRankingLoss(0.2, max_violation)(tensor(IMAGES), tensor(y3).unsqueeze(1))
        assert got.item() == pytest.approx(expected, abs=1e-12) and list(terms) == ["hinge"]
    assert py_hinge(IMAGES, y3, 0.2) != pytest.approx(py_hinge(IMAGES, y3, 0.2, True))


def test_mlmme_weighs_image_sentence_by_beta_and_sentence_sentence_by_one_minus_beta():
    a = [CAPTIONS[0][0], CAPTIONS[1][0], CAPTIONS[2][0]]
    b = [CAPTIONS[0][1], CAPTIONS[1][1], CAPTIONS[2][1]]
    margin = 0.3
    image_sentence = py_hinge(IMAGES, a, margin) + py_hinge(IMAGES, b, margin)
    sentence_sentence = py_hinge(a, b, margin)
    assert sentence_sentence > 0 and image_sentence > 0  # both terms really contribute
    text = torch.stack([tensor(a), tensor(b)], dim=1)  # [B, K = 2, D], English (a) in slot 0
    for beta in (0.3, 0.5):
        expected = beta * image_sentence + (1 - beta) * sentence_sentence  # Calixto, Liu and Campbell 2017
        got, terms = losses.MLMMELoss(margin=margin, beta=beta)(tensor(IMAGES), text)
        assert got.item() == pytest.approx(expected, abs=1e-12)
        assert terms["mlmme_image_sentence"].item() == pytest.approx(image_sentence, abs=1e-12)
        assert terms["mlmme_sentence_sentence"].item() == pytest.approx(sentence_sentence, abs=1e-12)
    alone = losses.MLMMELoss(margin=margin, beta=1.0)(tensor(IMAGES), text).loss
    assert alone.item() == pytest.approx(image_sentence, abs=1e-12)  # beta = 1: the image-sentence term alone
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        losses.MLMMELoss(margin, beta=1.5)


def test_mlmme_english_pivot_form_averages_its_terms_over_the_languages_paired_with_english():
    a = [CAPTIONS[0][0], CAPTIONS[1][0], CAPTIONS[2][0]]
    b = [CAPTIONS[0][1], CAPTIONS[1][1], CAPTIONS[2][1]]
    c = [IMAGES[1], IMAGES[2], IMAGES[0]]
    text = torch.stack([tensor(b), tensor(a), tensor(c)], dim=1)  # English (a) in slot 1
    mask = torch.tensor([[True, True, True], [True, True, False], [True, True, True]])  # c: two images only
    margin, beta = 0.2, 0.4
    s_i = (
        py_hinge(IMAGES, a, margin)
        + py_hinge(IMAGES, b, margin)
        + py_hinge([IMAGES[0], IMAGES[2]], [a[0], a[2]], margin)
        + py_hinge([IMAGES[0], IMAGES[2]], [c[0], c[2]], margin)
    ) / 2
    s_s = (py_hinge(a, b, margin) + py_hinge([a[0], a[2]], [c[0], c[2]], margin)) / 2
    got, terms = losses.MLMMELoss(margin, beta, english_index=1, form="english-pivot")(tensor(IMAGES), text, mask)
    assert terms["mlmme_image_sentence"].item() == pytest.approx(s_i, abs=1e-12)
    assert terms["mlmme_sentence_sentence"].item() == pytest.approx(s_s, abs=1e-12)
    assert got.item() == pytest.approx(beta * s_i + (1 - beta) * s_s, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# MSE distillation (MLA NLT) and CLL-CLIP
# ---------------------------------------------------------------------------------------------------------------


def test_mse_distill_is_the_mean_over_elements_and_leaves_the_teacher_alone():
    student = tensor([[1.0, 2.0], [3.0, 5.0]]).requires_grad_()
    teacher = tensor([[0.0, 2.0], [1.0, 1.0]]).requires_grad_()
    expected = (1 + 0 + 4 + 16) / 4
    got, terms = losses.MSEDistillLoss()(student, teacher)
    assert list(terms) == ["mse"]
    assert got.item() == pytest.approx(expected, abs=1e-12)
    got.backward()
    assert teacher.grad is None
    assert student.grad.flatten().tolist() == pytest.approx([0.5, 0.0, 1.0, 2.0])  # 2 * diff / 4


def test_mse_distill_offers_the_written_per_sample_sum():
    student = tensor([[1.0, 2.0], [3.0, 5.0]])
    teacher = tensor([[0.0, 2.0], [1.0, 1.0]])
    assert losses.mse_distill(student, teacher, "sum").item() == pytest.approx((1 + 0 + 4 + 16) / 2, abs=1e-12)
    assert losses.mse_distill(student, teacher).item() == pytest.approx((1 + 0 + 4 + 16) / 4, abs=1e-12)
    image = tensor([[1.0, 0.0], [0.0, 1.0]])
    written = losses.CLLCLIPLoss(0.0, 1.0, form="sum")(image, student, teacher, 10.0).loss
    assert written.item() == pytest.approx(10.5, abs=1e-12)
    assert losses.MSEDistillLoss("sum")(student, teacher).loss.item() == pytest.approx(10.5, abs=1e-12)
    with pytest.raises(ConfigError, match="MSE form"):
        losses.mse_distill(student, teacher, "rows")
    with pytest.raises(ConfigError, match="MSE form"):
        losses.MSEDistillLoss("rows")


def test_cll_clip_loss_normalises_for_infonce_and_uses_raw_embeddings_for_mse():
    image = [[2.0, 0.0], [1.0, 3.0]]  # raw, not unit length
    text = [[3.0, 4.0], [-1.0, 2.0]]
    teacher = [[3.0, 3.0], [0.0, 2.0]]
    scale, gamma1, gamma2 = 10.0, 0.01, 1.0
    contrastive = py_info_nce([unit(v) for v in image], [unit(t) for t in text], scale)
    mse = ((3 - 3) ** 2 + (4 - 3) ** 2 + (-1 - 0) ** 2 + (2 - 2) ** 2) / 4
    expected = gamma1 * contrastive + gamma2 * mse

    got, terms = losses.CLLCLIPLoss(gamma1, gamma2)(tensor(image), tensor(text), tensor(teacher), scale)
    assert got.item() == pytest.approx(expected, abs=1e-12)
    assert list(terms) == ["infonce", "mse"]  # unweighted: gamma1 and gamma2 weigh them
    assert terms["infonce"].item() == pytest.approx(contrastive, abs=1e-12)
    assert terms["mse"].item() == pytest.approx(mse, abs=1e-12)
    learnable = losses.LogitScale(0.1).double()
    expected_module = 0.5 * contrastive + 2.0 * mse  # log(1/T) is stored in float32: exp gives 10 +- 1e-6
    module = losses.CLLCLIPLoss(gamma1=0.5, gamma2=2.0)
    assert module(tensor(image), tensor(text), tensor(teacher), learnable()).loss.item() == pytest.approx(
        expected_module, abs=1e-6
    )
    text_only, terms = module(None, tensor(text), tensor(teacher))  # no image tower: the MSE term alone
    assert list(terms) == ["mse"] and text_only.item() == pytest.approx(2.0 * mse, abs=1e-12)


def test_logit_scale_clamps_the_temperature_to_a_range():
    scale = losses.LogitScale(0.07, temperature_range=(0.001, 0.5))
    with torch.no_grad():
        scale.log_scale.fill_(math.log(1 / 0.9))  # T = 0.9 > 0.5
    assert scale.temperature == pytest.approx(0.5)
    with torch.no_grad():
        scale.log_scale.fill_(math.log(1 / 0.0001))  # T = 1e-4 < 0.001: s would be 10,000
    assert float(scale().detach()) == pytest.approx(1000.0)
    assert float(losses.LogitScale(0.0001)().detach()) == pytest.approx(100.0)  # open_clip's bound without a range
    assert losses.OneToKLoss(0.07, temperature_range=(0.001, 0.5)).logit_scale.max_scale == pytest.approx(1000.0)
    with pytest.raises(ConfigError, match="temperature range"):
        losses.LogitScale(0.07, temperature_range=(0.5, 0.1))


def test_the_trained_temperature_has_no_value_in_code():
    """Its start (0.07) and clamp ([0.001, 0.5]) are the recipe's (cll-clip, ccrk), given by every caller."""
    with pytest.raises(TypeError):
        losses.Temperature()
    with pytest.raises(TypeError):
        losses.Temperature(0.07)
    assert losses.Temperature(0.07, (0.001, 0.5)).temperature == pytest.approx(0.07)


def test_the_ranking_margin_has_no_value_in_code():
    """The hinge's margin is the caller's (train-ccrk: the recipe's losses.hinge.margin), never a default."""
    x = torch.eye(2, dtype=torch.float64)
    with pytest.raises(TypeError, match="margin"):
        losses.pairwise_ranking_hinge(x, x)
    with pytest.raises(TypeError, match="margin"):
        losses.PairwiseRankingLoss()
