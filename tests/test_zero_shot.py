"""Zero-shot classification: CLIP's prompt ensemble, top-k with ties against the image, tasks from a
synthetic world and from a JSON file, and `mltk classify` end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import MltkError, SchemaError
from mltk.evaluate.zero_shot import class_vectors, file_task, top_k_accuracy, true_class_ranks, world_task

runner = CliRunner()


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_ensemble_is_the_normalised_mean_of_normalised_prompts():
    prompts = [np.array([[3.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 2.0]])]
    got = class_vectors(prompts)
    expected_first = np.array([1.0, 1.0]) / np.sqrt(2.0)  # mean of (1,0) and (0,1), renormalised
    assert np.allclose(got[0], expected_first) and np.allclose(got[1], [0.0, 1.0])


def test_top_k_by_an_independent_loop():
    rng = np.random.default_rng(0)
    images, classes = unit(rng.normal(size=(40, 8))), unit(rng.normal(size=(10, 8)))
    labels = rng.integers(0, 10, size=40)
    ranks = true_class_ranks(images, labels, classes)
    for row in range(40):
        scores = classes @ images[row]
        assert ranks[row] == sorted(scores, reverse=True).index(scores[labels[row]])
    expected_top1 = 100 * np.mean([np.argmax(classes @ images[r]) == labels[r] for r in range(40)])
    accuracy = top_k_accuracy(ranks, (1, 5))
    assert accuracy["top1"] == pytest.approx(expected_top1)
    top5 = 100 * np.mean([labels[r] in np.argsort(-(classes @ images[r]))[:5] for r in range(40)])
    assert accuracy["top5"] == pytest.approx(top5)


def test_constant_embeddings_do_not_score_a_perfect_accuracy():
    images, classes = np.ones((6, 4), np.float32) / 2, np.ones((3, 4), np.float32) / 2
    ranks = true_class_ranks(images, np.array([0, 1, 2, 0, 1, 2]), classes)
    assert (ranks == 2).all() and top_k_accuracy(ranks, (1,))["top1"] == 0.0


def test_a_world_task_labels_single_kind_images_with_grammatical_prompts(tmp_path):
    from mltk.data.synth import SynthConfig, synthesize

    world = synthesize(tmp_path / "w", SynthConfig(train=0, val=0, test=40, langs=("en", "de")))
    task = world_task(world.images_path, ("en", "de"))
    table = artifacts.load_images(world.images_path)
    scenes = dict(zip(table.column("image_id").to_pylist(), table.column("scene").to_pylist()))
    for image_id, class_id in task.labels.items():
        assert {f"{o['colour']}_{o['shape']}" for o in json.loads(scenes[image_id])} == {class_id}
    single = [i for i, s in scenes.items() if len({(o["colour"], o["shape"]) for o in json.loads(s)}) == 1]
    assert sorted(task.labels) == sorted(single) and len(task.class_ids) == 64
    assert "A picture of a red circle." in task.prompts["en"]["red_circle"]
    assert any("roter Kreis" in prompt or "roten Kreis" in prompt for prompt in task.prompts["de"]["red_circle"])


def test_a_task_file_is_checked(tmp_path):
    good = {
        "classes": {"apple": {"en": "apple", "de": "Apfel"}, "pear": {"en": "pear", "de": "Birne"}},
        "templates": {"en": ["a photo of a {}."], "de": ["ein Foto von {}."]},
        "labels": {"img1": "pear"},
    }
    path = tmp_path / "task.json"
    path.write_text(json.dumps(good))
    task = file_task(path)
    assert task.prompts["de"]["pear"] == ("ein Foto von Birne.",) and task.labels == {"img1": "pear"}
    bad = dict(good, labels={"img1": "plum"})
    path.write_text(json.dumps(bad))
    with pytest.raises(SchemaError, match="unknown class"):
        file_task(path)
    path.write_text(json.dumps(dict(good, templates={"en": ["no slot"]})))
    with pytest.raises(SchemaError, match="holding"):
        file_task(path)
    path.write_text("{not json")
    with pytest.raises(MltkError, match="zero-shot task file is not valid JSON"):
        file_task(path)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images
    from mltk.models.clip import clip_checkpoint_config, load_clip

    root = tmp_path_factory.mktemp("zs")
    result = synthesize(root / "world", SynthConfig(train=8, val=4, test=40, langs=("en", "de")))
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    images = encode_images(result.images_path, root / "img", model=str(native), device="cpu", workers=0)
    return {"root": root, "world": result.path, "native": native, "images": images}


def test_classify_cli_writes_accuracy_per_language(world, tmp_path):
    out = tmp_path / "zs"
    result = runner.invoke(
        app,
        [
            "classify",
            str(world["images"]),
            "--classes",
            str(world["world"]),
            "-m",
            str(world["native"]),
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    metrics = artifacts.load_metrics(out)
    assert set(metrics["zero_shot"]) == {"en", "de"}  # a whole CLIP reads every language (badly, untrained)
    for scores in metrics["zero_shot"].values():
        assert 0 <= scores["top1"] <= scores["top5"] <= 100 and scores["classes"] == 64
    again = runner.invoke(
        app,
        [
            "classify",
            str(world["images"]),
            "--classes",
            str(world["world"]),
            "-m",
            str(world["native"]),
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert again.exit_code == 0 and "up to date" in again.stderr


def test_classify_refuses_a_language_the_task_lacks(world, tmp_path):
    result = runner.invoke(
        app,
        [
            "classify",
            str(world["images"]),
            "--classes",
            str(world["world"]),
            "-m",
            str(world["native"]),
            "--lang",
            "xx",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "z"),
        ],
    )
    assert result.exit_code == 2 and "no class names in xx" in result.stderr


def test_classify_ranks_by_the_similarity_the_checkpoint_trained_with(world, tmp_path):
    from mltk.models.clip import clip_checkpoint_config, load_clip

    torch.manual_seed(0)
    config = {**clip_checkpoint_config("mltk-tiny"), "train_ccrk": {"similarity": "order"}}
    ordered = artifacts.write_checkpoint(
        tmp_path / "order", load_clip("mltk-tiny").model.state_dict(), config, stage="train-ccrk"
    )
    found = {}
    for name, model in (("cosine", world["native"]), ("order", ordered)):
        result = runner.invoke(
            app,
            [
                "classify",
                str(world["images"]),
                "--classes",
                str(world["world"]),
                "-m",
                str(model),
                "--lang",
                "de",
                "--device",
                "cpu",
                "-o",
                str(tmp_path / f"m-{name}"),
            ],
        )
        assert result.exit_code == 0, result.stderr
        found[name] = artifacts.load_metrics(tmp_path / f"m-{name}")
    assert [found[n]["settings"]["similarity"] for n in ("cosine", "order")] == ["cosine", "order"]
