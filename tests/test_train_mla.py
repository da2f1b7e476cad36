"""MLA training stages end to end on a tiny world: NLT, LE, exact resume, adding a language, teacher cache."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.train import mla
from mltk.train.stage import replace_settings
from mltk.train.step_log import STEPS_CSV, read_steps_csv, step_logging

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A small synthetic world, a random-weight 'native' CLIP saved as a checkpoint, image embeddings and a BPE
    vocabulary grown over German and Russian."""
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("world")
    result = synthesize(root / "world", SynthConfig(train=48, val=16, test=16, langs=("en", "de", "ru", "zh")))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    images = encode_images(result.images_path, root / "img", model=str(native), device="cpu", workers=0)
    vocab = build_vocab(result.captions_path, "de", root / "vocab-de", size=600)
    vocab = build_vocab(result.captions_path, "ru", root / "vocab-ru", parent=vocab, size=600)
    return {"root": root, "captions": result.captions_path, "native": native, "images": images, "vocab": vocab}


def term_columns(out) -> list[str]:
    """The named loss terms of an artifact's steps.csv: the columns between ``loss`` and ``lr``."""
    header = list(read_steps_csv(out / STEPS_CSV)[0])
    return header[header.index("loss") + 1 : header.index("lr")]


def nlt_config(world, out, **changes) -> mla.MlaConfig:
    base = mla.MlaConfig(
        captions=world["captions"],
        out=out,
        model=str(world["native"]),
        tokenizer=str(world["vocab"]),
        languages=("de", "ru"),
        batch_size=8,
        device="cpu",
        cache_dir=world["root"] / "cache",
        loop={"steps": 6, "lr": 1e-3},
    )
    return replace_settings(base, **changes)


