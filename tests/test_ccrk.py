"""train-ccrk (1-to-K contrastive training of the MLA encoder, and its baseline losses) and the compare report."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ConfigError
from mltk.losses import english_bridge_mse, one_to_k_contrastive, one_to_one_contrastive, pairwise_ranking_hinge
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.settings import resolve
from mltk.train import ccrk, ccrk_batches
from mltk.train.stage import replace_settings
from mltk.train.step_log import STEPS_CSV, read_steps_csv

runner = CliRunner()
LANGS = ("en", "de", "fr", "zh")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny synthetic world in 4 languages, a random-weight base CLIP saved as a checkpoint, its image
    embeddings, a BPE vocabulary grown over de, fr, zh, and a captions artifact where some train images lack
    French and others lack German."""
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("ccrk")
    result = synthesize(root / "world", SynthConfig(train=48, val=16, test=16, langs=LANGS))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    images = encode_images(result.images_path, root / "img", model=str(native), device="cpu", workers=0)
    vocab = None
    for lang in LANGS[1:]:
        vocab = build_vocab(result.captions_path, lang, root / f"vocab-{lang}", parent=vocab, size=600)
    captions = artifacts.load_captions(result.captions_path)
    return {
        "root": root,
        "captions": result.captions_path,
        "native": native,
        "images": images,
        "vocab": vocab,
        "gappy": artifacts.write_captions(root / "gappy", _drop_languages(captions), stage="test"),
    }


def _drop_languages(captions: pa.Table) -> pa.Table:
    """Train images 0-9 lose their French captions, images 10-14 their German ones."""
    image = captions.column("image_id").to_pylist()
    lang = captions.column("lang").to_pylist()
    no_fr = {f"train-{i:06d}" for i in range(10)}
    no_de = {f"train-{i:06d}" for i in range(10, 15)}
    keep = [
        not ((i in no_fr and caption_lang == "fr") or (i in no_de and caption_lang == "de"))
        for i, caption_lang in zip(image, lang)
    ]
    return captions.filter(pa.array(keep))


def config(world, out, **changes) -> ccrk.CcrkConfig:
    base = ccrk.CcrkConfig(
        images=world["images"],
        captions=world["captions"],
        out=out,
        model=str(world["native"]),
        tokenizer=str(world["vocab"]),
        batch_size=8,
        device="cpu",
        val_images=8,
        loop={"steps": 3, "lr": 1e-3},
    )
    return resolve(replace_settings(base, **changes), "train-ccrk")


# ----------------------------------------------------------------------------------------------------------------
# Batches: every available language of each image, missing ones masked
# ----------------------------------------------------------------------------------------------------------------


def _table(rows):
    names = ("image_id", "lang", "caption_id", "caption", "split")
    return pa.table({name: [r[i] for r in rows] for i, name in enumerate(names)})


def test_batches_hold_every_available_language_and_skip_missing_ones():
    rows = []
    for i in range(6):
        for lang in ("en", "de", "fr"):
            if (i, lang) in {(1, "fr"), (2, "de"), (2, "fr")}:
                continue  # image 1 lacks French; image 2 has English only
            rows.append((f"img{i}", lang, f"img{i}#0", f"{lang} caption of {i}", "train"))
    rows.append(("img9", "de", "img9#0", "an image the embeddings do not have", "train"))
    data = ccrk_batches.group_captions(_table(rows), "train", ["en", "de", "fr"], {f"img{i}": i for i in range(6)})
    assert data.image_rows.tolist() == list(range(6))
    batches = ccrk_batches.MultilingualBatches(data, batch_size=6, steps=4, seed=0)
    for step in range(4):
        images, captions = batches.batch(step)
        assert sorted(images.tolist()) == list(range(6))  # distinct images
        for image, chosen in zip(images, captions):
            present = [data.languages[k] for k in range(3) if chosen[k] != ccrk_batches.NO_CAPTION]
            expected = {1: ["en", "de"], 2: ["en"]}.get(int(image), ["en", "de", "fr"])
            assert present == expected
            for k, lang in enumerate(data.languages):
                if chosen[k] != ccrk_batches.NO_CAPTION:
                    assert data.texts[lang][chosen[k]] == f"{lang} caption of {image}"


