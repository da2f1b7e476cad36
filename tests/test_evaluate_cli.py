"""``mltk evaluate`` through the CLI: the artifact it writes, stdout/stderr, report formats, stdin, continual
metrics, and bad input (exit 2, one line naming the file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


@pytest.fixture
def embeddings(tmp_path):
    """12 images with 2 captions each in en and de (de lacks image 11), captions near their image."""
    rng = np.random.default_rng(0)
    images = rng.standard_normal((12, 8)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    image_ids = [f"img{i}" for i in range(12)]
    image_path = artifacts.write_embeddings(tmp_path / "img", image_ids, images, split=["test"] * 12)
    rows, vectors = [], []
    for lang in ("en", "de"):
        for i in range(12 if lang == "en" else 11):
            for c in range(2):
                vector = images[i] + 0.5 * rng.standard_normal(8)
                vectors.append(vector / np.linalg.norm(vector))
                rows.append((f"{lang}/{i}/{c}", f"img{i}", lang, f"s{i}.{c}"))
    ids, image_of, langs, caption_ids = map(list, zip(*rows))
    text_path = artifacts.write_embeddings(
        tmp_path / "txt", ids, np.array(vectors, np.float32), image_id=image_of, lang=langs, caption_id=caption_ids
    )
    return image_path, text_path


def test_evaluate_writes_a_metrics_artifact_and_prints_only_its_path(tmp_path, embeddings):
    image_path, text_path = embeddings
    out = tmp_path / "metrics"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--metric",
            "recall",
            "--metric",
            "mrv",
            "--metric",
            "c2c",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    metrics = artifacts.load_metrics(out)
    assert set(metrics["per_language"]) == {"en", "de"}
    for entry in metrics["per_language"].values():
        assert set(entry) == {"i2t", "t2i", "AR"}
        assert set(entry["i2t"]) == {"R@1", "R@5", "R@10", "median_rank", "mean_rank"}
        recalls = [entry[d][f"R@{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)]
        assert entry["AR"] == pytest.approx(sum(recalls) / 6)
    assert metrics["mrv"]["instances"] == {"i2t": 11, "t2i": 22}
    assert metrics["mrv"]["excluded_instances"] == {"i2t": 1, "t2i": 2}
    assert set(metrics["c2c"]["de-en"]) >= {"de->en", "en->de"}
    assert metrics["settings"]["counts"]["per_language"]["de"] == {"i2t_queries": 11, "t2i_queries": 22}
    assert "Retrieval per language" in result.stderr and "MRV" in result.stderr
    assert artifacts.read_manifest(out)["inputs"][0]["path"] == str(image_path)


@pytest.mark.parametrize(
    "report_format, name, marker",
    [("markdown", "metrics.md", "| lang |"), ("csv", "metrics.csv", "Retrieval per language: lang")],
)
def test_report_formats_are_written_into_the_artifact_and_shown(tmp_path, embeddings, report_format, name, marker):
    image_path, text_path = embeddings
    out = tmp_path / "m"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--format",
            report_format,
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    text = (out / name).read_text(encoding="utf-8")
    assert marker in text and marker in result.stderr
    en = artifacts.load_metrics(out)["per_language"]["en"]
    assert f"{en['AR']:.2f}" in text if report_format == "markdown" else str(round(en["AR"], 6)) in text


MODEL_LIBRARIES = ("torch", "open_clip", "torchvision", "transformers", "matplotlib")
EVALUATE_PROBE = """
import json, sys
from mltk.cli.application import main
sys.argv = ["mltk", "evaluate", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "loaded": sorted(m for m in %r if m in sys.modules)}), file=sys.stderr)
""" % (MODEL_LIBRARIES,)


def test_evaluate_on_embeddings_never_imports_torch_or_a_model_library(tmp_path, embeddings):
    """Scoring precomputed vectors loads no model and ranks in numpy on the CPU: importing torch, open_clip (with
    torchvision) and transformers costs seconds, more than the evaluation itself on a mid-sized set, so they are
    imported only by paths that read a model (or rank on a GPU: the GPUs are hidden here, as on a machine without
    one); matplotlib neither, as nothing is drawn. Run in a fresh interpreter, since this test process has imported
    them already."""
    image_path, text_path = embeddings
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            EVALUATE_PROBE,
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--metric",
            "recall,mrv,c2c",
            "--folds",
            "2",
            "--out",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        stdin=subprocess.DEVNULL,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root), "CUDA_VISIBLE_DEVICES": ""},
    )
    probe = json.loads(result.stderr.strip().splitlines()[-1])
    assert probe["code"] in (0, None), result.stderr
    assert artifacts.load_metrics(tmp_path / "m")["per_language"]["en"]["i2t"]["R@1"] >= 0
    assert probe["loaded"] == []


def test_images_path_from_stdin_and_split_and_language_selection(tmp_path, embeddings):
    image_path, text_path = embeddings
    out = tmp_path / "m"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            "-",
            "--texts",
            str(text_path),
            "--split",
            "test",
            "--lang",
            "de",
            "--out",
            str(out),
            "--json",
        ],
        input=f"{image_path}\n",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["path"] == str(out.resolve())
    metrics = artifacts.load_metrics(out)
    assert list(metrics["per_language"]) == ["de"] and metrics["settings"]["split"] == "test"


def test_continual_metrics_from_a_sequence_of_metrics_artifacts(tmp_path):
    runs = []
    for j, row in enumerate([{"fr": 50.0}, {"fr": 40.0, "de": 60.0}]):
        per_language = {lang: {"i2t": {"R@1": 0.0}, "t2i": {"R@1": value}, "AR": 0.0} for lang, value in row.items()}
        runs.append(artifacts.write_metrics(tmp_path / f"run{j}", {"per_language": per_language}))
    out = tmp_path / "continual"
    result = runner.invoke(
        app, ["evaluate-continual", str(runs[0]), str(runs[1]), "--task", "fr,de", "--out", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    continual = artifacts.load_metrics(out)["continual"]
    assert continual["matrix"] == [[50.0, None], [40.0, 60.0]]
    assert continual["AR"] == [50.0, 50.0] and continual["F"] == [None, 10.0]
    assert "Continual" in result.stderr
    old = runner.invoke(
        app,
        [
            "evaluate-continual",
            "--continual",
            str(runs[0]),
            "--continual",
            str(runs[1]),
            "--task",
            "fr,de",
            "--out",
            str(tmp_path / "old"),
        ],
    )  # the old spelling, hidden
    assert old.exit_code == 0, old.stderr
    assert artifacts.load_metrics(tmp_path / "old")["continual"] == continual
    gone = runner.invoke(app, ["evaluate", "--continual", str(runs[0]), "--out", str(tmp_path / "x")])
    assert gone.exit_code == 2 and "--continual" in gone.stderr


def test_continual_forgetting_of_evaluate_skips_zero_shot_rows(tmp_path):
    # every run evaluated every language: run 0's de (70) is zero-shot, before de was trained, and does not count
    rows = [
        {"fr": 50.0, "de": 70.0, "cs": 10.0},
        {"fr": 40.0, "de": 60.0, "cs": 20.0},
        {"fr": 45.0, "de": 40.0, "cs": 70.0},
    ]
    runs = []
    for j, row in enumerate(rows):
        per_language = {lang: {"i2t": {"R@1": 0.0}, "t2i": {"R@1": value}, "AR": 0.0} for lang, value in row.items()}
        runs.append(artifacts.write_metrics(tmp_path / f"run{j}", {"per_language": per_language}))
    out = tmp_path / "continual"
    result = runner.invoke(app, ["evaluate-continual", *map(str, runs), "--task", "fr,de,cs", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    continual = artifacts.load_metrics(out)["continual"]
    assert continual["F"] == [None, 10.0, 12.5]
    assert "i<=k<j" in artifacts.load_metrics(out)["settings"]["F"]


def _one_error_line(result, *fragments):
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def test_missing_file_is_exit_2_naming_it(tmp_path, embeddings):
    image_path, _ = embeddings
    missing = tmp_path / "nope"
    result = runner.invoke(
        app, ["evaluate", "--images", str(image_path), "--texts", str(missing), "--out", str(tmp_path / "m")]
    )
    _one_error_line(result, str(missing), "no such file")


def test_wrong_artifact_kind_is_exit_2_naming_it(tmp_path, embeddings):
    image_path, text_path = embeddings
    metrics_path = artifacts.write_metrics(tmp_path / "not-embeddings", {"per_language": {}})
    result = runner.invoke(
        app, ["evaluate", "--images", str(metrics_path), "--texts", str(text_path), "--out", str(tmp_path / "m")]
    )
    _one_error_line(result, str(metrics_path), "expected embeddings")
    assert not (tmp_path / "m").exists()


def test_text_embeddings_without_caption_columns_are_exit_2(tmp_path, embeddings):
    image_path, _ = embeddings
    bare = artifacts.write_embeddings(tmp_path / "bare", ["a", "b"], np.eye(2, 8, dtype=np.float32))
    result = runner.invoke(
        app, ["evaluate", "--images", str(image_path), "--texts", str(bare), "--out", str(tmp_path / "m")]
    )
    _one_error_line(result, str(bare), "image_id")


@pytest.mark.parametrize(
    "options, fragment",
    [
        (["--metric", "ndcg"], "unknown --metric ndcg"),
        (["--mrv-variant", "median", "--metric", "mrv"], "--mrv-variant"),
        (["--format", "latex"], "--format"),
        (["--split", "train"], "--split train"),
        (["--c2c-pair", "en", "--metric", "c2c"], "--c2c-pair"),
    ],
)
def test_bad_option_values_are_exit_2(tmp_path, embeddings, options, fragment):
    image_path, text_path = embeddings
    result = runner.invoke(
        app,
        ["evaluate", "--images", str(image_path), "--texts", str(text_path), "--out", str(tmp_path / "m"), *options],
    )
    _one_error_line(result, fragment)


def test_texts_option_is_required(tmp_path, embeddings):
    image_path, _ = embeddings
    result = runner.invoke(app, ["evaluate", "--images", str(image_path), "--out", str(tmp_path / "m")])
    _one_error_line(result, "--texts")


# ----------------------------------------------------------------------------------------------------------------
# --model CKPT --captions CAPS: the captions are encoded by a checkpoint (tiny random-weight models built here)
# ----------------------------------------------------------------------------------------------------------------

SENTENCES = {  # image i -> (en, de, fr): words the tiny WordPiece tokenizer knows
    "en": [
        "two red circle",
        "blue square",
        "red square",
        "two blue circle",
        "blue circle",
        "red circle",
        "two red square",
        "two blue square",
    ],
    "de": [
        "ein roter kreis",
        "blaues quadrat",
        "roter quadrat",
        "ein blauer kreis",
        "blauer kreis",
        "roter kreis",
        "ein roter quadrat links von einem kreis",
        "ein blaues quadrat",
    ],
    "fr": [
        "un cercle rouge",
        "carré bleu",
        "carré rouge",
        "un cercle bleu",
        "cercle bleu",
        "cercle rouge",
        "un carré rouge à gauche",
        "un carré bleu",
    ],
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A random-weight tiny CLIP saved as a checkpoint (open_clip format), an MLA checkpoint over it that reads
    German (a tiny WordPiece tokenizer), a captions artifact of 8 images in en/de/fr (images 0-5 test, 6-7
    train) and image embeddings of the model's width."""
    import pyarrow as pa
    from helpers_encoders import tiny_clip_and_mla

    from mltk.models.clip import load_clip

    root = tmp_path_factory.mktemp("evaluate-models")
    native, mla = tiny_clip_and_mla(root, ("de",))
    splits = ["test"] * 6 + ["train"] * 2
    rows = [
        (f"img{i}", lang, text, f"s{i}", splits[i]) for lang, texts in SENTENCES.items() for i, text in enumerate(texts)
    ]
    captions = artifacts.write_captions(
        root / "captions",
        pa.table(dict(zip(("image_id", "lang", "caption", "caption_id", "split"), map(list, zip(*rows))))),
    )
    dim = load_clip(str(native)).model.text_projection.shape[1]
    vectors = np.random.default_rng(0).standard_normal((8, dim)).astype(np.float32)
    images = artifacts.write_embeddings(
        root / "img",
        [f"img{i}" for i in range(8)],
        vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
        split=splits,
    )
    return {"native": native, "mla": mla, "captions": captions, "images": images}


