"""The recipe as the one handle on a hyper-parameter: a user's recipe file checked field by field (exit 2 naming the
file, the key and what was expected), known by its content rather than its path, ``--set KEY=VALUE`` on the
training commands, ``mltk recipes list / show / cp``, and help that reads the recipe instead of restating it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli.application import app
from mltk.recipes import load_recipe
from mltk.settings import resolve
from mltk.train.loop_state import settings_record
from mltk.train.pretrain import PretrainConfig

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def packaged(name: str) -> dict:
    return json.loads((ROOT / "mltk" / "recipes" / f"{name}.json").read_text(encoding="utf-8"))


def with_change(name: str, change) -> dict:
    recipe = packaged(name)
    change(recipe)
    return recipe


# Each bad recipe file (a change to clip-pretrain, which extends nothing) and the words its one error line holds.
BAD_RECIPES = {
    "string steps": (lambda r: r["loop"].update(steps="3"), "key 'loop.steps' must be an integer, not \"3\""),
    "float batch": (lambda r: r["config"].update(batch_size=12.5), "'config.batch_size' must be an integer"),
    "batch 0": (lambda r: r["config"].update(batch_size=0), "'config.batch_size' must be at least 2, not 0"),
    "string betas": (lambda r: r["loop"].update(betas=["0.9", "0.98"]), "'loop.betas[0]' must be a number"),
    "one beta": (lambda r: r["loop"].update(betas=[0.9]), "'loop.betas' must be a list of 2 numbers"),
    "bool lr": (lambda r: r["loop"].update(lr=True), "'loop.lr' must be a number"),
    "null steps": (lambda r: r["loop"].update(steps=None), "'loop.steps' must be an integer, not null"),
    "bad schedule": (
        lambda r: r["loop"].update(schedule="exponential"),
        "'loop.schedule' must be one of constant, cosine",
    ),
    "unknown loop key": (lambda r: r["loop"].update(lrr=1e-3), "unknown recipe key 'loop.lrr' (did you mean lr?)"),
    "unknown config key": (lambda r: r["config"].update(batch=8), "unknown recipe key 'config.batch'"),
    "unknown top key": (lambda r: r.update(loops={}), "unknown recipe key 'loops' (did you mean loop?)"),
    "loop not an object": (lambda r: r.update(loop=[1]), "recipe key 'loop' must be an object"),
    "missing loop key": (lambda r: r["loop"].pop("weight_decay"), "the recipe sets no 'loop.weight_decay'"),
    "missing config key": (lambda r: r["config"].pop("batch_size"), "the recipe sets no 'config.batch_size'"),
    "unknown parent": (lambda r: r.update(extends="clip-pretrian"), "'extends' must name another packaged recipe"),
    "unknown stage": (lambda r: r.update(stage="train"), "recipe key 'stage' must be one of"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    """Folders standing for pretrain's inputs: a recipe is checked before they are read."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "images").mkdir()
    (root / "captions").mkdir()
    return {"images": root / "images", "captions": root / "captions"}


def _pretrain(inputs, recipe, *more):
    return invoke(
        "pretrain",
        inputs["images"],
        "--captions",
        inputs["captions"],
        "--recipe",
        recipe,
        "-o",
        Path(recipe).parent / "out",
        "--device",
        "cpu",
        *more,
    )