def test_captions_of_a_batch_are_translations_when_the_data_has_them():
    # image 0: caption_id a in en+de+fr, b in en only, c in de only -> always a
    # image 1: caption_ids only per language (independent descriptions) -> each language still filled
    rows = [
        ("i0", "en", "a", "en-a", "train"),
        ("i0", "de", "a", "de-a", "train"),
        ("i0", "fr", "a", "fr-a", "train"),
        ("i0", "en", "b", "en-b", "train"),
        ("i0", "de", "c", "de-c", "train"),
        ("i1", "en", "x", "en-x", "train"),
        ("i1", "de", "y", "de-y", "train"),
        ("i1", "fr", "z", "fr-z", "train"),
    ]
    data = ccrk_batches.group_captions(_table(rows), "train", ["en", "de", "fr"], {"i0": 0, "i1": 1})
    rng = np.random.default_rng(0)
    for _ in range(20):
        chosen = ccrk_batches.pick_captions(data.options[0], rng)
        assert [data.texts[lang][c] for lang, c in zip(data.languages, chosen)] == ["en-a", "de-a", "fr-a"]
        chosen = ccrk_batches.pick_captions(data.options[1], rng)
        assert [data.texts[lang][c] for lang, c in zip(data.languages, chosen)] == ["en-x", "de-y", "fr-z"]


def test_hard_negatives_put_each_anchor_beside_its_nearest_images():
    torch.manual_seed(0)
    vectors = torch.nn.functional.normalize(torch.randn(40, 8), dim=-1)
    neighbours = ccrk_batches.nearest_images(vectors, 3)
    scores = vectors @ vectors.T
    scores.fill_diagonal_(-2)
    assert neighbours[5].tolist() == scores[5].topk(3).indices.tolist()
    rows = [(f"i{i}", "en", f"i{i}#0", "text", "train") for i in range(40)]
    data = ccrk_batches.group_captions(_table(rows), "train", ["en"], {f"i{i}": i for i in range(40)})
    batches = ccrk_batches.MultilingualBatches(data, batch_size=12, steps=5, seed=1, neighbours=neighbours)
    for step in range(5):
        images, _ = batches.batch(step)
        assert len(images) == 12 and len(set(images.tolist())) == 12
        anchor = int(images[0])
        assert set(neighbours[anchor].tolist()) <= set(images.tolist())


def test_one_to_one_batches_keep_one_present_language_per_image():
    rows = [
        (f"i{i}", lang, f"i{i}#0", "t", "train")
        for i in range(8)
        for lang in ("en", "de", "fr")
        if not (i == 0 and lang != "de")
    ]
    data = ccrk_batches.group_captions(_table(rows), "train", ["en", "de", "fr"], {f"i{i}": i for i in range(8)})
    batches = ccrk_batches.MultilingualBatches(data, batch_size=8, steps=30, seed=0, one_language=True)
    seen = set()
    for step in range(30):
        images, captions = batches.batch(step)
        present = captions != ccrk_batches.NO_CAPTION
        assert (present.sum(axis=1) == 1).all()
        assert present[images.tolist().index(0)].tolist() == [False, True, False]  # only German exists
        seen |= {int(np.flatnonzero(p)[0]) for p in present}
    assert seen == {0, 1, 2}  # every language gets sampled


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def test_one_to_k_cli_writes_an_mla_checkpoint_that_load_text_encoder_reads(world, tmp_path):
    from mltk.encode.text_encoders import load_text_encoder

    out = tmp_path / "ccrk"
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            "--captions",
            str(world["gappy"]),
            "--out",
            str(out),
            "--model",
            str(world["native"]),
            "--tokenizer",
            str(world["vocab"]),
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--val-images",
            "8",
            "--device",
            "cpu",
        ],
        input=f"{world['images']}\n",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "K = 4 (en, de, fr, zh)" in result.stderr
    tensors, cfg = artifacts.load_checkpoint(out)
    assert cfg["format"] == "mla" and cfg["languages"] == ["de", "fr", "zh"]
    assert cfg["train_ccrk"]["loss"] == "one-to-k" and cfg["train_ccrk"]["languages"] == list(LANGS)
    assert 0.0 < cfg["train_ccrk"]["temperature"] < 1.0
    assert not any(k.startswith("loss.") for k in tensors)
    # acquirers start as the identity (zero up-projection): trained ones have moved
    assert any(not torch.all(v == 0) for k, v in tensors.items() if k.startswith("acquirers.fr.") and "c_proj" in k)
    manifest = artifacts.read_manifest(out, "checkpoint")
    assert manifest["created_by"]["stage"] == "train-ccrk" and manifest["K"] == 4

    encoder = load_text_encoder(out)
    base = load_text_encoder(world["native"])
    with torch.no_grad():
        german = encoder.encode_tokens(encoder.tokenize(["ein roter kreis"], "de"), "de")
        english = encoder.encode_tokens(encoder.tokenize(["a red circle"], "en"), "en")
        english_base = base.encode_tokens(base.tokenize(["a red circle"], "en"), "en")
    assert german.shape == (1, 128) and torch.isfinite(german).all()
    assert torch.equal(english, english_base)  # English stays the frozen CLIP