def _text_embeddings_by_hand(models, model, languages, out):
    """What a user would write without --model: the test captions of ``languages`` encoded and saved."""
    import pyarrow.compute as pc

    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_captions

    table = artifacts.load_captions(models["captions"])
    table = table.filter(pc.equal(table.column("split"), "test"))
    rows, vectors = encode_captions(
        load_text_encoder(models[model]), table, resolve_runtime("cpu", "fp32"), languages=list(languages)
    )
    return artifacts.write_embeddings(
        out,
        rows.column("id").to_pylist(),
        vectors,
        **{c: rows.column(c).to_pylist() for c in ("image_id", "lang", "caption_id", "split")},
    )


@pytest.mark.parametrize("model, languages", [("native", ("de", "en", "fr")), ("mla", ("de", "en"))])
def test_model_and_captions_give_the_metrics_of_hand_written_text_embeddings(tmp_path, models, model, languages):
    texts = _text_embeddings_by_hand(models, model, languages, tmp_path / "txt")
    common = ["--images", str(models["images"]), "--split", "test", "--metric", "mrv", "--device", "cpu"]
    by_hand = runner.invoke(app, ["evaluate", *common, "--texts", str(texts), "--out", str(tmp_path / "a")])
    assert by_hand.exit_code == 0, by_hand.stderr
    lang_options = [] if model == "native" else ["--lang", ",".join(languages)]
    encoded = runner.invoke(
        app,
        [
            "evaluate",
            *common,
            "--model",
            str(models[model]),
            "--captions",
            str(models["captions"]),
            *lang_options,
            "--out",
            str(tmp_path / "b"),
        ],
    )
    assert encoded.exit_code == 0, encoded.stderr
    assert encoded.stdout == f"{(tmp_path / 'b').resolve()}\n"
    expected, metrics = artifacts.load_metrics(tmp_path / "a"), artifacts.load_metrics(tmp_path / "b")
    assert set(metrics["per_language"]) == set(languages)
    assert metrics["per_language"] == expected["per_language"] and metrics["mrv"] == expected["mrv"]
    settings = metrics["settings"]["texts"]
    assert settings["from"] == "model" and settings["model"] == str(models[model].resolve())
    assert settings["captions"] == str(models["captions"].resolve())
    assert settings["languages_encoded"] == sorted(languages)
    assert settings["captions_encoded"] == 6 * len(languages)  # only the test split was encoded
    assert expected["settings"]["texts"] == {"from": "embeddings", "texts": str(texts.resolve())}
    inputs = [entry["path"] for entry in artifacts.read_manifest(tmp_path / "b")["inputs"]]
    assert inputs == [str(p.resolve()) for p in (models["images"], models["captions"], models[model])]


