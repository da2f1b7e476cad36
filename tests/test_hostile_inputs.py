"""Hostile input, second sweep: what a checkpoint depends on is checked by content, a checkpoint's config never
makes mltk download or wander, and every file a user hands over is checked against one schema per kind.

1. a base whose ``model.safetensors`` was replaced in place by other bytes of the same size is refused naming the
   file (hashed once per file version, the hash kept in mltk's cache); ``inspect`` hashes the files;
2. a crafted checkpoint config naming a hub repository, a ``local-dir:`` pickle or a wrong architecture is exit 2
   with no network attempt; ``--base /`` is not walked;
3. zero-shot task files, MUSE lexicons and translations are validated, naming the file, the key and the problem.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_encoders import tiny_clip_and_mla
from helpers_tiny import tiny_bert_folder
from test_hostile import assert_refused, crafted, edit_checkpoint_config, invoke

from mltk import artifacts
from mltk.artifacts import content_check, integrity, schema
from mltk.core.errors import ArtifactError

XFLICKRCO = Path(__file__).parent / "fixtures" / "importers" / "xflickrco_fusion"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own hash cache: one test's cached hashes never answer for another's files."""
    monkeypatch.setenv("MLTK_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to resolve or reach a host fails the test at once (and is recorded)."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[:1])
        raise AssertionError(f"network attempt: {args[:1]}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Captions in en and de, a random mltk-tiny CLIP checkpoint and an MLA checkpoint over it."""
    from mltk.data.synth import SynthConfig, synthesize

    root = tmp_path_factory.mktemp("inputs")
    synthesize(root / "world", SynthConfig(train=8, val=4, test=4, image_size=32, langs=("en", "de")))
    native, mla = tiny_clip_and_mla(root)
    return {"root": root, "captions": root / "world" / "captions", "native": native, "mla": mla}


def _copy_models(models, directory: Path) -> tuple[Path, Path, Path]:
    """The base, tokenizer and MLA checkpoint copied together (so the checkpoint finds them through ``relative``),
    their files dated a minute back so that their hashes may be cached."""
    for name in ("native", "wordpiece", "mla"):
        shutil.copytree(models["root"] / name, directory / name)
    past = time.time() - 60
    for path in directory.rglob("*"):
        os.utime(path, (past, past))
    return directory / "native", directory / "wordpiece", directory / "mla"


def _replace_same_size(path: Path) -> None:
    """Other bytes of the same size in place (the last 64 bytes of tensor data reversed)."""
    data = bytearray(path.read_bytes())
    data[-64:] = bytes(reversed(data[-64:]))
    assert bytes(data) != path.read_bytes()
    path.write_bytes(bytes(data))


def _encode(models, model, out, *extra):
    return invoke("encode-texts", models["captions"], "-m", model, "-o", out, "--lang", "de", "--device", "cpu", *extra)


# -- 1. dependencies checked by content -------------------------------------------------------------------------------


class TestABaseReplacedInPlace:
    def test_is_refused_naming_the_file(self, models, tmp_path):
        native, _, mla = _copy_models(models, tmp_path)
        first = _encode(models, mla, tmp_path / "before")
        assert first.exit_code == 0, first.stderr  # the hashes are now cached
        _replace_same_size(native / schema.CHECKPOINT_WEIGHTS)
        assert_refused(
            _encode(models, mla, tmp_path / "after"), str(native / schema.CHECKPOINT_WEIGHTS), "does not hold the bytes"
        )
        assert not (tmp_path / "after").exists()
        assert_refused(
            invoke(
                "encode-texts",
                models["captions"],
                "-m",
                native,
                "-o",
                tmp_path / "direct",
                "--lang",
                "en",
                "--device",
                "cpu",
            ),
            str(native / schema.CHECKPOINT_WEIGHTS),
        )

    def test_inspect_hashes_the_files_and_says_changed(self, models, tmp_path):
        native, _, mla = _copy_models(models, tmp_path)
        assert _encode(models, mla, tmp_path / "before").exit_code == 0
        _replace_same_size(native / schema.CHECKPOINT_WEIGHTS)
        result = invoke("inspect", mla, "--json")
        assert result.exit_code == 0, result.stderr
        rows = {row["field"]: row for row in json.loads(result.stdout)["dependencies"]}
        assert rows["base.model"]["status"] == "changed"
        assert schema.CHECKPOINT_WEIGHTS in rows["base.model"]["now"]
        assert rows["non_native.source"]["status"].startswith("found at")  # the copy beside it, unchanged

    def test_a_tokenizer_artifact_replaced_in_place_is_refused(self, models, tmp_path):
        from mltk.models.nonnative import load_non_native_tokenizer
        from mltk.settings.vocab import build_vocab

        vocab = build_vocab(models["captions"], "de", tmp_path / "vocab", size=600, split=None)
        files = [vocab / name for name in artifacts.read_manifest(vocab)["files"]]
        tokenizer_file = max(files, key=lambda path: path.stat().st_size).name
        load_non_native_tokenizer(str(vocab))
        _replace_same_size(vocab / tokenizer_file)
        with pytest.raises(ArtifactError, match="does not hold the bytes"):
            load_non_native_tokenizer(str(vocab))

    def test_the_hash_is_paid_once_per_file_version(self, models, tmp_path, monkeypatch):
        native, _, _ = _copy_models(models, tmp_path)
        hashed = []
        real = integrity.sha256_file
        monkeypatch.setattr(integrity, "sha256_file", lambda path: hashed.append(path) or real(path))
        content_check.check_content(native, "base model")
        assert Path(native / schema.CHECKPOINT_WEIGHTS).resolve() in hashed
        hashed.clear()
        content_check.check_content(native, "base model")
        assert hashed == []  # from the cache
        _replace_same_size(native / schema.CHECKPOINT_WEIGHTS)
        with pytest.raises(ArtifactError):
            content_check.check_content(native, "base model")
        assert [p.name for p in hashed] == [schema.CHECKPOINT_WEIGHTS]  # a changed file is hashed again


# -- 2. a checkpoint's config names nothing to download, and --base is bounded ---------------------------------------


def _local_dir_with_a_pickle(directory: Path) -> Path:
    from mltk.models.clip import CONFIG_DIR

    directory.mkdir()
    config = json.loads((CONFIG_DIR / "mltk-tiny.json").read_text())
    (directory / "open_clip_config.json").write_text(json.dumps({"model_cfg": config}))
    (directory / "open_clip_pytorch_model.bin").write_bytes(pickle.dumps({"weights": os.getpid}))
    return directory


HOSTILE_NAMES = {
    "base.model hf-hub": lambda c, tmp: crafted(c, c["base"], model="hf-hub:attacker/evil-clip"),
    "tokenizer hf-hub": lambda c, tmp: crafted(c, c["non_native"], source="hf-hub:attacker/evil-tok"),
    "tokenizer hub id": lambda c, tmp: crafted(c, c["non_native"], source="attacker/evil-tok"),
    "base.model unknown architecture": lambda c, tmp: crafted(c, c["base"], model="ViT-NOPE"),
    "base.model local-dir pickle": lambda c, tmp: crafted(
        c, c["base"], model=f"local-dir:{_local_dir_with_a_pickle(tmp / 'pickled')}"
    ),
}


class TestACraftedCheckpointConfig:
    @pytest.mark.parametrize("case", list(HOSTILE_NAMES))
    def test_naming_a_hub_repo_or_a_pickle_is_exit_2_without_network(self, models, tmp_path, no_network, case):
        checkpoint = edit_checkpoint_config(
            models["mla"], tmp_path / "crafted", lambda c: HOSTILE_NAMES[case](c, tmp_path)
        )
        result = _encode(models, checkpoint, tmp_path / "out")
        assert no_network == []
        assert_refused(result)
        assert "config.json" in result.stderr or "pickled" in result.stderr

    def test_a_hub_name_in_the_local_cache_loads_from_its_folder_without_network(
        self, models, tmp_path, monkeypatch, no_network
    ):
        from huggingface_hub import constants

        repository = tmp_path / "hub" / "models--someone--tiny-wordpiece"
        shutil.copytree(models["root"] / "wordpiece", repository / "snapshots" / "0123abc")
        (repository / "refs").mkdir()
        (repository / "refs" / "main").write_text("0123abc")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        checkpoint = edit_checkpoint_config(
            models["mla"], tmp_path / "named", lambda c: crafted(c, c["non_native"], source="someone/tiny-wordpiece")
        )
        result = _encode(models, checkpoint, tmp_path / "out")
        assert result.exit_code == 0, result.stderr
        assert no_network == []
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
        assert_refused(_encode(models, checkpoint, tmp_path / "out2"), "not in the local Hugging Face cache")

    @pytest.mark.parametrize("architecture", ["ViT-NOPE", "RN50", "hf-hub:attacker/evil-clip"])
    def test_a_whole_clip_naming_a_wrong_architecture_is_exit_2(self, models, tmp_path, architecture):
        checkpoint = edit_checkpoint_config(
            models["native"], tmp_path / "crafted", lambda c: c.update(model=architecture)
        )
        result = invoke(
            "encode-texts",
            models["captions"],
            "-m",
            checkpoint,
            "-o",
            tmp_path / "out",
            "--lang",
            "en",
            "--device",
            "cpu",
        )
        assert_refused(result, "config.json", architecture)

    def test_base_root_is_not_walked(self, models, tmp_path):
        def tokenizer_moved(config):
            config["depends_on"]["non_native.source"].update(location=str(tmp_path / "gone"), relative="../gone")

        _, wordpiece, _ = _copy_models(models, tmp_path)
        moved = edit_checkpoint_config(models["mla"], tmp_path / "moved", tokenizer_moved)
        assert_refused(
            _encode(models, moved, tmp_path / "out", "--base", "/"),
            "--base / is not it (not a model or tokenizer folder)",
        )
        result = _encode(models, moved, tmp_path / "out", "--base", "/", "--base", wordpiece)
        assert result.exit_code == 0, result.stderr


# -- 3. one schema per kind of user file -----------------------------------------------------------------------------


GOOD_TASK = {
    "classes": {"apple": {"en": "apple"}, "pear": {"en": "pear"}},
    "templates": {"en": ["a photo of a {}."]},
    "labels": {"img1": "pear"},
}
BAD_TASKS = {
    "template {{}}": (dict(GOOD_TASK, templates={"en": ["{{}}"]}), "templates.en[0]"),
    "template {} {}": (dict(GOOD_TASK, templates={"en": ["{} and {}"]}), "templates.en[0]"),
    "template {x}": (dict(GOOD_TASK, templates={"en": ["a {x}"]}), "templates.en[0]"),
    "no templates": (dict(GOOD_TASK, templates={"en": []}), "templates.en"),
    "null class name": (dict(GOOD_TASK, classes={"apple": {"en": None}, "pear": {"en": "pear"}}), "classes.apple.en"),
    "integer class name": (dict(GOOD_TASK, classes={"apple": {"en": 7}, "pear": {"en": "pear"}}), "classes.apple.en"),
    "empty class name": (dict(GOOD_TASK, classes={"apple": {"en": ""}, "pear": {"en": "pear"}}), "classes.apple.en"),
    "integer label": (dict(GOOD_TASK, labels={"img1": 1}), "labels.img1"),
    "deep nesting": ({"classes": json.loads("[" * 40 + "]" * 40)}, "levels deep"),
}


class TestAZeroShotTaskFile:
    @pytest.mark.parametrize("case", list(BAD_TASKS))
    def test_a_bad_field_is_exit_2_naming_file_and_key(self, models, tmp_path, case):
        spec, key = BAD_TASKS[case]
        task = tmp_path / "task.json"
        task.write_text(json.dumps(spec))
        images = artifacts.write_embeddings(tmp_path / "img", ["img1"], np.eye(1, 128, dtype=np.float32))
        result = invoke(
            "classify", images, "--classes", task, "-m", models["native"], "-o", tmp_path / "out", "--device", "cpu"
        )
        assert_refused(result, str(task), key)
        assert not (tmp_path / "out").exists()


class TestALexiconFile:
    def test_an_empty_muse_file_names_the_input(self, tmp_path):
        source = tmp_path / "de-en.txt"
        source.write_text("\n  \n")
        result = invoke("import-data", "lexicon", source, "--src", "de", "--tgt", "en", "-o", tmp_path / "lex")
        assert_refused(result, str(source), "no 'src tgt' line")
        assert str(tmp_path / "lex") not in result.stderr


class TestATranslationsFile:
    def test_two_conflicting_translations_of_one_caption_are_refused(self, tmp_path):
        from mltk.data.importers import import_dataset

        tower = tiny_bert_folder(tmp_path / "bert")
        captions = import_dataset("xflickrco", XFLICKRCO / "annotations", tmp_path / "h") / "captions"
        translations = artifacts.load_captions(
            import_dataset("xflickrco", XFLICKRCO / "annotations_machine-translate", tmp_path / "mt") / "captions"
        )
        first = translations.slice(0, 1).to_pylist()[0]
        conflicting = pa.Table.from_pylist(
            [*translations.to_pylist(), dict(first, caption="Something else.")], schema=translations.schema
        )
        pq.write_table(conflicting, tmp_path / "translations.parquet")
        result = invoke(
            "evaluate",
            "--model",
            tower,
            "--captions",
            captions,
            "--metric",
            "c2c",
            "--c2c-pair",
            "de:en",
            "--translations",
            tmp_path / "translations.parquet",
            "--fusion",
            "0,1",
            "--device",
            "cpu",
            "-o",
            tmp_path / "m",
        )
        assert_refused(result, str(tmp_path / "translations.parquet"), first["caption_id"], "two different")
