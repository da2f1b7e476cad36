"""Recipes as data (``mltk.recipes``): every packaged recipe loads and fits its stage, the defaults of every training
command resolve to the values they had before recipes existed, a Hugging Face tower gets the real-text recipes,
and docs/fidelity.md's "mltk default" column states the recipe files' values."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from mltk.core.errors import ConfigError
from mltk.recipes import STAGE_RECIPES, load_recipe, recipe_names, stage_recipe
from mltk.settings.resolve import recipe_loop, resolve
from mltk.train.ccrk import CcrkConfig
from mltk.train.continual import ContinualTrainConfig
from mltk.train.loop import LoopConfig
from mltk.train.mla import MlaConfig
from mltk.train.pretrain import PretrainConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "train-nlt": MlaConfig,
    "train-le": MlaConfig,
    "train-nlt-le": MlaConfig,
    "train-ccrk": CcrkConfig,
    "train-continual": ContinualTrainConfig,
    "pretrain": PretrainConfig,
}


def test_the_published_recipes_are_shipped():
    assert {
        "mla-nlt",
        "mla-le",
        "mla-nlt-le",
        "cll-clip",
        "teir-minilm",
        "ccrk",
        "mlmme",
        "real-text-minilm",
        "clip-pretrain",
    } <= set(recipe_names())
    assert set(STAGE_RECIPES.values()) <= set(recipe_names())


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_sets_only_fields_of_its_stage_and_a_valid_loop(name):
    recipe = load_recipe(name)
    assert recipe.name == name and recipe.description and recipe.source
    fields = {field.name for field in dataclasses.fields(CONFIGS[recipe.stage])}
    assert set(recipe.config) <= fields, set(recipe.config) - fields
    assert isinstance(recipe_loop(recipe), LoopConfig)


def test_a_loop_config_has_no_hyper_parameter_defaults():
    """The recipe is the only home of a value: LoopConfig(steps, lr) alone is incomplete."""
    with pytest.raises(TypeError, match="weight_decay"):
        LoopConfig(steps=7, lr=0.5)


def test_a_recipe_without_extends_missing_a_loop_key_is_refused_naming_the_key_and_the_file(tmp_path):
    recipe = json.loads((ROOT / "mltk/recipes/mla-nlt.json").read_text())
    del recipe["loop"]["weight_decay"]
    path = tmp_path / "no-decay.json"
    path.write_text(json.dumps(recipe))
    with pytest.raises(ConfigError, match=r"no-decay\.json: the recipe sets no 'loop.weight_decay'"):
        resolve(MlaConfig(**_paths(), recipe=str(path)), "train-nlt")


def _paths():
    return {"captions": Path("c"), "out": Path("o")}


# The resolved configuration of each command run with its defaults (the CLI passes the seed, 0), as it was before
# the recipes, with the authors' schedules, eps and clipping since put in (MLA warmup_cosine; CCR_k linear, eps 1e-8,
# global clipping; CLL-CLIP eps 1e-6): the quickstart and every example that leaves a value out runs these.
BEFORE = {
    "train-nlt": (
        LoopConfig(
            steps=1000,
            lr=1e-4,
            warmup_fraction=0.1,
            schedule="warmup_cosine",
            weight_decay=0.2,
            betas=(0.9, 0.98),
            eps=1e-6,
            grad_clip=1.0,
            clip_mode="per_tensor",
        ),
        {
            "batch_size": 128,
            "acquirer": "mlp",
            "mse_form": "mean",
            "embedding_lr": None,
            "temperature": None,
            "nlt_weight": None,
            "le_weight": None,
        },
    ),  # None: LE's keys, not NLT's
    "train-ccrk": (
        LoopConfig(
            steps=1000,
            lr=1e-4,
            warmup_fraction=0.03,
            schedule="linear",
            weight_decay=0.01,
            betas=(0.9, 0.98),
            eps=1e-8,
            grad_clip=1.0,
            clip_mode="global",
        ),
        {
            "batch_size": 128,
            "loss": "one-to-k",
            "weighting": "paper",
            "temperature": 0.07,
            "learn_temperature": True,
            "margin": None,
            "beta": 0.5,
            "hard_negatives": 0,
            "temperature_range": (0.001, 0.5),
        },
    ),
    "train-continual": (
        LoopConfig(
            steps=None,
            lr=5e-5,
            warmup_fraction=0.1,
            schedule="constant",
            weight_decay=0.05,
            betas=(0.9, 0.999),
            eps=1e-6,
            grad_clip=1.0,
            clip_mode="global",
        ),
        {
            "epochs": 3,
            "epoch_unit": "captions",
            "batch_size": 128,
            "vocab_size": 10000,
            "vocab_min_frequency": 2,
            "token_sets": "occurrence",
            "method_lr": None,
            "gamma1": 0.01,
            "gamma2": 1.0,
            "mse_form": "mean",
            "temperature": 0.07,
        },
    ),
    "pretrain": (
        LoopConfig(
            steps=1500,
            lr=1e-3,
            warmup_fraction=0.1,
            schedule="cosine",
            weight_decay=0.1,
            betas=(0.9, 0.98),
            eps=1e-6,
            grad_clip=1.0,
            clip_mode="global",
        ),
        {"batch_size": 128},
    ),
}
BEFORE["train-le"] = (
    dataclasses.replace(BEFORE["train-nlt"][0], lr=3e-6),  # CLI: 3e-6
    {**BEFORE["train-nlt"][1], "temperature": 0.01, "mse_form": None},
)
BEFORE["train-nlt-le"] = (
    BEFORE["train-nlt"][0],
    {**BEFORE["train-nlt"][1], "temperature": 0.01, "nlt_weight": 1.0, "le_weight": 1.0},
)


def _default_config(stage: str, **fields):
    paths = {**_paths(), **({"images": Path("i")} if stage != "train-nlt" else {})}
    config = CONFIGS[stage](**paths, loop={"seed": 0}, **fields)
    return resolve(config, stage)


@pytest.mark.parametrize("stage", list(BEFORE))
def test_each_command_with_its_defaults_resolves_to_the_values_it_had_before_recipes(stage):
    config = _default_config(stage)
    loop, fields = BEFORE[stage]
    assert config.loop == loop
    assert {name: getattr(config, name) for name in fields} == fields
    assert config.recipe == STAGE_RECIPES[stage]


def test_a_given_option_replaces_the_recipe_value_and_grad_clip_0_turns_clipping_off():
    config = _default_config("train-le", batch_size=16)
    assert config.batch_size == 16 and config.loop.lr == 3e-6
    config = resolve(MlaConfig(**_paths(), loop={"lr": 2e-5, "grad_clip": 0}), "train-le")
    assert (config.loop.lr, config.loop.grad_clip, config.loop.weight_decay) == (2e-5, None, 0.2)


def test_the_mlmme_recipe_is_the_ccrk_recipe_with_its_loss():
    ccrk, mlmme = load_recipe("ccrk"), load_recipe("mlmme")
    assert mlmme.loop == ccrk.loop and {**ccrk.config, "loss": "mlmme"} == mlmme.config
    config = resolve(CcrkConfig(images=Path("i"), **_paths(), recipe="mlmme"), "train-ccrk")
    assert (config.loss, config.beta, config.recipe) == ("mlmme", 0.5, "mlmme")


def test_a_hugging_face_tower_defaults_to_the_real_text_recipes(tmp_path):
    tower = tmp_path / "minilm"
    tower.mkdir()
    (tower / "modules.json").write_text("[]")
    nlt = resolve(MlaConfig(**_paths(), model=str(tower)), "train-nlt")
    assert nlt.recipe == "real-text-minilm"
    assert (nlt.loop.lr, nlt.embedding_lr, nlt.batch_size, nlt.loop.weight_decay) == (2e-3, 2e-3, 64, 0.01)
    assert (nlt.loop.steps, nlt.loop.schedule, nlt.cpu_bf16) == (500, "cosine", True)  # the time-to-quality run
    continual = resolve(ContinualTrainConfig(images=None, **_paths(), model=str(tower)), "train-continual")
    assert continual.recipe == "teir-minilm" and continual.gamma1 == 0.0
    assert (continual.loop.lr, continual.batch_size, continual.vocab_size) == (1e-3, 64, 4000)
    explicit = resolve(MlaConfig(**_paths(), model=str(tower), recipe="mla-nlt"), "train-nlt")
    assert (explicit.recipe, explicit.loop.lr, explicit.cpu_bf16) == ("mla-nlt", 1e-4, False)


def test_a_recipe_of_another_stage_is_refused_naming_its_file():
    with pytest.raises(ConfigError, match="recipe ccrk is for train-ccrk, not train-le") as raised:
        stage_recipe("train-le", "ccrk")
    assert "ccrk.json" in str(raised.value)


def test_a_recipe_file_missing_a_value_its_stage_needs_is_refused(tmp_path):
    path = tmp_path / "thin.json"
    path.write_text(json.dumps({"stage": "pretrain", "loop": {"steps": 5, "lr": 0.1}}))
    with pytest.raises(ConfigError, match="sets no 'config.batch_size'") as raised:
        resolve(PretrainConfig(images=Path("i"), **_paths(), recipe=str(path)), "pretrain")
    assert str(path) in str(raised.value)


def _fidelity_claims() -> list[tuple[str, str, str]]:
    """(recipe, key, value) of every ``recipe `NAME`: `key=value` ...`` in docs/fidelity.md's "mltk default"
    column."""
    claims = []
    for line in (ROOT / "docs/fidelity.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3:
            continue
        for part in cells[2].split("recipe `")[1:]:
            name, rest = part.split("`", 1)
            claims += [(name, key, value) for key, value in re.findall(r"`(\w+)=([^`]+)`", rest)]
    return claims


def test_the_fidelity_table_states_the_recipe_files_values():
    claims = _fidelity_claims()
    assert {name for name, _, _ in claims} >= {
        "mla-nlt",
        "mla-le",
        "cll-clip",
        "ccrk",
        "mlmme",
        "real-text-minilm",
        "teir-minilm",
        "clip-pretrain",
    }
    for name, key, text in claims:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        values = load_recipe(name).values()
        assert key in values, f"docs/fidelity.md: recipe {name} has no {key}"
        assert values[key] == value, f"docs/fidelity.md says {name} {key}={text}; the recipe file: {values[key]}"
