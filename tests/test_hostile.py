"""Hostile input at the edges.

1. no code runs from data: a model folder that ships its own Python (``auto_map``) is refused (exit 2, one line),
   whether named by ``-m``, ``--tokenizer`` or a checkpoint's ``config.json``; stdin is never asked;
2. every write goes through the artifact policy: pictures and sheets, names taken from data, mltk's temporary names
   beside ``--out``, control characters in ``--out``;
5. containment and locks: every file listed with size and sha256, no symlink or special file inside an artifact,
   a lock that a reused pid cannot fake and two takers cannot both win;
6. bad input is exit 2 with one line naming the file, never exit 1.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_encoders import tiny_clip_and_mla
from helpers_tiny import tiny_bert_folder
from PIL import Image
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import integrity, locks, schema
from mltk.cli.application import app
from mltk.core import policy
from mltk.core.errors import ArtifactError

runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def assert_refused(result, *words):
    """Exit 2, nothing on stdout, one error line on stderr (its last; progress logs may precede it) holding
    ``words``."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.stdout == "", result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("mltk")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def rewrite_manifest_checksums(path: Path) -> None:
    """After editing an artifact's files on purpose: record their new sizes and hashes (a consistent forgery)."""
    manifest = json.loads((path / schema.MANIFEST).read_text())
    manifest["checksums"] = integrity.checksums(path, manifest["files"])
    (path / schema.MANIFEST).write_text(json.dumps(manifest))


def edit_checkpoint_config(source: Path, out: Path, change) -> Path:
    shutil.copytree(source, out)
    config = json.loads((out / schema.CHECKPOINT_CONFIG).read_text())
    change(config)
    (out / schema.CHECKPOINT_CONFIG).write_text(json.dumps(config))
    rewrite_manifest_checksums(out)
    return out


EVIL_CODE = """
from pathlib import Path
Path({marker!r}).write_text("ran")
from transformers import BertConfig, BertModel, BertTokenizerFast
class EvilConfig(BertConfig):
    model_type = "evil"
class EvilModel(BertModel):
    config_class = EvilConfig
class EvilTokenizer(BertTokenizerFast):
    pass
"""


def evil_folder(directory: Path, marker: Path) -> Path:
    """A tiny BERT folder whose config and tokenizer config map to Python shipped in the folder, which writes
    ``marker`` when it runs."""
    tiny_bert_folder(directory)
    (directory / "evil_code.py").write_text(EVIL_CODE.format(marker=str(marker)))
    config = json.loads((directory / "config.json").read_text())
    config.update(
        model_type="evil", auto_map={"AutoConfig": "evil_code.EvilConfig", "AutoModel": "evil_code.EvilModel"}
    )
    (directory / "config.json").write_text(json.dumps(config))
    tokenizer = json.loads((directory / "tokenizer_config.json").read_text())
    tokenizer.update(
        tokenizer_class="EvilTokenizer",
        auto_map={"AutoTokenizer": ["evil_code.EvilTokenizer", "evil_code.EvilTokenizer"]},
    )
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return directory


def images_artifact(path: Path, ids) -> Path:
    encoded = []
    for i, _ in enumerate(ids):
        buffer = io.BytesIO()
        Image.new("RGB", (16, 12), (i % 256, 90, 200)).save(buffer, format="PNG")
        encoded.append(buffer.getvalue())
    table = pa.table({"image_id": list(ids), "split": ["test"] * len(ids), "image": pa.array(encoded, pa.binary())})
    return artifacts.write_images(path, table)


def unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def image_and_text_embeddings(root: Path, langs=("en", "de")) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    images = unit(rng.standard_normal((6, 8)))
    image_path = artifacts.write_embeddings(root / "img", [f"i{n}" for n in range(6)], images, split=["test"] * 6)
    rows = [(f"{lang}/{n}", f"i{n}", lang, f"s{n}") for lang in langs for n in range(6)]
    texts = unit(np.concatenate([images + 0.3 * rng.standard_normal((6, 8)) for _ in langs]))
    ids, image_of, lang_of, caption_ids = map(list, zip(*rows))
    text_path = artifacts.write_embeddings(
        root / "txt", ids, texts, image_id=image_of, lang=lang_of, caption_id=caption_ids, split=["test"] * len(ids)
    )
    return image_path, text_path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny synthetic world (en, de captions), a random CLIP checkpoint, an MLA checkpoint over it, image
    embeddings and an index of them."""
    from mltk.data.synth import SynthConfig, synthesize

    root = tmp_path_factory.mktemp("hostile")
    synthesize(root / "world", SynthConfig(train=16, val=8, test=8, image_size=32, langs=("en", "de")))
    native, mla = tiny_clip_and_mla(root)
    ids = [f"img{i}" for i in range(12)]
    vectors = np.random.default_rng(1).standard_normal((12, 8)).astype(np.float32)
    emb = artifacts.write_embeddings(root / "emb", ids, vectors, normalized=False)
    result = invoke("index", "build", emb, "--out", root / "index")
    assert result.exit_code == 0, result.stderr
    world_images = invoke(
        "encode-images",
        root / "world" / "images",
        "-m",
        native,
        "-o",
        root / "world-emb",
        "--device",
        "cpu",
        "--workers",
        "0",
    )
    assert world_images.exit_code == 0, world_images.stderr
    return {
        "root": root,
        "captions": root / "world" / "captions",
        "native": native,
        "mla": mla,
        "emb": emb,
        "index": root / "index",
        "ids": ids,
        "images": images_artifact(root / "images", ids),
        "world_emb": root / "world-emb",
    }


# -- 1. no code runs from data ---------------------------------------------------------------------------------------


def crafted(config: dict, section: dict, **fields) -> None:
    """A config that names another base or tokenizer and no pinned dependency (``depends_on``, which a loader would
    otherwise follow instead of the edited field), as a crafted or pre-pinning checkpoint has."""
    section.update(fields)
    config.pop("depends_on", None)


CODE_CASES = {
    "encode-texts -m FOLDER": lambda w, evil, out: [
        "encode-texts",
        w["captions"],
        "-m",
        evil,
        "-o",
        out,
        "--lang",
        "de",
        "--device",
        "cpu",
    ],
    "train-nlt --tokenizer FOLDER": lambda w, evil, out: [
        "train-nlt",
        w["captions"],
        "--model",
        w["native"],
        "--tokenizer",
        evil,
        "--lang",
        "de",
        "--steps",
        "1",
        "--device",
        "cpu",
        "-o",
        out,
    ],
    "MLA checkpoint, non_native.source FOLDER": lambda w, evil, out: [
        "encode-texts",
        w["captions"],
        "-m",
        edit_checkpoint_config(
            w["mla"], out.parent / "mla-source", lambda c: crafted(c, c["non_native"], source=str(evil))
        ),
        "-o",
        out,
        "--lang",
        "de",
        "--device",
        "cpu",
    ],
    "MLA checkpoint, base.model FOLDER": lambda w, evil, out: [
        "encode-texts",
        w["captions"],
        "-m",
        edit_checkpoint_config(w["mla"], out.parent / "mla-base", lambda c: crafted(c, c["base"], model=str(evil))),
        "-o",
        out,
        "--lang",
        "de",
        "--device",
        "cpu",
    ],
    "translate-data --model FOLDER": lambda w, evil, out: [
        "translate-data",
        w["captions"],
        "-o",
        out,
        "--target",
        "fr",
        "--model",
        evil,
        "--no-cache",
        "--device",
        "cpu",
    ],
    "index query --model FOLDER": lambda w, evil, out: [
        "index",
        "query",
        w["index"],
        "--text",
        "ein roter kreis",
        "--lang",
        "en",
        "--model",
        evil,
        "--device",
        "cpu",
    ],
}


@pytest.mark.parametrize("case", list(CODE_CASES))
def test_a_model_folder_with_its_own_code_is_refused_and_never_run(world, tmp_path, monkeypatch, case):
    marker = tmp_path / "MARKER"
    evil = evil_folder(tmp_path / "evil", marker)
    asked = []
    monkeypatch.setattr(builtins, "input", lambda *a: asked.append(a) or "y")  # transformers' [y/N] question
    result = runner.invoke(app, [str(a) for a in CODE_CASES[case](world, evil, tmp_path / "out")], input="y\ny\n")
    assert not marker.exists(), "the folder's code ran"
    assert asked == [], "stdin was asked"
    assert_refused(result, "own Python code")
    assert not (tmp_path / "out").exists()


CRAFTED_CONFIGS = {
    "base.model a list": lambda c: c["base"].update(model=["x"]),
    "base a string": lambda c: c.update(base="somewhere"),
    "non_native.source a number": lambda c: c["non_native"].update(source=7),
    "non_native missing": lambda c: c.pop("non_native"),
    "vocab_size a string": lambda c: c["non_native"].update(vocab_size="44"),
    "languages with a path": lambda c: c.update(languages=["../de"]),
    "format a list": lambda c: c.update(format=["mla"]),
}


@pytest.mark.parametrize("case", list(CRAFTED_CONFIGS))
def test_a_crafted_checkpoint_config_is_exit_2_naming_it(world, tmp_path, case):
    crafted = edit_checkpoint_config(world["mla"], tmp_path / "crafted", CRAFTED_CONFIGS[case])
    result = invoke(
        "encode-texts", world["captions"], "-m", crafted, "-o", tmp_path / "out", "--lang", "de", "--device", "cpu"
    )
    assert_refused(result, "config.json")


# -- 2. every write goes through the artifact policy --------------------------------------------------------------


def _query_with_sheet(world, sheet, *extra):
    return invoke(
        "index",
        "query",
        world["index"],
        "--images",
        world["emb"],
        "--ids",
        "img1",
        "--k",
        "2",
        "--contact-sheet",
        sheet,
        "--image-source",
        world["images"],
        *extra,
    )


@pytest.mark.parametrize("inside", ["images", "index", "emb"])
def test_a_contact_sheet_inside_an_input_is_refused_and_the_input_stays_intact(world, inside):
    target = world[inside] / "sheet.png"
    result = _query_with_sheet(world, target)
    assert_refused(result, "sheet.png")
    assert not target.exists()
    assert artifacts.verify_artifact(world[inside])["verified"]


def test_a_contact_sheet_replaces_only_its_own_earlier_sheet_and_only_with_overwrite(world, tmp_path, monkeypatch):
    monkeypatch.setenv("MLTK_CACHE_DIR", str(tmp_path / "cache"))
    sheet = tmp_path / "sheet.png"
    sheet.write_bytes(b"mine")
    assert_refused(_query_with_sheet(world, sheet, "--overwrite"), "mltk did not write it")
    assert sheet.read_bytes() == b"mine"
    sheet.unlink()
    assert _query_with_sheet(world, sheet).exit_code == 0
    assert_refused(_query_with_sheet(world, sheet), "--overwrite")
    result = _query_with_sheet(world, sheet, "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert sheet.read_bytes()[:4] == b"\x89PNG" and [p.name for p in tmp_path.iterdir()] == ["cache", "sheet.png"]


@pytest.mark.parametrize("where", ["into the texts artifact", "into the metrics --out", "over a picture"])
def test_evaluate_plot_is_refused_inside_an_input_and_over_a_picture(tmp_path, where):
    image_path, text_path = image_and_text_embeddings(tmp_path)
    plots = {
        "into the texts artifact": text_path / "plots",
        "into the metrics --out": tmp_path / "m" / "plots",
        "over a picture": tmp_path / "plots",
    }[where]
    if where == "over a picture":
        plots.mkdir()
        (plots / "recall.png").write_bytes(b"mine")
    result = invoke("evaluate", "--images", image_path, "--texts", text_path, "--out", tmp_path / "m", "--plot", plots)
    assert_refused(result, "--plot")
    assert artifacts.verify_artifact(text_path)["verified"]
    assert not (tmp_path / "m").exists()
    if where == "over a picture":
        assert [p.name for p in plots.iterdir()] == ["recall.png"] and (plots / "recall.png").read_bytes() == b"mine"


def test_evaluate_plot_beside_its_inputs_is_written(tmp_path):
    image_path, text_path = image_and_text_embeddings(tmp_path)
    result = invoke(
        "evaluate", "--images", image_path, "--texts", text_path, "--out", tmp_path / "m", "--plot", tmp_path
    )  # the folder that holds the inputs: the pictures go beside them, not into them
    assert result.exit_code == 0, result.stderr
    assert {"recall.png", "ranks.svg"} <= {p.name for p in tmp_path.iterdir()}
    assert all(artifacts.verify_artifact(p)["verified"] for p in (image_path, text_path, tmp_path / "m"))


def test_a_caption_lang_cannot_make_train_continual_write_outside_its_out(world, tmp_path):
    table = artifacts.load_captions(world["captions"])
    hostile = "x/../../../../somewhere"  # from OUT.partial/vocabs/NN-x up to beside run/
    langs = [hostile if lang == "de" else lang for lang in table.column("lang").to_pylist()]
    table = table.set_column(table.schema.get_field_index("lang"), "lang", pa.array(langs, pa.string()))
    (tmp_path / "run").mkdir()
    pq.write_table(table, tmp_path / "run" / "captions.parquet")
    result = invoke(
        "train-continual",
        world["world_emb"],
        "--captions",
        tmp_path / "run" / "captions.parquet",
        "-m",
        world["native"],
        "--lang",
        f"en,{hostile}",
        "--vocab-size",
        "600",
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--cache-dir",
        tmp_path / "cache",
        "-o",
        tmp_path / "run" / "out",
    )
    assert_refused(result, "captions.parquet", "cannot name a file")
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["run/captions.parquet"], written


@pytest.mark.parametrize("temporary", [".v.partial", ".v.old"])
def test_a_users_artifact_named_like_mltks_temporary_names_is_never_moved_or_deleted(tmp_path, temporary):
    users = artifacts.write_metrics(tmp_path / temporary, {"mine": 1})
    before = {p.name: p.read_bytes() for p in users.iterdir()}
    outcome = None
    for attempt in range(2):  # a fresh output, then a replacement of it (other settings, --overwrite)
        try:
            with policy.overwriting(bool(attempt)):
                outcome = artifacts.write_metrics(tmp_path / "v", {"attempt": attempt}, config={"n": attempt})
        except ArtifactError as exc:
            outcome = exc
            assert temporary in str(exc) and "move it away" in str(exc)
    assert {p.name: p.read_bytes() for p in users.iterdir()} == before
    if not isinstance(outcome, ArtifactError):
        assert artifacts.load_metrics(tmp_path / "v") == {"attempt": 1}


def _checkpoint_with_state(path: Path) -> Path:
    with artifacts.ArtifactWriter(path, "checkpoint", stage="test") as writer:
        (writer.dir / schema.CHECKPOINT_STATE_DIR).mkdir()
        (writer.dir / schema.CHECKPOINT_STATE_DIR / "moments.json").write_text("{}")
        artifacts.write_json(writer.dir / schema.CHECKPOINT_CONFIG, {"format": "open_clip", "model": "mltk-tiny"})
    return path


@pytest.mark.parametrize("temporary", [".ck.partial", ".ck.pruned-original"])
def test_prune_never_touches_a_users_artifact_named_like_its_temporary_names(tmp_path, temporary):
    checkpoint = _checkpoint_with_state(tmp_path / "ck")
    users = artifacts.write_metrics(tmp_path / temporary, {"mine": 1})
    before = {p.name: p.read_bytes() for p in users.iterdir()}
    result = invoke("prune", checkpoint)
    assert result.exit_code == 0, result.stderr
    assert not (checkpoint / schema.CHECKPOINT_STATE_DIR).exists() and artifacts.verify_artifact(checkpoint)
    assert {p.name: p.read_bytes() for p in users.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([temporary, "ck"])


@pytest.mark.parametrize("where", ["inside the checkpoint", "over a user's .x.export-partial"])
def test_export_stays_out_of_artifacts_and_away_from_a_users_folders(world, tmp_path, where):
    mine = tmp_path / ".x.export-partial"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    out = world["native"] / "export" if where == "inside the checkpoint" else tmp_path / "x"
    result = invoke("export", world["native"], "--format", "open_clip", "-o", out)
    if where == "inside the checkpoint":
        assert_refused(result, "inside the mltk artifact")
        assert artifacts.verify_artifact(world["native"])
    else:
        assert result.exit_code == 0, result.stderr
    assert (mine / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("kind", ["file", "artifact"])
def test_a_users_file_or_artifact_named_like_the_lock_is_left_alone(tmp_path, kind):
    mine = tmp_path / ".v.lock"
    if kind == "file":
        mine.write_text("my notes\n")
    else:
        artifacts.write_metrics(mine, {"mine": 1})
    before = sorted((str(p), p.read_bytes()) for p in [mine, *mine.rglob("*")] if p.is_file())
    with pytest.raises(ArtifactError, match=".v.lock"):
        artifacts.write_metrics(tmp_path / "v", {"a": 1})
    assert sorted((str(p), p.read_bytes()) for p in [mine, *mine.rglob("*")] if p.is_file()) == before
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("out", ["a\nb", "tab\there", "cr\rx", "line\u2028sep"])
def test_an_out_with_a_control_character_is_refused_and_stdout_stays_empty(world, tmp_path, out):
    result = invoke("index", "build", world["emb"], "--out", tmp_path / out)
    assert_refused(result, "control character")
    assert list(tmp_path.iterdir()) == []


# -- 5. containment and locks ----------------------------------------------------------------------------------------


def _unlisted(path):
    manifest = json.loads((path / schema.MANIFEST).read_text())
    manifest["files"], manifest["checksums"] = [], {}
    (path / schema.MANIFEST).write_text(json.dumps(manifest))


def _no_checksums(path):
    manifest = json.loads((path / schema.MANIFEST).read_text())
    del manifest["checksums"]
    (path / schema.MANIFEST).write_text(json.dumps(manifest))


def _symlink_outside(path):
    outside = path.parent / "outside.parquet"
    os.replace(path / schema.CAPTIONS_FILE, outside)
    os.symlink(outside, path / schema.CAPTIONS_FILE)
    rewrite_manifest_checksums(path)


def _fifo(path):
    (path / schema.CAPTIONS_FILE).unlink()
    os.mkfifo(path / schema.CAPTIONS_FILE)


def _extra_symlink(path):
    os.symlink("/etc/passwd", path / "extra")


CONTAINMENT = {
    "manifest lists no files": (_unlisted, "not listed"),
    "no checksums": (_no_checksums, "checksums"),
    "table is a symlink leading outside": (_symlink_outside, "symlink"),
    "table is a FIFO": (_fifo, "not a regular file"),
    "an unlisted symlink": (_extra_symlink, "symlink"),
}


@pytest.mark.parametrize("case", list(CONTAINMENT))
def test_inspect_and_readers_refuse_what_the_manifest_does_not_pin(world, tmp_path, case):
    damage, words = CONTAINMENT[case]
    caps = tmp_path / "caps"
    shutil.copytree(world["captions"], caps)
    damage(caps)
    done = threading.Event()
    outcome = {}

    def run():  # a FIFO opened for reading would block forever: run it on a thread with a deadline
        outcome["inspect"] = invoke("inspect", caps)
        outcome["reader"] = invoke("build-vocab", caps, "--lang", "de", "--size", "600", "-o", tmp_path / "v")
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(120), "blocked on a special file"
    assert_refused(outcome["inspect"], words)
    assert_refused(outcome["reader"], words)


def test_a_lock_naming_a_reused_pid_is_not_trusted(tmp_path):
    out = tmp_path / "m"
    locks.lock_path(out).write_text("1\n")  # pid 1 is alive, but it is not an mltk writer holding this lock
    artifacts.write_metrics(out, {"a": 1})
    assert artifacts.load_metrics(out) == {"a": 1} and not locks.lock_path(out).exists()


@pytest.mark.parametrize("blocker", ["directory", "symlink"])
def test_a_lock_path_that_is_no_regular_file_is_refused_and_left_alone(tmp_path, blocker):
    out = tmp_path / "m"
    if blocker == "directory":
        locks.lock_path(out).mkdir()
    else:
        os.symlink(tmp_path / "elsewhere", locks.lock_path(out))
    with pytest.raises(ArtifactError, match="lock"):
        artifacts.write_metrics(out, {"a": 1})
    assert os.path.lexists(locks.lock_path(out)) and not (tmp_path / "elsewhere").exists()


def test_two_takers_never_both_win_with_a_stale_lock_present(tmp_path):
    """30 trials: two threads race for one output whose lock file is stale (it names pid 1); exactly one wins."""
    for trial in range(30):
        out = tmp_path / f"o{trial}"
        locks.lock_path(out).write_text("1 0\n")
        start, holding, results = threading.Barrier(2), threading.Barrier(2, timeout=30), []

        def take():
            lock = locks.OutputLock(out)
            start.wait()
            try:
                lock.acquire()
                results.append("won")
            except ArtifactError:
                results.append("refused")
            holding.wait()  # nobody lets go before both have tried
            lock.release()

        threads = [threading.Thread(target=take) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(results) == ["refused", "won"], (trial, results)


# -- 6. exit 2, never 1, naming the file --------------------------------------------------------------------------


def _invalid_utf8_captions(world, tmp_path):
    table = artifacts.load_captions(world["captions"]).slice(0, 4)
    raw = pa.array([b"ok", b"bad \xff\xfe here", b"ok", b"ok"], pa.binary()).view(pa.string())
    table = table.set_column(table.schema.get_field_index("caption"), "caption", raw)
    pq.write_table(table, tmp_path / "bad.parquet")
    return ["build-vocab", tmp_path / "bad.parquet", "--lang", "de", "-o", tmp_path / "v"], "bad.parquet"


def _nested_manifest(world, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(world["captions"], caps)
    (caps / schema.MANIFEST).write_text("[" * 100000 + "]" * 100000)
    return ["inspect", caps], "manifest.json"


def _empty_index(world, tmp_path):
    import faiss

    empty = artifacts.write_embeddings(tmp_path / "empty", [], np.zeros((0, 8), np.float32), normalized=False)
    assert invoke("index", "build", empty, "--out", tmp_path / "idx").exit_code == 2  # refused now; an older one:
    with artifacts.ArtifactWriter(tmp_path / "idx", "index", stage="index build", inputs=[empty]) as writer:
        artifacts.write_index_files(writer.dir, faiss.IndexFlatIP(8), artifacts.load_embeddings(empty)[0])
        writer.manifest.update(index_kind="flat", count=0, dim=8, metric="inner_product", normalized=True)
    np.save(tmp_path / "q.npy", np.ones((1, 8), np.float32))
    return ["index", "query", tmp_path / "idx", "--vectors", tmp_path / "q.npy"], "idx"


def _newline_id(world, tmp_path):
    ids = ["a\nb", "c"]
    emb = artifacts.write_embeddings(tmp_path / "emb", ids, np.eye(2, 8, dtype=np.float32), normalized=False)
    images = images_artifact(tmp_path / "images", ids)
    assert invoke("index", "build", emb, "--out", tmp_path / "idx").exit_code == 0
    return [
        "index",
        "query",
        tmp_path / "idx",
        "--images",
        emb,
        "--contact-sheet",
        tmp_path / "sheet.png",
        "--image-source",
        images,
    ], "idx"


def _clip_benchmark_lang(world, tmp_path):
    image_path, text_path = image_and_text_embeddings(tmp_path, langs=("en", "x/y"))
    return [
        "evaluate",
        "--images",
        image_path,
        "--texts",
        text_path,
        "--format",
        "clip-benchmark",
        "--dataset",
        "d",
        "--out",
        tmp_path / "m",
    ], "txt"


BAD_INPUT = {
    "invalid UTF-8 in a captions Parquet": _invalid_utf8_captions,
    "deeply nested manifest.json": _nested_manifest,
    "index query on an empty index": _empty_index,
    "an id with a newline in --contact-sheet": _newline_id,
    "a lang with / under --format clip-benchmark": _clip_benchmark_lang,
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_exit_2_naming_the_file(world, tmp_path, case):
    args, named = BAD_INPUT[case](world, tmp_path)
    result = invoke(*args)
    assert_refused(result, named)
    assert not (tmp_path / "m").exists() and not (tmp_path / "sheet.png").exists() and not (tmp_path / "v").exists()


@pytest.mark.parametrize("failure", ["numpy short write", "ENOSPC"])
def test_a_full_disk_names_the_file_and_leaves_the_previous_artifact(world, tmp_path, monkeypatch, failure):
    out = tmp_path / "again"
    first = invoke("index", "build", world["emb"], "--out", out)
    assert first.exit_code == 0
    before = (out / schema.MANIFEST).read_bytes()
    error = (
        OSError("2764800 requested and 25568 written")
        if failure == "numpy short write"
        else OSError(errno.ENOSPC, "No space left on device")
    )

    def full_disk(table, where, *args, **kwargs):
        Path(where).write_bytes(b"PAR1")  # a few bytes made it
        raise error

    monkeypatch.setattr(pq, "write_table", full_disk)
    result = invoke("index", "build", world["emb"], "--out", out, "--kind", "hnsw", "--overwrite")
    assert_refused(result, "no space left on device", str(out.resolve() / schema.INDEX_IDS_FILE))
    assert (out / schema.MANIFEST).read_bytes() == before and artifacts.verify_artifact(out)["verified"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]
