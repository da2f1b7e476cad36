"""Each stage-config option declared once: the training commands' tuning options are generated from the fields of
their torch-free config classes (``mltk.cli.config_options``), their help ends with the recipe's value read from the
recipe, and AME's alignment settings come from the recipe's ``alignment`` section like every other value."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_cli import leaf_commands

from mltk.ame.alignment_config import AlignmentConfig
from mltk.cli.config_options import RECIPE_DEFAULT, generated_options, given_config, option_name
from mltk.core.errors import ConfigError
from mltk.recipes import FROM_RECIPE
from mltk.settings.ccrk import CcrkConfig
from mltk.settings.continual import ContinualTrainConfig
from mltk.settings.mla import MlaConfig
from mltk.settings.pretrain import PretrainConfig
from mltk.settings.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
STAGES = {
    "train-nlt": MlaConfig,
    "train-le": MlaConfig,
    "train-nlt-le": MlaConfig,
    "train-ccrk": CcrkConfig,
    "train-continual": ContinualTrainConfig,
    "pretrain": PretrainConfig,
}
COMMAND_MODULES = ("train.py", "ccrk.py", "continual.py", "pretrain.py", "options.py", "common.py")
COMMANDS = dict(leaf_commands())


def _paths() -> dict:
    return {"captions": Path("c"), "out": Path("o")}


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_field_with_help_is_an_option_of_its_commands_with_the_fields_help(stage):
    options = {spelling: p for p in COMMANDS[stage].params for spelling in getattr(p, "opts", ())}
    generated = generated_options(stage, STAGES[stage], set())
    assert generated
    for option in generated:
        name = option_name(option.field).split("/")[0]
        assert name in options, f"{stage}: {name}"
        written = RECIPE_DEFAULT.sub("", option.field.metadata["help"]).rstrip()
        assert options[name].help.startswith(written), f"{stage}: {name}"


def _declared_option_names() -> set[str]:
    """Every option name a training command module of mltk/cli declares by hand (typer.Option with a name)."""
    names = set()
    for module in COMMAND_MODULES:
        for node in ast.walk(ast.parse((ROOT / "mltk" / "cli" / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
                names |= {
                    a.value.split("/")[0]
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
                }
    return names


def test_no_config_field_option_is_declared_by_hand():
    fields = {
        option_name(o.field).split("/")[0]
        for stage, config in STAGES.items()
        for o in generated_options(stage, config, set())
    }
    assert fields >= {"--batch-size", "--mse-form", "--val-images", "--gamma1", "--loss", "--align-k", "--lexicon"}
    assert not fields & {"--margin", "--beta", "--weighting", "--fixed-temperature"}  # --set loss.KEY=VALUE
    # --seed: the alias of the commands that are not training commands (synth-data, encode-videos); train-ccrk's
    # --train-embedding is its own (on by default, a field without a recipe value), not MlaConfig's
    assert fields & _declared_option_names() == {"--seed", "--train-embedding"}


def test_a_generated_stage_option_shows_the_recipe_value_read_from_the_recipe():
    def help_of(stage, name):
        return next(p.help for p in COMMANDS[stage].params if name in getattr(p, "opts", ()))

    assert help_of("train-continual", "--gamma1").endswith("Default: the recipe's (cll-clip: 0.01).")
    assert help_of("train-nlt", "--align-every").endswith("Default: the recipe's (mla-nlt: 500).")
    assert help_of("train-ccrk", "--align-lr").endswith("Default: the recipe's (ccrk: 2.0).")
    assert help_of("train-ccrk", "--loss").endswith("Default: the recipe's (ccrk: one-to-k).")


def test_help_names_the_hugging_face_towers_recipe_value_where_it_differs():
    """train-nlt on a Hugging Face tower runs real-text-minilm, whose lr is not mla-nlt's: the help says both."""

    def help_of(stage, name):
        return next(p.help for p in COMMANDS[stage].params if name in getattr(p, "opts", ()))

    lr_help = help_of("train-nlt", "--lr")
    assert "(mla-nlt: 0.0001; real-text-minilm on a Hugging Face tower: 0.002)" in lr_help
    assert "Hugging Face" not in help_of("train-le", "--lr")  # train-le has no tower recipe
    assert help_of("train-nlt", "--align-every").endswith("Default: the recipe's (mla-nlt: 500).")  # same value


