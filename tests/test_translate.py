"""translate-data: guards, language codes, the seq2seq backend on tiny local Marian/M2M-100 models (row counts,
caption_id, dedup, cache, resume, drop-bad), the join backend and the CLI's exit codes."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from helpers_translate import build_tiny_m2m100, build_tiny_marian, synthetic_sentences
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.core.errors import ConfigError, MltkError
from mltk.translate import JoinConfig, TranslateConfig, join_translations, translate_captions
from mltk.translate import guards as G
from mltk.translate.languages import M2M100_CODES, NLLB_CODES, detect_family, model_language_code
from mltk.translate.pipeline import make_plan
from mltk.translate.seq2seq import Seq2SeqTranslator, plan_batches

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
runner = CliRunner()


# ----------------------------------------------------------------------------------------------------------------
# fixtures: tiny models (built once per session) and a small captions artifact with duplicate captions
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The models here are tiny: one thread is as fast and does not fight other processes for the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def marian_dir(tmp_path_factory):
    """opus-mt-en-de and opus-mt-en-fr, tiny and random, side by side so --model .../opus-mt-en-{tgt} works."""
    root = tmp_path_factory.mktemp("models")
    build_tiny_marian(root / "opus-mt-en-de", target_lang="de", seed=0)
    build_tiny_marian(root / "opus-mt-en-fr", target_lang="fr", seed=1)
    return root


@pytest.fixture(scope="session")
def m2m_dir(tmp_path_factory):
    return build_tiny_m2m100(tmp_path_factory.mktemp("m2m") / "m2m100-tiny")


def _captions_table(count: int = 14, duplicates: int = 3) -> pa.Table:
    texts = synthetic_sentences(count - duplicates, seed=7)
    texts += texts[:duplicates]  # the same sentence for several images: translated once
    return pa.table(
        {
            "image_id": [f"img{i // 2}" for i in range(count)],
            "lang": ["en"] * count,
            "caption": texts,
            "caption_id": [f"cap{i:03d}" for i in range(count)],
            "split": ["train" if i % 4 else "val" for i in range(count)],
        }
    )


@pytest.fixture
def captions(tmp_path):
    return artifacts.write_captions(tmp_path / "captions", _captions_table())


def _config(marian_dir, tmp_path, **overrides) -> TranslateConfig:
    settings = dict(
        targets=("de", "fr"),
        model=str(marian_dir / "opus-mt-en-{tgt}"),
        beams=2,
        max_length=16,
        batch_size=3,
        shard_size=4,
        device="cpu",
        cache_dir=str(tmp_path / "cache"),
    )
    settings.update(overrides)
    return TranslateConfig(**settings)


@pytest.fixture
def model_calls(monkeypatch):
    """Every (target, text) sent to a model, and how many models were loaded."""
    calls = {"texts": [], "loads": 0}
    original_batch, original_init = Seq2SeqTranslator.translate_batch, Seq2SeqTranslator.__init__

    def counting_batch(self, texts, target):
        calls["texts"].extend((target, t) for t in texts)
        return original_batch(self, texts, target)

    def counting_init(self, *args, **kwargs):
        calls["loads"] += 1
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(Seq2SeqTranslator, "translate_batch", counting_batch)
    monkeypatch.setattr(Seq2SeqTranslator, "__init__", counting_init)
    return calls


def _rows(path) -> list[dict]:
    return artifacts.load_captions(path).to_pylist()


# ----------------------------------------------------------------------------------------------------------------
# quality guards on hand-made strings
# ----------------------------------------------------------------------------------------------------------------


def test_empty_guard():
    assert G.is_empty("") and G.is_empty("  \t") and not G.is_empty("Hund")


def test_too_long_guard_uses_a_floor_for_short_sources():
    source = "A dog runs on the beach."  # 24 chars -> limit 72
    assert not G.is_too_long(source, "Ein Hund rennt am Strand.")
    assert G.is_too_long(source, "x" * 73) and not G.is_too_long(source, "x" * 72)
    assert not G.is_too_long("Dogs.", "Zwei Hunde spielen.")  # 19 <= 3 * max(5, 10)
    assert G.is_too_long("Dogs.", "Zwei Hunde spielen im Schnee vor einem Haus.")


def test_identical_guard_ignores_case_and_spacing():
    assert G.is_identical("A dog  runs.", "a dog runs.")
    assert not G.is_identical("A dog runs.", "Ein Hund rennt.")
    assert not G.is_identical("", "")  # empty is the empty guard's business


def test_repetition_guard_finds_ngram_loops():
    assert G.has_repetition_loop("ein Hund Hund Hund Hund")  # unigram x4
    assert not G.has_repetition_loop("ein Hund Hund Hund")  # x3 only
    assert G.has_repetition_loop("der Mann und der Hund und der Hund und der Hund und der Hund")  # trigram x4
    assert not G.has_repetition_loop("a man and a dog and a cat and a bird")
    assert G.has_repetition_loop("一只狗狗狗狗在跑")  # no spaces: characters are the tokens
    assert not G.has_repetition_loop("一只狗在草地上跑")
    strict = G.GuardConfig(min_repeats=3)
    assert G.has_repetition_loop("ein Hund Hund Hund", strict)


def test_check_names_every_failed_guard_and_skips_source_guards_without_source():
    assert G.check("A dog.", "A dog.") == ("identical",)
    assert G.check("A dog.", "") == ("empty",)
    assert set(G.check("Dog.", "dog dog dog dog dog dog dog dog dog dog")) == {"too_long", "repetition"}
    assert G.check(None, "A dog.") == ()
    assert G.check("A dog runs.", "Ein Hund rennt.") == ()


def test_quality_report_counts_and_drops():
    report = G.QualityReport(G.GuardConfig(), drop_bad=True)
    keep = report.check_rows("de", ["A dog.", "A cat.", "A man."], ["Ein Hund.", "", "A man."])
    assert keep == [True, False, False]
    counts = report.to_manifest()["by_language"]["de"]
    assert counts == {"rows": 3, "empty": 1, "too_long": 0, "identical": 1, "repetition": 0, "flagged": 2, "dropped": 2}


# ----------------------------------------------------------------------------------------------------------------
# language codes, families, plans and batches
# ----------------------------------------------------------------------------------------------------------------


def test_language_tables_match_the_model_vocabularies():
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES as M2M
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES as NLLB

    assert M2M100_CODES == set(M2M["m2m100"])
    assert set(NLLB_CODES.values()) <= set(NLLB)
    assert model_language_code("nllb", "de") == "deu_Latn" and model_language_code("nllb", "zh") == "zho_Hans"
    assert model_language_code("m2m100", "de") == "de" and model_language_code("marian", "xx") == "xx"
    with pytest.raises(ConfigError, match="NLLB"):
        model_language_code("nllb", "xx")
    with pytest.raises(ConfigError, match="M2M-100"):
        model_language_code("m2m100", "eo")


def test_detect_family_from_names_and_local_files(marian_dir, m2m_dir, tmp_path):
    assert detect_family("facebook/nllb-200-distilled-600M") == "nllb"
    assert detect_family("facebook/m2m100_418M") == "m2m100"
    assert detect_family("Helsinki-NLP/opus-mt-{src}-{tgt}") == "marian"
    assert detect_family("t5-small") == "seq2seq"
    assert detect_family(str(marian_dir / "opus-mt-en-de")) == "marian"
    assert detect_family(str(m2m_dir)) == "m2m100"
    (tmp_path / "nllb").mkdir()
    (tmp_path / "nllb" / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}))
    assert detect_family(str(tmp_path / "nllb")) == "nllb"


def test_plan_deduplicates_and_sorts_by_length():
    texts = ["a much longer caption", "short", "mid length", "short", "a much longer caption"]
    assert make_plan(texts) == ["short", "mid length", "a much longer caption"]
    assert make_plan(texts, sort_by_length=False) == ["a much longer caption", "short", "mid length"]


def test_sorted_batches_group_similar_lengths():
    lengths = [9, 1, 8, 2, 7, 3, 1]
    assert plan_batches(lengths, 2) == [[1, 6], [3, 5], [4, 2], [0]]
    assert plan_batches(lengths, 4, sort_by_length=False) == [[0, 1, 2, 3], [4, 5, 6]]


# ----------------------------------------------------------------------------------------------------------------
# the seq2seq backend on tiny local models
# ----------------------------------------------------------------------------------------------------------------


def test_translation_adds_one_row_per_caption_and_target_keeping_ids(marian_dir, captions, tmp_path, model_calls):
    out = translate_captions(captions, tmp_path / "out", _config(marian_dir, tmp_path))
    source = _captions_table()
    rows = _rows(out)
    assert len(rows) == 3 * source.num_rows
    by_lang = {lang: [r for r in rows if r["lang"] == lang] for lang in ("en", "de", "fr")}
    originals = {r["caption_id"]: r for r in source.to_pylist()}
    for lang in ("de", "fr"):
        assert sorted(r["caption_id"] for r in by_lang[lang]) == sorted(originals)
        for row in by_lang[lang]:
            assert row["image_id"] == originals[row["caption_id"]]["image_id"]
            assert row["split"] == originals[row["caption_id"]]["split"]
            assert row["source"] == f"mt:{marian_dir / f'opus-mt-en-{lang}'}"
    assert all(r["source"] == "human" for r in by_lang["en"])
    # identical source captions get identical translations and are translated once
    unique = len(set(source.column("caption").to_pylist()))
    assert Counter(t for t, _ in model_calls["texts"]) == {"de": unique, "fr": unique}
    assert model_calls["loads"] == 2  # one Marian model per pair
    manifest = artifacts.read_manifest(out, "captions")
    assert manifest["languages"] == ["de", "en", "fr"] and manifest["rows"] == len(rows)
    assert manifest["translation"]["by_language"]["de"]["unique_sources"] == unique
    quality = manifest["quality"]["by_language"]["de"]
    assert quality["rows"] == source.num_rows and quality["dropped"] == 0
    assert not (artifacts.partial_dir(out)).exists() and manifest["files"] == ["captions.parquet"]


def test_second_run_translates_nothing_from_the_cache(marian_dir, captions, tmp_path, model_calls):
    first = translate_captions(captions, tmp_path / "first", _config(marian_dir, tmp_path))
    calls_after_first = len(model_calls["texts"])
    second = translate_captions(captions, tmp_path / "second", _config(marian_dir, tmp_path))
    assert len(model_calls["texts"]) == calls_after_first and model_calls["loads"] == 2  # nothing new, no load
    assert _rows(first) == _rows(second)
    stats = artifacts.read_manifest(second)["translation"]["by_language"]["de"]
    assert stats["translated"] == 0 and stats["from_cache"] == stats["unique_sources"]
    # other decoding settings are other cache entries
    translate_captions(captions, tmp_path / "third", _config(marian_dir, tmp_path, beams=1, targets=("de",)))
    assert len(model_calls["texts"]) > calls_after_first


class _Interrupt(Exception):
    pass


def test_interrupted_run_resumes_without_translating_twice(marian_dir, captions, tmp_path, model_calls):
    config = _config(marian_dir, tmp_path, use_cache=False)  # the shards alone carry the resume
    reference = _rows(translate_captions(captions, tmp_path / "reference", config))
    model_calls["texts"].clear()

    def stop_after_first_shard(target, index):
        raise _Interrupt

    out = tmp_path / "out"
    with pytest.raises(_Interrupt):
        translate_captions(captions, out, config, on_shard=stop_after_first_shard)
    assert not out.exists() and (artifacts.partial_dir(out) / "shards" / "de-00000.parquet").is_file()
    assert len(model_calls["texts"]) == config.shard_size
    result = translate_captions(captions, out, config)
    translated = model_calls["texts"]
    assert len(translated) == len(set(translated))  # nothing translated twice
    assert _rows(result) == reference
    stats = artifacts.read_manifest(result)["translation"]["by_language"]["de"]
    assert stats["resumed"] == config.shard_size and stats["translated"] == stats["unique_sources"] - stats["resumed"]


def test_changed_settings_discard_finished_shards(marian_dir, captions, tmp_path, model_calls):
    out = tmp_path / "out"
    config = _config(marian_dir, tmp_path, use_cache=False, targets=("de",))

    def interrupt(target, index):
        raise _Interrupt

    with pytest.raises(_Interrupt):
        translate_captions(captions, out, config, on_shard=interrupt)
    result = translate_captions(captions, out, _config(marian_dir, tmp_path, use_cache=False, targets=("de",), beams=1))
    assert artifacts.read_manifest(result)["translation"]["by_language"]["de"]["resumed"] == 0


def test_existing_human_translations_are_kept(marian_dir, tmp_path, model_calls):
    table = _captions_table(6, duplicates=0)
    human = pa.table(
        {"image_id": ["img0"], "lang": ["de"], "caption": ["Ein Hund."], "caption_id": ["cap000"], "split": ["val"]}
    )
    captions = artifacts.write_captions(tmp_path / "captions", pa.concat_tables([table, human]))
    out = translate_captions(captions, tmp_path / "out", _config(marian_dir, tmp_path, targets=("de",)))
    german = [r for r in _rows(out) if r["lang"] == "de"]
    assert len(german) == 6 and [r["caption"] for r in german if r["caption_id"] == "cap000"] == ["Ein Hund."]
    assert artifacts.read_manifest(out)["translation"]["by_language"]["de"]["kept_existing"] == 1


def test_blank_captions_never_reach_the_model(marian_dir, tmp_path, model_calls):
    table = _captions_table(4, duplicates=0)
    table = table.set_column(2, "caption", pa.array(["  ", *table.column("caption").to_pylist()[1:]]))
    captions = artifacts.write_captions(tmp_path / "captions", table)
    out = translate_captions(captions, tmp_path / "out", _config(marian_dir, tmp_path, targets=("de",)))
    assert ("de", "  ") not in model_calls["texts"] and len(model_calls["texts"]) == 3
    assert [r["caption"] for r in _rows(out) if r["caption_id"] == "cap000" and r["lang"] == "de"] == [""]
    assert artifacts.read_manifest(out)["quality"]["by_language"]["de"]["empty"] >= 1


def test_drop_bad_removes_exactly_the_flagged_rows(marian_dir, captions, tmp_path):
    kept = translate_captions(captions, tmp_path / "kept", _config(marian_dir, tmp_path))
    dropped = translate_captions(captions, tmp_path / "dropped", _config(marian_dir, tmp_path, drop_bad=True))
    quality = artifacts.read_manifest(dropped)["quality"]["total"]
    assert quality["flagged"] > 0 and quality["dropped"] == quality["flagged"]
    assert artifacts.read_manifest(kept)["quality"]["total"]["flagged"] == quality["flagged"]
    assert len(_rows(dropped)) == len(_rows(kept)) - quality["dropped"]
    for row in _rows(dropped):
        if row["lang"] != "en":
            source = next(
                r["caption"] for r in _rows(kept) if r["caption_id"] == row["caption_id"] and r["lang"] == "en"
            )
            assert G.check(source, row["caption"]) == ()


def test_m2m100_serves_all_targets_from_one_model(m2m_dir, captions, tmp_path, model_calls):
    out = translate_captions(
        captions, tmp_path / "out", _config(m2m_dir, tmp_path, model=str(m2m_dir), targets=("de", "fr", "ja"))
    )
    assert model_calls["loads"] == 1
    rows = _rows(out)
    assert len(rows) == 4 * _captions_table().num_rows
    assert not any("__" in r["caption"] for r in rows)  # language tokens are not text
    assert artifacts.read_manifest(out)["translation"]["family"] == "m2m100"


def test_one_bilingual_model_for_several_targets_is_refused(marian_dir, captions, tmp_path):
    config = _config(marian_dir, tmp_path, model=str(marian_dir / "opus-mt-en-de"))
    with pytest.raises(ConfigError, match="one language only"):
        translate_captions(captions, tmp_path / "out", config)


def test_bad_options_are_config_errors(marian_dir, captions, tmp_path):
    with pytest.raises(ConfigError, match="no target"):
        translate_captions(captions, tmp_path / "o", _config(marian_dir, tmp_path, targets=()))
    with pytest.raises(ConfigError, match="source language"):
        translate_captions(captions, tmp_path / "o", _config(marian_dir, tmp_path, targets=("en",)))
    with pytest.raises(ConfigError, match="--beams"):
        translate_captions(captions, tmp_path / "o", _config(marian_dir, tmp_path, beams=0))
    with pytest.raises(ConfigError, match="no captions in the source language 'cs'"):
        translate_captions(captions, tmp_path / "o", _config(marian_dir, tmp_path, source_lang="cs"))


# ----------------------------------------------------------------------------------------------------------------
# the join backend
# ----------------------------------------------------------------------------------------------------------------


def test_join_by_caption_id_from_csv_and_jsonl(captions, tmp_path):
    (tmp_path / "de.csv").write_text(
        'caption_id,lang,caption\ncap000,de,"Ein Hund, der rennt."\ncap001,de,Eine Katze.\nnope,de,Niemand.\n',
        encoding="utf-8",
    )
    lines = [
        {"caption_id": "cap000", "lang": "fr", "caption": "Un chien."},
        {"caption_id": "cap002", "lang": "fr", "caption": ""},
    ]
    (tmp_path / "fr.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    config = JoinConfig(translations=(str(tmp_path / "de.csv"), str(tmp_path / "fr.jsonl")))
    out = join_translations(captions, tmp_path / "out", config)
    added = [r for r in _rows(out) if r["lang"] != "en"]
    assert [(r["caption_id"], r["lang"], r["caption"]) for r in added] == [
        ("cap000", "de", "Ein Hund, der rennt."),
        ("cap001", "de", "Eine Katze."),
        ("cap000", "fr", "Un chien."),
        ("cap002", "fr", ""),
    ]
    assert added[0]["image_id"] == "img0" and added[0]["source"] == "join:de.csv"
    manifest = artifacts.read_manifest(out)
    by_file = manifest["translation"]["by_file"]
    assert by_file[str(tmp_path / "de.csv")]["de"]["unmatched"] == 1
    assert manifest["quality"]["by_language"]["fr"]["empty"] == 1
    dropped = join_translations(captions, tmp_path / "dropped", JoinConfig(config.translations, drop_bad=True))
    assert len(_rows(dropped)) == len(_rows(out)) - 1


def test_join_by_image_id_from_tsv_and_parquet(tmp_path):
    table = _captions_table(4, duplicates=0)  # img0 has cap000 and cap001, img1 has cap002 and cap003
    single = pa.table(
        {"image_id": ["img9"], "lang": ["en"], "caption": ["A boat."], "caption_id": ["cap9"], "split": ["test"]}
    )
    captions = artifacts.write_captions(tmp_path / "captions", pa.concat_tables([table, single]))
    (tmp_path / "x.tsv").write_text(
        'image_id\tlang\tcaption\nimg9\tde\tEin "Boot".\nimg0\tde\tZwei Hunde.\nimg0\tde\tHunde.\n', encoding="utf-8"
    )
    pq.write_table(pa.table({"image_id": [9], "lang": ["fr"], "caption": ["Un bateau."]}), tmp_path / "x.parquet")
    pq.write_table(pa.table({"image_id": ["img9"], "lang": ["fr"], "caption": ["Un bateau."]}), tmp_path / "y.parquet")
    out = join_translations(
        captions,
        tmp_path / "out",
        JoinConfig(
            (str(tmp_path / "x.tsv"), str(tmp_path / "x.parquet"), str(tmp_path / "y.parquet")), targets=("de", "fr")
        ),
    )
    added = {(r["caption_id"], r["lang"]): r for r in _rows(out) if r["lang"] != "en"}
    assert added[("cap9", "de")]["caption"] == 'Ein "Boot".'  # the image's only caption keeps its id
    assert added[("cap9", "fr")]["split"] == "test"
    assert {k for k in added if k[0].startswith("img0")} == {("img0#de-0", "de"), ("img0#de-1", "de")}
    stats = artifacts.read_manifest(out)["translation"]["by_file"][str(tmp_path / "x.parquet")]
    assert stats["key"] == "image_id" and stats["fr"]["unmatched"] == 1  # image 9 is not img9


def test_join_rejects_bad_files(captions, tmp_path):
    (tmp_path / "dup.csv").write_text("caption_id,lang,caption\ncap000,de,A\ncap000,de,B\n", encoding="utf-8")
    with pytest.raises(MltkError, match="more than one de caption"):
        join_translations(captions, tmp_path / "o", JoinConfig((str(tmp_path / "dup.csv"),)))
    (tmp_path / "nokey.csv").write_text("id,lang,caption\n1,de,A\n", encoding="utf-8")
    with pytest.raises(MltkError, match="caption_id or image_id"):
        join_translations(captions, tmp_path / "o", JoinConfig((str(tmp_path / "nokey.csv"),)))
    (tmp_path / "x.xlsx").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown translations format"):
        join_translations(captions, tmp_path / "o", JoinConfig((str(tmp_path / "x.xlsx"),)))
    with pytest.raises(ConfigError, match="at least one"):
        join_translations(captions, tmp_path / "o", JoinConfig(()))


# ----------------------------------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------------------------------


def test_cli_translates_from_stdin_and_prints_only_the_path(marian_dir, captions, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "translate-data",
            "-",
            "--out",
            str(out),
            "--target",
            "de,fr",
            "--model",
            str(marian_dir / "opus-mt-en-{tgt}"),
            "--beams",
            "1",
            "--max-length",
            "8",
            "--cache",
            str(tmp_path / "cache"),
            "--device",
            "cpu",
        ],
        input=f"{captions}\n",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{out.resolve()}\n"
    assert "en->de" in result.stderr
    assert artifacts.read_manifest(out)["languages"] == ["de", "en", "fr"]


def test_cli_join_with_json_output(captions, tmp_path):
    (tmp_path / "de.csv").write_text("caption_id,lang,caption\ncap000,de,Ein Hund.\n", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "translate-data",
            str(captions),
            "-o",
            str(tmp_path / "out"),
            "--backend",
            "join",
            "--translations",
            str(tmp_path / "de.csv"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["rows"] == _captions_table().num_rows + 1 and payload["languages"] == ["de", "en"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["{missing}", "--target", "de"], "no such file"),
        (["{captions}", "--target", "xx", "--model", "facebook/nllb-200-distilled-600M"], "no NLLB-200 code"),
        (["{captions}", "--target", "eo", "--model", "facebook/m2m100_418M"], "not one of M2M-100's languages"),
        (["{captions}", "--target", "german"], "not an ISO 639-1 language code"),
        (["{captions}"], "no target language"),
        (["{captions}", "--target", "de", "--model", "{tmp}/no-such-model"], "translation model directory not found"),
        (["{captions}", "--backend", "join"], "needs at least one --translations"),
        (["{captions}", "--backend", "join", "--translations", "{tmp}/none.csv"], "no such translations file"),
        (["{captions}", "--backend", "magic", "--target", "de"], "--backend must be one of"),
        (["{captions}", "--target", "de", "--batch-size", "0"], "--batch-size must be between 1 and"),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(captions, tmp_path, arguments, message):
    values = {"missing": str(tmp_path / "missing"), "captions": str(captions), "tmp": str(tmp_path)}
    args = [a.format(**values) for a in arguments]
    result = runner.invoke(
        app,
        [
            "translate-data",
            *args,
            "--out",
            str(tmp_path / "out"),
            "--device",
            "cpu",
            "--cache",
            str(tmp_path / "cache"),
        ],
    )
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists() and not artifacts.partial_dir(tmp_path / "out").exists()