@pytest.mark.parametrize("loss", ccrk.LOSSES)
def test_the_loss_choice_is_honoured(world, tmp_path, loss):
    task, _ = ccrk.build_task(config(world, tmp_path / "unused", captions=world["gappy"], loss=loss))
    assert task.objective.name == loss
    images, captions = task.batches.batch(0)
    with torch.no_grad():
        text, mask = task.text_features(captions)
        image = task.image_vectors[task.data.image_rows[images]]
        got, terms = task.loss(0)
    if loss == "one-to-k":
        expected = one_to_k_contrastive(image, text, 0.07, mask)
    elif loss == "one-to-one":
        assert (mask.sum(dim=1) == 1).all()
        expected = one_to_one_contrastive(image, text, 0.07, mask)
    elif loss == "english-bridge":
        expected = english_bridge_mse(text, 0, mask)
    elif loss == "hinge":
        expected = torch.stack(
            [pairwise_ranking_hinge(image[mask[:, k]], text[mask[:, k], k], 0.2) for k in range(4)]
        ).mean()
    else:  # MLMME as the paper sums it over K languages: every language's S_I, every pair's S_S
        beta = 0.5  # MLMME: beta * S_I + (1 - beta) * S_S (Calixto et al. 2017)
        image_sentence = sum(pairwise_ranking_hinge(image[mask[:, k]], text[mask[:, k], k], 0.2) for k in range(4))
        sentence_sentence = sum(
            pairwise_ranking_hinge(text[mask[:, k] & mask[:, m], k], text[mask[:, k] & mask[:, m], m], 0.2)
            for k in range(4)
            for m in range(k + 1, 4)
        )
        expected = beta * image_sentence + (1 - beta) * sentence_sentence
        # the logged terms: S_I and S_S before beta weighs them
        assert list(terms) == ["mlmme_image_sentence", "mlmme_sentence_sentence"]
        assert torch.allclose(terms["mlmme_image_sentence"], image_sentence, atol=1e-4)
        assert torch.allclose(terms["mlmme_sentence_sentence"], sentence_sentence, atol=1e-4)
    assert torch.allclose(got, expected, atol=1e-5), (loss, float(got), float(expected))
    if loss != "mlmme":  # the loss itself under its own name, and the temperature of the contrastive ones
        name = {"english-bridge": "english_bridge_mse"}.get(loss, loss.replace("-", "_"))
        assert list(terms) == [name, "logit_scale"] if loss in ccrk.CONTRASTIVE_LOSSES else [name]
        assert torch.equal(terms[name], got)
        assert "logit_scale" not in terms or terms["logit_scale"].item() == pytest.approx(1 / 0.07)
    trains_temperature = "loss.logit_scale.value" in task.parameters_to_train()  # T itself, as the authors
    assert trains_temperature == (loss in ccrk.CONTRASTIVE_LOSSES)


def test_same_seed_same_checkpoint(world, tmp_path):
    a, _ = artifacts.load_checkpoint(ccrk.train_ccrk(config(world, tmp_path / "a", steps=1, hard_negatives=2)))
    b, _ = artifacts.load_checkpoint(ccrk.train_ccrk(config(world, tmp_path / "b", steps=1, hard_negatives=2)))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    (row,) = read_steps_csv(tmp_path / "a" / STEPS_CSV)  # the loss under its name, and the temperature's 1/T
    assert list(row)[:4] == ["step", "loss", "one_to_k", "logit_scale"]
    assert row["one_to_k"] == pytest.approx(row["loss"], rel=1e-6) and row["logit_scale"] == pytest.approx(1 / 0.07)


