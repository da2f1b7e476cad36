"""train-ccrk's losses as its recipe's ``losses`` section: every loss's options shown by ``mltk recipes show`` with
their meanings, updated key by key by a recipe that extends, set with ``--set loss.KEY=VALUE`` through the one
settings parser, refused (exit 2, naming key and loss) when the chosen loss does not read them, and recorded as
resolved; every loss of every stage is an entry of the one registry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk.cli.application import app
from mltk.core.errors import ConfigError
from mltk.losses.options import CCRK_LOSSES, LOSS_OPTIONS, HingeOptions, OneToKOptions
from mltk.recipes import load_recipe
from mltk.settings import resolve
from mltk.settings.ccrk import CcrkConfig
from mltk.settings.mla import MlaConfig
from mltk.settings.resolve import parse_overrides

runner = CliRunner()


def config(**changes) -> CcrkConfig:
    return CcrkConfig(images=Path("emb"), captions=Path("caps"), out=Path("out"), **changes)


def test_recipes_show_lists_every_losss_options_with_their_meanings():
    result = runner.invoke(app, ["recipes", "show", "ccrk", "--json"])
    assert result.exit_code == 0, result.stderr
    rows = {row["key"]: row for row in json.loads(result.stdout)["values"]}
    assert rows["losses.one-to-k.temperature"]["value"] == 0.07 and rows["config.loss"]["value"] == "one-to-k"
    assert rows["losses.one-to-k.temperature_lr_scale"]["value"] == 2.0
    assert "Initial temperature" in rows["losses.one-to-k.temperature"]["meaning"]
    assert rows["losses.hinge.margin"]["value"] is None and "AME's margin" in rows["losses.hinge.margin"]["meaning"]
    assert rows["losses.mlmme.beta"]["value"] == 0.5
    assert not any(key.startswith("config.temperature") or key == "config.beta" for key in rows)  # no flat keys
    text = runner.invoke(app, ["recipes", "show", "mlmme"]).stdout  # its beta from its own file
    assert re.search(r"losses\.mlmme\.beta\s+0\.5\s+mlmme", text)
    mlmme = {
        row["key"]: row
        for row in json.loads(runner.invoke(app, ["recipes", "show", "mlmme", "--json"]).stdout)["values"]
    }
    assert (mlmme["losses.mlmme.form"]["value"], mlmme["losses.mlmme.form"]["source"]) == ("paper", "ccrk")


def test_set_loss_keys_go_through_the_one_settings_parser():
    parsed = parse_overrides(
        ["loss.temperature=0.05", "losses.one-to-k.weighting=code", "lr=1e-3"], CcrkConfig, "train-ccrk"
    )
    assert parsed == {
        "loop": {"lr": 1e-3},
        "config": {"loss_options": {"temperature": "0.05", "one-to-k": {"weighting": "code"}}},
    }
    resolved = resolve(config(**parsed["config"]), "train-ccrk")
    assert (resolved.loss_options.temperature, resolved.loss_options.weighting) == (0.05, "code")
    assert resolved.loss_options.temperature_range == (0.001, 0.5)  # the rest the recipe's
    with pytest.raises(ConfigError, match="no loss 'hinj'"):
        parse_overrides(["losses.hinj.margin=0.1"], CcrkConfig)
    with pytest.raises(ConfigError, match="unknown key 'loss.margin'"):
        parse_overrides(["loss.margin=0.1"], MlaConfig, "train-nlt")  # no losses there


def test_an_option_the_chosen_loss_does_not_read_exits_2_naming_key_and_loss(tmp_path):
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            "--images",
            str(tmp_path / "emb"),
            "--captions",
            str(tmp_path / "caps"),
            "-o",
            str(tmp_path / "out"),
            "--set",
            "loss.margin=0.1",
        ],
    )
    assert result.exit_code == 2
    assert "--set loss.margin: not an option of loss one-to-k" in result.stderr
    with pytest.raises(ConfigError, match="the run's loss is hinge, which does not read one-to-k's options"):
        resolve(config(loss="hinge", loss_options={"one-to-k": {"temperature": "0.1"}}), "train-ccrk")
    with pytest.raises(ConfigError, match="temperature must lie in the clamp range"):
        resolve(config(loss_options={"temperature": 0.9}), "train-ccrk")
    with pytest.raises(ConfigError, match="'loss.similarity' must be one of cosine, order"):
        resolve(config(loss="hinge", loss_options={"similarity": "dot"}), "train-ccrk")


def test_the_similarity_option_is_the_hinges_and_sets_ames_margin():
    resolved = resolve(config(loss="hinge", loss_options={"similarity": "order"}), "train-ccrk")
    assert resolved.loss_options == HingeOptions(margin=0.05, similarity="order", max_violation=False)
    assert resolved.similarity == "order" and resolve(config(), "train-ccrk").similarity == "cosine"


def test_a_recipe_that_extends_updates_one_option_and_keeps_the_others(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps({"stage": "train-ccrk", "extends": "ccrk", "losses": {"one-to-k": {"temperature": 0.1}}})
    )
    resolved = resolve(config(recipe=str(mine)), "train-ccrk")
    assert (resolved.loss_options.temperature, resolved.loss_options.weighting) == (0.1, "paper")
    assert load_recipe(mine).source_of("losses", "one-to-k.temperature") == mine


@pytest.mark.parametrize(
    "losses,words",
    [
        (
            {"one-to-k": {"temprature": 0.1}},
            "unknown recipe key 'losses.one-to-k.temprature' (did you mean temperature?)",
        ),
        ({"hinj": {"margin": 0.1}}, "recipe key 'losses.hinj': no such loss (did you mean hinge?)"),
        ({"mlmme": {"beta": 2.0}}, "recipe key 'losses.mlmme.beta' must be at most 1"),
    ],
)
def test_a_bad_losses_section_is_refused_naming_the_file_and_key(tmp_path, losses, words):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"stage": "train-ccrk", "extends": "ccrk", "losses": losses}))
    with pytest.raises(ConfigError, match=re.escape(words)) as error:
        resolve(config(recipe=str(mine)), "train-ccrk")
    assert "mine.json" in str(error.value)


def test_a_stage_without_losses_refuses_the_section(tmp_path):
    mine = tmp_path / "nlt.json"
    mine.write_text(json.dumps({"stage": "train-nlt", "extends": "mla-nlt", "losses": {"hinge": {"margin": 0.1}}}))
    with pytest.raises(ConfigError, match="train-nlt chooses no loss by name"):
        resolve(MlaConfig(captions=Path("caps"), out=Path("out"), recipe=str(mine)), "train-nlt")


def test_the_manifest_records_the_resolved_options_of_the_chosen_loss():
    from mltk.artifacts import jsonable

    resolved = resolve(config(loss="hinge"), "train-ccrk")
    recorded = jsonable(resolved)
    assert recorded["loss_options"] == {"margin": 0.2, "similarity": "cosine", "max_violation": False}
    assert not {"temperature", "beta", "weighting", "similarity"} & set(recorded)
    assert resolve(resolved, "train-ccrk") == resolved  # a resolved config resolves to itself
    assert isinstance(resolve(config(), "train-ccrk").loss_options, OneToKOptions)


def test_every_loss_of_every_stage_is_in_the_registry_with_options_without_defaults():
    import dataclasses

    from mltk.losses.registry import LOSSES, build_loss, options_of

    assert set(LOSSES) == set(LOSS_OPTIONS) >= {*CCRK_LOSSES, "infonce", "mse", "cll-clip", "rcsls"}
    for name, entry in LOSSES.items():
        assert entry.options is LOSS_OPTIONS[name]
        assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(entry.options)), name
    assert set(load_recipe("ccrk").losses) == set(CCRK_LOSSES)
    assert build_loss("mse", {"form": "sum"}).form == "sum"
    assert build_loss("cll-clip", options_of("cll-clip", gamma1=0.01, gamma2=1.0, form="mean")).gamma1 == 0.01
    assert build_loss("rcsls", options_of("rcsls", k=5)).k == 5
    with pytest.raises(ConfigError, match="'k' must be at least 1"):
        options_of("rcsls", k=0)
