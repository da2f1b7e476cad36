"""Hostile input at the edges of the smaller commands: MSR-VTT's files and its 1K-A test list, encode-videos, the
learning rates, check-overlap's ids, duplicate caption rows, empty indexes and self-hits, and language options.

Each refusal is exit 2 with one line on stderr naming the input file (never the output) and what is wrong.
"""

from __future__ import annotations

import csv
import json
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_hostile import assert_refused  # one definition of a refusal, shared
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli.application import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


# ----------------------------------------------------------------------------------------------------------------
# MSR-VTT
# ----------------------------------------------------------------------------------------------------------------


def msrvtt_folder(root: Path, videos: list, sentences: list, translations: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "MSRVTT_data.json").write_text(json.dumps({"videos": videos, "sentences": sentences}))
    for lang, content in (translations or {}).items():
        (root / "translations").mkdir(exist_ok=True)
        (root / "translations" / f"{lang}.json").write_text(json.dumps(content))
    return root


VIDEOS = [{"video_id": "video0", "split": "train"}, {"video_id": "video7010", "split": "test"}]
SENTENCES = [
    {"sen_id": 0, "video_id": "video0", "caption": "a man cooks"},
    {"sen_id": 1, "video_id": "video7010", "caption": "a dog runs"},
]


@pytest.mark.parametrize(
    "videos, sentences, words",
    [
        ([{"video_id": "video0", "split": ["train"]}], SENTENCES, ("videos[0].split", "must be a string")),
        (VIDEOS, [{"sen_id": 0, "video_id": "video0", "caption": 7}], ("sentences[0].caption", "must be a string")),
        ({"video0": "train"}, SENTENCES, ("'videos'", "must be a list")),
        (VIDEOS, [SENTENCES[0], {**SENTENCES[1], "video_id": "video0", "sen_id": 0}], ("sen_id '0' occurs twice",)),
    ],
)
def test_msrvtt_annotation_schema_names_file_and_key(tmp_path, videos, sentences, words):
    root = msrvtt_folder(tmp_path / "MSRVTT", videos, sentences)
    error = assert_refused(invoke("import-data", "msrvtt", root, "-o", tmp_path / "out"), "MSRVTT_data.json", *words)
    assert str(tmp_path / "out") not in error


def test_msrvtt_deeply_nested_annotation_is_refused(tmp_path):
    root = tmp_path / "MSRVTT"
    root.mkdir()
    (root / "MSRVTT_data.json").write_text('{"videos": ' + "[" * 5000 + "]" * 5000 + ', "sentences": []}')
    assert_refused(invoke("import-data", "msrvtt", root, "-o", tmp_path / "out"), "MSRVTT_data.json", "nests")


@pytest.mark.parametrize("video_id", ["../../outside", "/etc/passwd", "a\\b", ".."])
def test_msrvtt_video_id_cannot_leave_the_images_root(tmp_path, video_id):
    root = msrvtt_folder(
        tmp_path / "MSRVTT",
        [{"video_id": video_id, "split": "test"}],
        [{"sen_id": 0, "video_id": video_id, "caption": "x"}],
    )
    assert_refused(
        invoke("import-data", "msrvtt", root, "--images-root", tmp_path / "videos", "-o", tmp_path / "out"),
        "MSRVTT_data.json",
        "videos[0].video_id",
        "cannot name a file",
    )
    assert not (tmp_path / "out").exists()


def test_msrvtt_every_video_missing_warns(tmp_path):
    root = msrvtt_folder(tmp_path / "MSRVTT", VIDEOS, SENTENCES)
    result = invoke("import-data", "msrvtt", root, "--images-root", tmp_path / "nowhere", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "warning: none of the 2 videos is under --images-root" in result.stderr
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "video0.mp4").write_bytes(b"x")
    result = invoke("import-data", "msrvtt", root, "--images-root", tmp_path / "videos", "-o", tmp_path / "out2")
    assert result.exit_code == 0 and "warning: 1 of the 2 videos are not under" in result.stderr


@pytest.mark.parametrize(
    "content, words",
    [
        (
            {"sentences": [{"sen_id": 1, "caption": "ein Hund"}, {"sen_id": 1, "caption": "ein Hund rennt"}]},
            ("sen_id '1' is translated twice",),
        ),
        ({"sentences": [{"sen_id": 1, "caption": ["ein Hund"]}]}, ("sentences[0].caption", "must be a string")),
        ({"sentences": {"1": "ein Hund"}}, ("'sentences'", "must be a list")),
        (["not", "an", "object"], ("must be an object",)),
    ],
)
def test_msrvtt_translation_errors_name_the_translation_file(tmp_path, content, words):
    root = msrvtt_folder(tmp_path / "MSRVTT", VIDEOS, SENTENCES, {"de": content})
    error = assert_refused(
        invoke("import-data", "msrvtt", root, "-o", tmp_path / "out"), str(root / "translations" / "de.json"), *words
    )
    assert str(tmp_path / "out") not in error


