"""The stage runner's shared pieces: the one resume rule, stage configs with one LoopConfig, caption draws."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from mltk.core.errors import ConfigError
from mltk.recipes import load_recipe
from mltk.settings.resolve import recipe_loop, resolve
from mltk.train.batches import draw_captions, group_by_image
from mltk.train.ccrk import CcrkConfig
from mltk.train.loop_state import changed_settings, settings_record
from mltk.train.mla import MlaConfig as UnresolvedMlaConfig
from mltk.train.stage import open_run, replace_settings, stage_writer


def MlaConfig(**fields) -> UnresolvedMlaConfig:
    """train-nlt's config with its recipe's values filled in, as train_nlt records it."""
    return resolve(UnresolvedMlaConfig(**fields), "train-nlt")


def test_one_rule_lets_only_listed_settings_change_at_any_depth():
    saved = settings_record(MlaConfig(captions=Path("c"), out=Path("a"), loop={"steps": 5, "lr": 1e-3}))
    allowed = settings_record(
        MlaConfig(
            captions=Path("c"),
            out=Path("b"),
            device="cpu",
            val_images=3,
            loop={"steps": 5, "lr": 1e-3, "eval_every": 2, "save_every": 1},
        )
    )
    assert changed_settings(saved, allowed) == []
    other = settings_record(
        MlaConfig(captions=Path("c"), out=Path("a"), batch_size=4, loop={"steps": 5, "lr": 1e-2, "seed": 1})
    )
    assert changed_settings(saved, other) == [
        "batch_size=128 (now 4)",
        "loop.lr=0.001 (now 0.01)",
        "loop.seed=0 (now 1)",
    ]
    assert changed_settings({"a": 1}, {"a": 1, "new_setting": 2}) == ["new_setting=None (now 2)"]


def test_a_partial_run_continues_only_with_the_same_settings(tmp_path):
    config = MlaConfig(captions=Path("c"), out=tmp_path / "out", loop={"steps": 5, "lr": 1e-3})
    with pytest.raises(KeyboardInterrupt):
        with open_run(stage_writer(config.out, "train-nlt", config, []), config) as writer:
            (writer.dir / "state").mkdir()
            (writer.dir / "state" / "loop.json").write_text("{}")  # work a rerun continues from
            raise KeyboardInterrupt
    with pytest.raises(ConfigError, match=r"other settings: batch_size=128 \(now 4\); loop.steps=5 \(now 6\)"):
        changed = replace_settings(config, batch_size=4, steps=6)
        with open_run(stage_writer(config.out, "train-nlt", changed, []), changed):
            pass
    allowed = replace_settings(config, eval_every=1, device="cpu")
    with open_run(stage_writer(config.out, "train-nlt", allowed, []), allowed) as writer:
        assert (writer.dir / "run.json").is_file()
    assert not (config.out / "run.json").exists()  # the finished artifact does not keep it


def test_a_run_interrupted_before_any_work_leaves_nothing_and_a_corrected_rerun_starts(tmp_path):
    config = MlaConfig(captions=Path("c"), out=tmp_path / "out", loop={"steps": 5, "lr": 1e-3})
    with pytest.raises(RuntimeError):
        with open_run(stage_writer(config.out, "train-nlt", config, []), config):
            raise RuntimeError("the first step failed")
    assert list(tmp_path.iterdir()) == []
    corrected = replace_settings(config, lr=1e-4)
    with open_run(stage_writer(config.out, "train-nlt", corrected, []), corrected) as writer:
        assert (writer.dir / "run.json").is_file()


def test_replace_settings_routes_loop_fields_into_the_one_loop_config():
    config = resolve(CcrkConfig(images=Path("i"), captions=Path("c"), out=Path("o")), "train-ccrk")
    changed = replace_settings(config, steps=3, lr=1e-3, batch_size=8)
    defaults = recipe_loop(load_recipe("ccrk"))  # the CCR_k authors'
    assert changed.loop == dataclasses.replace(defaults, steps=3, lr=1e-3) and changed.batch_size == 8
    assert config.loop == defaults
    with pytest.raises(TypeError, match="no setting"):
        replace_settings(config, stepz=3)


def test_one_caption_per_image_is_drawn_from_its_own_captions():
    image_rows, counts, offsets = group_by_image(np.array([0, 0, 0, 2, 5, 5]))
    assert image_rows.tolist() == [0, 2, 5] and counts.tolist() == [3, 1, 2] and offsets.tolist() == [0, 3, 4]
    images = np.array([2, 0, 1])
    first = draw_captions(7, 3, 0x1E, images, offsets, counts)
    assert first.tolist() == draw_captions(7, 3, 0x1E, images, offsets, counts).tolist()
    for image, caption in zip(images, first):
        assert offsets[image] <= caption < offsets[image] + counts[image]
    draws = {tuple(draw_captions(7, step, 0x1E, images, offsets, counts)) for step in range(20)}
    assert len(draws) > 1  # the draw changes with the step