def test_bad_inputs_exit_2_with_one_line(world, tmp_path):
    common = ["--captions", str(world["captions"]), "--out", str(tmp_path / "x"), "--device", "cpu"]
    cases = [
        ([str(world["images"]), *common, "--model", str(world["native"])], "--tokenizer"),
        ([str(world["images"]), *common, "--tokenizer", str(world["vocab"]), "--loss", "nope"], "--loss"),
        ([str(world["images"]), *common, "--tokenizer", str(world["vocab"]), "--batch-size", "1"], "--batch-size"),
        (
            [
                str(world["images"]),
                *common,
                "--model",
                str(world["native"]),
                "--tokenizer",
                str(world["vocab"]),
                "--lang",
                "de,fr",
                "--loss",
                "english-bridge",
            ],
            "include en",
        ),
        (
            [
                str(world["images"]),
                *common,
                "--model",
                str(world["native"]),
                "--tokenizer",
                str(world["vocab"]),
                "--lang",
                "en,ja",
            ],
            "ja",
        ),
        ([str(tmp_path / "missing"), *common, "--tokenizer", str(world["vocab"])], str(tmp_path / "missing")),
        ([str(world["images"]), *common, "--init", str(world["native"])], "--init must be an MLA checkpoint"),
    ]
    for args, needle in cases:
        result = runner.invoke(app, ["train-ccrk", *args])
        assert result.exit_code == 2, (args, result.stderr)
        assert needle in result.stderr and result.stdout == ""
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists()


# ----------------------------------------------------------------------------------------------------------------
# CLL-CLIP's token table as the tower: every language trains, English included
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cll_checkpoint(world):
    """A real train-continual checkpoint over en, de, fr, zh (one update per task)."""
    from mltk.train.continual import ContinualTrainConfig, train_continual

    return train_continual(
        replace_settings(
            ContinualTrainConfig(
                images=world["images"],
                captions=world["captions"],
                out=world["root"] / "cll",
                model=str(world["native"]),
                languages=LANGS,
                vocab_size=600,
                steps=1,
                batch_size=8,
                val_images=8,
                device="cpu",
                cache_dir=world["root"] / "cache",
            ),
            lr=1e-2,
        )
    )


def test_cll_tower_trains_the_shared_table_english_included(world, cll_checkpoint, tmp_path):
    from mltk.encode.text_encoders import load_text_encoder

    out = tmp_path / "ccrk-cll"
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            str(world["images"]),
            "--captions",
            str(world["gappy"]),
            "--out",
            str(out),
            "--init",
            str(cll_checkpoint),
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--lr",
            "1e-2",
            "--val-images",
            "8",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "K = 4 (en, de, fr, zh)" in result.stderr  # en + the languages the checkpoint learnt
    tensors, cfg = artifacts.load_checkpoint(out)
    start, _ = artifacts.load_checkpoint(cll_checkpoint)
    assert cfg["format"] == "cll" and cfg["train_ccrk"]["languages"] == list(LANGS)
    assert (out / cfg["vocab"] / "manifest.json").is_file()
    assert tensors.keys() == start.keys() and tensors["table"].shape == start["table"].shape
    assert not torch.equal(tensors["table"], start["table"])
    for key in tensors.keys() - {"table"}:  # the tower, the method and CLL-CLIP's own temperature stay
        assert torch.equal(tensors[key], start[key]), key

    trained, initial = load_text_encoder(out), load_text_encoder(cll_checkpoint)
    english_ids = trained.tokenize(["a red circle"], "en")[0]
    english_ids = english_ids[english_ids != 0]
    assert not torch.equal(tensors["table"][english_ids], start["table"][english_ids])  # English rows moved
    with torch.no_grad():
        moved = trained.encode(["a red circle"], "en")
        before = initial.encode(["a red circle"], "en")
    assert not torch.allclose(moved, before)


