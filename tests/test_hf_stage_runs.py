"""Every text stage on Hugging Face towers, end to end through the CLI: train-nlt (acquirers and the full
fine-tune) on a text-only BERT folder, train-le, train-ccrk and `index query --text` on an open_clip CLIP whose
text tower is that BERT, evaluate and encode-texts on the results, and the one-line refusals."""

from __future__ import annotations

import json

import pytest
import torch
from helpers_tiny import register_hf_clip, tiny_bert_folder
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A small synthetic world, a tiny random BERT folder, an HF-tower CLIP with saved weights, and the CLIP's
    image embeddings."""
    import open_clip
    from safetensors.torch import save_file

    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images

    root = tmp_path_factory.mktemp("hfworld")
    result = synthesize(root / "world", SynthConfig(train=48, val=16, test=16, langs=("en", "de", "ru")))
    bert = tiny_bert_folder(root / "bert")
    name = register_hf_clip(root, bert, "mltk-test-hf-stage-runs")
    torch.manual_seed(7)
    weights = root / "clip.safetensors"
    save_file({k: v.contiguous() for k, v in open_clip.create_model(name).state_dict().items()}, weights)
    images = encode_images(
        result.images_path, root / "img", model=name, pretrained=str(weights), device="cpu", workers=0
    )
    return {
        "root": root,
        "captions": result.captions_path,
        "bert": bert,
        "clip": name,
        "weights": str(weights),
        "images": images,
    }


def nlt(world, out, *extra):
    return runner.invoke(
        app,
        [
            "train-nlt",
            str(world["captions"]),
            "--out",
            str(out),
            "--lang",
            "de",
            "--steps",
            "4",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
            *extra,
        ],
    )


@pytest.mark.parametrize("train", ["acquirers", "full"])
def test_train_nlt_on_a_text_only_tower_with_its_own_tokenizer(world, tmp_path, train):
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.models.hf_text import load_hf_text_tower

    out = tmp_path / train
    result = nlt(world, out, "--model", str(world["bert"]), "--train", train, "--embedding-lr", "2e-4")
    assert result.exit_code == 0, result.stderr
    tensors, config = artifacts.load_checkpoint(out)
    assert config["non_native"]["source"] == "tower" and config["train"] == train
    assert config["base"]["model"] == str(world["bert"].resolve())
    prefix = "acquirers.de." if train == "acquirers" else "student."
    assert any(k.startswith(prefix) for k in tensors) and "embedding.table.weight" in tensors
    manifest = artifacts.read_manifest(out, "checkpoint")
    assert manifest["parameters_trained"] == sum(v.numel() for v in tensors.values())
    assert manifest["train"] == train and manifest["train_seconds"] >= 0
    encoder = load_text_encoder(out)
    tower = load_hf_text_tower(str(world["bert"]))
    texts = ["two red circle", "blue square"]
    with torch.no_grad():  # English stays the frozen tower, bit for bit
        assert torch.equal(encoder.encode(texts, "en"), tower.encode(*tower.tokenize(texts)))
    metrics = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(out),
            "--captions",
            str(world["captions"]),
            "--split",
            "test",
            "--lang",
            "en,de",
            "--metric",
            "c2c",
            "--out",
            str(tmp_path / f"m-{train}"),
            "--device",
            "cpu",
        ],
    )
    assert metrics.exit_code == 0, metrics.stderr
    texts_out = runner.invoke(
        app,
        [
            "encode-texts",
            str(world["captions"]),
            "--model",
            str(out),
            "--split",
            "test",
            "--lang",
            "de",
            "--out",
            str(tmp_path / f"t-{train}"),
            "--device",
            "cpu",
        ],
    )
    assert texts_out.exit_code == 0, texts_out.stderr
    table, vectors = artifacts.load_embeddings(texts_out.stdout.strip())
    assert set(table.column("lang").to_pylist()) == {"de"} and vectors.shape[1] == 32


@pytest.mark.parametrize("matrix_units", [True, False])
def test_auto_precision_of_train_nlt_on_an_hf_tower_is_bf16_where_the_cpu_multiplies_bf16(
    world, tmp_path, monkeypatch, matrix_units
):
    """train-nlt's recipe on a Hugging Face tower sets cpu_bf16: --precision auto trains in bf16 autocast on a CPU
    with bf16 matrix instructions and in fp32 elsewhere; the manifest records what auto became and why. Two bf16
    runs with one seed write the same weights."""
    from mltk.core import cpu_bf16

    monkeypatch.setattr(cpu_bf16, "cpu_flags", lambda: frozenset({"avx512_bf16"} if matrix_units else {"avx2"}))
    monkeypatch.setattr(cpu_bf16, "measure_bf16_speedup", lambda: 1.6)
    outs = [tmp_path / "a", tmp_path / "b"] if matrix_units else [tmp_path / "a"]
    for out in outs:
        result = nlt(world, out, "--model", str(world["bert"]))
        assert result.exit_code == 0, result.stderr
        manifest = artifacts.read_manifest(out, "checkpoint")
        assert manifest["runtime"]["device"] == "cpu"
        assert manifest["runtime"]["precision"] == ("bf16" if matrix_units else "fp32")
        assert manifest["runtime"]["reason"].startswith("cpu has avx512_bf16" if matrix_units else "cpu has no bf16")
    if matrix_units:
        first, second = (artifacts.load_checkpoint(out)[0] for out in outs)
        assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_embedding_lr_is_its_own_param_group():
    from helpers_loop import loop_config

    from mltk.train.mla import nlt_optimizer

    params = {
        "embedding.table.weight": torch.nn.Parameter(torch.zeros(5, 4)),
        "embedding.proj.bias": torch.nn.Parameter(torch.zeros(4)),
        "acquirers.de.0.c_fc.weight": torch.nn.Parameter(torch.zeros(3, 4)),
    }
    optimizer = nlt_optimizer(params, loop_config(steps=10, lr=1e-3, weight_decay=0.1), 2e-4)
    lr_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    assert [lr_of[id(params[k])] for k in params] == [2e-4, 2e-4, 1e-3]
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    assert [decay_of[id(params[k])] for k in params] == [0.1, 0.0, 0.1]


def test_train_nlt_then_le_on_an_hf_tower_clip_and_query_an_index(world, tmp_path):
    result = nlt(world, tmp_path / "nlt", "--model", world["clip"], "--pretrained", world["weights"])
    assert result.exit_code == 0, result.stderr
    le = runner.invoke(
        app,
        [
            "train-le",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--init",
            str(tmp_path / "nlt"),
            "--out",
            str(tmp_path / "le"),
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--temperature",
            "clip",
            "--device",
            "cpu",
        ],
    )
    assert le.exit_code == 0, le.stderr
    index = runner.invoke(app, ["index", "build", str(world["images"]), "--out", str(tmp_path / "index")])
    assert index.exit_code == 0, index.stderr
    query = runner.invoke(
        app,
        [
            "index",
            "query",
            index.stdout.strip(),
            "--text",
            "ein roter kreis",
            "--lang",
            "de",
            "--model",
            str(tmp_path / "le"),
            "--k",
            "3",
            "--device",
            "cpu",
        ],
    )
    assert query.exit_code == 0, query.stderr
    assert len(json.loads(query.stdout.splitlines()[0])["results"]) == 3


def test_train_ccrk_on_an_hf_tower_clip(world, tmp_path):
    out = tmp_path / "ccrk"
    result = runner.invoke(
        app,
        [
            "train-ccrk",
            str(world["images"]),
            "--captions",
            str(world["captions"]),
            "--out",
            str(out),
            "--model",
            world["clip"],
            "--pretrained",
            world["weights"],
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--val-images",
            "8",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    tensors, config = artifacts.load_checkpoint(out)
    assert config["non_native"]["source"] == "tower" and any(k.startswith("acquirers.ru.") for k in tensors)


def test_stages_a_tower_cannot_serve_refuse_in_one_line(world, tmp_path):
    common = ["--captions", str(world["captions"]), "--device", "cpu"]
    cases = [
        (
            ["train-le", str(world["images"]), *common, "--model", str(world["bert"]), "--out", str(tmp_path / "a")],
            "text-only tower",
        ),
        (
            ["train-ccrk", str(world["images"]), *common, "--model", str(world["bert"]), "--out", str(tmp_path / "b")],
            "text-only tower",
        ),
        (
            [
                "train-continual",
                str(world["images"]),
                *common,
                "--model",
                str(world["bert"]),
                "--out",
                str(tmp_path / "c"),
            ],
            "text-only tower (no image tower): leave out the image embeddings",
        ),
        (
            [
                "train-continual",
                str(world["images"]),
                *common,
                "--model",
                world["clip"],
                "--pretrained",
                world["weights"],
                "--out",
                str(tmp_path / "d"),
            ],
            "cannot grow",
        ),
        (
            [
                "train-nlt",
                str(world["captions"]),
                "--model",
                str(world["bert"]),
                "--train",
                "half",
                "--out",
                str(tmp_path / "e"),
                "--device",
                "cpu",
            ],
            "--train",
        ),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args[0], result.stderr)
        assert message in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
