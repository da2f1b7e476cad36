"""train-continual: CLL-CLIP's expandable table, TEIR in training, each baseline's mechanism, resume, pictures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.cll_clip.base import TaskContext
from mltk.cll_clip.blocks import attention_block, forward_text
from mltk.cll_clip.ewc import accumulate_fisher, ewc_penalty
from mltk.cll_clip.methods import make_method
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.cll_clip.replay import Reservoir
from mltk.core.runtime import resolve_runtime
from mltk.encode.text_encoders import ClipTextEncoder, load_text_encoder
from mltk.encode.texts import encode_captions
from mltk.metrics.retrieval import evaluate_retrieval
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.text import trim_tokens
from mltk.recipes import load_recipe
from mltk.settings import resolve
from mltk.train import continual as C
from mltk.train.loop import fit
from mltk.train.stage import replace_settings
from mltk.train.step_log import read_steps_csv
from mltk.train.teacher import teacher_embeddings
from mltk.vocab import clip_vocabulary, load_vocabulary, select_captions, train_vocabulary, write_vocabulary

runner = CliRunner()
LANGS = ("en", "de", "ru")
# Small settings for the tiny tower (width 128, 4 blocks), through each method's own options.
SMALL = {
    "oewc": {"fisher_batches": 2},
    "er": {"memory_size": 40},
    "der": {"memory_size": 40},
    "mla": {"reduction": 8},
    "codaprompt": {"components": 2},
    "ptuning": {"bottleneck": 32},
}
TASK_SPECIFIC = {"mla", "lora", "ptuning"}  # one set per language, chosen by the task identity
# steps.csv: each method's own loss terms, unweighted, and the weight (option) of each in the optimised loss
# (ER's replayed examples join the batch's InfoNCE; their distillation is a mean of its own, weighted by gamma2)
METHOD_TERMS = {
    "oewc": {"ewc_penalty": 1000.0},
    "er": {"replay_mse": 1.0},
    "der": {"der_mse": 1.0},
    "dualprompt": {"prompt_pull": 1.0},
}

CLL_TEMPERATURE = load_recipe("cll-clip").config["temperature"]
METHOD_VALUES = load_recipe("cll-clip").methods  # each method's options, as the recipe gives them


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny synthetic world, a random-weight base CLIP saved as a checkpoint, image embeddings, vocabularies for
    en then de, and the training corpus."""
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images

    root = tmp_path_factory.mktemp("continual")
    result = synthesize(root / "world", SynthConfig(train=48, val=16, test=16, langs=LANGS))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    images = encode_images(result.images_path, root / "img", model=str(native), device="cpu", workers=0)
    captions = artifacts.load_captions(result.captions_path)
    vocab_en = write_vocabulary(train_vocabulary(select_captions(captions, "en"), "en", None, 600, 2), root / "v-en")
    vocab_de = write_vocabulary(
        train_vocabulary(select_captions(captions, "de"), "de", load_vocabulary(vocab_en), 600, 2), root / "v-de"
    )
    runtime = resolve_runtime("cpu", "fp32")
    clip = load_clip(str(native))
    image_table, vectors = artifacts.load_embeddings(images)
    vectors = np.asarray(vectors, dtype=np.float32)
    image_row = {image_id: i for i, image_id in enumerate(image_table.column("id").to_pylist())}
    teacher = ClipTextEncoder(clip)
    corpus = C.Corpus(
        captions,
        "train",
        list(LANGS),
        image_row,
        torch.from_numpy(vectors),
        lambda ids, texts: teacher_embeddings(teacher, clip.spec, ids, texts, runtime, root / "cache"),
        result.captions_path,
    )
    val = C.split_task_data(captions, image_table, vectors, "val", list(LANGS), result.captions_path)
    test = C.split_task_data(captions, image_table, vectors, "test", list(LANGS), result.captions_path)
    return {
        "root": root,
        "captions": result.captions_path,
        "native": native,
        "images": images,
        "clip": clip,
        "vocab": {"en": load_vocabulary(vocab_en), "de": load_vocabulary(vocab_de)},
        "corpus": corpus,
        "val": val,
        "test": test,
        "runtime": runtime,
    }