def test_model_encodes_only_the_asked_languages_of_the_split(tmp_path, models, monkeypatch):
    import mltk.encode.texts

    seen = []
    original = mltk.encode.texts.encode_texts

    def spy(encoder, texts, lang, *args, **kwargs):
        seen.append((lang, list(texts)))
        return original(encoder, texts, lang, *args, **kwargs)

    monkeypatch.setattr(mltk.encode.texts, "encode_texts", spy)
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(models["images"]),
            "--model",
            str(models["mla"]),
            "--captions",
            str(models["captions"]),
            "--split",
            "test",
            "--lang",
            "de",
            "--device",
            "cpu",
            "--precision",
            "fp32",
            "--out",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert seen == [("de", SENTENCES["de"][:6])]
    assert list(artifacts.load_metrics(tmp_path / "m")["per_language"]) == ["de"]


def test_model_and_captions_bad_combinations_are_exit_2(tmp_path, models, embeddings):
    _, text_path = embeddings
    images, captions, mla = str(models["images"]), str(models["captions"]), str(models["mla"])
    out = ["--out", str(tmp_path / "m"), "--device", "cpu"]
    cases = [
        (["--texts", str(text_path), "--model", mla, "--captions", captions], ["not both"]),
        ([], ["--texts", "--model"]),
        (["--model", mla], ["--captions"]),
        (["--captions", captions], ["--model"]),
        (["--model", mla, "--captions", captions, "--split", "test", "--lang", "de,fr"], [mla, "fr"]),  # asked: fr
        # has no acquirers (by default the languages the model reads are evaluated, and fr is named as skipped)
        (["--model", mla, "--captions", captions, "--lang", "ja"], [captions, "ja"]),
        (["--model", str(tmp_path / "nope"), "--captions", captions], [str(tmp_path / "nope"), "no such file"]),
        (["--model", captions, "--captions", captions], [captions, "expected checkpoint"]),
    ]
    for options, fragments in cases:
        result = runner.invoke(app, ["evaluate", "--images", images, *options, *out])
        _one_error_line(result, *fragments)
    assert not (tmp_path / "m").exists()


