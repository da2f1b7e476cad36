"""Translate-test and score fusion (CLL-CLIP's Figure 5): the fused vectors give exactly the fused scores, the etas
parse, translations pair by caption_id, xFlickr&CO's machine-translated folder imports as those translations, and
``evaluate --translations --fusion`` on a text-only tower matches a hand computation over its own encodings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers_tiny import tiny_bert_folder
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ConfigError
from mltk.data.importers import import_dataset
from mltk.evaluate.fusion import fuse, parse_etas, translation_rows

runner = CliRunner()
XFLICKRCO = Path(__file__).parent / "fixtures" / "importers" / "xflickrco_fusion"


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("eta", [0.0, 0.3, 1.0])
def test_fused_vectors_give_the_fused_scores_in_both_directions(eta):
    rng = np.random.default_rng(0)
    model, translated, gallery = (
        _unit(rng.normal(size=shape)).astype(np.float32) for shape in ((6, 8), (4, 8), (5, 8))
    )
    rows = np.array([0, 2, 3, 5])  # rows 1 and 4 have no translation
    fused = fuse(model, translated, rows, eta)
    expected = model @ gallery.T  # [6, 5]: s(model, foreign)
    for i, row in enumerate(rows):
        expected[row] = (1 - eta) * (model[row] @ gallery.T) + eta * (translated[i] @ gallery.T)
    np.testing.assert_allclose(fused @ gallery.T, expected, atol=1e-6)  # queries -> gallery
    np.testing.assert_allclose(gallery @ fused.T, expected.T, atol=1e-6)  # gallery -> queries
    np.testing.assert_array_equal(fused[[1, 4]], model[[1, 4]])


def test_etas_parse_sort_and_stay_in_range():
    assert parse_etas(["0,0.5", "1", "0.25"]) == (0.0, 0.25, 0.5, 1.0)
    for bad in (["1.5"], ["x"], ["-0.1"]):
        with pytest.raises(ConfigError):
            parse_etas(bad)


def test_the_authors_grid_is_the_default_and_the_documented_range_form_parses():
    grid = tuple(i / 10 for i in range(11))
    assert parse_etas(["default"]) == grid == parse_etas(["0,0.1,...,1"])  # CLL-CLIP's Figure 5: 11 points
    assert parse_etas(["0,0.25,...,1", "0.3"]) == (0.0, 0.25, 0.3, 0.5, 0.75, 1.0)
    assert parse_etas(["0.2,0.3,...,0.5"]) == (0.2, 0.3, 0.4, 0.5)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("0,...,1", "a range is two first values, ... and a last value"),
        ("0,0.1,...", "a range is two first values"),
        ("0,0.3,...,1", "whole steps of 0.3"),
        ("1,0.9,...,0", "must climb from 1 to 0"),
        ("0,0.5,...,2", "must lie in \\[0, 1\\], got 1.5"),
        ("defaults", "expects numbers in \\[0, 1\\], default, or a range"),
    ],
)
def test_a_bad_fusion_grid_is_refused_in_one_line(bad, message):
    with pytest.raises(ConfigError, match=message):
        parse_etas([bad])
    result = runner.invoke(app, ["evaluate", "--texts", "missing-texts", "--fusion", bad, "-o", "unused"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("mltk evaluate: error: --fusion")


def test_translations_pair_by_caption_id_and_skip_english():
    texts = pa.table({"lang": ["de", "en", "de", "fr"], "caption_id": ["a", "a", "b", "c"]})
    translations = pa.table({"lang": ["en", "en", "de"], "caption_id": ["b", "a", "c"]})
    rows, wanted = translation_rows(texts, translations)
    assert rows.tolist() == [0, 2] and wanted.tolist() == [1, 0]  # "c" is translated into German, not English
    with pytest.raises(ConfigError):
        translation_rows(texts, pa.table({"lang": ["en"], "caption_id": ["z"]}))


def test_xflickrco_machine_translations_import_as_translations_of_their_captions(tmp_path):
    human = artifacts.load_captions(import_dataset("xflickrco", XFLICKRCO / "annotations", tmp_path / "h") / "captions")
    mt = artifacts.load_captions(
        import_dataset("xflickrco", XFLICKRCO / "annotations_machine-translate", tmp_path / "mt") / "captions"
    )
    assert set(mt.column("lang").to_pylist()) == {"en"} and set(mt.column("source_lang").to_pylist()) == {"de"}
    german = {
        cid: text
        for cid, lang, text in zip(
            human.column("caption_id").to_pylist(),
            human.column("lang").to_pylist(),
            human.column("caption").to_pylist(),
        )
        if lang == "de"
    }
    rows, wanted = translation_rows(human, mt)
    assert len(rows) == 4 and len(german) == 5  # one German caption has no translation
    pairs = {
        german[human.column("caption_id")[int(r)].as_py()]: mt.column("caption")[int(w)].as_py()
        for r, w in zip(rows, wanted)
    }
    assert pairs["Zwei Hunde laufen im Schnee."] == "Two dogs run in the snow."


@pytest.mark.slow
def test_evaluate_fusion_on_a_text_tower_matches_a_hand_computation(tmp_path):
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.texts import encode_texts, load_text_encoder

    tower = tiny_bert_folder(tmp_path / "bert")
    captions = import_dataset("xflickrco", XFLICKRCO / "annotations", tmp_path / "h") / "captions"
    translations = import_dataset("xflickrco", XFLICKRCO / "annotations_machine-translate", tmp_path / "mt")
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(tower),
            "--captions",
            str(captions),
            "--metric",
            "c2c",
            "--c2c-pair",
            "de:en",
            "--translations",
            str(translations / "captions"),
            "--fusion",
            "0,0.5,1",
            "--device",
            "cpu",
            "--plot",
            str(tmp_path / "plots"),
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    metrics = artifacts.load_metrics(tmp_path / "m")
    fusion = metrics["fusion"]
    assert fusion["etas"] == [0.0, 0.5, 1.0] and fusion["translated"] == 4 and fusion["untranslated"] == 1
    assert fusion["per_eta"]["0"]["c2c"] == metrics["c2c"]  # eta = 0: the model alone
    assert (tmp_path / "m" / "fusion_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "plots" / "fusion_curve.png").is_file()
    # by hand: encode German, the translations and the English gallery with the same tower, fuse the scores
    table = artifacts.load_captions(captions).to_pylist()
    mt = {row["caption_id"]: row["caption"] for row in artifacts.load_captions(translations / "captions").to_pylist()}
    german = [row for row in table if row["lang"] == "de"]
    english = [row for row in table if row["lang"] == "en"]
    encoder, runtime = load_text_encoder(str(tower)), resolve_runtime("cpu", "fp32")
    encode = lambda texts: encode_texts(encoder, texts, "en", runtime)  # noqa: E731
    g = encode([row["caption"] for row in english])  # [5, D]
    s_model = encode([row["caption"] for row in german]) @ g.T  # [5, 5]
    has = [row["caption_id"] in mt for row in german]
    s_translation = encode([mt.get(row["caption_id"], row["caption"]) for row in german]) @ g.T
    truth = [[e["image_id"] for e in english].index(row["image_id"]) for row in german]
    for eta in (0.0, 0.5, 1.0):
        fused = np.where(np.array(has)[:, None], (1 - eta) * s_model + eta * s_translation, s_model)
        # the pessimistic tie rule (mltk.metrics.ranks): any other gallery item at or above the truth's score counts
        others = [np.delete(fused[i], truth[i]) for i in range(len(german))]
        hits = [int((others[i] >= fused[i, truth[i]] - 1e-6).sum()) == 0 for i in range(len(german))]
        got = fusion["per_eta"][f"{eta:g}"]["c2c"]["de-en"]["de->en"]["R@1"]
        assert got == pytest.approx(100.0 * np.mean(hits)), eta
    assert fusion["curves"]["de->en R@1"] == [
        fusion["per_eta"][k]["c2c"]["de-en"]["de->en"]["R@1"] for k in ("0", "0.5", "1")
    ]
    bad = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(tower),
            "--captions",
            str(captions),
            "--metric",
            "c2c",
            "--fusion",
            "0.5",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "bad"),
        ],
    )
    assert bad.exit_code == 2 and "--translations" in bad.stderr


def test_fusion_curve_draws_one_line_per_r1_series():
    from mltk.present import plots

    fusion = {
        "etas": [0.0, 0.5, 1.0],
        "curves": {"de t2i R@1": [10.0, 20.0, 30.0], "de t2i R@5": [1, 2, 3], "de->en R@1": [5.0, None, 7.0]},
    }
    figure = plots.fusion_curve(fusion, fmt=None)
    lines = figure.axes[0].get_lines()
    assert sorted(line.get_label() for line in lines) == ["de t2i R@1", "de->en R@1"]
    assert [list(line.get_ydata()) for line in lines if line.get_label() == "de->en R@1"] == [[5.0, 7.0]]
    assert plots.fusion_curve(fusion)[:4] == b"\x89PNG"


def test_the_fusion_form_names_the_similarity_that_ranks_the_fused_query():
    from mltk.evaluate.fusion import FUSION_FORM, fusion_curve

    table = pa.table({"lang": ["de", "en"], "caption_id": ["c0", "c1"]})
    vectors, translated = np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32)[:1]

    def evaluate(fused):
        return {"per_language": {"de": {"t2i": {"R@1": 100.0}, "i2t": {"R@1": 100.0}}}}

    cosine = fusion_curve([0.0, 1.0], table, vectors, translated, np.array([0]), evaluate)
    order = fusion_curve([0.0, 1.0], table, vectors, translated, np.array([0]), evaluate, similarity="order")
    assert cosine["form"] == FUSION_FORM and "cosine scores" in FUSION_FORM
    assert "order-violation" in order["form"] and "not a fusion of cosine scores" in order["form"]