def config(world, out="unused", **changes) -> C.ContinualTrainConfig:
    base = C.ContinualTrainConfig(
        images=world["images"],
        captions=world["captions"],
        out=world["root"] / out,
        model=str(world["native"]),
        languages=LANGS,
        vocab_size=600,
        steps=2,
        batch_size=8,
        device="cpu",
        cache_dir=world["root"] / "cache",
    )
    if "method" in changes:
        changes.setdefault("options", None)  # the options of plain CLL-CLIP do not fit another method
    return resolve(replace_settings(base, lr=1e-2, **changes), "train-continual")


def encoder_for(world, method: str = "cll-clip", **options) -> ContinualTextEncoder:
    return ContinualTextEncoder(
        world["clip"],
        clip_vocabulary().tokenizer,
        make_method(method, {**METHOD_VALUES.get(method, {}), **options}, world["clip"]),
        init_temperature=CLL_TEMPERATURE,
    )


def start_tasks(world, encoder, count: int, **changes) -> list[C.CllClipTask]:
    """Prepare tasks en (and de) on ``encoder`` without training them; returns the task objects."""
    cfg = config(world, **changes)
    return [
        C.prepare_task(cfg, encoder, world["corpus"], world["vocab"][lang], index, lang, world["val"], world["runtime"])
        for index, lang in enumerate(("en", "de")[:count])
    ]


def train(task: C.CllClipTask, state_dir) -> None:
    result = fit(task, C.loop_config(task.config, task), task.runtime, state_dir)
    params = task.parameters_to_train()
    with torch.no_grad():
        for name, value in result.best_state.items():
            params[name].copy_(value)


# ----------------------------------------------------------------------------------------------------------------
# The encoder
# ----------------------------------------------------------------------------------------------------------------


def test_forward_text_equals_the_towers_own_forward(world):
    encoder = encoder_for(world)
    tokens, pool = trim_tokens(encoder.tokenize(["a red circle", "two blue squares left of a green star"]), 49407)
    x = F.embedding(tokens, encoder.table)
    expected = encoder.tower.forward_embeddings(x, pool + 1)
    assert torch.allclose(forward_text(encoder.tower, x, pool + 1), expected, atol=1e-5)