def test_train_nlt_cli_writes_a_checkpoint_of_acquirers_only(world, tmp_path):
    out = tmp_path / "nlt"
    result = runner.invoke(
        app,
        [
            "train-nlt",
            str(world["captions"]),
            "--out",
            str(out),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--lang",
            "de,ru",
            "--steps",
            "4",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    tensors, config = artifacts.load_checkpoint(out)
    assert config["format"] == "mla" and config["languages"] == ["de", "ru"]
    assert all(k.startswith(("acquirers.", "embedding.")) for k in tensors)
    assert any(k.startswith("acquirers.ru.") for k in tensors)
    assert term_columns(out) == ["nlt_mse"]
    assert all(row["nlt_mse"] == pytest.approx(row["loss"], rel=1e-6) for row in read_steps_csv(out / STEPS_CSV))


def test_nlt_resumes_exactly_after_an_interruption(world, tmp_path):
    full = mla.train_nlt(nlt_config(world, tmp_path / "full"))

    def interrupt(step, loss):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mla.train_nlt(nlt_config(world, tmp_path / "resumed"), on_step=interrupt)
    assert not (tmp_path / "resumed").exists()  # nothing that looks complete
    resumed = mla.train_nlt(nlt_config(world, tmp_path / "resumed"))
    a, _ = artifacts.load_checkpoint(full)
    b, _ = artifacts.load_checkpoint(resumed)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_resumed_run_records_the_time_of_every_stretch(world, tmp_path, monkeypatch):
    """The manifest's train_seconds is the sum over the interrupted stretch and the resumed one (a fake clock: the
    stage reads it once at each stretch's start and end)."""
    import mltk.train.stage as stage

    readings = iter([100.0, 105.5, 200.0, 207.25])
    monkeypatch.setattr(stage, "time", SimpleNamespace(perf_counter=lambda: next(readings)))

    def interrupt(step, loss):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mla.train_nlt(nlt_config(world, tmp_path / "run"), on_step=interrupt)
    resumed = mla.train_nlt(nlt_config(world, tmp_path / "run"))
    manifest = artifacts.read_manifest(resumed)
    assert manifest["train_stretches_seconds"] == [5.5, 7.2]
    assert manifest["train_seconds"] == 12.7
    assert not (resumed / stage.STRETCHES_FILE).exists()


def test_adding_a_language_leaves_the_others_bit_identical(world, tmp_path):
    first = mla.train_nlt(nlt_config(world, tmp_path / "de", languages=("de",), tokenizer=str(world["vocab"])))
    added = mla.train_nlt(nlt_config(world, tmp_path / "de-ru", languages=("ru",), init=first, tokenizer=None))
    before, _ = artifacts.load_checkpoint(first)
    after, config = artifacts.load_checkpoint(added)
    assert config["languages"] == ["de", "ru"]
    for key, value in before.items():
        assert torch.equal(value, after[key]), key
    assert any(not torch.all(v == 0) for k, v in after.items() if k.startswith("acquirers.ru.") and "c_proj" in k)


def test_teacher_embeddings_are_computed_once(world, tmp_path, monkeypatch):
    """A rerun of the same steps (or any later stage drawing the same pairs) encodes no English sentence again."""
    cache = tmp_path / "cache"
    mla.train_nlt(nlt_config(world, tmp_path / "a", cache_dir=cache, steps=2))
    calls = []
    import mltk.train.teacher as teacher

    monkeypatch.setattr(teacher, "encode_texts", lambda *a, **k: calls.append(1))
    mla.train_nlt(nlt_config(world, tmp_path / "b", cache_dir=cache, steps=2))
    assert calls == []


def test_nlt_teacher_is_encoded_for_the_drawn_pairs_only(world, tmp_path):
    """The teacher of a pair is computed when a step draws it: 2 steps of 8 pairs (and the validation pairs)
    encode far fewer English sentences than the split holds, and the first run of more steps adds only theirs."""
    import pyarrow.compute as pc

    from mltk.train.teacher import KEY

    def cached(cache) -> set:
        return {d for f in cache.rglob("*.parquet") for d in artifacts.read_table(f).column(KEY).to_pylist()}

    captions = artifacts.load_captions(world["captions"])
    english = captions.filter(pc.equal(captions.column("lang"), "en"))
    per_split = {
        split: len(set(english.filter(pc.equal(english.column("split"), split)).column("caption").to_pylist()))
        for split in ("train", "val")
    }
    cache = tmp_path / "cache"
    mla.train_nlt(nlt_config(world, tmp_path / "a", cache_dir=cache, steps=2))
    two_steps = cached(cache)
    assert len(two_steps) <= 2 * 8 + per_split["val"] < per_split["train"]
    mla.train_nlt(nlt_config(world, tmp_path / "b", cache_dir=cache, steps=3))
    assert two_steps < cached(cache) and len(cached(cache)) <= len(two_steps) + 8


def test_nlt_on_demand_trains_the_weights_of_the_teacher_computed_up_front(world, tmp_path, monkeypatch):
    """The teacher computed per step gives the same trained weights as the teacher of every pair encoded in one
    pass before the first step (what train-nlt did before): the schedule draws the same pairs and the targets
    are the same vectors, up to the last bits of float32 (a sentence encoded in a batch of other sentences, trimmed
    to another length, sums in another order), so 6 steps at lr 1e-3 agree to 1e-5 (measured: 3.5e-6)."""
    from mltk.encode.texts import encode_texts

    on_demand = mla.train_nlt(nlt_config(world, tmp_path / "demand", cache_dir=tmp_path / "c1"))
    original = mla._nlt_data

    def teacher_up_front(encoder, config, captions, split, languages, runtime):
        pairs = original(encoder, config, captions, split, languages, runtime)
        texts = sorted({t for english in pairs.english.values() for t in english.to_pylist()})
        vectors = encode_texts(pairs.teacher.encoder, texts, "en", runtime, 256, normalize=False)  # [N, D]
        row_of = {text: i for i, text in enumerate(texts)}
        pairs.targets = lambda lang, index: torch.from_numpy(
            vectors[[row_of[t] for t in pairs.english[lang].take(index).to_pylist()]]
        )
        return pairs

    monkeypatch.setattr(mla, "_nlt_data", teacher_up_front)
    up_front = mla.train_nlt(nlt_config(world, tmp_path / "front", cache_dir=tmp_path / "c2"))
    expected, _ = artifacts.load_checkpoint(up_front)
    got, _ = artifacts.load_checkpoint(on_demand)
    assert expected.keys() == got.keys()
    worst = max(float((value - got[key]).abs().max()) for key, value in expected.items())
    assert worst < 1e-5, worst
    assert any(not torch.all(v == 0) for k, v in got.items() if k.startswith("acquirers.de.") and "c_proj" in k)


def test_teacher_cache_follows_the_weights_not_the_path(world, tmp_path):
    """A base CLIP rewritten at the same path (pretrain rerun) gets new teacher embeddings, not the cached ones."""
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import ClipTextEncoder
    from mltk.train.teacher import teacher_embeddings

    runtime = resolve_runtime("cpu", "fp32")
    native = tmp_path / "native"
    ids, texts = ["c1", "c2"], ["a red circle", "two blue squares"]

    def teacher_of(seed: int) -> np.ndarray:
        torch.manual_seed(seed)
        artifacts.write_checkpoint(
            native, load_clip("mltk-tiny").model.state_dict(), clip_checkpoint_config("mltk-tiny"), stage="pretrain"
        )
        clip = load_clip(str(native))
        return np.array(teacher_embeddings(ClipTextEncoder(clip), clip.spec, ids, texts, runtime, tmp_path / "cache"))

    first, second = teacher_of(0), teacher_of(1)
    expected = ClipTextEncoder(load_clip(str(native))).encode_tokens(load_clip(str(native)).tokenizer(texts), "en")
    assert not np.allclose(first, second)
    np.testing.assert_allclose(second, expected.detach().numpy(), atol=1e-6)


def test_train_le_reads_image_embeddings_from_a_pipe(world, tmp_path):
    nlt = mla.train_nlt(nlt_config(world, tmp_path / "nlt"))
    out = tmp_path / "le"
    result = runner.invoke(
        app,
        [
            "train-le",
            "--captions",
            str(world["captions"]),
            "--init",
            str(nlt),
            "--out",
            str(out),
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--lr",
            "1e-4",
            "--device",
            "cpu",
        ],
        input=f"{world['images']}\n",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(out.resolve())
    manifest = artifacts.read_manifest(out, "checkpoint")
    assert manifest["created_by"]["stage"] == "train-le" and "best_score" in manifest
    assert term_columns(out) == ["le_infonce"]
    assert all(row["le_infonce"] == pytest.approx(row["loss"], rel=1e-6) for row in read_steps_csv(out / STEPS_CSV))


def test_train_le_without_nlt_trains_fresh_acquirers(world, tmp_path):
    """The paper's LE-only ablation: acquirers trained from scratch by the contrastive loss alone."""
    out = tmp_path / "le-only"
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--lang",
            "de",
            "--out",
            str(out),
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    tensors, config = artifacts.load_checkpoint(out)
    assert config["format"] == "mla" and config["languages"] == ["de"]
    assert any(k.startswith("acquirers.de.") for k in tensors)
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--out",
            str(tmp_path / "x"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 2 and "--init" in result.stderr and "--tokenizer" in result.stderr


def test_bad_inputs_are_one_line_errors(world, tmp_path):
    result = runner.invoke(
        app,
        [
            "train-nlt",
            str(world["captions"]),
            "--out",
            str(tmp_path / "x"),
            "--model",
            str(world["native"]),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 2 and "--tokenizer" in result.stderr
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--init",
            str(world["native"]),
            "--out",
            str(tmp_path / "y"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 2 and "not an MLA checkpoint" in result.stderr
    result = runner.invoke(app, ["train-nlt", str(tmp_path / "missing"), "--out", str(tmp_path / "z")])
    assert result.exit_code == 2 and str(tmp_path / "missing") in result.stderr


def test_length_buckets_give_the_features_and_gradients_of_one_batch(world):
    """The acquirer path runs a batch as groups of similar length: same features and gradients as one batch."""
    from mltk.models.multilingual import build_encoder
    from mltk.models.text import trim_tokens

    torch.manual_seed(0)
    encoder = build_encoder(str(world["native"]), None, str(world["vocab"]), ["de"])
    texts = [
        "ein roter Kreis",
        "ein sehr kleiner roter Kreis links von einem großen blauen Quadrat und ein Stern",
        "Quadrat",
        "ein blaues Quadrat links von einem Kreis",
        "Stern",
        "zwei rote Kreise",
        "ein Herz",
        "Kreuz",
        "drei kleine gelbe Sterne über einem großen schwarzen Herz",
    ]
    tokens = encoder.tokenize(texts, "de")
    params = list(encoder.trainable_tensors(["de"]).values())

    tokens, pool_index = trim_tokens(tokens, encoder.non_native.end_token_id)

    def features_and_grads(buckets):
        encoder.zero_grad()
        features = encoder.tower.forward_embeddings(
            encoder.embedding(tokens), pool_index + 1, after_block=encoder.acquirers["de"], buckets=buckets
        )
        (features**2).sum().backward()
        return features.detach(), [p.grad.clone() for p in params]

    one, grads_one = features_and_grads(1)
    bucketed, grads_bucketed = features_and_grads(4)
    assert torch.allclose(bucketed, one, atol=1e-5)
    assert torch.allclose(encoder.encode_tokens(tokens, "de"), one, atol=1e-5)  # the default path buckets
    assert all(torch.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(grads_bucketed, grads_one))


def test_le_temperature_is_fixed_at_a_number_or_at_the_base_clips_own(world, tmp_path):
    from mltk.models.multilingual import build_encoder

    encoder = build_encoder(str(world["native"]), None, str(world["vocab"]), ["de"])
    own = 1.0 / encoder.clip.model.logit_scale.exp().item()
    assert mla.le_temperature(None, encoder) == pytest.approx(own)
    assert mla.le_temperature(0.01, encoder) == 0.01
    base = [
        "train-le",
        str(world["images"]),
        "--captions",
        str(world["captions"]),
        "--model",
        str(world["native"]),
        "--tokenizer",
        str(world["vocab"]),
        "--lang",
        "de",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--device",
        "cpu",
    ]
    result = runner.invoke(app, base + ["--temperature", "warm", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "mltk train-le: error: --temperature must be a number or 'clip', got 'warm'"
    ]
    result = runner.invoke(app, base + ["--temperature", "0", "--out", str(tmp_path / "z")])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "mltk train-le: error: --temperature must be positive or 'clip', got 0.0"
    ]  # refused before anything is loaded
    result = runner.invoke(app, base + ["--temperature", "clip", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.stderr
    assert f"LE temperature {own:.4g}" in result.stderr


def test_nlt_and_le_in_one_stage_add_both_losses(world, tmp_path):
    """MLA's ablation of its two-stage recipe: one stage whose loss is nlt_weight * NLT + le_weight * LE."""
    config = nlt_config(world, tmp_path / "joint", images=world["images"], loop={"steps": 2, "lr": 1e-3})
    captured = {}
    original = mla._run

    def capture(task, encoder, config, runtime, stage, languages, on_step=None):
        captured["task"] = task
        return original(task, encoder, config, runtime, stage, languages, on_step)

    mla._run = capture
    try:
        with step_logging(log_every=1):
            out = mla.train_nlt_le(replace_settings(config, nlt_weight=0.5, le_weight=2.0))
    finally:
        mla._run = original
    # steps.csv: both terms unweighted, and their weighted sum is the optimised loss of each step
    assert term_columns(out) == ["nlt_mse", "le_infonce"]
    rows = read_steps_csv(out / STEPS_CSV)
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert 0.5 * row["nlt_mse"] + 2.0 * row["le_infonce"] == pytest.approx(row["loss"], rel=1e-6)
        assert row["nlt_mse"] > 0 and row["le_infonce"] > 0
    task = captured["task"]
    with torch.no_grad():
        (nlt, _), (le, _) = task.nlt.loss(1), task.le.loss(1)
        expected = 0.5 * nlt + 2.0 * le
        loss, terms = task.loss(1)
        assert torch.allclose(loss, expected)
        assert nlt > 0 and le > 0
        assert list(terms) == ["nlt_mse", "le_infonce"]  # unweighted
        assert torch.equal(terms["nlt_mse"], nlt) and torch.equal(terms["le_infonce"], le)
    manifest = artifacts.read_manifest(out, "checkpoint")
    assert manifest["created_by"]["stage"] == "train-nlt-le"
    result = runner.invoke(
        app,
        [
            "train-nlt-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--lang",
            "de",
            "--acquirer",
            "linear",
            "--out",
            str(tmp_path / "cli"),
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert artifacts.load_checkpoint(tmp_path / "cli")[1]["acquirer"] == "linear"


def test_nlt_acquirer_ablation_and_mse_form_reach_the_encoder_and_the_loss(world, tmp_path):
    out = mla.train_nlt(
        nlt_config(world, tmp_path / "none", acquirer="none", languages=("de",), loop={"steps": 2, "lr": 1e-3})
    )
    tensors, checkpoint = artifacts.load_checkpoint(out)
    assert checkpoint["acquirer"] == "none" and all(k.startswith("embedding.") for k in tensors)
    captured = {}
    original = mla._run
    mla._run = lambda task, *args, **kwargs: captured.setdefault("task", task) and tmp_path
    try:
        mla.train_nlt(nlt_config(world, tmp_path / "sum", mse_form="sum", languages=("de",)))
    finally:
        mla._run = original
    assert captured["task"].criterion.form == "sum"


def test_train_le_from_python_with_the_default_config_trains_at_the_le_recipe_rate(world, tmp_path):
    """The paper's LE lr 3e-6 lived only in the CLI, so ``train_le(MlaConfig(...))`` trained at NLT's 1e-4.
    Only the step count is set here; every other value, lr included, is the config's default (the mla-le recipe)."""
    nlt = mla.train_nlt(nlt_config(world, tmp_path / "nlt"))
    config = replace_settings(
        mla.MlaConfig(captions=world["captions"], out=tmp_path / "le", images=world["images"], init=nlt, device="cpu"),
        steps=20,
    )
    out = mla.train_le(config)
    loop = artifacts.read_manifest(out, "checkpoint")["created_by"]["config"]["loop"]
    assert loop["lr"] == 3e-6 and loop["steps"] == 20
    from mltk.recipes import load_recipe
    from mltk.settings.resolve import recipe_loop
    from mltk.train.loop import lr_factor

    rows = read_steps_csv(out / STEPS_CSV)
    schedule = recipe_loop(load_recipe("mla-le"), steps=20)  # the rates the optimizer stepped at: 3e-6 x its schedule
    assert any(float(row["lr"]) > 1e-6 for row in rows) and [float(row["lr"]) for row in rows] == pytest.approx(
        [3e-6 * lr_factor(int(row["step"]) - 1, schedule) for row in rows], abs=1e-15
    )


def test_recipe_file_sets_the_hyper_parameters_and_the_options_given_replace_them(world, tmp_path):
    import json

    recipe = tmp_path / "slow-le.json"
    recipe.write_text(
        json.dumps(
            {
                "name": "slow-le",
                "stage": "train-le",
                "extends": "mla-le",
                "loop": {"lr": 5e-6, "weight_decay": 0.1},
                "config": {"batch_size": 8},
            }
        )
    )
    nlt = mla.train_nlt(nlt_config(world, tmp_path / "nlt"))
    out = tmp_path / "le"
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--init",
            str(nlt),
            "--recipe",
            str(recipe),
            "--steps",
            "2",
            "--weight-decay",
            "0.3",
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    config = artifacts.read_manifest(out, "checkpoint")["created_by"]["config"]
    assert config["recipe"].startswith("file sha256:") and config["batch_size"] == 8 and config["temperature"] == 0.01
    assert (config["loop"]["lr"], config["loop"]["weight_decay"], config["loop"]["steps"]) == (5e-6, 0.3, 2)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{not json", "this recipe is not valid JSON"),
        ('{"stage": "train-le", "loop": {"lr": 1e-5}, "colour": 1}', "unknown recipe key 'colour'"),
        ('{"stage": "train-ccrk"}', "is for train-ccrk, not train-le"),
        ('{"stage": "train-le", "extends": "mla-le", "loop": {"rate": 1}}', "unknown recipe key 'loop.rate'"),
    ],
)
def test_a_bad_recipe_file_exits_2_with_one_line_naming_it(world, tmp_path, text, fragment):
    recipe = tmp_path / "bad.json"
    recipe.write_text(text)
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--init",
            str(world["native"]),
            "--recipe",
            str(recipe),
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "le"),
        ],
    )
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and str(recipe) in result.stderr and fragment in result.stderr, result.stderr
    result = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--recipe",
            "no-such-recipe",
            "-o",
            str(tmp_path / "le"),
        ],
    )
    assert result.exit_code == 2 and "no recipe 'no-such-recipe'" in result.stderr and "mla-le" in result.stderr