def test_msrvtt_sentence_on_two_videos_names_the_input_not_the_output(tmp_path):
    sentences = [
        {"sen_id": 1, "video_id": "video0", "caption": "a"},
        {"sen_id": "1", "video_id": "video7010", "caption": "b"},
    ]
    root = msrvtt_folder(tmp_path / "MSRVTT", VIDEOS, sentences)
    error = assert_refused(invoke("import-data", "msrvtt", root, "-o", tmp_path / "out"), "MSRVTT_data.json")
    assert str(tmp_path / "out") not in error


def jsfusion_world(root: Path, count: int) -> tuple[Path, Path]:
    """``count`` official test videos of three captions each (plus train and unlisted test videos), their German
    translations, and a JSFusion-style test list naming every test video once with its second caption (the last
    listed video with a sentence of its own)."""
    videos = [{"video_id": "video0", "split": "train"}, {"video_id": "video99999", "split": "test"}]
    sentences = [
        {"sen_id": 0, "video_id": "video0", "caption": "a man cooks"},
        {"sen_id": 1, "video_id": "video99999", "caption": "not in the list"},
    ]
    rows = []
    for number in range(count):
        video = f"video{7010 + number}"
        videos.append({"video_id": video, "split": "test"})
        for caption in range(3):
            sentences.append(
                {"sen_id": 10 + 3 * number + caption, "video_id": video, "caption": f"clip {number} caption {caption}"}
            )
        sentence = f"clip {number} caption 1" if number < count - 1 else "a sentence of the list only, with a comma"
        rows.append({"key": f"ret{number}", "vid_key": f"msr{7010 + number}", "video_id": video, "sentence": sentence})
    german = {"sentences": [{"sen_id": s["sen_id"], "caption": f"de {s['caption']}"} for s in sentences]}
    msrvtt_folder(root, videos, sentences, {"de": german})
    test_list = root / "MSRVTT_JSFUSION_test.csv"
    with test_list.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["key", "vid_key", "video_id", "sentence"])
        writer.writeheader()
        writer.writerows(rows)
    return root, test_list