def test_folds_average_the_metrics_of_consecutive_parts_of_the_gallery(tmp_path, embeddings):
    from mltk.metrics.retrieval import evaluate_retrieval

    image_path, text_path = embeddings
    out = tmp_path / "folds"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--folds",
            "3",
            "--lang",
            "en",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    metrics = artifacts.load_metrics(out)
    assert metrics["settings"]["folds"]["images"] == [4, 4, 4]
    assert metrics["settings"]["folds"]["first_image"] == ["img0", "img4", "img8"]
    image_table, image_vectors = artifacts.load_embeddings(image_path)
    text_table, text_vectors = artifacts.load_embeddings(text_path)
    image_vectors, text_vectors = np.asarray(image_vectors), np.asarray(text_vectors)
    by_hand = []
    for fold in range(3):
        members = {f"img{i}" for i in range(4 * fold, 4 * fold + 4)}
        image_rows = [i for i, v in enumerate(image_table.column("id").to_pylist()) if v in members]
        text_rows = [i for i, v in enumerate(text_table.column("image_id").to_pylist()) if v in members]
        one = evaluate_retrieval(
            image_table.take(image_rows),
            image_vectors[image_rows],
            text_table.take(text_rows),
            text_vectors[text_rows],
            languages=["en"],
        )
        assert one["settings"]["counts"]["per_language"]["en"]["t2i_queries"] == 8  # 4 images x 2 captions
        by_hand.append(one["per_language"]["en"])
    for direction in ("i2t", "t2i"):
        for key in ("R@1", "median_rank", "mean_rank"):
            assert metrics["per_language"]["en"][direction][key] == pytest.approx(
                np.mean([fold[direction][key] for fold in by_hand])
            )
    assert [f["per_language"]["en"] for f in metrics["folds"]] == by_hand
    whole = artifacts.load_metrics(
        Path(
            runner.invoke(
                app,
                [
                    "evaluate",
                    "--images",
                    str(image_path),
                    "--texts",
                    str(text_path),
                    "--lang",
                    "en",
                    "--out",
                    str(tmp_path / "whole"),
                ],
            ).stdout.strip()
        )
    )
    assert whole["per_language"]["en"]["t2i"]["mean_rank"] > metrics["per_language"]["en"]["t2i"]["mean_rank"]
    bad = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--folds",
            "0",
            "--out",
            str(tmp_path / "bad"),
        ],
    )
    assert bad.exit_code == 2 and "--folds" in bad.stderr


