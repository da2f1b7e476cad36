"""MLMME over K > 2 languages: the paper's sum over every language and pair is the default, the
English-pivot average an option; the M-BERT initialisation of the non-native table is on by default."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_ccrk import config, world  # noqa: F401 (fixture)

from mltk.core.errors import ConfigError
from mltk.losses import MLMMELoss, pairwise_ranking_hinge
from mltk.settings import resolve
from mltk.train import ccrk


def resolved(**fields) -> ccrk.CcrkConfig:
    """A train-ccrk config of ``fields``, its recipe read."""
    return resolve(ccrk.CcrkConfig(**fields), "train-ccrk")


def mlmme(languages: list[str], **fields) -> ccrk.CcrkObjective:
    """The mlmme objective with the ccrk recipe's values (beta 0.5) and ``fields``."""
    config = resolved(images=Path("i"), captions=Path("c"), out=Path("o"), loss="mlmme", **fields)
    return ccrk.CcrkObjective.of(config, languages)


def _features(seed: int, shape) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_mlmme_sums_every_language_and_every_pair_by_default():
    image, text = _features(0, (6, 8)), _features(1, (6, 3, 8))
    mask = torch.ones(6, 3, dtype=torch.bool)
    mask[0, 2] = False  # image 0 has no caption in the third language
    objective = mlmme(["en", "de", "fr"])
    loss, terms = objective(image, text, mask)

    def h(a, b):  # AME_MARGINS["cosine"], the margin the objective is built with
        return pairwise_ranking_hinge(a, b, 0.2)

    s_i = sum(h(image[mask[:, k]], text[mask[:, k], k]) for k in range(3))
    s_s = sum(
        h(text[mask[:, a] & mask[:, b], a], text[mask[:, a] & mask[:, b], b]) for a, b in ((0, 1), (0, 2), (1, 2))
    )
    assert torch.allclose(terms["mlmme_image_sentence"], s_i) and torch.allclose(terms["mlmme_sentence_sentence"], s_s)
    assert torch.allclose(loss, 0.5 * s_i + 0.5 * s_s)
    # the de-fr pair counts: with English pivoting, it would not
    pivot, pivot_terms = mlmme(["en", "de", "fr"], mlmme_form="english-pivot")(image, text, mask)
    pair_terms = MLMMELoss(None, 0.5).pair_terms
    parts = [pair_terms(image[mask[:, k]], text[mask[:, k], 0], text[mask[:, k], k]) for k in (1, 2)]
    assert torch.allclose(pivot_terms["mlmme_image_sentence"], (parts[0][0] + parts[1][0]) / 2)
    assert torch.allclose(pivot_terms["mlmme_sentence_sentence"], (parts[0][1] + parts[1][1]) / 2)
    assert not torch.allclose(pivot, loss)
    # without English the paper's form still has every pair; the pivot form needs English
    mlmme(["de", "fr"])
    with pytest.raises(ConfigError, match="include en"):
        mlmme(["de", "fr"], mlmme_form="english-pivot")


def test_mlmme_form_reaches_the_stage(world, tmp_path):
    task, _ = ccrk.build_task(config(world, tmp_path / "unused", loss="mlmme", mlmme_form="english-pivot"))
    assert task.objective.mlmme_form == "english-pivot"
    with pytest.raises(ConfigError, match="--mlmme-form"):
        config(world, tmp_path / "unused", loss="mlmme", mlmme_form="pairs")


def test_the_m_bert_initialisation_is_the_default_and_a_missing_model_says_how_to_turn_it_off(tmp_path, monkeypatch):
    from helpers_tiny import tiny_wordpiece_tokenizer
    from typer.testing import CliRunner

    from mltk.cli import app
    from mltk.models.nonnative import load_non_native_tokenizer
    from mltk.train import mla

    assert ccrk.CcrkConfig.__dataclass_fields__["init_embeddings"].default is True
    assert mla.MlaConfig.__dataclass_fields__["init_embeddings"].default is True
    for command in ("train-nlt", "train-nlt-le", "train-ccrk"):
        help_text = CliRunner().invoke(app, [command, "--help"], terminal_width=200).stdout
        assert "--no-init-embeddings" in help_text, command
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no test touches the network
    tokenizer = load_non_native_tokenizer(str(tiny_wordpiece_tokenizer(tmp_path / "wordpiece")))
    with pytest.raises(ConfigError, match="--no-init-embeddings"):
        tokenizer.word_embeddings()  # a tokenizer folder without the model's weights


def test_max_violation_is_reachable_from_the_recipe_the_config_and_the_option(tmp_path):
    """VSE++'s hardest negative (AME's --max_violation) reaches the hinge of --loss hinge and mlmme."""
    from typer.testing import CliRunner

    from mltk.cli import app
    from mltk.recipes import load_recipe

    paths = {"images": tmp_path / "i", "captions": tmp_path / "c", "out": tmp_path / "o"}
    assert load_recipe("ccrk").config["max_violation"] is False
    assert resolved(**paths, loss="hinge").max_violation is False
    image, text = _features(0, (6, 8)), _features(1, (6, 2, 8))
    mask = torch.ones(6, 2, dtype=torch.bool)
    for loss in ("hinge", "mlmme"):
        objective = ccrk.CcrkObjective.of(resolved(**paths, loss=loss, max_violation=True), ["en", "de"])
        summed = ccrk.CcrkObjective.of(resolved(**paths, loss=loss), ["en", "de"])
        assert objective(image, text, mask).loss < summed(image, text, mask).loss
    hinge = ccrk.CcrkObjective.of(resolved(**paths, loss="hinge", max_violation=True), ["en", "de"])
    expected = (
        pairwise_ranking_hinge(image, text[:, 0], 0.2, max_violation=True)
        + pairwise_ranking_hinge(image, text[:, 1], 0.2, max_violation=True)
    ) / 2
    assert torch.allclose(hinge(image, text, mask).loss, expected)
    with pytest.raises(ConfigError, match="--max-violation goes with --loss hinge or mlmme"):
        resolved(**paths, loss="one-to-k", max_violation=True)
    help_text = CliRunner().invoke(app, ["train-ccrk", "--help"], terminal_width=200).stdout
    assert "--max-violation" in help_text and "English-language" not in help_text
    assert "English-language" not in load_recipe("mlmme").description