def test_cll_tower_english_slot_has_gradients_and_the_bridge_targets_the_frozen_clip(world, cll_checkpoint, tmp_path):
    from mltk.encode.text_encoders import ClipTextEncoder

    task, _ = ccrk.build_task(
        config(world, tmp_path / "unused", init=cll_checkpoint, tokenizer=None, loss="english-bridge")
    )
    assert task.english_trains and task.trained_languages == list(LANGS)
    assert set(task.parameters_to_train()) == {"table"}
    images, captions = task.batches.batch(0)
    text, mask = task.text_features(captions)
    assert text.requires_grad and mask[:, 0].all()
    teacher = task.english_teacher(captions)
    frozen = ClipTextEncoder(load_clip(str(world["native"])))
    english = [task.data.texts["en"][i] for i in captions[:, 0]]
    with torch.no_grad():
        expected_teacher = F.normalize(frozen.encode_tokens(frozen.tokenize(english, "en"), "en"), dim=-1)
    assert torch.allclose(teacher, expected_teacher, atol=1e-5)
    # by hand: mean over present (image, language) pairs, English included, and feature dims of the squared error
    squared = ((text.detach() - teacher[:, None]) ** 2).sum(dim=-1)  # [B, K]
    expected = squared[mask].sum() / (mask.sum() * text.shape[-1])
    assert torch.allclose(task.loss(0)[0].detach(), expected, atol=1e-6)


def test_image_embeddings_of_another_width_exit_2_for_either_tower(world, cll_checkpoint, tmp_path):
    table, vectors = artifacts.load_embeddings(world["images"])
    narrow = artifacts.write_embeddings(
        tmp_path / "img64",
        table.column("id").to_pylist(),
        np.asarray(vectors)[:, :64].copy(),
        split=table.column("split").to_pylist(),
    )
    for start in (
        ["--init", str(cll_checkpoint)],
        ["--model", str(world["native"]), "--tokenizer", str(world["vocab"])],
    ):
        result = runner.invoke(
            app,
            [
                "train-ccrk",
                str(narrow),
                "--captions",
                str(world["captions"]),
                "--out",
                str(tmp_path / "x"),
                "--device",
                "cpu",
                *start,
            ],
        )
        assert result.exit_code == 2, result.stderr
        assert "text features have dim 128 but the image embeddings have dim 64" in result.stderr
        assert "Traceback" not in result.stderr and not (tmp_path / "x").exists()


def test_cll_tower_rejects_freeze_embedding(world, cll_checkpoint, tmp_path):
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--out",
            str(tmp_path / "x"),
            "--init",
            str(cll_checkpoint),
            "--freeze-embedding",
        ],
    )
    assert result.exit_code == 2 and "nothing to train" in result.stderr and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------------------------------------------
# Consistency report
# ----------------------------------------------------------------------------------------------------------------


def _metrics(ar: dict[str, float], mrv: tuple[float, float]) -> dict:
    side = {"R@1": 0.0, "R@5": 0.0, "R@10": 0.0, "median_rank": 1.0, "mean_rank": 1.0}
    return {
        "per_language": {lang: {"i2t": side, "t2i": side, "AR": value} for lang, value in ar.items()},
        "mrv": {"variant": "paper", "languages": list(ar), "K": len(ar), "i2t": mrv[0], "t2i": mrv[1]},
    }