def test_english_keeps_clips_ids_and_pooling_uses_the_first_end_token(world):
    encoder = encoder_for(world)
    start_tasks(world, encoder, 2)
    english = "two red circles above a blue square"
    assert encoder.tokenize([english]).tolist() == world["clip"].tokenizer([english])[:, :77].tolist()
    german = world["corpus"].texts["de"][0]
    tokens = encoder.tokenize([german], "de")
    assert int(tokens.max()) > 49407  # new tokens: the end token is no longer the largest id
    end = int((tokens[0] == 49407).nonzero()[0])
    x = F.embedding(tokens[:, : end + 1], encoder.table)
    expected = encoder.tower.forward_embeddings(x, torch.tensor([end + 1]))
    assert torch.allclose(encoder.encode_tokens(tokens, "de"), expected, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# TEIR inside training
# ----------------------------------------------------------------------------------------------------------------


def test_teir_freezes_absent_and_special_rows_and_draws_new_rows_from_the_table(world, tmp_path):
    encoder = encoder_for(world)
    old_table = encoder.table.detach().clone()
    _, task = start_tasks(world, encoder, 2, teir_init=True, teir_reg=True)
    parent = world["vocab"]["de"].parent_size
    new_rows = encoder.table.detach()[parent:]
    assert new_rows.numel() > 1000
    assert abs(new_rows.mean().item() - old_table.mean().item()) < 0.01
    assert abs(new_rows.std().item() - old_table.std().item()) < 0.01
    before = encoder.table.detach().clone()
    train(task, tmp_path / "state")
    frozen = task.lambdas == 0
    assert frozen[[49406, 49407]].all()
    after = encoder.table.detach()
    assert torch.equal(after[frozen], before[frozen])  # absent tokens and specials: not updated, not decayed
    assert (after[~frozen] != before[~frozen]).any(dim=1).all()  # every token of the German text moved
    assert isinstance(task.make_optimizer(task.parameters_to_train(), C.loop_config(task.config, task)), C.TeirAdamW)


def test_plain_cll_clip_trains_every_row_and_draws_new_rows_from_n_0_002(world, tmp_path):
    encoder = encoder_for(world)
    _, task = start_tasks(world, encoder, 2)
    parent = world["vocab"]["de"].parent_size
    assert abs(encoder.table.detach()[parent:].std().item() - 0.02) < 0.003
    before = encoder.table.detach().clone()
    train(task, tmp_path / "state")
    after = encoder.table.detach()
    assert task.lambdas is None
    assert not torch.equal(after[49407], before[49407])  # the end token (where features are pooled) moves
    assert (after != before).any(dim=1).all()  # weight decay reaches every row


# ----------------------------------------------------------------------------------------------------------------
# Baselines
# ----------------------------------------------------------------------------------------------------------------


def test_reservoir_keeps_a_uniform_sample_of_the_stream():
    capacity, stream, trials = 20, 100, 4000
    hits = np.zeros(stream)
    for trial in range(trials):
        memory = Reservoir(capacity)
        items = np.stack([np.zeros(stream, np.int64), np.arange(stream)], axis=1)
        memory.add(items[:60], np.random.default_rng([7, trial, 0]))  # two tasks of the stream, one after the other
        memory.add(items[60:], np.random.default_rng([7, trial, 1]))
        assert len(memory) == capacity and memory.seen == stream and len(set(memory.items[:, 1])) == capacity
        hits[memory.items[:, 1]] += 1
    frequency = hits / trials  # every item should be kept with probability capacity / stream = 0.2
    assert np.abs(frequency - 0.2).max() < 0.035  # ~5.5 standard deviations of a binomial(4000, 0.2) mean
    assert abs(frequency[:60].mean() - frequency[60:].mean()) < 0.01  # early items are not favoured


def test_er_replays_earlier_tasks_and_der_regresses_stored_features(world):
    encoder = encoder_for(world, "er", memory_size=50, replay_loss="separate")
    (en,) = start_tasks(world, encoder, 1)
    encoder.method.end_task(en.context)
    memory = encoder.method.memory
    assert len(memory) == 50 and memory.seen == world["corpus"].size("en") and (memory.items[:, 0] == 0).all()
    _, de = start_tasks(world, encoder_for(world, "er", memory_size=50, replay_loss="separate"), 2)
    de.method.memory = memory
    de.method.begin_task(de.context)
    assert de.method.replay.tokens.shape[0] == 50
    loss, terms = de.method.extra_loss(de.context, 0)
    assert torch.isfinite(loss) and loss > 0
    assert sorted(terms) == ["replay_infonce", "replay_mse"]  # logged unweighted: gamma1, gamma2 weigh them
    assert torch.allclose(loss, 0.01 * terms["replay_infonce"] + terms["replay_mse"])

    encoder = encoder_for(world, "der", memory_size=30, replay_loss="separate")
    (en,) = start_tasks(world, encoder, 1)
    encoder.method.end_task(en.context)
    encoder.method.begin_task(en.context)  # replay the memory with the weights that recorded it
    assert encoder.method.features.shape == (30, 128)
    assert encoder.method.extra_loss(en.context, 3)[0].item() < 1e-10
    with torch.no_grad():
        encoder.table[:49406] += 0.05 * torch.randn_like(encoder.table[:49406])
    loss, terms = encoder.method.extra_loss(en.context, 3)
    assert loss.item() > 1e-6 and torch.equal(loss, terms["der_mse"])  # alpha = 1


def test_ewc_penalty_is_zero_at_the_anchor_and_weighted_by_the_fisher(world):
    anchor = torch.zeros(3, 2)
    fisher = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    table = torch.zeros(4, 2)  # one more row than the anchor: a token added later is free
    assert ewc_penalty(table, fisher, anchor, 1000.0).item() == 0
    table[0, 0], table[1, 1], table[3] = 0.1, 5.0, 9.0  # only (0, 0) carries information
    assert ewc_penalty(table, fisher, anchor, 1000.0).item() == pytest.approx(1000 * 1.0 * 0.01)
    table[1, 0] = 0.1
    assert ewc_penalty(table, fisher, anchor, 1000.0).item() == pytest.approx(1000 * 3.0 * 0.01)
    assert ewc_penalty(table, fisher, anchor, 1000.0, half=True).item() == pytest.approx(0.5 * 1000 * 3.0 * 0.01)
    grown = accumulate_fisher(fisher, torch.ones(4, 2), gamma=0.5)
    assert torch.equal(grown, torch.cat([0.5 * fisher + 1, torch.ones(1, 2)]))

    encoder = encoder_for(world, "oewc", fisher_batches=2)
    (en,) = start_tasks(world, encoder, 1)
    encoder.method.end_task(en.context)
    information = encoder.method.fisher
    assert information.shape == encoder.table.shape and (information >= 0).all()
    unused = torch.ones(encoder.vocab_size, dtype=torch.bool)
    unused[en.data.tokens.unique()] = False
    assert information[unused].abs().sum() == 0 and information[~unused].sum() > 0
    assert encoder.method.extra_loss(en.context, 0)[0].item() == 0
    with torch.no_grad():
        encoder.table += 0.01
    loss, terms = encoder.method.extra_loss(en.context, 0)
    assert loss.item() > 0 and list(terms) == ["ewc_penalty"]
    assert loss.item() == pytest.approx(1000 * terms["ewc_penalty"].item(), rel=1e-6)  # logged at lambda = 1


def test_language_adapters_isolate_languages(world):
    encoder = encoder_for(world, "mla", reduction=8, init="zero")
    text = ["a red circle"]
    plain = encoder.encode(text, "en")
    en, de = start_tasks(world, encoder, 2)
    adapters = encoder.method.adapters
    assert list(adapters) == ["en", "de"] and encoder.method.needs_task_identity
    assert torch.allclose(encoder.encode(text, "de"), plain, atol=1e-6)  # an untrained adapter is the identity
    assert set(de.parameters_to_train()) == {"table", "logit_scale"} | {
        f"method.adapters.de.{k}" for k, _ in adapters["de"].named_parameters()
    }
    assert not any(p.requires_grad for p in adapters["en"].parameters())
    with torch.no_grad():
        for p in adapters["de"].parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    assert torch.allclose(encoder.encode(text, "en"), plain, atol=1e-6)  # English never reads German's adapter
    assert not torch.allclose(encoder.encode(text, "de"), plain, atol=1e-3)


def test_lora_starts_as_identity_and_changes_only_queries_and_values(world):
    encoder = encoder_for(world, "lora")
    text = ["two green triangles"]
    plain = encoder_for(world).encode(text)
    start_tasks(world, encoder, 1)
    assert torch.allclose(encoder.encode(text, "en"), plain, atol=1e-5)
    lora = encoder.method
    assert set(lora.trainable()) == {"sets.en.down", "sets.en.up"} and lora.sets["en"].down.shape == (4, 2, 8, 128)
    block = encoder.tower.blocks[0]
    x = torch.randn(1, 5, 128, generator=torch.Generator().manual_seed(0))
    mask = encoder.tower.attn_mask[:5, :5]
    delta = torch.randn(1, 5, 128)
    base = attention_block(block, x, mask, 0)
    query_only = attention_block(block, x, mask, 0, qv_delta=lambda i, h: (delta, None))
    value_only = attention_block(block, x, mask, 0, qv_delta=lambda i, h: (None, delta))
    # position 0 attends to itself alone: a new query cannot change it, a new value must
    assert torch.allclose(query_only[:, 0], base[:, 0], atol=1e-6) and not torch.allclose(query_only, base)
    assert not torch.allclose(value_only[:, 0], base[:, 0])
    with torch.no_grad():
        lora.sets["en"].up.normal_(0, 0.1)
    assert not torch.allclose(encoder.encode(text, "en"), plain, atol=1e-3)


def test_method_hooks_receive_the_typed_task_context(world):
    encoder = encoder_for(world, "er", memory_size=20)
    seen = []
    original = encoder.method.begin_task
    encoder.method.begin_task = lambda task: seen.append(task) or original(task)
    _, de = start_tasks(world, encoder, 2)
    assert [type(task) for task in seen] == [TaskContext, TaskContext]
    assert seen[1] is de.context and (seen[1].index, seen[1].lang) == (1, "de")
    context = de.context
    assert context.encoder is encoder and context.corpus is world["corpus"]
    assert (context.steps, context.batch_size) == (de.steps, de.batch_size)
    with torch.no_grad():
        assert torch.equal(context.data_loss(0), de.data_loss(0))
    assert torch.equal(context.sample_tokens(5), de.sample_tokens(5))
    with pytest.raises(AttributeError):  # frozen: a hook cannot rewire the task
        context.lang = "fr"


def test_dualprompt_trains_the_current_expert_and_selects_experts_by_key(world):
    encoder = encoder_for(world, "dualprompt")
    en, de = start_tasks(world, encoder, 2)
    method = encoder.method
    assert method.trained == 2 and method.g_layers == [0, 1] and method.e_layers == [2, 3]
    assert set(de.parameters_to_train()) == {
        "table",
        "logit_scale",
        "method.g_prompt",
        "method.e_prompts.1",
        "method.e_keys.1",
    }
    tokens = encoder.tokenize(["a red circle", "ein roter kreis"])
    encoder.train()
    encoder.encode_tokens(tokens, "de")
    assert method.pop_auxiliary_loss() is not None  # the key-query matching loss of the current expert
    from mltk.cll_clip.prompts import prompt_query

    trimmed, pool = trim_tokens(tokens, 49407)
    query = prompt_query(encoder, F.embedding(trimmed, encoder.table), pool + 1)
    with torch.no_grad():
        method.e_keys[0].copy_(query[1])
        method.e_keys[1].copy_(query[0])
    assert method.select(query).tolist() == [1, 0]
    encoder.eval()
    chosen = encoder.encode_tokens(tokens)
    with torch.no_grad():
        method.e_keys[0].copy_(query[0])
        method.e_keys[1].copy_(query[1])
    assert not torch.allclose(encoder.encode_tokens(tokens), chosen, atol=1e-4)
    assert method.pop_auxiliary_loss() is None


def test_codaprompt_adds_orthogonal_components_and_weights_them_by_attention(world):
    encoder = encoder_for(world, "codaprompt", components=3)
    start_tasks(world, encoder, 2)
    method = encoder.method
    assert [p.shape for p in method.prompts] == [(3, 4, 2, 128)] * 2  # length 2: one key and one value
    assert not method.prompts[0].requires_grad and method.prompts[1].requires_grad
    for store in (method.prompts, method.keys):
        old, new = (p.detach().reshape(3, 4, -1) for p in store)
        for layer in range(4):
            products = torch.cat([old[:, layer], new[:, layer]]) @ torch.cat([old[:, layer], new[:, layer]]).T
            assert torch.allclose(products, torch.eye(6), atol=1e-5)
    query = F.normalize(torch.randn(2, 128), dim=-1)
    keys, attention = torch.cat(list(method.keys)), torch.cat(list(method.attention))
    manual = F.cosine_similarity(query[:, None, None] * attention[None], keys[None], dim=-1)
    assert torch.allclose(method.weights(query), manual, atol=1e-5)


@pytest.mark.parametrize("method", ["mla", "codaprompt", "dualprompt", "lora", "ptuning"])
def test_checkpoints_rebuild_the_method_structure(world, tmp_path, method):
    encoder = encoder_for(world, method, **SMALL.get(method, {}))
    start_tasks(world, encoder, 2)
    with torch.no_grad():
        for p in encoder.method.parameters():
            p.add_(0.01 * torch.randn_like(p))
    encoder.trained_languages = ["en", "de"]
    path = C.write_task_checkpoint(
        tmp_path / "ckpt", encoder, world["vocab"]["de"], {"task": 1, "lang": "de"}, config(world, method=method)
    )
    loaded = load_text_encoder(path)
    encoder.eval()
    texts = world["corpus"].texts["de"][:4]
    assert torch.allclose(loaded.encode(texts, "de"), encoder.encode(texts, "de"), atol=1e-5)
    assert json.loads((path / "config.json").read_text())["needs_task_identity"] == (method in TASK_SPECIFIC)


# ----------------------------------------------------------------------------------------------------------------
# The whole run: CLI, matrix, pictures, resume
# ----------------------------------------------------------------------------------------------------------------


def cli_arguments(world, out):
    return [
        "train-continual",
        str(world["images"]),
        "--captions",
        str(world["captions"]),
        "--out",
        str(out),
        "--model",
        str(world["native"]),
        "--lang",
        "en,de,ru",
        "--teir",
        "--vocab-size",
        "600",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--lr",
        "1e-2",
        "--keep-task-checkpoints",
        "--device",
        "cpu",
        "--cache-dir",
        str(world["root"] / "cache"),
    ]


@pytest.fixture(scope="module")
def cli_run(world):
    out = world["root"] / "teir"
    return out, runner.invoke(app, cli_arguments(world, out))


def test_rerun_with_json_prints_the_final_ar_and_f(world, cli_run):
    out, _ = cli_run
    result = runner.invoke(app, cli_arguments(world, out) + ["--json"])
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    continual = json.loads((out / "continual.json").read_text())["continual"]
    assert printed == {
        "path": str(out.resolve()),
        "tasks": list(LANGS),
        "AR": continual["AR"][-1],
        "F": continual["F"][-1],
    }


def test_train_continual_writes_a_checkpoint_with_the_matrix_and_pictures(world, cli_run):
    out, result = cli_run
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    document = json.loads((out / "continual.json").read_text())
    continual = document["continual"]
    assert continual["tasks"] == list(LANGS) and continual["metric"] == "t2i.R@1"
    matrix = continual["matrix"]
    assert [sum(v is not None for v in row) for row in matrix] == [1, 2, 3]
    assert continual["AR"][2] == pytest.approx(np.mean(matrix[2]))
    assert document["method"]["teir"]["variant"] == "teir" and not document["method"]["needs_task_identity"]
    assert [t["vocabulary"]["size"] for t in document["per_task"]] == sorted(
        t["vocabulary"]["size"] for t in document["per_task"]
    )
    for name in ("continual_matrix.png", "continual_curve.png"):
        assert Image.open(out / name).size[0] > 300
        assert (out / name).with_suffix(".svg").read_bytes().startswith(b"<?xml")
    assert sorted(p.name for p in (out / "steps").iterdir()) == ["00-en.csv", "01-de.csv", "02-ru.csv"]
    assert load_vocabulary(out / "vocab").languages == list(LANGS)
    assert sorted(p.name for p in (out / "tasks").iterdir()) == ["00-en", "01-de", "02-ru"]
    # the checkpoint is a text encoder for evaluate/index: it reproduces the last row of the matrix
    encoder = load_text_encoder(out)
    test = world["test"]
    table, vectors = encode_captions(encoder, test.captions, world["runtime"], languages=list(LANGS))
    again = evaluate_retrieval(test.image_table, test.image_vectors, table, vectors)
    assert [again["per_language"][lang]["t2i"]["R@1"] for lang in LANGS] == pytest.approx(matrix[2])
    # TEIR froze the rows of tokens absent from the Russian text between the last two tasks
    before, _ = artifacts.load_checkpoint(out / "tasks" / "01-de")
    after, _ = artifacts.load_checkpoint(out / "tasks" / "02-ru")
    rows = before["table"].shape[0]
    assert torch.equal(after["table"][49406:49408], before["table"][49406:49408])
    assert (after["table"][:rows] == before["table"]).all(dim=1).sum() > rows - 500


def test_an_interrupted_run_resumes_to_the_same_result(world, cli_run, tmp_path):
    out, _ = cli_run
    cfg = config(world, "resumed", teir_init=True, teir_reg=True, keep_task_checkpoints=True)

    def interrupt(task, step, loss):
        if task == 1 and step == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        C.train_continual(cfg, on_step=interrupt)
    partial = artifacts.partial_dir(cfg.out)
    assert (partial / "tasks" / "00-en").is_dir() and (partial / "train" / "01-de").is_dir()
    assert not cfg.out.exists()
    with pytest.raises(Exception, match="other settings"):
        C.train_continual(replace_settings(cfg, lr=1e-3))
    C.train_continual(cfg)
    expected, _ = artifacts.load_checkpoint(out)
    resumed, _ = artifacts.load_checkpoint(cfg.out)
    assert expected.keys() == resumed.keys()
    for key in expected:
        assert torch.equal(expected[key], resumed[key]), key
    first = json.loads((out / "continual.json").read_text())["continual"]
    assert json.loads((cfg.out / "continual.json").read_text())["continual"] == first


def test_bad_options_are_one_line_errors(world, tmp_path):
    base = [
        "train-continual",
        str(world["images"]),
        "--captions",
        str(world["captions"]),
        "--out",
        str(tmp_path / "x"),
        "--model",
        str(world["native"]),
        "--device",
        "cpu",
    ]
    result = runner.invoke(app, base + ["--teir", "--teir-init-only"])
    assert result.exit_code == 2 and "--teir" in result.stderr
    result = runner.invoke(app, base + ["--method", "gem"])
    assert result.exit_code == 2 and "--method must be one of" in result.stderr
    result = runner.invoke(app, base + ["--continual-metric", "t2i.R@3"])
    assert result.exit_code == 2 and "--continual-metric" in result.stderr
    result = runner.invoke(app, base + ["--metric", "t2i.R@3"])  # the old spelling, hidden
    assert result.exit_code == 2 and "--continual-metric" in result.stderr
    result = runner.invoke(app, base + ["--vocab-size", "100"])  # refused before any model or teacher work
    assert result.exit_code == 2 and "--vocab-size must be at least 514" in result.stderr
    assert "teacher" not in result.stderr
    vocab_dir = tmp_path / "vocabs"
    shutil.copytree(world["vocab"]["de"].path, vocab_dir / "en")  # the de chain where en alone is expected
    result = runner.invoke(app, base + ["--vocab-dir", str(vocab_dir), "--cache-dir", str(world["root"] / "cache")])
    last = result.stderr.strip().splitlines()[-1]
    assert (
        result.exit_code == 2 and last.startswith("mltk train-continual: error:") and "task chain en,de, not en" in last
    )


def test_method_options_given_with_set_are_checked_against_the_method_in_one_line(world, tmp_path):
    base = [
        "train-continual",
        str(world["images"]),
        "--captions",
        str(world["captions"]),
        "--out",
        str(tmp_path / "x"),
        "--model",
        str(world["native"]),
        "--device",
        "cpu",
        "--method",
        "lora",
    ]
    result = runner.invoke(app, base + ["--set", "method.bogus=1"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert (
        "--set method.bogus: not an option of method lora (its options: rank, alpha, dropout, targets)" in result.stderr
    )
    result = runner.invoke(app, base + ["--set", "method.rank=0"])  # the type fits; LoraOptions.check refuses it
    assert result.exit_code == 2 and "the options of method lora: rank must be at least 1" in result.stderr
    result = runner.invoke(app, base + ["--set", "methods.er.memory_size=5"])  # a value that would do nothing
    assert result.exit_code == 2 and "the run's method is lora, which does not read er's options" in result.stderr
    assert not (tmp_path / "x").exists()


def test_set_method_rank_reaches_the_lora_method_and_its_checkpoint(world, tmp_path):
    result = runner.invoke(
        app,
        [
            "train-continual",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "-o",
            str(tmp_path / "lora"),
            "--model",
            str(world["native"]),
            "--device",
            "cpu",
            "--lang",
            "en,de",
            "--vocab-size",
            "600",
            "--steps",
            "1",
            "--batch-size",
            "8",
            "--val-images",
            "8",
            "--cache-dir",
            str(world["root"] / "cache"),
            "--method",
            "lora",
            "--set",
            "method.rank=4",
            "--set",
            "methods.lora.alpha=2",
        ],
    )
    assert result.exit_code == 0, result.stderr
    out = Path(result.stdout.strip())
    document = json.loads((out / "continual.json").read_text())
    assert document["method"]["options"] == {"rank": 4, "alpha": 2.0, "dropout": 0.0, "targets": "q+v"}
    assert artifacts.read_manifest(out)["created_by"]["config"]["options"]["rank"] == 4
    encoder = load_text_encoder(out)
    assert encoder.method.options.rank == 4
    downs = [t for name, t in encoder.method.state_dict().items() if name.endswith("down")]
    assert downs and all(t.shape[-2] == 4 for t in downs)  # A [blocks, targets, r, W]


@pytest.mark.parametrize(
    "method", ["cll-clip", "oewc", "er", "der", "mla", "lora", "ptuning", "dualprompt", "codaprompt"]
)
def test_every_method_trains_a_sequence_and_its_checkpoint_reproduces_the_matrix(world, method):
    cfg = config(
        world,
        f"run-{method}",
        languages=("en", "de"),
        method=method,
        teir_init=True,
        teir_reg=True,
        options=SMALL.get(method),
    )
    out = C.train_continual(cfg)
    document = json.loads((out / "continual.json").read_text())
    assert document["method"]["name"] == method
    assert document["method"]["needs_task_identity"] == (method in TASK_SPECIFIC)
    assert ("task-specific" in document["settings"]["task_identity"]) == (method in TASK_SPECIFIC)
    assert document["method"]["options"] == {**METHOD_VALUES.get(method, {}), **SMALL.get(method, {})}
    encoder = load_text_encoder(out)
    test = world["test"]
    table, vectors = encode_captions(encoder, test.captions, world["runtime"], languages=["en", "de"])
    again = evaluate_retrieval(test.image_table, test.image_vectors, table, vectors)
    assert [again["per_language"][lang]["t2i"]["R@1"] for lang in ("en", "de")] == pytest.approx(
        document["continual"]["matrix"][1]
    )
    # the second task's steps.csv: CLL-CLIP's terms and the method's, whose weighted sum is the loss
    own = METHOD_TERMS.get(method, {})
    rows = read_steps_csv(out / "steps" / "01-de.csv")
    header = list(rows[0])
    assert header[header.index("loss") + 1 : header.index("lr")] == ["infonce", "mse", "logit_scale", *own]
    weights = {"infonce": cfg.gamma1, "mse": cfg.gamma2, **own}
    for row in rows:
        assert sum(weight * row[name] for name, weight in weights.items()) == pytest.approx(row["loss"], rel=1e-5)
        assert 10 < row["logit_scale"] < 20  # CLL-CLIP's learnt 1/T, from 1/0.07
        assert all(row[name] > 0 for name in weights)


def test_a_per_language_method_without_its_module_is_refused_when_defined():
    """PerLanguageMethod's one hook has no default: a subclass that forgets it fails at its definition, not at
    the first task of a run."""
    from mltk.cll_clip.base import PerLanguageMethod

    with pytest.raises(TypeError, match="must define new_module"):

        class Forgetful(PerLanguageMethod):  # defining it is the test
            modules_name = "forgotten"
