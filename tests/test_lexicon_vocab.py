"""``import-data lexicon --vocab-from CAPTIONS``: AME filters MUSE's dictionaries to the words of the training
captions, so that the pairs an alignment step draws are words the captions use."""

from __future__ import annotations

import pyarrow as pa
from typer.testing import CliRunner

from mltk import artifacts
from mltk.ame.lexicon import lexicon_pairs, load_lexicon
from mltk.cli import app

runner = CliRunner()


def _captions(path):
    table = pa.table(
        {
            "image_id": ["a", "a", "b", "b", "c", "c"],
            "lang": ["en", "de", "en", "de", "en", "de"],
            "caption": [
                "A red circle.",
                "Ein roter Kreis.",
                "Two blue squares",
                "Zwei blaue Quadrate",
                "a green star",
                "ein grüner Stern",
            ],
            "caption_id": ["1", "1", "2", "2", "3", "3"],
            "split": ["train", "train", "train", "train", "test", "test"],  # green / grüner: test words only
        }
    )
    return artifacts.write_captions(path, table)


def test_vocab_from_keeps_the_pairs_of_the_training_words(tmp_path):
    muse = tmp_path / "de-en.txt"
    muse.write_text("roter red\nkreis circle\nblaue blue\ngrüner green\nhaus house\nzwei house\nkreis circles\n")
    captions = _captions(tmp_path / "caps")
    result = runner.invoke(
        app,
        [
            "import-data",
            "lexicon",
            str(muse),
            "--src",
            "de",
            "--tgt",
            "en",
            "--vocab-from",
            str(captions),
            "-o",
            str(tmp_path / "lex"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert lexicon_pairs(load_lexicon(tmp_path / "lex")) == [("roter", "red"), ("kreis", "circle"), ("blaue", "blue")]
    manifest = artifacts.read_manifest(tmp_path / "lex", "lexicon")
    assert manifest["pairs"] == 3 and manifest["pairs_in_file"] == 7
    assert str(captions.resolve()) in {entry["path"] for entry in manifest["inputs"]}
    unfiltered = runner.invoke(
        app, ["import-data", "lexicon", str(muse), "--src", "de", "--tgt", "en", "-o", str(tmp_path / "all")]
    )
    assert unfiltered.exit_code == 0 and len(lexicon_pairs(load_lexicon(tmp_path / "all"))) == 7


def test_vocab_from_refuses_what_cannot_filter(tmp_path):
    muse = tmp_path / "de-en.txt"
    muse.write_text("haus house\n")
    captions = _captions(tmp_path / "caps")
    none_left = runner.invoke(
        app,
        [
            "import-data",
            "lexicon",
            str(muse),
            "--src",
            "de",
            "--tgt",
            "en",
            "--vocab-from",
            str(captions),
            "-o",
            str(tmp_path / "lex"),
        ],
    )
    assert none_left.exit_code == 2 and str(captions) in none_left.stderr and "no pair" in none_left.stderr
    other_lang = runner.invoke(
        app,
        [
            "import-data",
            "lexicon",
            str(muse),
            "--src",
            "fr",
            "--tgt",
            "en",
            "--vocab-from",
            str(captions),
            "-o",
            str(tmp_path / "lex2"),
        ],
    )
    assert other_lang.exit_code == 2 and "no captions in fr" in other_lang.stderr
    for result in (none_left, other_lang):
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("mltk import-data: error:")
