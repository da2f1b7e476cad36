"""One resolution point for every stage's settings (``mltk.settings.resolve``): configs are plain values until a
training function resolves them, each key belongs to the stages that read it, and every value is checked (finite,
within its bounds, no key given twice) before any work, the refusal naming where the value came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk.cli.application import app
from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE, load_recipe, recipe_names
from mltk.settings import resolve
from mltk.settings.ccrk import CcrkConfig
from mltk.settings.continual import ContinualTrainConfig
from mltk.settings.mla import MlaConfig
from mltk.settings.pretrain import PretrainConfig
from mltk.settings.resolve import parse_overrides
from mltk.settings.show import recipe_values

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"captions": Path("c"), "out": Path("o")}


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def refusal(result) -> str:
    """The one line of a refusal (exit 2)."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def recipe_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.json"
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------------------------
# One resolution point
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_class", "stage"),
    [(CcrkConfig, "train-ccrk"), (PretrainConfig, "pretrain"), (ContinualTrainConfig, "train-continual")],
)
def test_a_config_is_a_plain_value_until_its_stage_resolves_it(config_class, stage, tmp_path):
    missing = tmp_path / "no-such-recipe.json"
    config = config_class(images=Path("i"), **PATHS, recipe=str(missing))  # no file read here
    assert config.batch_size is FROM_RECIPE and config.loop is None
    with pytest.raises(ConfigError, match="no-such-recipe.json"):
        resolve(config, stage)


def test_resolve_fills_every_value_once_and_a_resolved_config_resolves_to_itself(tmp_path):
    path = recipe_file(tmp_path, json.dumps({"stage": "train-ccrk", "extends": "ccrk", "loop": {"lr": 2e-4}}))
    resolved = resolve(CcrkConfig(images=Path("i"), **PATHS, recipe=str(path)), "train-ccrk")
    assert resolved.loop.lr == 2e-4 and resolved.batch_size == load_recipe("ccrk").config["batch_size"]
    assert resolved.recipe.startswith("file sha256:")
    assert resolve(resolved, "train-ccrk") == resolved  # the recipe is not looked up again by its content name