def test_msrvtt_jsfusion_1k_a_list_gives_1000_videos_one_caption_each(tmp_path):
    root, test_list = jsfusion_world(tmp_path / "MSRVTT", 1000)
    result = invoke("import-data", "msrvtt", root, "--test-list", test_list, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    captions = artifacts.load_captions(tmp_path / "out" / "captions")
    test = captions.filter(pa.compute.equal(captions.column("split"), "test"))
    english = test.filter(pa.compute.equal(test.column("lang"), "en"))
    assert english.num_rows == 1000 and len(set(english.column("image_id").to_pylist())) == 1000
    assert "video99999" not in test.column("image_id").to_pylist()
    by_video = dict(zip(english.column("image_id").to_pylist(), english.column("caption").to_pylist()))
    assert by_video["video7010"] == "clip 0 caption 1"
    ids = dict(zip(english.column("image_id").to_pylist(), english.column("caption_id").to_pylist()))
    assert ids["video7010"] == "msrvtt:11" and ids["video8009"] == "msrvtt-1k-a:ret999"
    german = test.filter(pa.compute.equal(test.column("lang"), "de"))
    assert german.num_rows == 999 and "de clip 0 caption 1" in german.column("caption").to_pylist()
    train = captions.filter(pa.compute.equal(captions.column("split"), "train"))
    assert train.num_rows == 2  # the train split is untouched: its caption and translation
    images = artifacts.load_images(tmp_path / "out" / "images")
    test_images = [
        i for i, s in zip(images.column("image_id").to_pylist(), images.column("split").to_pylist()) if s == "test"
    ]
    assert len(test_images) == 1000
    assert artifacts.read_manifest(tmp_path / "out" / "captions")["test_protocol"] == "1k-a"


@pytest.mark.parametrize(
    "rows, words",
    [
        ("key,video_id\nret0,video7010\n", ("lacks the column(s) sentence",)),
        ("key,vid_key,video_id,sentence\nret0,m,video7010,a\nret1,m,video7010,b\n", ("line 3", "listed twice")),
        ("key,vid_key,video_id,sentence\nret0,m,../x,a\n", ("line 2 video_id", "cannot name a file")),
        ("key,vid_key,video_id,sentence\nret0,m,video5,a\n", ("video 'video5'", "does not describe")),
    ],
)
def test_msrvtt_bad_test_list_names_the_list(tmp_path, rows, words):
    root = msrvtt_folder(tmp_path / "MSRVTT", VIDEOS, SENTENCES)
    (tmp_path / "list.csv").write_text(rows)
    assert_refused(
        invoke("import-data", "msrvtt", root, "--test-list", tmp_path / "list.csv", "-o", tmp_path / "out"),
        "list.csv",
        *words,
    )


# ----------------------------------------------------------------------------------------------------------------
# encode-videos
# ----------------------------------------------------------------------------------------------------------------


def test_encode_videos_refuses_two_files_of_one_id_before_writing(tmp_path):
    folder = tmp_path / "videos"
    (folder / "sub").mkdir(parents=True)
    for name in ("a.mp4", "a.mov", "b.mp4", "sub/c.mkv"):
        (folder / name).write_bytes(b"not decoded: refused first")
    result = invoke("encode-videos", folder, "-m", "mltk-tiny", "--device", "cpu", "-o", tmp_path / "emb")
    assert_refused(result, str(folder), "a.mov and a.mp4", "video 'a'")
    assert not (tmp_path / "emb").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["videos"]


@pytest.mark.parametrize("frames", ["257", "1000000000"])
def test_encode_videos_frames_has_an_upper_bound(tmp_path, frames):
    folder = tmp_path / "videos"
    folder.mkdir()
    (folder / "a.mp4").write_bytes(b"x")
    result = invoke(
        "encode-videos", folder, "-m", "mltk-tiny", "--frames", frames, "--device", "cpu", "-o", tmp_path / "emb"
    )
    assert_refused(result, f"--frames {frames}", "limit of 256")
    assert not (tmp_path / "emb").exists()


# ----------------------------------------------------------------------------------------------------------------
# Learning rates: one rule for every rate option
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, option, value",
    [
        ("train-nlt", "--embedding-lr", "-1"),
        ("train-nlt", "--embedding-lr", "0"),
        ("train-nlt", "--embedding-lr", "nan"),
        ("train-nlt", "--lr", "-1"),
        ("train-nlt", "--lr", "inf"),
        ("train-nlt-le", "--lr", "-0.5"),
        ("train-continual", "--method-lr", "-1"),
        ("train-continual", "--method-lr", "inf"),
        ("train-continual", "--lr", "-1e-4"),
        ("train-ccrk", "--lr", "inf"),
        ("pretrain", "--lr", "nan"),
    ],
)
def test_every_learning_rate_option_is_refused_alike(tmp_path, command, option, value):
    captions = tmp_path / "captions.parquet"  # never read: the rates are checked first
    captions.write_bytes(b"")
    where = {
        "train-continual": ["--captions", captions],
        "train-ccrk": [captions, "--captions", captions],
        "pretrain": [captions, "--captions", captions],
        "train-nlt-le": [captions, "--captions", captions],
    }.get(command, [captions])
    extra = ["--method", "lora"] if command == "train-continual" else []
    result = invoke(command, *where, "-m", "mltk-tiny", *extra, option, value, "-o", tmp_path / "out")
    assert_refused(result, option, "must be a finite learning rate above 0")
    assert not (tmp_path / "out").exists()


def test_a_recipe_rate_is_checked_like_an_option(tmp_path):
    recipe = json.loads((Path(artifacts.__file__).parents[1] / "recipes" / "mla-nlt.json").read_text())
    recipe["config"]["embedding_lr"] = -1e-4
    (tmp_path / "r.json").write_text(json.dumps(recipe))
    captions = tmp_path / "captions.parquet"
    captions.write_bytes(b"")
    result = invoke("train-nlt", captions, "-m", "mltk-tiny", "--recipe", tmp_path / "r.json", "-o", tmp_path / "out")
    assert_refused(result, "--embedding-lr must be a finite learning rate above 0, got -0.0001")


def test_nested_rates_share_the_rule():
    from dataclasses import dataclass

    from mltk.core.rates import learning_rate_problems

    @dataclass
    class Options:
        align_lr: float = -2.0
        weight: float = -1.0  # not a rate

    problems = learning_rate_problems({"lr": 1e-4, "method_lr": None, "options": Options()})
    assert problems == ["--align-lr must be a finite learning rate above 0, got -2.0 (a negative rate climbs the loss)"]


