"""import-data: every format on small hand-written fixtures, Multi30K on the shared data, and the CLI."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.data.importers import import_dataset, normalize_lang, read_lines

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
runner = CliRunner()


def load(out: Path) -> tuple[list[dict], dict, dict[str, dict]]:
    """(caption rows, captions manifest, {image_id: image row})."""
    captions = artifacts.load_captions(out / "captions").to_pylist()
    manifest = artifacts.read_manifest(out / "captions", "captions")
    images = {row["image_id"]: row for row in artifacts.load_images(out / "images").to_pylist()}
    return captions, manifest, images


def by_caption_id(rows: list[dict]) -> dict[str, dict[str, str]]:
    grouped: dict[str, dict[str, str]] = {}
    for row in rows:
        grouped.setdefault(row["caption_id"], {})[row["lang"]] = row["caption"]
    return grouped


def test_normalize_lang():
    assert [normalize_lang(c) for c in ("jp", "DE", "zh-CN", "pt_BR", "cz", "fil")] == [
        "ja",
        "de",
        "zh",
        "pt",
        "cs",
        "fil",
    ]


def test_read_lines_strips_carriage_returns_and_keeps_unicode_separators(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes("\ufeffa\r\nb\u2028c\r\n\n".encode("utf-8"))
    assert read_lines(path) == ["a", "b\u2028c", ""]
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ArtifactError, match="not UTF-8"):
        read_lines(path)


# ----------------------------------------------------------------------------------------------------------------
# Multi30K
# ----------------------------------------------------------------------------------------------------------------


def test_multi30k_translations_share_caption_ids_and_task2_is_independent(tmp_path):
    out = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "m30k")
    rows, manifest, images = load(out)
    task1 = [r for r in rows if r["source"] == "task1"]
    assert len(task1) == len(rows) and manifest["created_by"]["config"]["task"] == "task1"  # task 2 when asked
    task2, manifest2, _ = load(import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "task2", task="task2"))
    assert {r["source"] for r in task2} == {"task2"}
    assert Counter(r["split"] for r in task1) == {"train": 12, "val": 7, "test": 8}
    assert manifest["dropped_empty"] == 1 and manifest["dropped_empty_by_lang"] == {"fr": 1}
    assert manifest2["dropped_empty_by_lang"] == {"de": 1}
    groups = by_caption_id(task1)
    assert set(groups["train-1"]) == {"en", "de", "fr", "cs"}
    assert groups["train-1"]["cs"] == "Několik mužů v přilbách obsluhuje obří kladkostroj."
    assert set(groups["val-1"]) == {"en", "de", "cs"}  # the empty French line is dropped, not shifted
    assert groups["val-1"]["de"] == "Ein Mann schläft in einem grünen Raum auf einem Sofa."
    assert not any(r["caption"].endswith("\r") for r in rows)  # train.de has CRLF line ends
    repeated = [r for r in task1 if r["image_id"] == "flickr30k:1000092795" and r["lang"] == "en"]
    assert [r["caption_id"] for r in repeated] == ["train-0", "train-2"]
    assert len(task2) == 19
    assert all(len(langs) == 1 for langs in by_caption_id(task2).values())  # independent descriptions
    assert {r["image_id"] for r in task2} == {"flickr30k:1007129816", "flickr30k:1009434119"}
    assert images["flickr30k:1000092795"]["split"] == "train" and len(images) == 6
    assert images["flickr30k:1007129816"]["path"] == str((FIXTURES / "multi30k" / "1007129816.jpg").resolve())


def test_multi30k_split_filter_gzip_and_images_root(tmp_path):
    src = tmp_path / "multi30k"
    shutil.copytree(FIXTURES / "multi30k", src)
    raw = src / "task1" / "raw" / "test_2016_flickr.en"
    with gzip.open(raw.with_name(raw.name + ".gz"), "wb") as handle:
        handle.write(raw.read_bytes())
    raw.unlink()
    out = import_dataset("multi30k", src, tmp_path / "out", splits=["test"], images_root=tmp_path / "flickr30k")
    rows, _, images = load(out)
    assert {r["split"] for r in rows} == {"test"} and len(rows) == 8
    assert by_caption_id(rows)["test-0"]["en"] == "The man with pierced ears is wearing glasses and an orange hat."
    assert images["flickr30k:1009434119"]["path"] == str(tmp_path / "flickr30k" / "1009434119.jpg")


def test_multi30k_split_filter_takes_the_file_stem_too(tmp_path):
    by_stem = load(import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "a", splits=["test_2016_flickr"]))[0]
    assert {r["split"] for r in by_stem} == {"test"} and len(by_stem) == 8


def test_multi30k_imports_one_task_and_says_what_it_read(tmp_path):
    """Task 2's independent descriptions stay out of the translations' test split unless asked for, and stderr
    names the files, the languages and the captions per split (and the task left out)."""
    result = runner.invoke(app, ["import-data", "multi30k", str(FIXTURES / "multi30k"), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.stderr
    assert "read 12 caption file(s): raw/test_2016_flickr.cs" in result.stderr
    assert "(cs 7, de 7, en 7, fr 6)" in result.stderr
    assert "captions per split: test 8, train 12, val 7" in result.stderr
    assert "task2 not imported (independent descriptions; --task task2" in result.stderr
    assert {r["source"] for r in load(tmp_path / "a")[0]} == {"task1"}
    task2 = runner.invoke(
        app, ["import-data", "multi30k", str(FIXTURES / "multi30k"), "--task", "task2", "--out", str(tmp_path / "b")]
    )
    assert task2.exit_code == 0, task2.stderr
    assert "read 10 caption file(s)" in task2.stderr and "captions per split: test 19" in task2.stderr
    wrong = runner.invoke(
        app, ["import-data", "xtd10", str(FIXTURES / "xtd10"), "--task", "task2", "--out", str(tmp_path / "c")]
    )
    assert wrong.exit_code == 2 and wrong.stderr.count("\n") == 1 and "--task is for multi30k" in wrong.stderr
    unknown = runner.invoke(
        app, ["import-data", "multi30k", str(FIXTURES / "multi30k"), "--task", "3", "--out", str(tmp_path / "d")]
    )
    assert unknown.exit_code == 2 and "expected one of task1, task2" in unknown.stderr


def test_multi30k_unequal_line_counts_name_the_file(tmp_path):
    src = tmp_path / "multi30k"
    shutil.copytree(FIXTURES / "multi30k", src)
    with open(src / "task1" / "raw" / "val.de", "a", encoding="utf-8") as handle:
        handle.write("Eine Zeile zu viel.\n")
    with pytest.raises(SchemaError, match=r"val\.de.*3 lines but val\.txt has 2"):
        import_dataset("multi30k", src, tmp_path / "out")
    result = runner.invoke(app, ["import-data", "multi30k", str(src), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "val.de" in result.stderr and result.stdout == ""


def test_multi30k_on_the_shared_data(shared_data, tmp_path):
    src = shared_data / "multi30k"
    if not (src / "task1").is_dir():
        pytest.skip(f"Multi30K not found at {src}")
    out = import_dataset("multi30k", src, tmp_path / "m30k")
    rows, manifest, images = load(out)
    task1 = [r for r in rows if r["source"] == "task1"]
    counts = Counter((r["split"], r["lang"]) for r in task1)
    for lang in ("en", "de", "fr", "cs"):
        assert (counts[("train", lang)], counts[("val", lang)], counts[("test", lang)]) == (29000, 1014, 1000)
    for split in ("train", "val", "test"):
        ids = {
            lang: {r["caption_id"] for r in task1 if r["split"] == split and r["lang"] == lang}
            for lang in ("en", "de", "fr", "cs")
        }
        assert ids["en"] == ids["de"] == ids["fr"] == ids["cs"]
    first = by_caption_id(task1)["val-0"]
    assert first["cs"] == "Skupina mužů nakládá bavlnu na náklaďák."
    assert len(task1) == len(rows)  # task 2's descriptions stay out of the translations' test split
    assert manifest["dropped_empty"] == 0 and len(images) == 29000 + 1014 + 1000
    task2, manifest2, images2 = load(import_dataset("multi30k", src, tmp_path / "task2", task="task2"))
    assert Counter((r["split"], r["lang"]) for r in task2) == {("test", "en"): 5000, ("test", "de"): 5000}
    assert set(images2) <= {i for i, row in images.items() if row["split"] == "test"} and len(images2) == 1000


# ----------------------------------------------------------------------------------------------------------------
# COCO Karpathy, XTD10, Crossmodal-3600, xFlickr&CO, Conceptual Captions
# ----------------------------------------------------------------------------------------------------------------


def test_coco_karpathy(tmp_path):
    out = import_dataset("coco-karpathy", FIXTURES / "coco-karpathy" / "dataset_coco.json", tmp_path / "coco")
    rows, manifest, images = load(out)
    assert [(r["image_id"], r["caption_id"], r["split"]) for r in rows] == [
        ("coco:000000391895", "770337", "test"),
        ("coco:000000391895", "771687", "test"),
        ("coco:000000522418", "681330", "train"),
        ("coco:000000057870", "787980", "train"),
        ("coco:000000184613", "459036", "val"),
    ]
    assert rows[0]["caption"] == "A man with a red helmet on a small moped on a dirt road."
    assert manifest["dropped_empty"] == 1 and manifest["languages"] == ["en"]
    assert images["coco:000000522418"]["split"] == "train"  # restval joins train
    assert images["coco:000000057870"]["path"] == str(
        (FIXTURES / "coco-karpathy" / "train2014" / "COCO_train2014_000000057870.jpg").resolve()
    )


def test_xtd10_mic_translates_english_and_stair_is_independent(tmp_path):
    """MIC's de and fr translate the English line (they share its caption_id); STAIR's ja was written apart.
    MIC/test_1kcaptions_fr.txt is CRLF without a final newline, as some of the public files are."""
    out = import_dataset("xtd10", FIXTURES / "xtd10", tmp_path / "xtd")
    rows, manifest, images = load(out)
    groups = by_caption_id(rows)
    assert set(groups["test-0"]) == {"en", "es", "zh", "ru", "de", "fr"}
    assert set(groups["test-1"]) == {"en", "es", "zh", "de", "fr"}  # the empty Russian line is dropped
    assert groups["test-2"]["zh"] == "一只长颈鹿站在树旁。"
    assert groups["test-2"]["de"] == "Eine Giraffe neben einem Baum."
    assert groups["test-2"]["fr"] == "Une girafe à côté d'un arbre."
    assert groups["test-0-STAIR"] == {"ja": "道路の上を飛ぶ飛行機。"}  # jp means ja
    assert not any(key.endswith("-MIC") for key in groups)
    assert manifest["languages"] == ["de", "en", "es", "fr", "ja", "ru", "zh"] and manifest["dropped_empty"] == 1
    assert (
        {r["image_id"] for r in rows} == set(images) == {"coco:000000000081", "coco:000000000094", "coco:000000000144"}
    )
    again = import_dataset("xtd10", FIXTURES / "xtd10" / "XTD10", tmp_path / "xtd2")
    assert len(load(again)[0]) == len(rows)


def test_xtd10_unequal_line_counts_name_the_file(tmp_path):
    src = tmp_path / "xtd10"
    shutil.copytree(FIXTURES / "xtd10", src)
    path = src / "XTD10" / "test_1kcaptions_es.txt"
    path.write_text("".join(read_lines(path)[:2]) + "\n", encoding="utf-8")
    with pytest.raises(SchemaError, match="test_1kcaptions_es.txt"):
        import_dataset("xtd10", src, tmp_path / "out")


def test_crossmodal3600(tmp_path):
    out = import_dataset("crossmodal3600", FIXTURES / "crossmodal3600", tmp_path / "xm")
    rows, manifest, images = load(out)
    assert Counter(r["lang"] for r in rows) == {"ar": 2, "en": 3, "fil": 1, "zh": 1}
    assert manifest["dropped_empty"] == 1
    assert {r["caption_id"] for r in rows if r["image_id"] == "000411001ff7dd4f" and r["lang"] == "en"} == {
        "000411001ff7dd4f-en-0",
        "000411001ff7dd4f-en-1",
    }
    assert {r["split"] for r in rows} == {"test"}
    assert images["0005e2b9a0c3b7b1"]["path"].endswith("/crossmodal3600/0005e2b9a0c3b7b1.jpg")


def test_xflickrco_mixed_ids_empty_captions_and_split_files(tmp_path):
    out = import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf")
    rows, manifest, images = load(out)
    assert Counter(r["lang"] for r in rows) == {"de": 2, "ja": 3}
    assert manifest["dropped_empty"] == 1 and manifest["dropped_empty_by_lang"] == {"de": 1}
    # ints and strings become string ids
    assert set(images) == {"flickr30k:1007129816", "coco:000000452122", "coco:000000122239"}
    matched = {r["lang"]: r["caption"] for r in rows if r["image_id"] == "coco:000000452122"}
    assert matched == {"de": "Ein Flugzeug von der Star Alliance.", "ja": "スターアライアンスの飛行機。"}
    assert len({r["caption_id"] for r in rows}) == len(rows)  # written independently per language
    few_shot = import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf1", splits=["train_1"])
    assert [(r["image_id"], r["lang"], r["split"]) for r in load(few_shot)[0]] == [
        ("flickr30k:2115631346", "de", "train_1")
    ]
    one_file = import_dataset(
        "xflickrco", FIXTURES / "xflickrco" / "annotations" / "ja" / "test.jsonl", tmp_path / "xf2"
    )
    assert Counter(r["lang"] for r in load(one_file)[0]) == {"ja": 3}


def test_conceptual_captions_keeps_urls_and_row_ids(tmp_path):
    out = import_dataset("cc", FIXTURES / "cc" / "Validation_GCC-1.1.0-Validation.tsv", tmp_path / "cc")
    rows, manifest, images = load(out)
    assert [(r["image_id"], r["caption_id"], r["split"]) for r in rows] == [
        ("0", "cc-0", "val"),
        ("1", "cc-1", "val"),
        ("3", "cc-3", "val"),
    ]
    assert manifest["dropped_empty"] == 1
    assert images["1"]["path"] == "http://www.example.org/images/goal.jpg?size=large&v=2"
    assert set(images) == {"0", "1", "3"}
    bad = tmp_path / "train.tsv"
    bad.write_text("a caption\thttp://x/y.jpg\nno tab here\n", encoding="utf-8")
    with pytest.raises(SchemaError, match="line 2 has no tab"):
        import_dataset("cc", bad, tmp_path / "bad")


def test_repeated_ids_are_an_error_not_a_silent_merge(tmp_path):
    coco = tmp_path / "dataset_coco.json"
    image = {"filename": "a.jpg", "split": "test", "cocoid": 1, "sentences": [{"raw": "x", "sentid": 7}]}
    coco.write_text(json.dumps({"images": [image, {**image, "cocoid": 2}]}), encoding="utf-8")
    with pytest.raises(SchemaError, match="caption_id/lang pair"):
        import_dataset("coco-karpathy", coco, tmp_path / "out")


# ----------------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------------


def test_cli_prints_the_directory_and_reports_dropped_captions(tmp_path):
    out = tmp_path / "xtd"
    result = runner.invoke(app, ["import-data", "xtd10", str(FIXTURES / "xtd10"), "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "dropped 1 empty caption" in result.stderr
    result = runner.invoke(app, ["import-data", "xtd10", str(FIXTURES / "xtd10"), "--out", str(out), "--json"])
    payload = json.loads(result.stdout)
    assert payload["captions"] == str(out.resolve() / "captions") and payload["dropped_empty"] == 1
    assert payload["languages"] == ["de", "en", "es", "fr", "ja", "ru", "zh"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["flickr8k", "{fixtures}/cc"], "unknown format"),
        (["cc", "{tmp}/missing.tsv"], "no such file"),
        (["multi30k", "{fixtures}/cc"], "not a Multi30K folder"),
        (["xtd10", "{fixtures}/xtd10", "--split", "train"], "no captions found"),
    ],
)
def test_cli_bad_input_is_exit_2(tmp_path, args, message):
    args = [a.format(fixtures=FIXTURES, tmp=tmp_path) for a in args]
    result = runner.invoke(app, ["import-data", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and result.stdout == ""


def test_unknown_format_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        import_dataset("nope", FIXTURES, tmp_path / "out")
