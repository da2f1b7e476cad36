"""The continual baselines as CLL-CLIP's authors ran them: options, task-specific sets, prompt shapes, placement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_continual import SMALL, config, encoder_for, start_tasks, train, world  # noqa: F401 (fixture)

from mltk.cll_clip.blocks import attention_block
from mltk.cll_clip.methods import METHODS, method_options
from mltk.cll_clip.options import METHOD_OPTIONS, option_fields, options_dict
from mltk.core.errors import ConfigError
from mltk.models.text import trim_tokens
from mltk.recipes import load_recipe
from mltk.settings.methods import resolved_options
from mltk.train import continual as C

# ----------------------------------------------------------------------------------------------------------------
# One options mechanism: the recipe's methods section
# ----------------------------------------------------------------------------------------------------------------


def recipe_options(method: str, given=None):
    return resolved_options(method, given, load_recipe("cll-clip"))


def test_the_recipe_holds_the_papers_values():
    assert options_dict(recipe_options("lora")) == {"rank": 8, "alpha": 8.0, "dropout": 0.0, "targets": "q+v"}
    assert options_dict(recipe_options("ptuning")) == {
        "length": 30,
        "bottleneck": 512,
        "separate_kv": True,
        "layer_norm": False,
    }
    assert options_dict(recipe_options("dualprompt")) == {
        "g_length": 2,
        "e_length": 16,
        "g_layers": [0, 1],
        "e_layers": [2, 3, 4],
        "pool": 36,
        "pull_weight": 1.0,
        "key_init": "uniform",
        "candidates": "all",
    }
    assert options_dict(recipe_options("codaprompt")) == {
        "components": 5,
        "length": 2,
        "layers": [0, 1, 2, 3, 4],
        "tasks": 36,
    }
    assert recipe_options("der").alpha == 1.0 and recipe_options("der").memory_size == 8000
    assert recipe_options("er").replay_loss == "clfm" == recipe_options("der").replay_loss
    assert options_dict(recipe_options("oewc")) == {
        "penalty": 1000.0,
        "gamma": 1.0,
        "fisher_batches": None,
        "half": False,
    }
    assert options_dict(recipe_options("mla")) == {"reduction": 2, "position": "block", "init": "bert"}


def test_options_given_as_text_are_typed_by_their_field_and_checked():
    options = recipe_options("dualprompt", {"g_length": "4", "e_layers": "2,3,4,5", "pull_weight": "0.5"})
    assert (options.g_length, options.e_layers, options.pull_weight) == (4, (2, 3, 4, 5), 0.5)
    assert recipe_options("codaprompt", {"layers": "[0, 2]"}).layers == (0, 2)
    assert recipe_options("er", {"replay_batch": "none"}).replay_batch is None
    assert recipe_options("lora", {"lora": {"rank": 4}}).rank == 4  # methods.lora.rank
    with pytest.raises(ConfigError, match=r"method\.rank: not an option of method ptuning \(its options: length"):
        recipe_options("ptuning", {"rank": "4"})
    with pytest.raises(ConfigError, match="must be an integer"):
        recipe_options("lora", {"rank": "2.5"})
    with pytest.raises(ConfigError, match="one of block, mlp"):
        recipe_options("mla", {"position": "middle"})
    with pytest.raises(ConfigError, match="even"):
        recipe_options("dualprompt", {"e_length": "3"})
    with pytest.raises(ConfigError, match="the run's method is er, which does not read lora's options"):
        recipe_options("er", {"lora": {"rank": 4}})


def test_the_recipe_names_every_option_of_every_method_and_nothing_else():
    methods = load_recipe("cll-clip").methods
    assert set(METHODS) == set(METHOD_OPTIONS)
    for name, cls in METHODS.items():
        assert METHOD_OPTIONS[name] is cls.Options
        assert set(methods.get(name, {})) == set(option_fields(name)), name
        assert all(meta.get("help") for _, meta in option_fields(name).values()), name  # recipes show's meaning


def test_the_options_have_no_value_in_code_and_a_recipe_without_one_is_refused():
    with pytest.raises(TypeError):
        METHOD_OPTIONS["lora"]()
    recipe = load_recipe("cll-clip")
    lacking = dataclasses.replace(
        recipe, methods={**recipe.methods, "lora": {"alpha": 8.0, "dropout": 0.0, "targets": "q+v"}}
    )
    with pytest.raises(ConfigError, match="the recipe sets no 'methods.lora.rank'"):
        resolved_options("lora", None, lacking)
    assert resolved_options("lora", {"rank": 4}, lacking).rank == 4


def test_the_stage_config_records_the_resolved_options(world):
    cfg = config(world, method="lora", options={"alpha": 16})
    assert cfg.options == recipe_options("lora", {"alpha": 16.0})
    from mltk.artifacts import jsonable

    assert jsonable(cfg)["options"] == {"rank": 8, "alpha": 16.0, "dropout": 0.0, "targets": "q+v"}


def test_method_tensors_train_at_the_tables_lr_by_default(world):
    encoder = encoder_for(world, "lora")
    (task,) = start_tasks(world, encoder, 1)
    optimizer = task.make_optimizer(task.parameters_to_train(), C.loop_config(task.config, task))
    assert {group["lr"] for group in optimizer.param_groups} == {task.config.loop.lr}


# ----------------------------------------------------------------------------------------------------------------
# Task-specific methods: LoRA and P-Tuning
# ----------------------------------------------------------------------------------------------------------------


def test_lora_keeps_one_set_per_task_and_evaluation_uses_the_tasks_own(world, tmp_path):
    encoder = encoder_for(world, "lora")
    cfg = config(world, method="lora")
    en = C.prepare_task(cfg, encoder, world["corpus"], world["vocab"]["en"], 0, "en", world["val"], world["runtime"])
    train(en, tmp_path / "en")
    trained_en = {k: v.detach().clone() for k, v in encoder.method.sets["en"].state_dict().items()}
    assert trained_en["up"].abs().sum() > 0  # task 0 trained its own set
    texts = world["corpus"].texts["en"][:4]
    de = C.prepare_task(cfg, encoder, world["corpus"], world["vocab"]["de"], 1, "de", world["val"], world["runtime"])
    assert set(de.parameters_to_train()) == {"table", "logit_scale", "method.sets.de.down", "method.sets.de.up"}
    train(de, tmp_path / "de")
    assert list(encoder.method.sets) == ["en", "de"]
    for key, value in encoder.method.sets["en"].state_dict().items():
        assert torch.equal(value, trained_en[key]), key  # task 0's set is untouched by task 1
    assert encoder.method.sets["de"].up.abs().sum() > 0
    encoder.eval()
    # evaluation routes each caption through its own language's set: en with en's, de with de's
    calls = []
    original = encoder.method.qv_delta
    encoder.method.qv_delta = lambda lora, i, h: (calls.append(lora), original(lora, i, h))[1]
    encoder.encode(texts, "en")
    assert calls and all(lora is encoder.method.sets["en"] for lora in calls)
    calls.clear()
    encoder.encode(texts, "de")
    assert calls and all(lora is encoder.method.sets["de"] for lora in calls)
    encoder.method.qv_delta = original


def test_shared_kv_ptuning_is_a_prefix_per_block_that_leaves_every_position_to_the_text(world):
    encoder = encoder_for(world, "ptuning", bottleneck=32, separate_kv=False, layer_norm=True)
    assert encoder.method.reserved_positions == 0
    assert encoder.tokenize(["a small yellow heart"]).shape == (1, 77)  # all 77 context positions for the text
    long = encoder.tokenize([" ".join(["red circle"] * 60)])
    assert long.shape == (1, 77) and int(long[0, -1]) == 49407
    start_tasks(world, encoder, 2)
    method = encoder.method
    assert list(method.prefixes) == ["en", "de"] and method.needs_task_identity
    prefixes, shared_values = method.prefixes["de"]()
    # [blocks, 30, W]: 30 prefix vectors per block
    assert torch.equal(prefixes, shared_values) and prefixes.shape == (4, 30, 128)
    assert torch.allclose(prefixes.mean(dim=-1), torch.zeros(4, 30), atol=1e-5)  # the LayerNorm's output
    mlp = method.prefixes["de"].mlp
    assert isinstance(mlp[1], torch.nn.Tanh) and mlp[0].out_features == 32 and mlp[2].out_features == 4 * 128
    tokens, pool = trim_tokens(encoder.tokenize(["ein roter kreis"]), 49407)
    x = F.embedding(tokens, encoder.table)
    seen = {}

    def spy(block, x, mask, index, qv_delta=None, prefix=None, after_mlp=None):
        keys, values = prefix(index)
        seen[index] = (keys, values)
        return attention_block(block, x, mask, index, qv_delta, prefix, after_mlp)

    import mltk.cll_clip.blocks as blocks

    original = blocks.attention_block
    blocks.attention_block = spy
    try:
        method.encode(encoder, x, pool + 1, "de")
    finally:
        blocks.attention_block = original
    assert sorted(seen) == [0, 1, 2, 3]
    keys, values = seen[2]
    assert keys.shape == (1, 30, 128) and torch.equal(keys, values)  # keys and values shared
    assert torch.allclose(keys[0], prefixes[2], atol=1e-6)
    # the prefixes take no position: the text's own positions and pooling are those of the tower
    assert not torch.allclose(encoder.encode(["ein roter kreis"], "de"), encoder.encode(["ein roter kreis"], "en"))


# ----------------------------------------------------------------------------------------------------------------
# Prompt shapes, DER, MLA placement
# ----------------------------------------------------------------------------------------------------------------


def test_dualprompt_and_coda_have_the_papers_lengths(world):
    encoder = encoder_for(world, "dualprompt")
    start_tasks(world, encoder, 2)
    method = encoder.method
    assert method.g_prompt.shape == (2, 2, 128)  # blocks 0-1, length 2
    assert [p.shape for p in method.e_prompts] == [(2, 16, 128)] * 36  # blocks 2-3 of the 4-block tower, length 16
    expert = torch.stack(list(method.e_prompts))[torch.tensor([1])]
    assert [len(method.prompts(i, 1, expert)) for i in range(4)] == [1, 1, 1, 1]
    key, value = (torch.cat(parts, 1) for parts in zip(*[(p[:, :8], p[:, 8:]) for p in method.prompts(2, 1, expert)]))
    assert key.shape == (1, 8, 128) and value.shape == (1, 8, 128)  # 16 -> 8 keys and 8 values
    assert float(method.g_prompt.detach().min()) < 0  # uniform in [-1, 1), the authors' initialisation
    coda = encoder_for(world, "codaprompt")
    start_tasks(world, coda, 1)
    assert coda.method.prompts[0].shape == (5, 4, 2, 128)  # 5 components per task, length 2, blocks 0-3 (of 0-4)


def test_dualprompt_pool_and_coda_tasks_bound_the_number_of_tasks(world):
    encoder = encoder_for(world, "dualprompt", pool=1)
    with pytest.raises(ConfigError, match="pool"):
        start_tasks(world, encoder, 2)


def test_der_weights_the_feature_regression_by_alpha_one(world):
    der = encoder_for(world, "der", memory_size=40)
    assert der.method.options.alpha == 1.0


def test_mla_adapter_on_the_mlp_output_with_reduction_two(world):
    encoder = encoder_for(world, "mla", position="mlp")
    start_tasks(world, encoder, 1)
    stack = encoder.method.adapters["en"]
    assert stack[0].c_fc.out_features == 64  # width 128 / reduction 2
    with torch.no_grad():
        for p in stack.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    block = encoder.tower.blocks[1]
    x = torch.randn(2, 5, 128, generator=torch.Generator().manual_seed(1))
    mask = encoder.tower.attn_mask[:5, :5]
    after_attention = attention_block(block, x, mask, 1, after_mlp=lambda i, m: torch.zeros_like(m))
    mlp_out = block.mlp(block.ln_2(after_attention))
    expected = after_attention + mlp_out + stack[1].c_proj(torch.relu(stack[1].c_fc(mlp_out)))
    assert torch.allclose(attention_block(block, x, mask, 1, after_mlp=stack), expected, atol=1e-5)
    whole_block = attention_block(block, x, mask, 1)
    assert not torch.allclose(stack(1, whole_block), expected, atol=1e-4)  # not after the whole block
    texts = ["a red circle"]
    encoder.eval()
    mlp_features = encoder.encode(texts, "en")
    encoder.method.options = dataclasses.replace(encoder.method.options, position="block")
    assert not torch.allclose(encoder.encode(texts, "en"), mlp_features, atol=1e-4)


# ----------------------------------------------------------------------------------------------------------------
# The paper's task order, shipped as data
# ----------------------------------------------------------------------------------------------------------------


def test_the_cll_clip_order_is_shipped_and_orders_a_subset():
    from mltk.data.orders import language_order, ordered_subset

    order = language_order("cll-clip")
    assert len(order) == 36 == len(set(order)) and order[:4] == ("en", "it", "de", "fil") and order[-1] == "hu"
    assert ordered_subset("cll-clip", ("ru", "de", "en")) == ("en", "de", "ru")
    with pytest.raises(ConfigError, match="not in the cll-clip order"):
        ordered_subset("cll-clip", ("en", "xx"))
    with pytest.raises(ConfigError, match="--order must be one of cll-clip"):
        language_order("random")


def test_train_continual_order_option_refuses_languages_outside_it(world, tmp_path):
    from typer.testing import CliRunner

    from mltk.cli import app

    result = CliRunner().invoke(
        app,
        [
            "train-continual",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--out",
            str(tmp_path / "x"),
            "--order",
            "cll-clip",
            "--lang",
            "en,xx",
        ],
    )
    assert result.exit_code == 2 and "xx are not in the cll-clip order" in result.stderr


# ----------------------------------------------------------------------------------------------------------------
# train-continual as the authors ran it: epochs over captions, global clipping, TEIR's parts, token sets
# ----------------------------------------------------------------------------------------------------------------


def test_an_epoch_passes_over_every_caption_by_default(world):
    encoder = encoder_for(world)
    (by_caption,) = start_tasks(world, encoder, 1, steps=None, epochs=1)
    captions, images = len(by_caption.data.tokens), len(by_caption.data.image_rows)
    assert captions > images  # several captions per image in the world
    assert by_caption.steps_per_epoch == captions // 8 and by_caption.steps == captions // 8
    seen = np.concatenate([by_caption.batches.batch(step)[1] for step in range(by_caption.steps_per_epoch)])
    assert len(seen) == len(set(seen.tolist())) == (captions // 8) * 8  # each caption once per epoch
    (by_image,) = start_tasks(world, encoder_for(world), 1, steps=None, epochs=1, epoch_unit="images")
    assert by_image.steps_per_epoch == images // 8
    with pytest.raises(ConfigError, match="--epoch-unit"):
        config(world, epoch_unit="words").check()


def test_gradients_are_clipped_by_their_global_norm(world):
    encoder = encoder_for(world)
    (task,) = start_tasks(world, encoder, 1)
    assert task.config.loop.clip_mode == "global" and C.loop_config(task.config, task).clip_mode == "global"


@pytest.mark.parametrize(
    "parts, expected",
    [
        (("init",), (True, False, True, True)),
        (("grad",), (False, True, True, False)),
        (("decay",), (False, True, False, True)),
        (("grad", "decay"), (False, True, True, True)),
        (("init", "grad", "decay"), (True, True, True, True)),
    ],
)
def test_teir_parts_alone_or_together_reach_the_optimizer(world, parts, expected):
    settings = C.teir_parts(parts=parts)
    assert (
        settings["teir_init"],
        settings["teir_reg"],
        settings["teir_reg_grad"],
        settings["teir_reg_decay"],
    ) == expected
    encoder = encoder_for(world)
    (task,) = start_tasks(world, encoder, 1, **settings)
    optimizer = task.make_optimizer(task.parameters_to_train(), C.loop_config(task.config, task))
    if settings["teir_reg"]:
        assert (optimizer.scale_gradients, optimizer.scale_weight_decay) == expected[2:]
    else:
        assert task.lambdas is None
    assert C.teir_parts(teir=True) == C.teir_parts(parts=("init", "grad", "decay"))
    with pytest.raises(ConfigError, match="choose one"):
        C.teir_parts(teir=True, parts=("init",))
    with pytest.raises(ConfigError, match="--teir-part"):
        C.teir_parts(parts=("both",))


def test_token_sets_by_vocabulary_membership_give_other_lambdas(world):
    from mltk.cll_clip.teir import token_lambdas

    by_text = start_tasks(world, encoder_for(world), 2, teir_reg=True)[1].lambdas
    by_vocab = start_tasks(world, encoder_for(world), 2, teir_reg=True, token_sets="vocabulary")[1].lambdas
    vocabulary = world["vocab"]["de"]
    ids, counts = vocabulary.token_set("vocabulary")
    assert torch.equal(by_vocab, token_lambdas(ids, counts, special_ids=[49406, 49407]))
    assert not torch.equal(by_text, by_vocab)


def test_the_mse_form_reaches_the_loss(world):
    (task,) = start_tasks(world, encoder_for(world), 1, mse_form="sum", gamma1=0.0)
    image, text, teacher = torch.zeros(2, 4), torch.tensor([[1.0, 2, 0, 0], [0, 0, 0, 3]]), torch.zeros(2, 4)
    assert task.pair_loss(image, text, teacher).item() == pytest.approx((1 + 4 + 9) / 2)


# ----------------------------------------------------------------------------------------------------------------
# The oracle vocabulary and the joint bound
# ----------------------------------------------------------------------------------------------------------------


def test_the_joint_bound_trains_every_language_at_once_with_the_oracle_vocabulary(world):
    import json

    from mltk.vocab import load_vocabulary

    out = C.train_continual(
        config(world, "joint", languages=("en", "de"), joint=True, steps=2, keep_task_checkpoints=True)
    )
    document = json.loads((out / "continual.json").read_text())
    matrix = document["continual"]["matrix"]
    assert len(matrix) == 1 and None not in matrix[0]  # one task, tested on every language
    assert document["continual"]["AR"] == [pytest.approx(sum(matrix[0]) / 2)]
    assert document["method"]["teir"]["variant"] == "joint-plain"
    oracle = load_vocabulary(out / "vocabs" / "oracle")
    assert [t["lang"] for t in oracle.tasks] == ["en+de"]
    assert json.loads((out / "config.json").read_text())["vocab_size"] == oracle.vocab_size
    with pytest.raises(ConfigError, match="--joint"):
        config(world, joint=True, method="lora").check()


def test_the_oracle_vocabulary_grows_the_table_once_and_counts_earlier_tasks_texts(world, tmp_path):
    cfg = config(world, languages=("en", "de"), oracle_vocab=True)
    from mltk.vocab import clip_vocabulary

    first = C.task_vocabulary(cfg, 0, ["en", "de"], clip_vocabulary(), _captions(world), tmp_path)
    second = C.task_vocabulary(cfg, 1, ["en", "de"], first, _captions(world), tmp_path)
    assert first.parent_size == 49408 and second.parent_size == second.vocab_size == first.vocab_size
    english = first.task_token_freq > 0
    assert np.array_equal(second.prior_task_counts[49408:], english[49408:].astype(np.int64))
    assert (second.prior_task_counts[:49408] >= 1).all()
    assert cfg.variant == "oracle-plain"


def _captions(world):
    from mltk import artifacts

    return artifacts.load_captions(world["captions"])


@pytest.mark.slow  # ~8 s a method on 2 shared cores; the TEIR column of every method runs in the default suite
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_completes_a_tiny_run_without_teir(world, method):
    """The smoke run of the continual table's plain column (the TEIR column: test_continual.py's every-method test;
    the joint bound: test_the_joint_bound_trains_every_language_at_once_with_the_oracle_vocabulary)."""
    import json

    vocabs = world["root"] / "vocabs-en-de"  # the world's two vocabularies, so that no run trains BPE again
    if not vocabs.exists():
        vocabs.mkdir()
        for lang in ("en", "de"):
            (vocabs / lang).symlink_to(world["vocab"][lang].path)
    out = C.train_continual(
        config(
            world,
            f"plain-{method}",
            languages=("en", "de"),
            method=method,
            steps=1,
            options=SMALL.get(method),
            vocab_dir=vocabs,
            val_images=8,
        )
    )
    document = json.loads((out / "continual.json").read_text())
    assert document["method"]["teir"]["variant"] == "plain"
    assert len(document["continual"]["matrix"]) == 2 and None not in document["continual"]["matrix"][1]


def test_checkpoints_with_the_old_flat_options_keep_their_meaning(tmp_path):
    """train-continual checkpoints written before per-method options recorded one flat set for every method."""
    from mltk.cll_clip.model import legacy_options

    old = {
        "ewc_lambda": 1000.0,
        "ewc_gamma": 1.0,
        "fisher_batches": 2,
        "memory_size": 40,
        "replay_batch": None,
        "der_alpha": 0.5,
        "adapter_hidden": 16,
        "lora_rank": 8,
        "lora_alpha": 16.0,
        "ptuning_length": 30,
        "coda_components": 2,
        "coda_length": 8,
        "coda_layers": [0, 1, 2, 3, 4],
    }
    assert legacy_options("der", old, 128, tmp_path) == {
        "memory_size": 40,
        "replay_batch": None,
        "alpha": 0.5,
        "replay_loss": "separate",
    }
    assert legacy_options("mla", old, 128, tmp_path) == {"position": "block", "reduction": 8, "init": "zero"}
    assert legacy_options("codaprompt", old, 128, tmp_path) == {
        "components": 2,
        "length": 8,
        "layers": [0, 1, 2, 3, 4],
        "tasks": 36,
    }
    assert legacy_options("cll-clip", old, 128, tmp_path) == {}
    for method in ("der", "mla", "codaprompt", "oewc", "er", "cll-clip"):
        method_options(method, legacy_options(method, old, 128, tmp_path))  # valid options of the method
    assert legacy_options("lora", {"rank": 8}, 128, tmp_path) == {"rank": 8}  # the current form passes through
    with pytest.raises(ConfigError, match="older mltk"):
        legacy_options("lora", old, 128, tmp_path)