# ----------------------------------------------------------------------------------------------------------------
# check-overlap, duplicate caption rows, indexes, language options
# ----------------------------------------------------------------------------------------------------------------


def captions_file(
    path: Path, image_ids: list[str], caption_ids: list[str] | None = None, lang: str = "en", split: str = "train"
) -> Path:
    count = len(image_ids)
    pq.write_table(
        pa.table(
            {
                "image_id": image_ids,
                "lang": [lang] * count,
                "caption": [f"c{i}" for i in range(count)],
                "caption_id": caption_ids or [f"{split}{i}" for i in range(count)],
                "split": [split] * count,
            }
        ),
        path,
    )
    return path


def test_check_overlap_counts_nfc_and_nfd_spellings_as_one_id(tmp_path):
    composed = unicodedata.normalize("NFC", "café-Ω-가")
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    train = captions_file(tmp_path / "train.parquet", [composed, "other"])
    test = captions_file(tmp_path / "test.parquet", [decomposed, "third"], split="test")
    result = invoke("check-overlap", train, test, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["overlapping"], report["test_images"]) == (1, 2) and report["examples"] == [composed]


def test_duplicate_caption_rows_name_the_input_captions_not_the_output(tmp_path):
    from helpers_encoders import tiny_clip_and_mla

    clip, _ = tiny_clip_and_mla(tmp_path / "models")
    captions = captions_file(tmp_path / "caps.parquet", ["a", "a", "b"], caption_ids=["1", "1", "2"])
    error = assert_refused(
        invoke("encode-texts", captions, "-m", clip, "--device", "cpu", "-o", tmp_path / "emb"),
        str(captions),
        "'1' in en",
        "more than one row",
    )
    assert str(tmp_path / "emb") not in error and not (tmp_path / "emb").exists()


def test_an_index_of_no_vectors_is_refused_naming_the_embeddings(tmp_path):
    empty = artifacts.write_embeddings(tmp_path / "empty", [], np.zeros((0, 8), np.float32))
    assert_refused(invoke("index", "build", empty, "-o", tmp_path / "idx"), str(empty), "holds no vectors")
    assert not (tmp_path / "idx").exists()


def test_index_query_by_images_leaves_the_query_out_of_its_own_results(tmp_path):
    vectors = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    ids = [f"img{i}" for i in range(6)]
    embeddings = artifacts.write_embeddings(tmp_path / "emb", ids, vectors)
    index = tmp_path / "idx"
    assert invoke("index", "build", embeddings, "-o", index).exit_code == 0
    result = invoke("index", "query", index, "--images", embeddings, "--k", "3")
    assert result.exit_code == 0, result.stderr
    for line in map(json.loads, result.stdout.splitlines()):
        hits = [hit["id"] for hit in line["results"]]
        assert len(hits) == 3 and line["query"] not in hits
        normalized = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = normalized @ normalized[ids.index(line["query"])]
        scores[ids.index(line["query"])] = -np.inf
        assert hits == [ids[i] for i in np.argsort(-scores)[:3]]  # the next three, in order
    kept = invoke("index", "query", index, "--images", embeddings, "--ids", "img2", "--k", "2", "--keep-self")
    first = json.loads(kept.stdout)["results"][0]
    assert first["id"] == "img2" and first["score"] == pytest.approx(1.0)
    everything = json.loads(
        invoke("index", "query", index, "--images", embeddings, "--ids", "img2", "--k", "10").stdout
    )
    assert len(everything["results"]) == 5  # every other vector; the query itself is the one left out


@pytest.mark.parametrize(
    "args",
    [
        ["import-data", "lexicon", "{lex}", "--src", "de\nx", "--tgt", "en"],
        ["import-data", "lexicon", "{lex}", "--src", "de", "--tgt", "e\tn"],
        ["induce-lexicon", "{lex}", "--src", "de\rx", "--tgt", "en"],
    ],
)
def test_a_language_option_with_a_control_character_is_refused(tmp_path, args):
    lexicon = tmp_path / "de-en.txt"
    lexicon.write_text("hund dog\nkatze cat\n")
    result = invoke(*[str(lexicon) if a == "{lex}" else a for a in args], "-o", tmp_path / "out")
    assert_refused(result, "cannot name a file", "control character")
    assert not (tmp_path / "out").exists()
