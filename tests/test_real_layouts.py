"""Real public test sets in their distributed layouts (small hand-written fixtures): each defect found when a new
user imported XTD10, xFlickr&CO, Multi30K, Conceptual Captions and plain caption files, with its fix."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ArtifactError, ConfigError, SchemaError
from mltk.data.importers import canonical_image_id, import_dataset, merge_captions

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
runner = CliRunner()


def rows_of(out: Path) -> list[dict]:
    return artifacts.load_captions(out / "captions").to_pylist()


def images_of(out: Path) -> dict[str, dict]:
    return {row["image_id"]: row for row in artifacts.load_images(out / "images").to_pylist()}


def one_line_error(result, *fragments):
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


# ----------------------------------------------------------------------------------------------------------------
# One image id per picture
# ----------------------------------------------------------------------------------------------------------------


def test_canonical_image_ids():
    for name in (
        "COCO_train2014_000000391895.jpg",
        "val2014/COCO_val2014_000000391895.jpg",
        "000000391895.jpg",
        "coco:000000391895",
    ):
        assert canonical_image_id(name) == "coco:000000391895", name
    assert canonical_image_id(391895, "coco") == canonical_image_id("391895", "coco") == "coco:000000391895"
    assert canonical_image_id("1000092795.jpg", "flickr30k") == "flickr30k:1000092795"
    assert canonical_image_id("391895") == "391895"  # a bare number is ambiguous without a namespace
    assert canonical_image_id("0005e2b9a0c3b7b1") == "0005e2b9a0c3b7b1"


def test_the_same_picture_has_the_same_id_in_every_importer(tmp_path):
    xtd = set(images_of(import_dataset("xtd10", FIXTURES / "xtd10", tmp_path / "xtd")))
    xflickrco = set(images_of(import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf")))
    coco = set(images_of(import_dataset("coco-karpathy", FIXTURES / "coco-karpathy", tmp_path / "coco")))
    multi30k = set(images_of(import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "m30k", splits=["test"])))
    # a CC-style training file of COCO translations: its paths are COCO file names
    tsv = tmp_path / "coco_de_train.tsv"
    tsv.write_text(
        "Ein Flugzeug über einer Straße.\ttrain2014/COCO_train2014_000000000081.jpg\n"
        "Ein Flugzeug von der Star Alliance.\tval2014/COCO_val2014_000000452122.jpg\n",
        encoding="utf-8",
    )
    cc = set(images_of(import_dataset("cc", tsv, tmp_path / "cc")))
    lines_dir = tmp_path / "nl"
    lines_dir.mkdir()
    (lines_dir / "test.1.nl").write_text("Een man met een oranje muts.\nTwee mannen.\n", encoding="utf-8")
    lines = set(
        images_of(
            import_dataset(
                "lines",
                [lines_dir / "test.1.nl"],
                tmp_path / "lines",
                lang="nl",
                image_list=FIXTURES / "multi30k" / "task2" / "test_2016_images.txt",
            )
        )
    )
    assert "coco:000000000081" in xtd and "coco:000000000081" in cc
    assert "coco:000000452122" in xflickrco and "coco:000000452122" in cc
    assert "coco:000000391895" in coco
    assert "flickr30k:1007129816" in xflickrco and "flickr30k:1007129816" in multi30k
    assert lines == {"flickr30k:1007129816", "flickr30k:1009434119"} <= multi30k


def test_xtd10_images_from_several_roots(tmp_path):
    """XTD10 mixes train2014 and val2014: --images-root is repeatable and each name resolves where it is."""
    src = tmp_path / "xtd10"
    shutil.copytree(FIXTURES / "xtd10", src)
    names = (src / "XTD10" / "test_image_names.txt").read_text().split()
    names[2] = "COCO_val2014_000000000144.jpg"
    (src / "XTD10" / "test_image_names.txt").write_text("\n".join(names) + "\n")
    train, val = tmp_path / "coco" / "train2014", tmp_path / "coco" / "val2014"
    for folder, name in ((train, names[0]), (train, names[1]), (val, names[2])):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")
    out = import_dataset("xtd10", src, tmp_path / "out", images_root=[train, val])
    images = images_of(out)
    assert images["coco:000000000081"]["path"] == str(train.resolve() / names[0])
    assert images["coco:000000000144"]["path"] == str(val.resolve() / names[2])
    result = runner.invoke(
        app,
        [
            "import-data",
            "xtd10",
            str(src),
            "--images-root",
            str(train),
            "--images-root",
            str(val),
            "--out",
            str(tmp_path / "cli"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert images_of(tmp_path / "cli") == images


# ----------------------------------------------------------------------------------------------------------------
# Multi30K: nothing skipped without a word
# ----------------------------------------------------------------------------------------------------------------


def test_multi30k_task2_files_numbered_from_zero_are_read(tmp_path):
    src = tmp_path / "multi30k"
    shutil.copytree(FIXTURES / "multi30k", src)
    raw = src / "task2" / "raw"
    for path in sorted(raw.iterdir()):
        stem, k, lang = path.name.split(".")
        path.rename(raw / f"{stem}.{int(k) - 1}.{lang}")
    rows = rows_of(import_dataset("multi30k", src, tmp_path / "out", task="task2"))
    assert len(rows) == 19 and Counter(r["lang"] for r in rows) == {"en": 10, "de": 9}
    assert {r["caption_id"].split("-")[-2] for r in rows} == {"0", "1", "2", "3", "4"}


def test_multi30k_caption_files_without_image_list_are_an_error_naming_them(tmp_path):
    src = tmp_path / "multi30k"
    shutil.copytree(FIXTURES / "multi30k", src)
    (src / "task1" / "image_splits" / "val.txt").unlink()
    with pytest.raises(ArtifactError, match=r"val\.cs.*image_splits/val\.txt"):
        import_dataset("multi30k", src, tmp_path / "out")
    assert len(rows_of(import_dataset("multi30k", src, tmp_path / "out", splits=["train"]))) == 12
    shutil.rmtree(src / "task1" / "image_splits")
    shutil.rmtree(src / "task2")
    result = runner.invoke(app, ["import-data", "multi30k", str(src), "--out", str(tmp_path / "cli")])
    one_line_error(result, "has no image list")


def test_multi30k_unexpected_file_names_are_named_on_stderr(tmp_path):
    src = tmp_path / "multi30k"
    shutil.copytree(FIXTURES / "multi30k", src)
    (src / "task2" / "raw" / "test_2016.en.orig").write_text("x\n")
    result = runner.invoke(
        app, ["import-data", "multi30k", str(src), "--task", "task2", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.stderr
    assert "skipped" in result.stderr and "test_2016.en.orig" in result.stderr
    assert artifacts.read_manifest(tmp_path / "out" / "captions")["skipped_files"][0].startswith(
        str(src / "task2" / "raw" / "test_2016.en.orig")
    )


# ----------------------------------------------------------------------------------------------------------------
# Conceptual Captions, xFlickr&CO
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        ("http://x.org/a.jpg\ta dog on a beach\n", "columns look swapped"),
        ("1042\tCOCO_val2014_000000000042.jpg\n", "does not read as text"),
        ("a dog on a beach\tsome words here\n", "should be the image path or URL"),
    ],
)
def test_cc_checks_which_column_is_which(tmp_path, content, message):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("a cat on a mat\thttp://x.org/b.jpg\n" + content, encoding="utf-8")
    with pytest.raises(SchemaError, match=message):
        import_dataset("cc", tsv, tmp_path / "out")
    result = runner.invoke(app, ["import-data", "cc", str(tsv), "--out", str(tmp_path / "cli")])
    one_line_error(result, str(tsv), "line 2")


def test_xflickrco_machine_translations_are_english_with_their_source_language(tmp_path):
    out = import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations_machine-translate", tmp_path / "mt")
    rows = rows_of(out)
    assert {r["lang"] for r in rows} == {"en"} and {r["source_lang"] for r in rows} == {"de"}
    human = rows_of(import_dataset("xflickrco", FIXTURES / "xflickrco" / "annotations", tmp_path / "xf"))
    merged = rows_of_artifact(
        merge_captions([tmp_path / "mt" / "captions", tmp_path / "xf" / "captions"], tmp_path / "merged")
    )
    pairs = {}
    for row in merged:
        pairs.setdefault(row["caption_id"], {})[row["lang"]] = row["caption"]
    assert pairs["test-coco:000000452122-de-0"] == {
        "de": "Ein Flugzeug von der Star Alliance.",
        "en": "A Star Alliance airplane.",
    }
    assert len(merged) == len(rows) + len(human)


def rows_of_artifact(path: Path) -> list[dict]:
    return artifacts.load_captions(path).to_pylist()


def test_xflickrco_single_file_outside_a_language_folder_takes_lang(tmp_path):
    single = tmp_path / "downloads" / "xFlickrCO_test_ja.jsonl"
    single.parent.mkdir()
    shutil.copy(FIXTURES / "xflickrco" / "annotations" / "ja" / "test.jsonl", single)
    with pytest.raises(ConfigError, match="--lang"):
        import_dataset("xflickrco", single, tmp_path / "no")
    result = runner.invoke(
        app, ["import-data", "xflickrco", str(single), "--lang", "ja", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.stderr
    assert Counter(r["lang"] for r in rows_of(tmp_path / "out")) == {"ja": 3}


# ----------------------------------------------------------------------------------------------------------------
# import-data lines, merge-captions
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def dutch(tmp_path):
    """Dutch descriptions of the two Multi30K task 2 test images, two per image, numbered from 0."""
    folder = tmp_path / "dutch"
    folder.mkdir()
    (folder / "test_2016.0.nl").write_text("Een man met een oranje muts.\nTwee honden in de sneeuw.\n")
    (folder / "test_2016.1.nl").write_text("Man kijkt naar iets.\n\n")
    return folder


def test_lines_imports_several_numbered_files_with_their_own_ids(tmp_path, dutch):
    image_list = FIXTURES / "multi30k" / "task2" / "test_2016_images.txt"
    result = runner.invoke(
        app,
        [
            "import-data",
            "lines",
            str(dutch / "test_2016.1.nl"),
            str(dutch / "test_2016.0.nl"),
            "--lang",
            "nl",
            "--image-list",
            str(image_list),
            "--out",
            str(tmp_path / "nl"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'nl').resolve()}\n"
    rows = rows_of(tmp_path / "nl")
    assert [(r["image_id"], r["caption_id"], r["split"]) for r in rows] == [
        ("flickr30k:1007129816", "test-0-nl-0", "test"),
        ("flickr30k:1009434119", "test-1-nl-0", "test"),
        ("flickr30k:1007129816", "test-0-nl-1", "test"),
    ]  # the empty line is dropped
    assert artifacts.read_manifest(tmp_path / "nl" / "captions")["dropped_empty"] == 1


def test_lines_translation_of_takes_the_parent_caption_ids(tmp_path):
    parent = import_dataset("multi30k", FIXTURES / "multi30k", tmp_path / "m30k", splits=["test"]) / "captions"
    pt = tmp_path / "test_2016_flickr.pt"
    pt.write_text("O homem com orelhas furadas.\nUm terrier de Boston.\n")
    image_list = FIXTURES / "multi30k" / "task1" / "image_splits" / "test_2016_flickr.txt"
    out = import_dataset(
        "lines",
        [pt],
        tmp_path / "pt",
        lang="pt",
        image_list=image_list,
        translation_of="en",
        parent=parent,
        splits=["test"],
    )
    merged = rows_of_artifact(merge_captions([parent, out / "captions"], tmp_path / "merged"))
    english = {r["caption_id"]: r for r in merged if r["lang"] == "en" and r["source"] == "task1"}
    for row in (r for r in merged if r["lang"] == "pt"):
        assert english[row["caption_id"]]["image_id"] == row["image_id"]
    assert sorted(r["caption_id"] for r in merged if r["lang"] == "pt") == ["test-0", "test-1"]


def test_lines_checks_line_counts_and_options(tmp_path, dutch):
    image_list = tmp_path / "images.txt"
    image_list.write_text("1007129816.jpg\n1009434119.jpg\n1000092795.jpg\n")
    with pytest.raises(SchemaError, match="2 lines but images.txt has 3"):
        import_dataset("lines", [dutch / "test_2016.0.nl"], tmp_path / "a", lang="nl", image_list=image_list)
    with pytest.raises(ConfigError, match="--lang"):
        import_dataset("lines", [dutch / "test_2016.0.nl"], tmp_path / "b", image_list=image_list)
    with pytest.raises(ConfigError, match="--translation-of and --parent"):
        import_dataset(
            "lines", [dutch / "test_2016.0.nl"], tmp_path / "c", lang="nl", image_list=image_list, translation_of="en"
        )


def test_merge_captions_refuses_duplicates_and_conflicting_ids(tmp_path, dutch):
    xtd = import_dataset("xtd10", FIXTURES / "xtd10", tmp_path / "xtd") / "captions"
    result = runner.invoke(app, ["merge-captions", str(xtd), str(xtd), "--out", str(tmp_path / "twice")])
    one_line_error(result, "duplicate row")
    table = artifacts.load_captions(xtd)
    moved = table.set_column(0, "image_id", [["coco:000000999999"] * table.num_rows])
    other = artifacts.write_captions(
        tmp_path / "other", moved.filter([r == "es" for r in table.column("lang").to_pylist()])
    )
    only_en = artifacts.write_captions(
        tmp_path / "en", table.filter([r == "en" for r in table.column("lang").to_pylist()])
    )
    result = runner.invoke(app, ["merge-captions", str(only_en), str(other), "--out", str(tmp_path / "m")])
    one_line_error(result, "conflicting ids", str(other))
    assert not (tmp_path / "m").exists()
