"""AME's words with the paper's tokenizers (``mltk.ame.segment``): real Japanese and Chinese captions cut into the
words a person would name, so that a dictionary filtered to the training words keeps its entries; and the one-line
error naming the ``words`` extra when a language's tokenizer is missing."""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from mltk import artifacts
from mltk.ame import segment
from mltk.ame.lexicon import import_muse, lexicon_pairs, load_lexicon
from mltk.cli import app
from mltk.core.errors import ConfigError

runner = CliRunner()
EXTRA_PRESENT = all(importlib.util.find_spec(name) for name in ("sacremoses", "fugashi", "unidic_lite", "jieba"))
needs_extra = pytest.mark.skipif(not EXTRA_PRESENT, reason="the words extra (pip install 'mltk[words]') is absent")

# Parallel captions written as people write them (no spaces between Japanese or Chinese words).
SENTENCES = [
    (
        "A white dog is chasing a ball on the grass.",
        "白い犬が芝生の上でボールを追いかけている。",
        "一只白色的狗在草地上追球。",
    ),
    ("A man is riding a bicycle down the street.", "男性が通りで自転車に乗っている。", "一个男人在街上骑自行车。"),
    ("Two children are playing in the park.", "二人の子供が公園で遊んでいる。", "两个孩子在公园里玩耍。"),
    ("A cat is sleeping on the sofa.", "猫がソファの上で寝ている。", "一只猫在沙发上睡觉。"),
]
# Dictionary entries (MUSE's "src tgt" lines): each a word a person would name in those captions, and one entry of
# a word no caption holds (kept out by the filter).
DICTIONARIES = {
    "ja": [
        ("犬", "dog"),
        ("ボール", "ball"),
        ("芝生", "grass"),
        ("男性", "man"),
        ("公園", "park"),
        ("猫", "cat"),
        ("子供", "children"),
        ("ソファ", "sofa"),
        ("馬", "horse"),
    ],
    "zh": [
        ("狗", "dog"),
        ("草地", "grass"),
        ("男人", "man"),
        ("自行车", "bicycle"),
        ("公园", "park"),
        ("猫", "cat"),
        ("孩子", "children"),
        ("沙发", "sofa"),
        ("马", "horse"),
    ],
}


def _captions(tmp_path, lang: str):
    column = {"ja": 1, "zh": 2}[lang]
    rows = [
        (f"img{i}", code, sentence[0 if code == "en" else column], f"c{i}")
        for i, sentence in enumerate(SENTENCES)
        for code in ("en", lang)
    ]
    table = pa.table(
        {
            "image_id": [r[0] for r in rows],
            "lang": [r[1] for r in rows],
            "caption": [r[2] for r in rows],
            "caption_id": [r[3] for r in rows],
            "split": ["train"] * len(rows),
        }
    )
    return artifacts.write_captions(tmp_path / f"caps-{lang}", table)


def _dictionary(tmp_path, lang: str):
    path = tmp_path / f"{lang}-en.txt"
    path.write_text("".join(f"{s} {t}\n" for s, t in DICTIONARIES[lang]), encoding="utf-8")
    return path


@needs_extra
@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_lexicon_filtering_keeps_the_words_a_person_would_name(tmp_path, lang):
    captions = _captions(tmp_path, lang)
    out = import_muse(_dictionary(tmp_path, lang), tmp_path / f"lex-{lang}", lang, "en", vocab_from=captions)
    kept = set(lexicon_pairs(load_lexicon(out)))
    assert kept == set(DICTIONARIES[lang][:-1])  # every word of the captions, not the horse no caption shows
    config = artifacts.read_manifest(out, "lexicon")["created_by"]["config"]
    assert config["words"] == {lang: segment.tokenizer_name(lang), "en": "moses"}


@needs_extra
def test_caption_words_cut_clauses_into_words_and_drop_punctuation():
    assert {"犬", "芝生", "ボール", "白い"} <= segment.caption_words(SENTENCES[0][1], "ja")
    assert {"狗", "草地", "白色"} <= segment.caption_words(SENTENCES[0][2], "zh")
    assert segment.caption_words("A man's e-mail, 3,5 km!", "en") == {"a", "man", "'s", "e-mail", "3,5", "km"}
    assert "。" not in segment.caption_words(SENTENCES[0][1], "ja")
    assert segment.caption_words("一只狗。", "zh-CN") == segment.caption_words("一只狗。", "zh")


def test_a_language_without_its_tokenizer_is_refused_in_one_line_naming_the_extra(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jieba" else real(name, *a))
    segment.tokenizer.cache_clear()
    try:
        with pytest.raises(
            ConfigError,
            match=r"zh words need the tokenizer package\(s\) jieba: "
            r"pip install 'mltk\[words\]'",
        ):
            segment.caption_words("一只狗", "zh")
        dictionary = tmp_path / "zh-en.txt"
        dictionary.write_text("狗 dog\n", encoding="utf-8")
        captions = artifacts.write_captions(
            tmp_path / "caps",
            pa.table(
                {
                    "image_id": ["a", "a"],
                    "lang": ["zh", "en"],
                    "caption": ["一只狗", "a dog"],
                    "caption_id": ["c", "c"],
                    "split": ["train", "train"],
                }
            ),
        )
        result = runner.invoke(
            app,
            [
                "import-data",
                "lexicon",
                str(dictionary),
                "--src",
                "zh",
                "--tgt",
                "en",
                "--vocab-from",
                str(captions),
                "-o",
                str(tmp_path / "lex"),
            ],
        )
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
        assert "pip install 'mltk[words]'" in result.stderr and not (tmp_path / "lex").exists()
    finally:
        segment.tokenizer.cache_clear()
