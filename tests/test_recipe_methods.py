"""The continual methods' options as the train-continual recipe's ``methods`` section: shown by ``mltk recipes
show`` with their meanings, updated key by key by a recipe that extends, checked like every recipe value, and set
with ``--set method.KEY=VALUE`` through the one settings parser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk.cli.application import app
from mltk.core.errors import ConfigError
from mltk.recipes import load_recipe
from mltk.settings import resolve
from mltk.settings.continual import ContinualTrainConfig
from mltk.settings.mla import MlaConfig
from mltk.settings.resolve import parse_overrides

runner = CliRunner()


def config(**changes) -> ContinualTrainConfig:
    return ContinualTrainConfig(images=Path("emb"), captions=Path("caps"), out=Path("out"), **changes)


def test_recipes_show_lists_the_replay_memory_and_loras_rank_with_their_meanings():
    result = runner.invoke(app, ["recipes", "show", "cll-clip", "--json"])
    assert result.exit_code == 0, result.stderr
    rows = {row["key"]: row for row in json.loads(result.stdout)["values"]}
    assert rows["methods.er.memory_size"]["value"] == 8000 == rows["methods.der.memory_size"]["value"]
    assert "Replay memory" in rows["methods.er.memory_size"]["meaning"]
    assert rows["methods.lora.rank"]["value"] == 8 and "LoRA's rank" in rows["methods.lora.rank"]["meaning"]
    assert rows["methods.lora.rank"]["source"] == "cll-clip"
    text = runner.invoke(app, ["recipes", "show", "teir-minilm"]).stdout  # inherited from cll-clip
    assert re.search(r"methods\.er\.memory_size\s+8000\s+cll-clip\s+Replay memory", text)
    assert re.search(r"methods\.lora\.rank\s+8\s+cll-clip\s+LoRA's rank", text)


def test_a_recipe_that_extends_updates_one_option_and_keeps_the_others(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"stage": "train-continual", "extends": "cll-clip", "methods": {"lora": {"rank": 16}}}))
    resolved = resolve(config(method="lora", recipe=str(mine)), "train-continual")
    assert (resolved.options.rank, resolved.options.alpha) == (16, 8.0)
    assert load_recipe(mine).source_of("methods", "lora.rank") == mine
    assert load_recipe(mine).source_of("methods", "lora.alpha").stem == "cll-clip"
    assert resolve(config(method="er", recipe="teir-minilm"), "train-continual").options.memory_size == 8000


@pytest.mark.parametrize(
    "methods,words",
    [
        ({"lora": {"rnak": 16}}, "unknown recipe key 'methods.lora.rnak' (did you mean rank?)"),
        ({"lorra": {"rank": 16}}, "recipe key 'methods.lorra': no such method (did you mean lora?)"),
        ({"lora": {"rank": "16"}}, "recipe key 'methods.lora.rank' must be an integer"),
        ({"er": {"replay_loss": "both"}}, "must be one of clfm, joint, separate"),
        ({"lora": 8}, "methods.lora"),
    ],
)
def test_a_bad_methods_section_is_refused_naming_the_file_and_key(tmp_path, methods, words):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"stage": "train-continual", "extends": "cll-clip", "methods": methods}))
    with pytest.raises(ConfigError, match=re.escape(words)) as error:
        resolve(config(method="cll-clip", recipe=str(mine)), "train-continual")
    assert "mine.json" in str(error.value)


def test_a_stage_without_methods_refuses_the_section(tmp_path):
    mine = tmp_path / "nlt.json"
    mine.write_text(json.dumps({"stage": "train-nlt", "extends": "mla-nlt", "methods": {"lora": {"rank": 4}}}))
    with pytest.raises(ConfigError, match="train-nlt has no continual methods"):
        resolve(MlaConfig(captions=Path("caps"), out=Path("out"), recipe=str(mine)), "train-nlt")


def test_set_method_keys_go_through_the_one_settings_parser():
    parsed = parse_overrides(
        ["method.rank=16", "methods.lora.alpha=4", "lr=1e-3"], ContinualTrainConfig, "train-continual"
    )
    assert parsed == {"loop": {"lr": 1e-3}, "config": {"options": {"rank": "16", "lora": {"alpha": "4"}}}}
    resolved = resolve(config(method="lora", **parsed["config"]), "train-continual")
    assert (resolved.options.rank, resolved.options.alpha) == (16, 4.0)
    with pytest.raises(ConfigError, match="--set method.rank given twice"):
        parse_overrides(["method.rank=16", "method.rank=8"], ContinualTrainConfig)
    with pytest.raises(ConfigError, match="no method 'lorra'"):
        parse_overrides(["methods.lorra.rank=16"], ContinualTrainConfig)
    with pytest.raises(ConfigError, match="unknown key 'method.rank'"):
        parse_overrides(["method.rank=16"], MlaConfig, "train-nlt")  # no methods there
    with pytest.raises(ConfigError, match="not an option of method cll-clip"):
        resolve(config(**parse_overrides(["method.rank=16"], ContinualTrainConfig)["config"]), "train-continual")


def test_the_manifest_records_only_the_chosen_methods_options():
    from mltk.artifacts import jsonable

    resolved = resolve(config(method="der", options={"alpha": 0.5}), "train-continual")
    assert jsonable(resolved)["options"] == {
        "memory_size": 8000,
        "replay_batch": None,
        "replay_loss": "clfm",
        "alpha": 0.5,
    }
    assert resolve(resolved, "train-continual") == resolved  # a resolved config resolves to itself