def test_compare_prints_mean_ar_mrv_and_recall_spread_side_by_side(tmp_path):
    one_to_k = artifacts.write_metrics(tmp_path / "m1", _metrics({"en": 60.0, "de": 50.0, "fr": 55.0}, (3.5, 2.25)))
    one_to_one = artifacts.write_metrics(
        tmp_path / "m2", _metrics({"en": 60.0, "de": 30.0, "fr": 45.0, "zh": 9.0}, (7.0, 6.0))
    )
    out = tmp_path / "cmp"
    result = runner.invoke(
        app,
        [
            "compare",
            str(one_to_k),
            str(one_to_one),
            "--out",
            str(out),
            "--name",
            "1-to-K,1-to-1",
            "--format",
            "markdown",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "| 1-to-K | 55.00 | 3.50 | 2.25 | 10.00 | de 50.0 | en 60.0 |" in result.stderr
    assert "| 1-to-1 | 45.00 | 7.00 | 6.00 | 30.00 | de 30.0 | en 60.0 |" in result.stderr
    comparison = artifacts.load_metrics(out)["comparison"]
    assert comparison["languages"] == ["en", "de", "fr"]  # zh is not shared
    assert [r["recall_spread"] for r in comparison["runs"]] == [10.0, 30.0]

    result = runner.invoke(app, ["compare", str(one_to_k), "--out", str(tmp_path / "c2"), "--name", "a,b"])
    assert result.exit_code == 2 and "--name" in result.stderr
    result = runner.invoke(app, ["compare", str(one_to_k), "--out", str(tmp_path / "c3"), "--lang", "ja"])
    assert result.exit_code == 2 and "ja" in result.stderr


def _c2c_metrics(ar: dict[str, float]) -> dict:
    side = {"R@1": 0.0, "R@5": 0.0, "R@10": 0.0, "median_rank": 1.0, "mean_rank": 1.0}
    return {
        "c2c": {
            pair: {
                f"{pair[:2]}->{pair[3:]}": side,
                f"{pair[3:]}->{pair[:2]}": side,
                "AR": value,
                "relevance": "caption_id",
            }
            for pair, value in ar.items()
        }
    }


def test_compare_puts_caption_to_caption_results_side_by_side(tmp_path):
    """Text-only runs (evaluate --metric c2c): the same table over language pairs, MRV left empty."""
    first = artifacts.write_metrics(tmp_path / "m1", _c2c_metrics({"de-en": 90.0, "fr-en": 80.0}))
    second = artifacts.write_metrics(tmp_path / "m2", _c2c_metrics({"de-en": 70.0, "fr-en": 40.0, "cs-en": 9.0}))
    out = tmp_path / "cmp"
    result = runner.invoke(
        app, ["compare", str(first), str(second), "--out", str(out), "--name", "a,b", "--format", "markdown"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "| a | 85.00 | – | – | 10.00 | fr-en 80.0 | de-en 90.0 |" in result.stderr
    assert "| b | 55.00 | – | – | 30.00 | fr-en 40.0 | de-en 70.0 |" in result.stderr
    comparison = artifacts.load_metrics(out)["c2c_comparison"]
    assert comparison["languages"] == ["de-en", "fr-en"]  # cs-en is not shared
    assert [r["mean_AR"] for r in comparison["runs"]] == [85.0, 55.0]
    only_de = runner.invoke(app, ["compare", str(first), str(second), "--out", str(tmp_path / "c2"), "--lang", "de,en"])
    assert only_de.exit_code == 0, only_de.stderr
    assert artifacts.load_metrics(tmp_path / "c2")["c2c_comparison"]["languages"] == ["de-en"]
    none = runner.invoke(app, ["compare", str(first), "--out", str(tmp_path / "c3"), "--lang", "ja,en"])
    assert none.exit_code == 2 and "no caption-to-caption language pair within ja, en" in none.stderr


def test_ccrk_defaults_are_the_authors():
    from mltk.recipes import load_recipe
    from mltk.settings import resolve
    from mltk.settings.resolve import recipe_loop
    from mltk.train.ccrk import CcrkConfig, CcrkObjective

    authors = recipe_loop(load_recipe("ccrk"))
    assert (authors.weight_decay, authors.warmup_fraction) == (0.01, 0.03)
    config = resolve(CcrkConfig(images=Path("i"), captions=Path("c"), out=Path("o")), "train-ccrk")
    assert config.loop == authors and config.temperature_range == (0.001, 0.5)
    objective = CcrkObjective.of(config, ["en", "de"])
    objective.criterion.logit_scale.load_log_scale(torch.tensor(0.0))  # T = 1
    assert objective.temperature() == pytest.approx(0.5)
    params = {
        "table": torch.nn.Parameter(torch.zeros(3, 2)),
        "bias": torch.nn.Parameter(torch.zeros(2)),
        **objective.trainable(),
    }
    task = SimpleNamespace(
        temperature_lr_scale=config.temperature_lr_scale, temperature_weight_decay=config.temperature_weight_decay
    )
    groups = ccrk.CcrkTask.make_optimizer(task, params, config.loop).param_groups
    # CCR_k's create_optimizer: the temperature at twice the lr with the run's decay 0.01; matrices decayed
    assert [(len(g["params"]), g["lr"], g["weight_decay"]) for g in groups] == [
        (1, 1e-4, 0.01),
        (1, 1e-4, 0.0),
        (1, 2e-4, 0.01),
    ]
    assert groups[2]["params"][0] is objective.criterion.logit_scale.value
    with pytest.raises(ConfigError, match="clamp range"):
        resolve(CcrkConfig(images=Path("i"), captions=Path("c"), out=Path("o"), temperature=0.9), "train-ccrk")
