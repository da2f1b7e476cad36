"""The edges of every command: what mltk replaces, what it refuses to reach, the exit code and line of a refusal,
the bounds on what a user hands over, and what a failed or killed run leaves behind (``docs/safety.md``)."""

from __future__ import annotations

import pytest

from mltk.artifacts import loose, ownership
from mltk.core import policy
from mltk.core.errors import ArtifactError
from mltk.present import plots

CONTINUAL = {
    "continual": {
        "tasks": ["en", "de"],
        "metric": "t2i.R@1",
        "matrix": [[50.0, None], [45.0, 60.0]],
        "AR": [50.0, 52.5],
        "F": [None, 5.0],
    }
}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """mltk's record of the files it wrote lives under the cache root: one per test."""
    monkeypatch.setenv("MLTK_CACHE_DIR", str(tmp_path / "cache"))


# -- a user file is never replaced --------------------------------------------------------------------------------


def test_a_single_file_writer_replaces_its_own_file_only_with_overwrite(tmp_path):
    target = tmp_path / "out.txt"
    loose.write_file(target, b"first")
    with pytest.raises(ArtifactError, match="pass --overwrite"):
        loose.write_file(target, b"second")
    with policy.overwriting():
        loose.write_file(target, b"second")
    assert target.read_bytes() == b"second" and ownership.made_by_mltk(target)


@pytest.mark.parametrize("change", ["a user's file", "edited after mltk wrote it", "same size, other bytes"])
def test_a_file_mltk_did_not_write_is_never_replaced_even_with_overwrite(tmp_path, change):
    target = tmp_path / "notes.png"
    if change == "a user's file":
        target.write_bytes(b"my notes")
    else:
        loose.write_file(target, b"written by mltk")
        target.write_bytes(b"my notes" if change == "edited after mltk wrote it" else b"WRITTEN BY MLTK")
    before = target.read_bytes()
    with policy.overwriting(), pytest.raises(ArtifactError, match="mltk did not write it"):
        loose.write_file(target, b"new")
    assert target.read_bytes() == before and not ownership.made_by_mltk(target)


def test_evaluation_pictures_never_replace_a_users_file_of_the_same_name(tmp_path):
    folder = tmp_path / "plots"
    plots.write_evaluation_plots(CONTINUAL, folder)
    with policy.overwriting():
        plots.write_evaluation_plots(CONTINUAL, folder)  # its own pictures: replaced
    (folder / "continual_curve.svg").write_text("<svg>mine</svg>")
    with policy.overwriting(), pytest.raises(ArtifactError, match="mltk did not write it"):
        plots.check_plot_dir(folder)
    assert (folder / "continual_curve.svg").read_text() == "<svg>mine</svg>"


def test_an_export_folder_and_an_artifact_are_mltks_and_a_plain_folder_is_not(tmp_path):
    from mltk import artifacts

    metrics = artifacts.write_metrics(tmp_path / "m", {"a": 1})
    export = tmp_path / "e"
    export.mkdir()
    (export / ownership.EXPORT_INFO).write_text('{"made_by": "mltk export"}')
    (tmp_path / "plain").mkdir()
    assert ownership.made_by_mltk(metrics) and ownership.made_by_mltk(export)
    assert not ownership.made_by_mltk(tmp_path / "plain")


# -- the scorer travels with the model to every command that ranks --------------------------------------------------


def _order_checkpoint(path):
    """A checkpoint config as train-ccrk --similarity order writes it (its tensors are never loaded here)."""
    import torch

    from mltk import artifacts

    config = {
        "format": "mla",
        "base": {"model": "mltk-tiny"},
        "native_lang": "en",
        "languages": ["de"],
        "non_native": {"kind": "vocab", "source": "vocab", "vocab_size": 10, "embed_dim": 4},
        "acquirer_hidden": 8,
        "train_ccrk": {"loss": "hinge", "similarity": "order"},
    }
    return artifacts.write_checkpoint(path, {"w": torch.zeros(1)}, config, stage="train-ccrk")


