"""The non-native table's gradient, written into one buffer kept from step to step (``mltk.models.table_gradient``):
the same gradient as torch's own embedding backward, step after step, without a new dense tensor each step."""

from __future__ import annotations

import torch

from mltk.models.nonnative import NonNativeEmbedding


def _pair():
    """The non-native embedding and a plain torch table with the same weights and projection."""
    torch.manual_seed(0)
    ours = NonNativeEmbedding(40, 6, 6)
    reference = torch.nn.Embedding(40, 6)
    with torch.no_grad():
        reference.weight.copy_(ours.table.weight)
    return ours, reference


def _backward(ours, reference, ids: torch.Tensor) -> None:
    """One backward through each: the same loss of the looked-up rows (repeated ids included)."""
    weights = torch.linspace(-1, 1, ids.numel() * 6).view(*ids.shape, 6)
    (ours(ids) * weights).sum().backward()
    (ours.proj(reference(ids)) * weights).sum().backward()


def test_table_gradient_equals_torchs_step_after_step_in_one_buffer():
    ours, reference = _pair()
    batches = [torch.tensor([[1, 2, 2, 3]]), torch.tensor([[4, 5], [5, 39]]), torch.tensor([[0, 1, 7]])]
    first = None
    for ids in batches:
        _backward(ours, reference, ids)
        torch.testing.assert_close(ours.table.weight.grad, reference.weight.grad, atol=1e-6, rtol=0)
        assert ours.table.weight.grad[ids.flatten()].abs().sum() > 0
        first = ours.table.weight.grad if first is None else first
        assert ours.table.weight.grad is first  # one buffer: no new 40 x 6 tensor per step
        for module in (ours, reference):
            module.zero_grad(set_to_none=True)  # as the training loop does


def test_two_backwards_before_an_update_and_zero_grad_in_place_accumulate():
    ours, reference = _pair()
    _backward(ours, reference, torch.tensor([[1, 2, 3]]))
    _backward(ours, reference, torch.tensor([[3, 4]]))  # accumulated, as autograd accumulates
    torch.testing.assert_close(ours.table.weight.grad, reference.weight.grad, atol=1e-6, rtol=0)
    for module in (ours, reference):
        module.zero_grad(set_to_none=False)
    _backward(ours, reference, torch.tensor([[9]]))
    torch.testing.assert_close(ours.table.weight.grad, reference.weight.grad, atol=1e-6, rtol=0)
    for module in (ours, reference):
        module.zero_grad(set_to_none=True)
    _backward(ours, reference, torch.tensor([[5, 6]]))  # nothing of the steps before is left in the buffer
    torch.testing.assert_close(ours.table.weight.grad, reference.weight.grad, atol=1e-6, rtol=0)


def test_a_frozen_table_and_no_grad_use_the_plain_lookup():
    ours, _ = _pair()
    ours.table.requires_grad_(False)
    ours(torch.tensor([[1, 2]])).sum().backward()
    assert ours.table.weight.grad is None and ours.proj.weight.grad is not None
    with torch.no_grad():
        assert not ours(torch.tensor([[1, 2]])).requires_grad


def test_with_lengths_only_the_real_tokens_are_looked_up_and_projected():
    """A batch's padding can outnumber its real tokens: with lengths the projection runs on the real tokens only,
    their rows equal the plain lookup's and the padded positions stay zero (no gradient reaches the pad row)."""
    ours, _ = _pair()
    tokens, lengths = torch.tensor([[3, 4, 5, 0, 0], [6, 0, 0, 0, 0]]), torch.tensor([3, 1])
    seen = []
    ours.proj.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape[0]))
    words = ours(tokens, lengths)
    assert seen == [4] and words.shape == (2, 5, 6)
    real = torch.arange(5)[None, :] < lengths[:, None]
    torch.testing.assert_close(words[real], ours(tokens)[real], atol=0, rtol=0)
    assert not words[~real].any()
    words.sum().backward()
    assert ours.table.weight.grad[0].abs().sum() == 0 and ours.table.weight.grad[[3, 4, 5, 6]].abs().sum() > 0
