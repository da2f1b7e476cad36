"""TEIR building blocks: per-token lambdas, new-row initialisation, and AdamW with per-row lambda."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mltk.cll_clip.teir import TeirAdamW, expand_table, init_new_rows, token_lambdas
from mltk.core.errors import ConfigError

LR, WD, BETAS, EPS = 1e-2, 0.05, (0.9, 0.999), 1e-6


def test_lambdas_on_a_hand_made_example():
    # Tokens 0..3 are CLIP's (counted once), 4..5 came with task 1, 6..7 are special. Earlier tasks: CLIP + task 1,
    # whose text contained tokens 2 and 4. The current task's text contains tokens 0, 2, 4, 5 and the specials.
    prior = np.array([1, 1, 2, 1, 1, 0, 1, 1])
    lambdas = token_lambdas({0, 2, 4, 5, 6, 7}, prior, special_ids=[6, 7])
    expected = torch.tensor([1 / 2, 0, 1 / 3, 0, 1 / 2, 1, 0, 0], dtype=torch.float32)
    assert lambdas.dtype == torch.float32 and lambdas.shape == (8,)
    assert torch.equal(lambdas, expected)
    # The present ids may come as an array or a tensor.
    assert torch.equal(token_lambdas(np.array([0, 2, 4, 5]), prior, [6, 7]), expected)
    assert torch.equal(token_lambdas(torch.tensor([0, 2, 4, 5]), prior, [6, 7]), expected)


def test_lambdas_reject_ids_outside_the_vocabulary():
    with pytest.raises(ConfigError, match="present_ids"):
        token_lambdas([0, 9], np.ones(8, np.int64))
    with pytest.raises(ConfigError, match="special_ids"):
        token_lambdas([0], np.ones(8, np.int64), special_ids=[8])


def _model(seed: int) -> tuple[torch.nn.Parameter, torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    table = torch.nn.Parameter(torch.randn(12, 5, generator=generator))
    temperature = torch.nn.Parameter(torch.tensor(0.07))
    return table, temperature


def _set_grads(table, temperature, step: int, active_rows=None) -> None:
    generator = torch.Generator().manual_seed(1000 + step)
    grad = torch.randn(table.shape, generator=generator)
    if active_rows is not None:
        mask = torch.zeros(table.shape[0], 1)
        mask[active_rows] = 1
        grad = grad * mask
    table.grad = grad
    temperature.grad = torch.randn((), generator=generator)


def test_teir_adamw_equals_torch_adamw_when_lambda_is_one():
    table_a, temp_a = _model(0)
    table_b, temp_b = _model(0)
    reference = torch.optim.AdamW([table_a, temp_a], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, foreach=False)
    teir = TeirAdamW(
        [table_b, temp_b], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, row_scales={table_b: torch.ones(12)}
    )
    for step in range(6):
        _set_grads(table_a, temp_a, step)
        _set_grads(table_b, temp_b, step)
        reference.step()
        teir.step()
    assert torch.allclose(table_a, table_b, atol=1e-6, rtol=0)
    assert torch.allclose(temp_a, temp_b, atol=1e-6, rtol=0)
    assert not torch.allclose(table_b, _model(0)[0])  # it did train
    assert torch.allclose(reference.state[table_a]["exp_avg_sq"], teir.state[table_b]["exp_avg_sq"], atol=1e-9)


def test_rows_with_lambda_zero_stay_bit_identical_and_keep_zero_moments():
    table, temperature = _model(1)
    before = table.detach().clone()
    lambdas = torch.tensor([1.0, 0.5, 0, 0, 0.25, 0, 1, 0, 0, 0.5, 0, 0])
    frozen = lambdas == 0
    optimizer = TeirAdamW(
        [table, temperature], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, row_scales={table: lambdas}
    )
    for step in range(4):
        _set_grads(table, temperature, step)  # frozen rows get gradients too (as special tokens do)
        optimizer.step()
    assert torch.equal(table.detach()[frozen], before[frozen])
    state = optimizer.state[table]
    assert not state["exp_avg"][frozen].any() and not state["exp_avg_sq"][frozen].any()
    assert (table.detach()[~frozen] != before[~frozen]).all(dim=1).all()


def test_lambda_scales_the_gradient_before_the_moments_and_the_decay():
    table = torch.nn.Parameter(torch.ones(3, 2))
    lambdas = torch.tensor([1.0, 0.5, 0.25])
    optimizer = TeirAdamW([table], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, row_scales={table: lambdas})
    grad = torch.tensor([[2.0, 2.0], [2.0, 2.0], [0.0, 0.0]])
    table.grad = grad.clone()
    optimizer.step()
    state = optimizer.state[table]
    expected_m = (1 - BETAS[0]) * grad * lambdas[:, None]
    assert torch.allclose(state["exp_avg"], expected_m)
    assert torch.allclose(state["exp_avg_sq"], (1 - BETAS[1]) * (grad * lambdas[:, None]) ** 2)
    # Row 2 has no gradient: only its decay acts, scaled by lambda = 0.25.
    assert torch.allclose(table.detach()[2], torch.full((2,), 1 - LR * WD * 0.25))
    # Rows 0 and 1: Adam's first step moves by lr (the gradient scale cancels), after their scaled decay.
    assert torch.allclose(table.detach()[0], torch.full((2,), 1 - LR * WD - LR), atol=1e-6)
    assert torch.allclose(table.detach()[1], torch.full((2,), 1 - LR * WD * 0.5 - LR), atol=1e-6)


@pytest.mark.parametrize("scale_gradients, scale_weight_decay", [(True, False), (False, True)])
def test_each_half_of_the_regularisation_can_be_switched_off(scale_gradients, scale_weight_decay):
    table = torch.nn.Parameter(torch.ones(2, 2))
    optimizer = TeirAdamW(
        [table],
        lr=LR,
        betas=BETAS,
        eps=EPS,
        weight_decay=WD,
        row_scales={table: torch.tensor([0.0, 1.0])},
        scale_gradients=scale_gradients,
        scale_weight_decay=scale_weight_decay,
    )
    table.grad = torch.ones(2, 2)
    optimizer.step()
    row = table.detach()[0]
    if scale_gradients:  # gradient of row 0 scaled to zero, decay not scaled
        assert torch.allclose(row, torch.full((2,), 1 - LR * WD))
    else:  # gradient kept, decay of row 0 scaled to zero
        assert torch.allclose(row, torch.full((2,), 1 - LR), atol=1e-6)


def test_unregistered_and_sparse_cases():
    table = torch.nn.Parameter(torch.ones(4, 2))
    optimizer = TeirAdamW([table], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    with pytest.raises(ConfigError, match="shape"):
        optimizer.set_row_scale(table, torch.ones(3))
    with pytest.raises(ConfigError, match="not optimised"):
        optimizer.set_row_scale(torch.nn.Parameter(torch.ones(4, 2)), torch.ones(4))
    optimizer.set_row_scale(table, torch.zeros(4))
    table.grad = torch.ones(4, 2)
    optimizer.step()
    assert torch.equal(table.detach(), torch.ones(4, 2))  # everything frozen
    optimizer.set_row_scale(table, None)  # back to plain AdamW
    optimizer.step()
    assert (table.detach() != 1).all()


def test_resuming_from_a_state_dict_continues_exactly():
    lambdas = torch.tensor([1.0, 0.5, 0, 0, 0.25, 0, 1, 0, 0, 0.5, 0, 0])
    table_a, temp_a = _model(2)
    straight = TeirAdamW([table_a, temp_a], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, row_scales={table_a: lambdas})
    table_b, temp_b = _model(2)
    first = TeirAdamW([table_b, temp_b], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, row_scales={table_b: lambdas})
    for step in range(3):
        for table, temp, optimizer in ((table_a, temp_a, straight), (table_b, temp_b, first)):
            _set_grads(table, temp, step)
            optimizer.step()
    resumed = TeirAdamW([table_b, temp_b], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    resumed.load_state_dict(first.state_dict())
    resumed.set_row_scale(table_b, lambdas)
    for step in range(3, 5):
        for table, temp, optimizer in ((table_a, temp_a, straight), (table_b, temp_b, resumed)):
            _set_grads(table, temp, step)
            optimizer.step()
    assert torch.equal(table_a, table_b) and torch.equal(temp_a, temp_b)


def test_teir_init_matches_the_mean_and_std_of_the_old_table():
    old = torch.randn(3000, 64, generator=torch.Generator().manual_seed(0)) * 0.3 + 0.1
    rows = init_new_rows(old, 4000, torch.Generator().manual_seed(1), mode="teir")
    assert rows.shape == (4000, 64) and rows.dtype == old.dtype
    assert abs(rows.mean().item() - old.mean().item()) < 0.005
    assert abs(rows.std().item() - old.std().item()) < 0.005
    plain = init_new_rows(old, 4000, torch.Generator().manual_seed(1), mode="normal")
    assert abs(plain.mean().item()) < 0.001 and abs(plain.std().item() - 0.02) < 0.001
    again = init_new_rows(old, 4000, torch.Generator().manual_seed(1), mode="teir")
    assert torch.equal(rows, again)  # same seed, same rows


def test_expand_table_keeps_old_rows_and_checks_the_mode():
    old = torch.randn(10, 4)
    grown = expand_table(old, 3, torch.Generator().manual_seed(0))
    assert grown.shape == (13, 4) and torch.equal(grown[:10], old)
    with pytest.raises(ConfigError, match="init mode"):
        init_new_rows(old, 3, mode="zeros")


def test_the_optimizer_settings_have_no_value_in_code():
    """lr, betas, eps and decay come from the train-continual recipe (the loop); TeirAdamW holds none of its own."""
    table = torch.nn.Parameter(torch.ones(4, 2))
    for missing in ("lr", "betas", "eps", "weight_decay"):
        given = {"lr": LR, "betas": BETAS, "eps": EPS, "weight_decay": WD}
        del given[missing]
        with pytest.raises(TypeError, match=missing):
            TeirAdamW([table], **given)