@pytest.fixture
def order_world(tmp_path):
    """An order-trained checkpoint, image embeddings it encoded, an index over them; and an index over
    embeddings no checkpoint made."""
    import numpy as np

    from mltk import artifacts
    from mltk.index.faiss_index import IndexConfig, build_index

    vectors = np.eye(4, dtype=np.float32)
    checkpoint = _order_checkpoint(tmp_path / "ckpt")
    encoded = artifacts.write_embeddings(
        tmp_path / "emb", [f"i{n}" for n in range(4)], vectors, stage="encode-images", inputs=[checkpoint]
    )
    plain = artifacts.write_embeddings(tmp_path / "plain", [f"i{n}" for n in range(4)], vectors)
    return {
        "ckpt": checkpoint,
        "emb": encoded,
        "plain": plain,
        "index": build_index(IndexConfig(embeddings=encoded, out=tmp_path / "idx")),
        "plain_index": build_index(IndexConfig(embeddings=plain, out=tmp_path / "plain_idx")),
    }


@pytest.mark.parametrize("query", ["an index of its vectors", "its image embeddings as queries", "its text side"])
def test_index_query_refuses_to_rank_an_order_trained_models_vectors_by_cosine(order_world, query):
    from tests.test_hostile import assert_refused, invoke

    args = {
        "an index of its vectors": [order_world["index"], "--images", order_world["plain"]],
        "its image embeddings as queries": [order_world["plain_index"], "--images", order_world["emb"]],
        "its text side": [
            order_world["plain_index"],
            "--text",
            "ein Hund",
            "--lang",
            "de",
            "--model",
            order_world["ckpt"],
        ],
    }[query]
    assert_refused(invoke("index", "query", *args, "--k", "2"), "order similarity", "mltk evaluate")
    plain = invoke("index", "query", order_world["plain_index"], "--images", order_world["plain"], "--k", "2")
    assert plain.exit_code == 0, plain.stderr


def test_zero_shot_ranks_by_order_similarity_when_asked_and_it_differs_from_cosine():
    import numpy as np
    import torch

    from mltk.evaluate.zero_shot import true_class_ranks
    from mltk.losses.ranking import order_violation_similarity

    generator = np.random.default_rng(0)
    images, classes = generator.random((30, 5), dtype=np.float32), generator.random((7, 5), dtype=np.float32)
    labels = generator.integers(0, 7, 30)
    order = true_class_ranks(images, labels, classes, "order")
    scores = order_violation_similarity(torch.from_numpy(images), torch.from_numpy(classes)).numpy()  # [30, 7]
    expected = [(row >= row[label]).sum() - 1 for row, label in zip(scores, labels)]
    assert order.tolist() == expected and order.tolist() != true_class_ranks(images, labels, classes).tolist()