def test_a_flag_a_parsed_option_and_a_nested_one_give_their_fields_values():
    def options(stage, config):
        return {option.parameter: option for option in generated_options(stage, config, set())}

    ccrk, le, nlt = options("train-ccrk", CcrkConfig), options("train-le", MlaConfig), options("train-nlt", MlaConfig)
    assert given_config(CcrkConfig, {ccrk["loss"]: "hinge"}) == {"loss": "hinge"}
    assert given_config(CcrkConfig, {ccrk["loss"]: None}) == {}
    assert given_config(MlaConfig, {le["temperature"]: "clip"}) == {"temperature": None}  # given, as None
    assert given_config(MlaConfig, {le["temperature"]: None}) == {}  # not given: the recipe's
    assert given_config(MlaConfig, {nlt["alignment_every"]: 3}) == {"alignment": AlignmentConfig(every=3)}
    assert "temperature" not in nlt and "alignment_every" not in le  # each command offers its own fields


def test_the_config_classes_import_no_torch():
    code = (
        "import sys\nimport mltk.settings.mla, mltk.settings.ccrk, mltk.settings.continual\n"
        "import mltk.settings.pretrain, mltk.ame.alignment_config\n"
        "print([m for m in ('torch', 'numpy', 'pyarrow') if m in sys.modules])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_the_old_import_paths_still_give_the_config_classes():
    from mltk.ame.rcsls import AlignmentConfig as from_rcsls
    from mltk.train.ccrk import CcrkConfig as from_ccrk
    from mltk.train.continual import ContinualTrainConfig as from_continual
    from mltk.train.mla import MlaConfig as from_mla
    from mltk.train.pretrain import PretrainConfig as from_pretrain

    assert (from_rcsls, from_ccrk, from_continual, from_mla, from_pretrain) == (
        AlignmentConfig,
        CcrkConfig,
        ContinualTrainConfig,
        MlaConfig,
        PretrainConfig,
    )


# --- AME's alignment settings: the recipe's ------------------------------------------------------------------------


def test_alignment_settings_have_no_default_in_code_and_come_from_the_recipe(tmp_path):
    assert all(
        getattr(AlignmentConfig(), key) is FROM_RECIPE for key in ("weight", "k", "form", "every", "lr", "orthogonal")
    )
    resolved = resolve(MlaConfig(**_paths()), "train-nlt").alignment
    assert (resolved.form, resolved.every, resolved.lr, resolved.orthogonal) == ("map", 500, 2.0, False)
    recipe = json.loads((ROOT / "mltk" / "recipes" / "mla-nlt.json").read_text(encoding="utf-8"))
    recipe["config"]["alignment"].update(every=7, lr=0.5)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(recipe))
    mine = resolve(MlaConfig(**_paths(), recipe=str(path)), "train-nlt").alignment
    assert (mine.every, mine.lr) == (7, 0.5)
    given = resolve(MlaConfig(**_paths(), recipe=str(path), alignment=AlignmentConfig(every=3)), "train-nlt")
    assert given.alignment.every == 3


@pytest.mark.parametrize("key", ["every", "lr", "form", "orthogonal"])
def test_a_recipe_without_an_alignment_key_is_refused_naming_the_key_and_the_file(key, tmp_path):
    recipe = json.loads((ROOT / "mltk" / "recipes" / "ccrk.json").read_text(encoding="utf-8"))
    recipe["config"]["alignment"].pop(key)
    path = tmp_path / "thin.json"
    path.write_text(json.dumps(recipe))
    with pytest.raises(ConfigError, match=f"the recipe sets no 'config.alignment.{key}'") as raised:
        resolve(CcrkConfig(images=Path("i"), **_paths(), recipe=str(path)), "train-ccrk")
    assert str(path) in str(raised.value)


def test_a_bad_alignment_value_in_a_recipe_is_refused():
    with pytest.raises(ConfigError, match="--align-every must be >= 1"):
        AlignmentConfig(every=0)
    with pytest.raises(ConfigError, match="--align-form must be one of map, table"):
        AlignmentConfig(form="rotate")
