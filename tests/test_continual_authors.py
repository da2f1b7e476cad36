"""The continual baselines as the CLL-CLIP authors' code ran them are the defaults, the earlier forms
stay behind method options (P-Tuning's keys and values, MLA's placement and initialisation, ER/DER's joint batch,
oEWC's penalty and Fisher, DualPrompt's keys, LoRA's targets)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from test_continual import encoder_for, start_tasks, world  # noqa: F401 (fixture)

from mltk.cll_clip.blocks import attention_block
from mltk.cll_clip.ewc import ewc_penalty
from mltk.cll_clip.prompts import prompt_query
from mltk.models.text import trim_tokens


def test_ptuning_gives_each_block_its_own_keys_and_values_without_layer_norm(world):
    encoder = encoder_for(world, "ptuning", bottleneck=32)
    start_tasks(world, encoder, 1)
    prefix = encoder.method.prefixes["en"]
    assert isinstance(prefix.norm, torch.nn.Identity)  # AdapterHub's prefix_tuning has no LayerNorm
    assert prefix.mlp[2].out_features == 4 * 2 * 128  # blocks x (key, value) x W
    keys, values = prefix()
    assert keys.shape == values.shape == (4, 30, 128) and not torch.allclose(keys, values)
    # AdapterHub's order: the MLP output viewed as [P, blocks x 2, W]; row 2l holds block l's keys, 2l + 1 its values
    out = prefix.mlp(prefix.vectors).reshape(30, 4 * 2, 128)
    assert torch.allclose(keys[2], out[:, 4]) and torch.allclose(values[2], out[:, 5])
    assert not torch.allclose(keys.mean(dim=-1), torch.zeros(4, 30), atol=1e-3)  # no LayerNorm on the output


def test_mla_adapter_reads_the_block_output_and_starts_with_adapterhubs_bert_init(world):
    encoder = encoder_for(world, "mla")
    start_tasks(world, encoder, 1)
    stack = encoder.method.adapters["en"]
    for adapter in stack:  # init_weights "bert": both projections N(0, 0.02), biases zero
        for layer in (adapter.c_fc, adapter.c_proj):
            assert 0.015 < float(layer.weight.detach().std()) < 0.025 and float(layer.weight.abs().max()) > 0
            assert float(layer.bias.abs().max()) == 0
    # the adapter of block i reads the block's whole output y = x + attention + MLP and adds its bottleneck to it
    tower = encoder.tower
    tokens, pool = trim_tokens(encoder.tokenize(["a red circle", "two blue squares"]), 49407)
    x = F.embedding(tokens, encoder.table) + tower.positional_embedding[: tokens.shape[1]]
    mask = tower.attn_mask[: tokens.shape[1], : tokens.shape[1]]
    for index, block in enumerate(tower.blocks):
        y = attention_block(block, x, mask, index)
        x = y + stack[index].c_proj(torch.relu(stack[index].c_fc(y)))
    pooled = tower.ln_final(x[torch.arange(2), pool])
    expected = (
        tower.text_projection(pooled)
        if isinstance(tower.text_projection, torch.nn.Linear)
        else pooled @ tower.text_projection
    )
    features = encoder.method.encode(encoder, F.embedding(tokens, encoder.table), pool + 1, "en")
    assert torch.allclose(features, expected, atol=1e-5)
    zero = encoder_for(world, "mla", init="zero")
    start_tasks(world, zero, 1)
    assert all(float(a.c_proj.weight.abs().max()) == 0 for a in zero.method.adapters["en"])


def _er_task_on_de(world, method: str, **options):
    encoder = encoder_for(world, method, memory_size=24, **options)
    en, de = start_tasks(world, encoder, 2)
    encoder.method.end_task(en)
    encoder.method.begin_task(de)
    return encoder, de


def test_er_puts_replayed_examples_into_the_batch_for_one_infonce(world):
    encoder, de = _er_task_on_de(world, "er", replay_loss="joint")
    method = encoder.method
    loss, terms = de.loss(0)
    assert sorted(terms) == ["infonce", "logit_scale", "mse"]  # no separate replay loss
    rows = method.replay_indices(de, 0)
    assert len(rows) == 8  # as many replayed examples as the batch holds (the batch doubled)
    images, features, teachers = method.replayed_batch(de, rows, method.replayed_features(de, rows))
    expected, expected_terms = de.data_terms(0, (images, features, teachers))
    current_only, current_terms = de.data_terms(0)
    assert torch.allclose(loss, expected) and torch.allclose(terms["infonce"], expected_terms["infonce"])
    assert not torch.allclose(terms["infonce"], current_terms["infonce"])  # the softmax ran over 16, not 8


def test_der_replayed_examples_join_infonce_and_regress_their_stored_features(world):
    encoder, de = _er_task_on_de(world, "der", replay_loss="joint")
    loss, terms = de.loss(0)
    assert sorted(terms) == ["der_mse", "infonce", "logit_scale", "mse"]
    method = encoder.method
    rows = method.replay_indices(de, 0)
    batch = method.replayed_batch(de, rows, method.replayed_features(de, rows))
    joint, _ = de.data_terms(0, batch)
    stored = method.features[torch.from_numpy(rows)]
    regression = F.mse_loss(batch[1], stored)
    assert torch.allclose(terms["der_mse"], regression, atol=1e-6)
    assert torch.allclose(loss, joint + regression, atol=1e-6)


def test_oewc_penalty_has_no_half_and_its_fisher_averages_the_whole_task(world):
    anchor, fisher, table = torch.zeros(2, 1), torch.ones(2, 1), torch.tensor([[0.1], [0.0]])
    assert abs(ewc_penalty(table, fisher, anchor, 1000.0).item() - 10.0) < 1e-4  # 1000 * 0.1^2, no 1/2
    encoder = encoder_for(world, "oewc")
    (en,) = start_tasks(world, encoder, 1, steps=None, epochs=3)
    batches = []
    original = en.data_loss
    en.data_loss = lambda step: (batches.append(step), original(step))[1]
    encoder.method.end_task(en)
    assert batches == list(range(en.steps_per_epoch)) and en.steps_per_epoch > 2  # one pass over the task
    with torch.no_grad():
        encoder.table += 0.01
    loss, terms = encoder.method.extra_loss(en, 0)
    manual = ewc_penalty(encoder.table, encoder.method.fisher, encoder.method.anchor, 1.0)
    assert torch.allclose(terms["ewc_penalty"], manual) and torch.allclose(loss, 1000 * manual)
    halved = encoder_for(world, "oewc", half=True, fisher_batches=2)
    (en,) = start_tasks(world, halved, 1)
    halved.method.end_task(en)
    with torch.no_grad():
        halved.table += 0.01
    _, terms = halved.method.extra_loss(en, 0)
    full = ewc_penalty(halved.table, halved.method.fisher, halved.method.anchor, 1.0)
    assert torch.allclose(terms["ewc_penalty"], 0.5 * full)


def test_dualprompt_keys_start_uniform_and_every_pool_key_is_a_candidate(world):
    encoder = encoder_for(world, "dualprompt")
    en, de = start_tasks(world, encoder, 2)
    method = encoder.method
    assert len(method.e_keys) == 36 and method.trained == 2  # the whole pool, as the authors' code holds it
    key = method.e_keys[1].detach()
    assert float(key.min()) >= -1 and float(key.max()) < 1 and float(key.norm()) > 2  # uniform, not a unit mean
    tokens = encoder.tokenize(["a red circle", "ein roter kreis"])
    trimmed, pool = trim_tokens(tokens, 49407)
    query = prompt_query(encoder, F.embedding(trimmed, encoder.table), pool + 1)
    with torch.no_grad():
        method.e_keys[30].copy_(query[0])  # an untrained pool entry nearest the first text
    assert int(method.select(query)[0]) == 30
    trained_only = encoder_for(world, "dualprompt", candidates="trained", key_init="mean")
    start_tasks(world, trained_only, 2)
    assert len(trained_only.method.e_keys) == 2  # keys of trained tasks only, each the unit mean query
    assert abs(float(trained_only.method.e_keys[1].norm()) - 1) < 1e-5
    assert int(trained_only.method.select(query).max()) < 2


def test_lora_targets_key_and_value_as_the_papers_appendix_says(world):
    encoder = encoder_for(world, "lora", targets="k+v")
    start_tasks(world, encoder, 1)
    lora = encoder.method
    assert lora.sets["en"].down.shape == (4, 2, 8, 128)
    with torch.no_grad():
        lora.sets["en"].up.normal_(0, 0.1)
    delta_q, delta_k, delta_v = lora.qv_delta(lora.sets["en"], 0, torch.randn(1, 3, 128))
    assert delta_q is None and delta_k is not None and delta_v is not None
    block = encoder.tower.blocks[0]
    x = torch.randn(1, 5, 128, generator=torch.Generator().manual_seed(0))
    mask = encoder.tower.attn_mask[:5, :5]
    delta = torch.randn(1, 5, 128)
    base = attention_block(block, x, mask, 0)
    key_only = attention_block(block, x, mask, 0, qv_delta=lambda i, h: (None, delta, None))
    # position 0 attends to itself alone: a new key cannot change it, but it changes later positions
    assert torch.allclose(key_only[:, 0], base[:, 0], atol=1e-6) and not torch.allclose(key_only, base)