# -- the network is never reached from data; a hub id that cannot be had fails at once -----------------------------


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Every name lookup fails as on a machine without a network, and is counted; an empty hub cache."""
    import socket

    lookups = []

    def unreachable(host, *args, **kwargs):
        lookups.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unreachable)
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return lookups


@pytest.mark.parametrize("fmt", ["open_clip", "mla", "transformers"])
def test_export_of_a_checkpoint_naming_a_hub_repository_refuses_without_a_connection(tmp_path, no_network, fmt):
    import torch

    from mltk import artifacts
    from mltk.models.clip import clip_checkpoint_config, load_clip
    from tests.test_hostile import assert_refused, invoke

    config = {**clip_checkpoint_config("mltk-tiny"), "model": "hf-hub:someone/tiny-clip"}
    torch.manual_seed(0)
    checkpoint = artifacts.write_checkpoint(
        tmp_path / "ckpt", load_clip("mltk-tiny").model.state_dict(), config, stage="pretrain"
    )
    assert_refused(
        invoke("export", checkpoint, "--format", fmt, "-o", tmp_path / "out"),
        "config.json",
        "hf-hub:someone/tiny-clip",
        "never fetches",
    )
    assert no_network == [] and not (tmp_path / "out").exists()


def test_a_hub_tokenizer_that_cannot_be_fetched_fails_in_one_line_at_the_first_try(no_network):
    from mltk.core.errors import ModelDownloadError
    from mltk.models.nonnative import load_non_native_tokenizer

    with pytest.raises(ModelDownloadError, match=r"'someorg/sometok'.*offline \(no connection"):
        load_non_native_tokenizer("someorg/sometok")
    assert 1 <= len(no_network) <= 2, no_network  # no retries


# -- exit 2, one line, for what the user fixes ------------------------------------------------------------------------


@pytest.mark.parametrize("length", [200, 250, 255])
def test_a_legal_long_out_name_is_written_and_reused_by_the_artifact_writer(tmp_path, length):
    from mltk import artifacts

    out = tmp_path / ("m" * length)
    assert artifacts.write_metrics(out, {"a": 1}, stage="s", config={"x": 1}) == out.resolve()
    assert artifacts.reusable(out, "metrics", stage="s", config={"x": 1}) == out.resolve()
    with policy.overwriting():
        artifacts.write_metrics(out, {"a": 2}, stage="s", config={"x": 2})
    assert artifacts.load_metrics(out) == {"a": 2} and [p.name for p in tmp_path.iterdir()] == [out.name]


def test_a_full_disk_at_the_lock_file_is_exit_2_naming_it(tmp_path, monkeypatch):
    import errno
    import os

    from mltk import artifacts
    from mltk.artifacts import locks
    from tests.test_hostile import assert_refused, invoke

    out = artifacts.write_metrics(tmp_path / "m", {"a": 1})

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "ftruncate", full)
    assert_refused(invoke("prune", out), "no space left on device", ".m.lock")
    assert not locks.lock_path(out).exists() and artifacts.load_metrics(out) == {"a": 1}


def test_a_refused_write_anywhere_in_a_command_is_exit_2_naming_the_file(monkeypatch):
    import errno

    from mltk.artifacts import prune
    from tests.test_hostile import assert_refused, invoke

    def refused(path):
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/state")

    monkeypatch.setattr(prune, "prune_state", refused)
    assert_refused(invoke("prune", "ckpt"), "/somewhere/state: permission denied")


def test_an_error_line_shows_a_file_name_with_a_newline_whole(tmp_path):
    from tests.test_hostile import assert_refused, invoke

    line = assert_refused(invoke("inspect", tmp_path / "first\nsecond"), "first\\nsecond")
    assert "\n" not in line


# -- every read of user input and every user-made size is bounded ----------------------------------------------------


def test_sentences_from_an_endless_file_are_read_up_to_the_bound_and_refused_saying_it(monkeypatch):
    from mltk.core import user_files
    from mltk.core.errors import ConfigError
    from mltk.encode.texts import sentences_of

    monkeypatch.setattr(user_files, "MAX_TEXT_BYTES", 4096)
    with pytest.raises(ConfigError, match=r"/dev/zero: .* more than 4,096 bytes, the most mltk reads"):
        sentences_of([], "/dev/zero")


def test_sentences_from_a_pipe_are_read(tmp_path):
    import os
    import threading

    from mltk.encode.texts import sentences_of

    fifo = tmp_path / "sentences"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("ein Hund\n\neine Katze\n"))
    writer.start()
    assert sentences_of([], fifo) == [("1", "ein Hund"), ("3", "eine Katze")]
    writer.join()


@pytest.mark.parametrize("grid", ["0,0.000001,...,1", "0,0.001,...,1", ",".join(str(i / 1000) for i in range(200))])
def test_a_fusion_grid_from_a_typo_is_refused_before_it_is_built(grid):
    from mltk.core.errors import ConfigError
    from mltk.evaluate.fusion import MAX_ETAS, parse_etas

    with pytest.raises(ConfigError, match=f"over the most mltk evaluates \\({MAX_ETAS}"):
        parse_etas([grid])
    assert len(parse_etas(["0,0.01,...,1"])) == MAX_ETAS


# -- lines that say what is wrong ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", " , "])
def test_an_empty_fusion_value_says_it_holds_no_weight(value):
    from mltk.core.errors import ConfigError
    from mltk.evaluate.fusion import parse_etas

    with pytest.raises(ConfigError, match="holds no weight"):
        parse_etas([value])


def test_a_fifo_given_as_an_input_is_called_a_fifo(tmp_path, order_world):
    import os

    from tests.test_hostile import assert_refused, invoke

    fifo = tmp_path / "task.json"
    os.mkfifo(fifo)
    result = invoke("classify", order_world["plain"], "--classes", fifo, "-m", "mltk-tiny", "-o", tmp_path / "z")
    line = assert_refused(result, "task.json", "FIFO (named pipe)")
    assert "no such file" not in line


def test_a_directory_as_a_test_list_is_called_a_directory(tmp_path):
    from mltk.core.errors import MltkError
    from mltk.data.importers.msrvtt import read_test_list

    with pytest.raises(MltkError, match="is a directory"):
        read_test_list(tmp_path)


def test_a_language_column_of_numbers_is_a_wrong_type_not_a_missing_language(tmp_path):
    import pyarrow as pa

    from mltk import artifacts
    from mltk.core.errors import SchemaError

    table = pa.table(
        {"image_id": ["a"], "lang": pa.array([0]), "caption": ["ein Hund"], "caption_id": [1], "split": ["train"]}
    )
    with pytest.raises(SchemaError, match="column lang has type int64, expected string"):
        artifacts.validate_captions(table, tmp_path / "c.parquet")


# -- what a failed run leaves behind --------------------------------------------------------------------------------


@pytest.mark.parametrize("work", [False, True])
def test_a_resumable_run_that_fails_before_any_work_leaves_nothing(tmp_path, work):
    from mltk import artifacts

    out = tmp_path / "run"
    with pytest.raises(RuntimeError), artifacts.ArtifactWriter(out, "checkpoint", stage="s", resume=True) as writer:
        writer.bookkeeping.add("run.json")
        artifacts.write_json(writer.dir / "run.json", {"lr": "nan"})  # settings, not work
        if work:
            (writer.dir / "state").mkdir()
            (writer.dir / "state" / "state-10.safetensors").write_bytes(b"moments")
        raise RuntimeError("the first step failed")
    partial = artifacts.writer.partial_dir(out)
    assert partial.exists() == work and not out.exists()  # only work is kept for a rerun to continue


# -- what the help promises ---------------------------------------------------------------------------------------


def test_overwrite_reuses_an_up_to_date_output_and_replaces_one_made_otherwise(tmp_path):
    from mltk.data.synth import SynthConfig, synthesize

    config = SynthConfig(train=2, val=1, test=1, langs=("en",))
    world = synthesize(tmp_path / "w", config)
    made = (world.images_path / "manifest.json").stat().st_mtime_ns
    with policy.overwriting():  # MLTK_OVERWRITE=1, as the example Makefiles export it
        again = synthesize(tmp_path / "w", config)
        assert (again.images_path / "manifest.json").stat().st_mtime_ns == made  # reused, not rebuilt
        other = synthesize(tmp_path / "w", SynthConfig(train=3, val=1, test=1, langs=("en",)))
    assert (other.images_path / "manifest.json").stat().st_mtime_ns != made


@pytest.mark.parametrize("sizes", [{"train": 10**9}, {"translated_per_image": 10**6}])
def test_a_synthetic_world_of_a_typo_size_is_refused_saying_the_bound(sizes):
    from mltk.core.errors import ConfigError
    from mltk.data.synth import SynthConfig

    with pytest.raises(ConfigError, match="over the most"):
        SynthConfig(**sizes)


@pytest.mark.parametrize("option", ["beams", "max_length", "batch_size"])
def test_translation_sizes_from_a_typo_are_refused_saying_the_bound(tmp_path, option):
    import dataclasses

    from mltk.core.errors import ConfigError
    from mltk.translate.pipeline import TranslateConfig, validate_config

    fields = {f.name for f in dataclasses.fields(TranslateConfig) if f.default is dataclasses.MISSING}
    base = {name: tmp_path / name for name in fields}
    base.update(source_lang="en", targets=("de",))
    with pytest.raises(ConfigError, match="must be between 1 and"):
        validate_config(TranslateConfig(**{**base, option: 10**9}))


def test_a_fifo_nobody_writes_to_is_refused_at_once_not_waited_for(tmp_path):
    """Opening a FIFO without a writer blocks for ever; a recipe named so is read as empty and refused in one line."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "recipe.json"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-m", "mltk", "recipes", "show", str(fifo)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert str(fifo) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
