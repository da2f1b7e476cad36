"""The edges of every command: what mltk replaces, what it refuses to reach, the exit code and line of a refusal,
the bounds on what a user hands over, and what a failed or killed run leaves behind (``docs/safety.md``)."""

from __future__ import annotations

import pytest

from mltk.artifacts import loose, ownership
from mltk.core import policy
from mltk.core.errors import ArtifactError
from mltk.present import plots

CONTINUAL = {"continual": {"tasks": ["en", "de"], "metric": "t2i.R@1", "matrix": [[50.0, None], [45.0, 60.0]],
                           "AR": [50.0, 52.5], "F": [None, 5.0]}}


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

    config = {"format": "mla", "base": {"model": "mltk-tiny"}, "native_lang": "en", "languages": ["de"],
              "non_native": {"kind": "vocab", "source": "vocab", "vocab_size": 10, "embed_dim": 4},
              "acquirer_hidden": 8, "train_ccrk": {"loss": "hinge", "similarity": "order"}}
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
    encoded = artifacts.write_embeddings(tmp_path / "emb", [f"i{n}" for n in range(4)], vectors,
                                         stage="encode-images", inputs=[checkpoint])
    plain = artifacts.write_embeddings(tmp_path / "plain", [f"i{n}" for n in range(4)], vectors)
    return {"ckpt": checkpoint, "emb": encoded, "plain": plain,
            "index": build_index(IndexConfig(embeddings=encoded, out=tmp_path / "idx")),
            "plain_index": build_index(IndexConfig(embeddings=plain, out=tmp_path / "plain_idx"))}


@pytest.mark.parametrize("query", ["an index of its vectors", "its image embeddings as queries", "its text side"])
def test_index_query_refuses_to_rank_an_order_trained_models_vectors_by_cosine(order_world, query):
    from tests.test_hostile import assert_refused, invoke

    args = {"an index of its vectors": [order_world["index"], "--images", order_world["plain"]],
            "its image embeddings as queries": [order_world["plain_index"], "--images", order_world["emb"]],
            "its text side": [order_world["plain_index"], "--text", "ein Hund", "--lang", "de",
                              "--model", order_world["ckpt"]]}[query]
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
    checkpoint = artifacts.write_checkpoint(tmp_path / "ckpt", load_clip("mltk-tiny").model.state_dict(), config,
                                            stage="pretrain")
    assert_refused(invoke("export", checkpoint, "--format", fmt, "-o", tmp_path / "out"), "config.json",
                   "hf-hub:someone/tiny-clip", "never fetches")
    assert no_network == [] and not (tmp_path / "out").exists()


def test_a_hub_tokenizer_that_cannot_be_fetched_fails_in_one_line_at_the_first_try(no_network):
    from mltk.core.errors import ModelDownloadError
    from mltk.models.nonnative import load_non_native_tokenizer

    with pytest.raises(ModelDownloadError, match=r"'someorg/sometok'.*offline \(no connection"):
        load_non_native_tokenizer("someorg/sometok")
    assert 1 <= len(no_network) <= 2, no_network  # no retries