@pytest.mark.parametrize("case", list(BAD_RECIPES))
def test_a_bad_recipe_file_is_exit_2_naming_the_file_the_key_and_what_was_expected(case, inputs, tmp_path):
    change, words = BAD_RECIPES[case]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(with_change("clip-pretrain", change)), encoding="utf-8")
    result = _pretrain(inputs, path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mltk pretrain: error: ") and str(path) in lines[0], lines
    assert words in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_deeply_nested_recipe_is_refused_before_it_is_parsed(inputs, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"stage": "pretrain", "loop": {"steps": ' + "[" * 5000 + "]" * 5000 + "}}", encoding="utf-8")
    result = _pretrain(inputs, path)
    assert result.exit_code == 2 and "nests 5002 levels deep" in result.stderr and str(path) in result.stderr


def test_a_bad_value_in_a_parent_is_blamed_on_the_file_that_holds_it(tmp_path):
    from mltk.core.errors import ConfigError
    from mltk.settings.resolve import recipe_loop

    path = tmp_path / "child.json"
    path.write_text(json.dumps({"stage": "train-nlt", "extends": "mla-nlt", "loop": {"lr": "fast"}}))
    with pytest.raises(ConfigError, match=r"child\.json: recipe key 'loop.lr' must be a number"):
        recipe_loop(load_recipe(path))


def test_the_same_recipe_file_is_the_same_settings_however_its_path_is_spelled(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "mine.json").write_text(json.dumps(with_change("clip-pretrain", lambda r: r["loop"].update(lr=2e-3))))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def record(recipe: str) -> dict:
        return settings_record(
            resolve(PretrainConfig(images=Path("/i"), captions=Path("/c"), out=Path("/o"), recipe=recipe), "pretrain")
        )

    absolute = record(str(folder / "mine.json"))
    monkeypatch.chdir(folder)
    assert record("mine.json") == record("./mine.json") == absolute
    monkeypatch.chdir(elsewhere)
    assert record("../recipes/mine.json") == absolute
    assert absolute["recipe"].startswith("file sha256:") and absolute["loop"]["lr"] == 2e-3
    (folder / "mine.json").write_text(json.dumps(packaged("clip-pretrain")))  # another content: another recipe
    assert record("../recipes/mine.json")["recipe"] != absolute["recipe"]


# --- --set -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("set")
    result = invoke("synth-data", "-o", root / "world", "--train", "24", "--val", "8", "--test", "8", "--lang", "en")
    assert result.exit_code == 0, result.stderr
    return root / "world"


def test_set_wins_over_the_recipe_and_is_recorded_like_a_named_option(world, tmp_path):
    common = ("pretrain", world / "images", "--steps", "2", "--batch-size", "8", "--device", "cpu")
    by_set = invoke(*common, "-o", tmp_path / "set", "--set", "lr=3e-4", "--set", "betas=0.8,0.9")
    assert by_set.exit_code == 0, by_set.stderr
    named = invoke(*common, "-o", tmp_path / "named", "--lr", "3e-4", "--set", "betas=[0.8, 0.9]")
    assert named.exit_code == 0, named.stderr
    recorded = artifacts.read_manifest(tmp_path / "set")["created_by"]["config"]
    assert recorded["loop"]["lr"] == 3e-4 and recorded["loop"]["betas"] == [0.8, 0.9]
    assert recorded == artifacts.read_manifest(tmp_path / "named")["created_by"]["config"] | {"out": recorded["out"]}
    weights = [(tmp_path / run / "model.safetensors").read_bytes() for run in ("set", "named")]
    assert weights[0] == weights[1]


@pytest.mark.parametrize(
    "args,words",
    [
        (("--set", "lrr=1e-3"), "--set: unknown key 'lrr' (did you mean lr?)"),
        (("--set", "lr"), "--set takes KEY=VALUE, got 'lr'"),
        (("--set", "device=cpu"), "--set: unknown key 'device'"),  # a run option, not a recipe key
        (("--set", "steps=two"), "--set key 'steps' must be an integer, not \"two\""),
        (("--set", "batch_size=1"), "--set key 'batch_size' must be at least 2, not 1"),
        (("--set", "lr=1e-3", "--lr", "2e-3"), "lr given twice, as an option and as --set lr=..."),
        (("--set", "batch_size=8", "--batch-size", "8"), "batch_size given twice"),
    ],
)
def test_a_bad_set_is_exit_2_with_one_line(inputs, tmp_path, args, words):
    result = invoke("pretrain", inputs["images"], "--captions", inputs["captions"], "-o", tmp_path / "o", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


# --- mltk recipes ------------------------------------------------------------------------------------------------


def test_recipes_list_names_every_packaged_recipe_and_its_stage():
    result = invoke("recipes", "list", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert (rows["mla-le"]["stage"], rows["mla-le"]["extends"], rows["mla-le"]["default"]) == (
        "train-le",
        "mla-nlt",
        True,
    )
    assert not rows["mlmme"]["default"] and set(rows) == {p.stem for p in (ROOT / "mltk" / "recipes").glob("*.json")}


def test_recipes_show_lists_every_value_with_its_source():
    result = invoke("recipes", "show", "mla-le", "--json")
    assert result.exit_code == 0, result.stderr
    values = {row["key"]: (row["value"], row["source"]) for row in json.loads(result.stdout)["values"]}
    assert values["loop.lr"] == (3e-6, "mla-le")  # its own
    assert values["loop.weight_decay"] == (0.2, "mla-nlt") and values["config.temperature"] == (0.01, "mla-le")
    recipe = load_recipe("mla-le")
    read = {f"loop.{k}" for k in recipe.loop} | {f"config.{k}" for k in recipe.config if k != "mse_form"}
    assert set(values) == read  # mla-nlt's mse_form, which train-le does not read, is left out
    text = invoke("recipes", "show", "mla-le").stdout
    assert re.search(r"loop\.lr\s+3e-06\s+mla-le", text) and re.search(r"loop\.eps\s+1e-06\s+mla-nlt", text)


# The authors' optimizer settings of each recipe, as their code runs them (docs/fidelity.md).
AUTHORS_VALUES = {
    "cll-clip": {
        "loop.eps": 1e-6,
        "loop.schedule": "constant",
        "loop.clip_mode": "global",
        "config.alignment": {"weight": 1.0, "k": 5, "form": "table", "every": 500, "lr": 2.0, "orthogonal": False},
    },
    "ccrk": {
        "loop.schedule": "linear",
        "loop.eps": 1e-8,
        "loop.clip_mode": "global",
        "loop.grad_clip": 1.0,
        "config.temperature_form": "temperature",
        "config.temperature_lr_scale": 2.0,
        "config.temperature_weight_decay": 0.01,
    },
    "mla-nlt": {"loop.schedule": "warmup_cosine"},
    "mla-le": {"loop.schedule": "warmup_cosine"},
    "mla-nlt-le": {"loop.schedule": "warmup_cosine"},
    "ame": {
        "loop.lr": 1.1e-4,
        "loop.weight_decay": 0.0,
        "loop.warmup_fraction": 0.0,
        "loop.schedule": "step",
        "loop.grad_clip": 2.0,
        "loop.clip_mode": "global",
        "config.loss": "hinge",
        "config.alignment": {"weight": 1.0, "k": 5, "form": "map", "every": 500, "lr": 2.0, "orthogonal": False},
    },
}


@pytest.mark.parametrize("name", list(AUTHORS_VALUES))
def test_recipes_show_prints_the_authors_values(name):
    result = invoke("recipes", "show", name, "--json")
    assert result.exit_code == 0, result.stderr
    values = {row["key"]: row["value"] for row in json.loads(result.stdout)["values"]}
    assert {key: values.get(key) for key in AUTHORS_VALUES[name]} == AUTHORS_VALUES[name]


def test_recipes_cp_writes_a_recipe_that_loads_and_never_replaces_a_file_without_overwrite(tmp_path, monkeypatch):
    monkeypatch.setenv("MLTK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "mine.json"
    result = invoke("recipes", "cp", "mla-le", out)
    assert result.exit_code == 0 and result.stdout.strip() == str(out.resolve())
    assert load_recipe(out).values() == load_recipe("mla-le").values()
    again = invoke("recipes", "cp", "mla-nlt", out)
    assert again.exit_code == 2 and "pass --overwrite" in again.stderr
    assert invoke("recipes", "cp", "mla-nlt", "-o", out, "--overwrite").exit_code == 0
    assert load_recipe(out).loop["lr"] == 1e-4
    out.write_text("my edits")  # the user's edits are never replaced, not even with --overwrite
    edited = invoke("recipes", "cp", "mla-le", "-o", out, "--overwrite")
    assert edited.exit_code == 2 and "mltk did not write it" in edited.stderr and out.read_text() == "my edits"
    assert invoke("recipes", "cp", "mla-nlt").exit_code == 2  # no file to write
    unknown = invoke("recipes", "show", "mla-lee")
    assert unknown.exit_code == 2 and "did you mean mla-le?" in unknown.stderr


# --- help reads the recipe -----------------------------------------------------------------------------------------


def test_help_shows_the_recipe_value_read_from_the_recipe(monkeypatch, tmp_path):
    from mltk.cli import config_options

    assert "Default: the recipe's (mla-le: 3e-06)" in invoke("train-le", "--help").stdout.replace("\n", " ")
    edited = packaged("mla-le")
    edited["loop"]["lr"] = 7e-6
    (tmp_path / "mla-le.json").write_text(json.dumps(edited))
    monkeypatch.setattr(
        config_options,
        "load_recipe",
        lambda name: load_recipe(tmp_path / "mla-le.json") if name == "mla-le" else load_recipe(name),
    )
    assert "7e-06" in config_options.recipe_value_words("train-le", "lr")


def test_no_help_text_restates_a_recipe_number():
    """A help string of mltk/cli may say "the recipe's" but never follow it with a value of its own."""
    restated = []
    for path in (ROOT / "mltk" / "cli").glob("*.py"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        restated += [f"{path.name}: {m}" for m in re.findall(r"the recipe's[,:] [\w.\-]+", text)]
    assert restated == []
