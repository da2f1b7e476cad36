"""AME's objective in mltk's terms: the lexicon artifact and its sources (MUSE lines, Dice induction, the embedded
world), RCSLS against a plain loop over its definition, the order-violation similarity of the ranking loss, CSLS and
BLI on hand examples, and the term inside train-nlt / evaluate --metric bli."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from mltk import artifacts
from mltk.ame.bli import csls_scores, precision_at_1
from mltk.ame.induce import dice_lexicon
from mltk.ame.lexicon import import_muse, lexicon_pairs, load_lexicon
from mltk.ame.rcsls import AlignmentConfig, rcsls_loss
from mltk.ame.words import content_tokens, mean_rows
from mltk.ame.world import world_pairs
from mltk.cli import app
from mltk.core.errors import ConfigError
from mltk.losses import order_violation_similarity, pairwise_ranking_hinge

runner = CliRunner()


# ----------------------------------------------------------------------------------------------------------------
# Formulas against plain loops
# ----------------------------------------------------------------------------------------------------------------


def _cos(a, b) -> float:
    return float(sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)))


def rcsls_by_loop(x, y, k, xc, yc) -> float:
    """Joulin et al. 2018, eq. 5, one pair at a time with sorted lists."""
    total = 0.0
    for xi, yi in zip(x, y):
        near_y = sorted((_cos(xi, yj) for yj in yc), reverse=True)[:k]
        near_x = sorted((_cos(xj, yi) for xj in xc), reverse=True)[:k]
        total += -2 * _cos(xi, yi) + sum(near_y) / len(near_y) + sum(near_x) / len(near_x)
    return total / len(x)


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_rcsls_matches_its_definition(k):
    g = torch.Generator().manual_seed(k)
    x, y = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    xc, yc = torch.randn(7, 4, generator=g), torch.randn(6, 4, generator=g)
    got = float(rcsls_loss(x, y, k, xc, yc))
    assert got == pytest.approx(rcsls_by_loop(x.tolist(), y.tolist(), k, xc.tolist(), yc.tolist()), abs=1e-5)
    default = float(rcsls_loss(x, y, k))  # candidates default to the pairs' own rows
    assert default == pytest.approx(rcsls_by_loop(x.tolist(), y.tolist(), k, x.tolist(), y.tolist()), abs=1e-5)


def test_rcsls_gradient_moves_sources_towards_their_translations():
    g = torch.Generator().manual_seed(0)
    y = F.normalize(torch.randn(8, 6, generator=g), dim=-1)
    x = torch.randn(8, 6, generator=g, requires_grad=True)
    before = float(F.cosine_similarity(x.detach(), y).mean())
    optimizer = torch.optim.SGD([x], lr=0.5)
    for _ in range(50):
        optimizer.zero_grad()
        rcsls_loss(x, y, 3).backward()
        optimizer.step()
    assert float(F.cosine_similarity(x.detach(), y).mean()) > before + 0.3
    with pytest.raises(ConfigError):
        rcsls_loss(x, y, 0)


def test_order_violation_similarity_and_the_hinge_that_uses_it():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 3, generator=g), torch.randn(5, 3, generator=g)
    expected = [
        [-sum(max(0.0, bj - ai) ** 2 for ai, bj in zip(a_row, b_row)) for b_row in b.tolist()] for a_row in a.tolist()
    ]
    assert order_violation_similarity(a, b).flatten().tolist() == pytest.approx(sum(expected, []), rel=1e-5)
    assert float(order_violation_similarity(torch.tensor([[2.0, 2.0]]), torch.tensor([[1.0, -1.0]]))) == 0.0
    image, text = a, b[:4]
    s = order_violation_similarity(image, text).tolist()
    by_loop = sum(
        max(0.0, 0.05 - s[i][i] + s[i][j]) + max(0.0, 0.05 - s[i][i] + s[j][i])
        for i in range(4)
        for j in range(4)
        if j != i
    )
    assert float(pairwise_ranking_hinge(image, text, 0.05, similarity="order")) == pytest.approx(by_loop, rel=1e-5)
    with pytest.raises(ConfigError):
        pairwise_ranking_hinge(image, text, 0.2, similarity="dot")


def test_ccrk_objective_takes_ames_margin_of_its_similarity():
    from mltk.settings import resolve
    from mltk.train.ccrk import CcrkConfig, CcrkObjective

    def objective(**fields):
        return CcrkObjective.of(
            resolve(CcrkConfig(images="i", captions="c", out="o", loss="hinge", **fields), "train-ccrk"), ["en", "de"]
        )

    assert objective().margin == 0.2
    assert objective(similarity="order").margin == 0.05
    assert objective(margin=0.3, similarity="order").margin == 0.3
    with pytest.raises(ConfigError, match="--loss hinge"):
        resolve(CcrkConfig(images="i", captions="c", out="o", loss="one-to-k", similarity="order"), "train-ccrk")


def test_csls_and_p_at_1_on_a_hand_example():
    # target 0 is a hub: nearest to every source by cosine; CSLS discounts it
    x = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]])
    y = torch.tensor([[0.8, 0.6], [1.0, 0.05], [0.5, 0.9]])
    cos = F.normalize(x, dim=-1) @ F.normalize(y, dim=-1).T
    k = 2
    r_t = [sorted(row, reverse=True)[:k] for row in cos.tolist()]
    r_s = [sorted(col, reverse=True)[:k] for col in cos.T.tolist()]
    expected = [[2 * cos[i, j].item() - sum(r_t[i]) / k - sum(r_s[j]) / k for j in range(3)] for i in range(3)]
    scores = csls_scores(x, y, k)
    assert scores.flatten().tolist() == pytest.approx(sum(expected, []), abs=1e-6)
    gold = [{1}, {0}, {2}]
    assert precision_at_1(scores, gold) == pytest.approx(
        100.0 * sum(max(range(3), key=lambda j: expected[i][j]) in gold[i] for i in range(3)) / 3
    )
    assert precision_at_1(cos, [{0}, {0}, {2}]) == pytest.approx(100 * 2 / 3)


def test_word_rows_are_the_mean_of_content_tokens():
    tokens = torch.tensor([[9, 4, 5, 8, 0], [9, 7, 8, 0, 0], [9, 8, 0, 0, 0]])  # start 9, end 8, pad 0
    words = content_tokens(tokens, torch.tensor([4, 3, 2]))
    assert words.kept.tolist() == [True, True, False]
    assert words.ids.tolist() == [[4, 5], [7, 0]] and words.mask.tolist() == [[True, True], [True, False]]
    table = torch.arange(30, dtype=torch.float32).reshape(10, 3)
    rows = mean_rows(table[words.ids], words.mask)
    assert rows.tolist() == [((table[4] + table[5]) / 2).tolist(), table[7].tolist()]


# ----------------------------------------------------------------------------------------------------------------
# Lexicons
# ----------------------------------------------------------------------------------------------------------------


def test_muse_lines_become_a_lexicon_artifact(tmp_path):
    muse = tmp_path / "de-en.0-5000.txt"
    muse.write_text("rot red\nrot scarlet\nkreis\tcircle\n\nblau blue\nrot red\n", encoding="utf-8")
    path = import_muse(muse, tmp_path / "L", "DE", "en")
    table = load_lexicon(path)
    assert lexicon_pairs(table) == [("rot", "red"), ("rot", "scarlet"), ("kreis", "circle"), ("blau", "blue")]
    assert set(table.column("src_lang").to_pylist()) == {"de"}
    assert artifacts.read_manifest(path, "lexicon")["src_words"] == 3
    result = runner.invoke(
        app, ["import-data", "lexicon", str(muse), "--src", "de", "--tgt", "en", "-o", str(tmp_path / "cli")]
    )
    assert result.exit_code == 0 and load_lexicon(tmp_path / "cli").num_rows == 4
    bad = tmp_path / "bad.txt"
    bad.write_text("rot red\nein roter kreis\n", encoding="utf-8")
    result = runner.invoke(
        app, ["import-data", "lexicon", str(bad), "--src", "de", "--tgt", "en", "-o", str(tmp_path / "bad")]
    )
    assert result.exit_code == 2 and "line 2" in result.stderr and str(bad) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = runner.invoke(app, ["import-data", "lexicon", str(muse), "-o", str(tmp_path / "nolang")])
    assert result.exit_code == 2 and "--src" in result.stderr


def test_dice_induction_keeps_mutual_best_matches():
    pairs = [
        ("der rote kreis", "the red circle"),
        ("ein roter kreis", "a red circle"),
        ("der blaue kreis", "the blue circle"),
        ("das blaue quadrat", "the blue square"),
    ]
    # By hand: c(kreis) = c(circle) = c(kreis, circle) = 3 -> Dice 1. "der" ties between "circle" and "the" (2*2/5)
    # and takes the smaller word, "circle", which prefers "kreis": not kept. "rote" prefers "red" (2/3) but "red"
    # prefers "kreis" (2*2/5). "ein"/"roter" tie for "a" (1.0): "ein" wins; "das"/"quadrat" tie for "square": "das".
    kept = {(s, t): (round(dice, 6), c) for s, t, dice, c in dice_lexicon(pairs, "de", "en", min_count=1)}
    assert kept == {
        ("kreis", "circle"): (1.0, 3),
        ("blaue", "blue"): (1.0, 2),
        ("ein", "a"): (1.0, 1),
        ("das", "square"): (1.0, 1),
    }
    kept = {(s, t) for s, t, _, _ in dice_lexicon(pairs, "de", "en", min_count=2)}
    assert kept == {("kreis", "circle"), ("blaue", "blue")}


def test_the_world_lexicon_pairs_words_its_captions_use(tmp_path):
    from mltk.ame.induce import caption_words
    from mltk.data.synth import SynthConfig, synthesize

    pairs = world_pairs("de", "en")
    assert ("Kreis", "circle") in pairs and ("rote", "red") in pairs and ("zwei", "two") in pairs
    world = synthesize(tmp_path / "w", SynthConfig(train=40, val=4, test=4, langs=("en", "de")))
    captions = artifacts.load_captions(world.captions_path)
    words = {lang: set() for lang in ("en", "de")}
    for lang, text in zip(captions.column("lang").to_pylist(), captions.column("caption").to_pylist()):
        words[lang] |= caption_words(text, lang)
    used = [(s, t) for s, t in pairs if s.lower() in words["de"] and t.lower() in words["en"]]
    assert len(used) >= len(pairs) // 3  # a small world does not say every form, but says many
    assert {"kreis", "quadrat", "rote"} <= words["de"]
    result = runner.invoke(
        app,
        ["import-data", "synth-lexicon", str(tmp_path / "w"), "--src", "de", "--tgt", "en", "-o", str(tmp_path / "L")],
    )
    assert result.exit_code == 0 and load_lexicon(tmp_path / "L").num_rows == len(set(pairs))
    result = runner.invoke(
        app,
        ["import-data", "synth-lexicon", str(tmp_path / "w"), "--src", "ru", "--tgt", "en", "-o", str(tmp_path / "R")],
    )
    assert result.exit_code == 2 and "no captions in ru" in result.stderr
    result = runner.invoke(
        app, ["induce-lexicon", str(world.captions_path), "--src", "de", "--min-count", "2", "-o", str(tmp_path / "I")]
    )
    induced = dict(lexicon_pairs(load_lexicon(tmp_path / "I")))
    assert result.exit_code == 0 and induced.get("kreis") == "circle"


# ----------------------------------------------------------------------------------------------------------------
# The term in a stage, and BLI of a checkpoint
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.models.clip import clip_checkpoint_config, load_clip
    from mltk.settings.vocab import build_vocab

    root = tmp_path_factory.mktemp("ame")
    world = synthesize(root / "world", SynthConfig(train=40, val=8, test=8, langs=("en", "de")))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    vocab = build_vocab(world.captions_path, "de", root / "vocab", size=600)
    lexicon = runner.invoke(
        app,
        [
            "import-data",
            "synth-lexicon",
            str(root / "world"),
            "--src",
            "de",
            "--tgt",
            "en",
            "-o",
            str(root / "lexicon"),
        ],
    )
    assert lexicon.exit_code == 0, lexicon.stderr
    return {
        "root": root,
        "captions": world.captions_path,
        "native": native,
        "vocab": vocab,
        "lexicon": root / "lexicon",
    }


def _nlt(tiny, out, *extra):
    return runner.invoke(
        app,
        [
            "train-nlt",
            str(tiny["captions"]),
            "--model",
            str(tiny["native"]),
            "--tokenizer",
            str(tiny["vocab"]),
            "--lang",
            "de",
            "--steps",
            "4",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "--acquirer",
            "none",
            "--out",
            str(out),
            *extra,
        ],
    )


def test_alignment_term_is_added_and_aligns_the_table(tiny, tmp_path):
    from mltk.ame.bli import evaluate_bli
    from mltk.ame.rcsls import LexiconAlignment
    from mltk.models.multilingual import load_encoder
    from mltk.train.step_log import STEPS_CSV, read_steps_csv

    plain = _nlt(tiny, tmp_path / "plain")
    aligned = _nlt(
        tiny,
        tmp_path / "aligned",
        "--lexicon",
        str(tiny["lexicon"]),
        "--align-weight",
        "2",
        "--align-k",
        "3",
        "--log-every",
        "1",
    )
    assert plain.exit_code == 0 and aligned.exit_code == 0, aligned.stderr
    header = list(read_steps_csv(tmp_path / "aligned" / STEPS_CSV)[0])
    assert "rcsls" in header and "nlt_mse" in header
    config = artifacts.read_manifest(tmp_path / "aligned", "checkpoint")["created_by"]["config"]
    assert config["alignment"]["k"] == 3 and config["alignment"]["weight"] == 2.0
    # the term alone, optimised, raises the BLI of the table it reads
    encoder = load_encoder(tmp_path / "plain")
    before = evaluate_bli(encoder, tiny["lexicon"], k=5)["P@1"]
    alignment = LexiconAlignment(encoder, load_lexicon(tiny["lexicon"]), weight=1.0, k=3)
    optimizer = torch.optim.Adam(encoder.embedding.parameters(), lr=1e-2)
    for step in range(60):
        optimizer.zero_grad()
        alignment(step)[0].backward()
        optimizer.step()
    after = evaluate_bli(encoder, tiny["lexicon"], k=5)["P@1"]
    assert after > before + 20, (before, after)


def test_alignment_needs_a_trained_table_and_a_trained_language(tiny, tmp_path):
    frozen = _nlt(tiny, tmp_path / "frozen", "--lexicon", str(tiny["lexicon"]), "--freeze-embedding")
    assert frozen.exit_code == 2 and "does not train it" in frozen.stderr
    from mltk.ame.rcsls import with_alignment

    with pytest.raises(ConfigError, match="does not train"):
        with_alignment(object(), None, AlignmentConfig(lexicon=tiny["lexicon"]), 0, ["ru"])


def test_evaluate_bli_writes_p_at_1(tiny, tmp_path):
    assert _nlt(tiny, tmp_path / "ckpt").exit_code == 0
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(tmp_path / "ckpt"),
            "--metric",
            "bli",
            "--lexicon",
            str(tiny["lexicon"]),
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    bli = artifacts.load_metrics(tmp_path / "m")["bli"]
    assert 0.0 <= bli["P@1"] <= 100.0 and bli["k"] == 10 and bli["queries"] > 10
    assert bli["vocabulary"]["source"] == "training captions" and bli["source_words"] >= bli["queries"]
    assert bli["P@1_csls"] is not None and "P@1_reverse" in bli
    result = runner.invoke(
        app, ["evaluate", "--model", str(tmp_path / "ckpt"), "--metric", "bli", "-o", str(tmp_path / "m2")]
    )
    assert result.exit_code == 2 and "--lexicon" in result.stderr


@pytest.fixture(scope="module")
def tiny_images(tiny):
    from mltk.encode.images import encode_images

    return encode_images(
        tiny["root"] / "world" / "images", tiny["root"] / "img", model=str(tiny["native"]), device="cpu", workers=0
    )


@pytest.mark.slow
def test_train_ccrk_hinge_with_order_similarity_and_the_term(tiny, tiny_images, tmp_path):
    from mltk.train.step_log import STEPS_CSV, read_steps_csv

    assert _nlt(tiny, tmp_path / "nlt").exit_code == 0
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            str(tiny_images),
            "--captions",
            str(tiny["captions"]),
            "--init",
            str(tmp_path / "nlt"),
            "--lang",
            "en,de",
            "--loss",
            "hinge",
            "--similarity",
            "order",
            "--lexicon",
            str(tiny["lexicon"]),
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--val-images",
            "8",
            "--device",
            "cpu",
            "--log-every",
            "1",
            "-o",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert {"hinge", "rcsls"} <= set(read_steps_csv(tmp_path / "c" / STEPS_CSV)[0])
    config = artifacts.read_checkpoint_config(tmp_path / "c")
    assert config["train_ccrk"]["similarity"] == "order"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(tmp_path / "c"),
            "--captions",
            str(tiny["captions"]),
            "--images",
            str(tiny_images),
            "--lang",
            "de",
            "--split",
            "val",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert artifacts.load_metrics(tmp_path / "m")["settings"]["similarity"] == "order"  # the scorer it trained


def test_train_continual_aligns_only_the_lexicon_languages_task_with_its_own_recipe(tiny, tiny_images, tmp_path):
    result = runner.invoke(
        app,
        [
            "train-continual",
            str(tiny_images),
            "--captions",
            str(tiny["captions"]),
            "--model",
            str(tiny["native"]),
            "--lang",
            "en,de",
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--vocab-size",
            "600",
            "--val-images",
            "8",
            "--device",
            "cpu",
            "--lexicon",
            str(tiny["lexicon"]),
            "--align-k",
            "4",
            "-o",
            str(tmp_path / "cll"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("alignment: RCSLS over") == 1  # task de only, not task en
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(tmp_path / "cll"),
            "--metric",
            "bli",
            "--lexicon",
            str(tiny["lexicon"]),
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert artifacts.load_metrics(tmp_path / "m")["bli"]["queries"] > 10


def test_train_continual_refuses_the_map_form_before_task_0(tiny, tiny_images, tmp_path):
    result = runner.invoke(
        app,
        [
            "train-continual",
            str(tiny_images),
            "--captions",
            str(tiny["captions"]),
            "--model",
            str(tiny["native"]),
            "--lang",
            "en,de",
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--vocab-size",
            "600",
            "--device",
            "cpu",
            "--lexicon",
            str(tiny["lexicon"]),
            "--align-form",
            "map",
            "-o",
            str(tmp_path / "cll"),
        ],
    )
    assert result.exit_code == 2
    assert "--align-form table" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cll").exists()


def test_train_ccrk_refuses_the_map_form_on_a_cll_clip_checkpoint(tiny, tiny_images, tmp_path):
    out = tmp_path / "cll"
    result = runner.invoke(
        app,
        [
            "train-continual",
            str(tiny_images),
            "--captions",
            str(tiny["captions"]),
            "--model",
            str(tiny["native"]),
            "--lang",
            "de",
            "--steps",
            "1",
            "--batch-size",
            "8",
            "--vocab-size",
            "600",
            "--val-images",
            "8",
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            str(tiny_images),
            "--captions",
            str(tiny["captions"]),
            "--init",
            str(out),
            "--lang",
            "en,de",
            "--lexicon",
            str(tiny["lexicon"]),
            "--align-form",
            "map",
            "--steps",
            "1",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 2
    assert "CLL-CLIP checkpoint" in result.stderr and len(result.stderr.strip().splitlines()) == 1