def test_the_cli_and_the_settings_import_no_training_code():
    code = (
        "import sys, mltk.cli.application, mltk.settings.mla, mltk.settings.ccrk, mltk.settings.continual; "
        "print(sorted(m for m in sys.modules if m.startswith('mltk.train') or m == 'torch'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------------------------------------------
# Stage-true keys
# ----------------------------------------------------------------------------------------------------------------


def test_set_of_a_key_the_stage_does_not_read_is_refused_naming_the_stage_that_does(tmp_path):
    line = refusal(
        invoke(
            "train-nlt", tmp_path / "captions", "-m", "mltk-tiny", "--set", "temperature=0.05", "-o", tmp_path / "out"
        )
    )
    assert "temperature" in line and "train-nlt does not read" in line and "train-le" in line
    assert not (tmp_path / "out").exists()


def test_a_python_caller_giving_a_key_the_stage_does_not_read_is_refused():
    with pytest.raises(ConfigError, match="train-nlt does not read 'nlt_weight'.*train-nlt-le"):
        resolve(MlaConfig(**PATHS, nlt_weight=2.0), "train-nlt")


def test_each_mla_stage_records_only_the_keys_it_reads():
    nlt, le = resolve(MlaConfig(**PATHS), "train-nlt"), resolve(MlaConfig(**PATHS), "train-le")
    both = resolve(MlaConfig(**PATHS), "train-nlt-le")
    assert (nlt.temperature, nlt.nlt_weight, nlt.le_weight, nlt.mse_form) == (None, None, None, "mean")
    assert (le.temperature, le.mse_form, le.nlt_weight) == (0.01, None, None)
    assert (both.temperature, both.nlt_weight, both.le_weight, both.mse_form) == (0.01, 1.0, 1.0, "mean")


def test_no_packaged_recipe_carries_a_key_its_stage_does_not_read():
    nlt = json.loads((ROOT / "mltk" / "recipes" / "mla-nlt.json").read_text(encoding="utf-8"))
    assert not {"temperature", "nlt_weight", "le_weight"} & set(nlt["config"])


def test_a_recipe_file_setting_a_key_its_stage_does_not_read_is_refused(tmp_path):
    path = recipe_file(tmp_path, json.dumps({"stage": "train-le", "extends": "mla-le", "config": {"mse_form": "sum"}}))
    with pytest.raises(ConfigError, match="train-le does not read 'mse_form'") as raised:
        resolve(MlaConfig(**PATHS, recipe=str(path)), "train-le")
    assert str(path) in str(raised.value)


def test_train_continual_records_no_loop_steps_and_refuses_a_recipe_that_sets_them(tmp_path):
    assert "steps" not in load_recipe("cll-clip").loop  # each task's steps come from config.steps or epochs
    config = resolve(ContinualTrainConfig(images=Path("i"), **PATHS, steps=7), "train-continual")
    assert config.loop.steps is None and config.steps == 7
    path = recipe_file(tmp_path, json.dumps({"stage": "train-continual", "extends": "cll-clip", "loop": {"steps": 5}}))
    with pytest.raises(ConfigError, match="train-continual does not read it") as raised:
        resolve(ContinualTrainConfig(images=Path("i"), **PATHS, recipe=str(path)), "train-continual")
    assert str(path) in str(raised.value)


def test_recipes_show_explains_each_key_and_its_printed_key_is_accepted_by_set():
    result = invoke("recipes", "show", "mla-nlt", "--json")
    rows = {row["key"]: row for row in json.loads(result.stdout)["values"]}
    assert "learning rate" in rows["loop.lr"]["meaning"] and "config.temperature" not in rows
    assert parse_overrides(["loop.lr=3e-4", "config.batch_size=64"], MlaConfig, "train-nlt") == {
        "loop": {"lr": 3e-4},
        "config": {"batch_size": 64},
    }


@pytest.mark.parametrize("name", recipe_names())
def test_every_key_recipes_show_prints_says_what_it_means(name):
    _, rows = recipe_values(name)
    assert rows and all(row.meaning for row in rows), [row.key for row in rows if not row.meaning]


# ----------------------------------------------------------------------------------------------------------------
# Every value checked before work, naming where it came from
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ("lr=NaN", "finite"),
        ("eps=Infinity", "finite"),
        ("weight_decay=NaN", "finite"),
        ("seed=-1", "at least 0"),
        ("seed=99999999999", "at most"),
        ("steps=10000000000", "at most"),
    ],
)
def test_set_refuses_a_value_that_is_not_finite_or_out_of_bounds_naming_set(pair, words, tmp_path):
    line = refusal(invoke("train-nlt", tmp_path / "captions", "-m", "mltk-tiny", "--set", pair, "-o", tmp_path / "o"))
    assert words in line and "--set" in line and "mla-nlt.json" not in line


@pytest.mark.parametrize(
    ("loop", "words"),
    [('{"eps": Infinity}', "finite"), ('{"weight_decay": NaN}', "finite"), ('{"seed": -3}', "at least 0")],
)
def test_a_recipe_file_with_a_value_that_is_not_finite_or_out_of_bounds_is_refused_naming_the_file(
    loop, words, tmp_path
):
    path = recipe_file(tmp_path, '{"stage": "train-nlt", "extends": "mla-nlt", "loop": %s}' % loop)
    with pytest.raises(ConfigError, match=words) as raised:
        resolve(MlaConfig(**PATHS, recipe=str(path)), "train-nlt")
    assert str(path) in str(raised.value)


def test_a_value_given_by_name_is_checked_like_a_recipes():
    with pytest.raises(ConfigError, match="finite"):
        resolve(MlaConfig(**PATHS, loop={"weight_decay": float("nan")}), "train-nlt")
    with pytest.raises(ConfigError, match="at most"):
        resolve(MlaConfig(**PATHS, loop={"seed": 2**40}), "train-nlt")


def test_a_recipe_with_a_key_given_twice_is_refused(tmp_path):
    path = recipe_file(tmp_path, '{"stage": "train-nlt", "extends": "mla-nlt", "loop": {"steps": 3, "steps": 400000}}')
    line = refusal(invoke("recipes", "show", path))
    assert str(path) in line and "'steps' twice" in line