def test_evaluate_without_split_says_it_scores_every_split(tmp_path, embeddings):
    """No --split: every split is scored together, and the run says so (on stderr and in the metrics' settings)
    instead of letting the overlap warning call every image a "test image"."""
    image_path, text_path = embeddings
    result = runner.invoke(
        app, ["evaluate", "--images", str(image_path), "--texts", str(text_path), "--out", str(tmp_path / "m")]
    )
    assert result.exit_code == 0, result.stderr
    assert "the data holds one split (test), scored as it is" in result.stderr
    assert "train" not in result.stderr  # no split the data does not have
    assert artifacts.load_metrics(tmp_path / "m")["settings"]["split"] == "all splits"
    split_of = {"img0": "test", "img1": "val"}
    table = artifacts.load_embeddings(text_path)[0]
    with_splits = artifacts.write_embeddings(
        tmp_path / "split-txt",
        table.column("id").to_pylist(),
        artifacts.load_embeddings(text_path)[1],
        **{c: table.column(c).to_pylist() for c in ("image_id", "lang", "caption_id")},
        split=[split_of.get(i, "test") for i in table.column("image_id").to_pylist()],
    )
    named = runner.invoke(
        app, ["evaluate", "--images", str(image_path), "--texts", str(with_splits), "--out", str(tmp_path / "m2")]
    )
    assert named.exit_code == 0, named.stderr
    assert "the data's splits (val, test) are scored together; --split test scores" in named.stderr
    assert "train" not in named.stderr
