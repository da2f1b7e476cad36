"""Vocabulary growth for CLL-CLIP: CLIP-exact tokenisation, BPE training, merging, artifacts, TEIR counts, CLI."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import mltk
from mltk import artifacts, vocab
from mltk.cli import app
from mltk.core.errors import ArtifactError, ConfigError, SchemaError

runner = CliRunner()
CLIP_SIZE, SOT, EOT = 49408, 49406, 49407

ENGLISH_SENTENCES = [
    "A man rides a bicycle down the street.",
    "Two dogs are playing with a red ball on the grass!",
    "A woman's hat, and 3 children (ages 4-7) at the beach; it's sunny :)",
    "  Lots   of\twhitespace\nand UPPER case  ",
    "Caf\u00e9 cr\u00e8me &amp; cr\u00eapes &lt;3 at the 2nd st. market",
    "mojibake: cafÃ© and â€œquotesâ€\x9d",
    "<start_of_text> is a special token, so is <end_of_text>",
    "emoji 🙂 and symbols ©®™ and numbers 1234567",
    "",
]

# Small generated corpora, one per task: two Latin languages, Cyrillic, and Chinese (no spaces: one pre-token).
WORDS = {
    "en": "a man woman dog runs on the grass beach red ball parasailing snowmobile unicyclist juggling".split(),
    "de": "ein mann frau hund läuft auf dem rasen strand roten ball spielt schwimmt fahrrad".split(),
    "ru": "мужчина женщина собака бежит по траве пляжу красный мяч играет плавает велосипед".split(),
    "zh": ["一个", "男人", "女人", "狗", "在", "草地", "上", "跑", "海滩", "红色", "球", "骑", "自行车"],
}
TASKS = ("en", "de", "ru", "zh")
SMALL_SIZE = 700  # V̂ of each task: 512 byte symbols + 2 special tokens + up to 186 merges


def corpus(lang: str, n: int = 200) -> list[str]:
    rng = random.Random(f"{lang}-corpus")
    separator = "" if lang == "zh" else " "
    return [separator.join(rng.choice(WORDS[lang]) for _ in range(rng.randint(3, 7))) for _ in range(n)]


def captions_table(langs=TASKS) -> pa.Table:
    rows = [
        (f"img{i}", lang, text, f"{lang}{i}", "train" if i % 10 else "val")
        for lang in langs
        for i, text in enumerate(corpus(lang))
    ]
    return pa.table(
        {
            name: [row[k] for row in rows]
            for k, name in enumerate(("image_id", "lang", "caption", "caption_id", "split"))
        }
    )


@pytest.fixture(scope="module")
def open_clip_tokenizer():
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """en -> de -> ru -> zh, each built from the captions artifact with the previous artifact as parent."""
    root = tmp_path_factory.mktemp("chain")
    captions = artifacts.write_captions(root / "captions", captions_table())
    paths, parent = [], None
    for lang in TASKS:
        parent = mltk.build_vocab(captions, lang, root / f"vocab-{lang}", parent=parent, size=SMALL_SIZE)
        paths.append(parent)
    return captions, paths


# ----------------------------------------------------------------------------------------------------------------
# CLIP's own tokenizer, reproduced
# ----------------------------------------------------------------------------------------------------------------


def test_preprocessing_is_clips(open_clip_tokenizer):
    from open_clip import tokenizer as oc

    assert vocab.bytes_to_unicode() == oc.bytes_to_unicode()
    for text in ENGLISH_SENTENCES:
        assert vocab.clean_text(text) == oc._clean_lower(text)


def test_clip_root_gives_open_clips_ids_and_tensors(open_clip_tokenizer):
    ours = vocab.clip_tokenizer()
    assert ours.vocab_size == CLIP_SIZE and (ours.sot_token_id, ours.eot_token_id) == (SOT, EOT)
    for text in ENGLISH_SENTENCES + ["мужчина бежит по траве", "一个男人在草地上跑"]:
        assert ours.encode(text) == open_clip_tokenizer.encode(text), text
    long_text = " ".join(["word"] * 100)
    assert ours(ENGLISH_SENTENCES + [long_text]).equal(open_clip_tokenizer(ENGLISH_SENTENCES + [long_text]))
    assert ours(long_text, context_length=16).equal(open_clip_tokenizer(long_text, context_length=16))
    ids = ours.encode("a dog on the grass")
    assert ours.decode(ids) == open_clip_tokenizer.decode(ids)


def test_clip_root_matches_open_clip_on_multi30k_english(shared_data, open_clip_tokenizer):
    path = shared_data / "multi30k" / "task1" / "raw" / "val.en"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    sentences = [line.rstrip("\r\n") for line in path.open(encoding="utf-8")]
    ours = vocab.clip_tokenizer()
    assert len(sentences) > 300
    assert ours(sentences).equal(open_clip_tokenizer(sentences))


# ----------------------------------------------------------------------------------------------------------------
# BPE training and the merge rules
# ----------------------------------------------------------------------------------------------------------------


def _pieces(words: dict[str, int]) -> dict[str, int]:
    return {vocab.pre_tokenize(word)[0]: count for word, count in words.items()}


def test_train_bpe_on_a_hand_made_example():
    counts = _pieces({"low": 5, "lower": 2, "newest": 6, "widest": 3})
    # (e,s) and (s,t</w>) both occur 9 times: ties go to the smaller pair. Then es+t</w> (9), then l+o (7).
    merges = vocab.train_bpe(counts, size=514 + 3, min_frequency=2)
    assert merges == [("e", "s"), ("es", "t</w>"), ("l", "o")]
    assert vocab.train_bpe(counts, size=514, min_frequency=2) == []
    # min_frequency stops early: only pairs seen at least 7 times.
    assert vocab.train_bpe(counts, size=10_000, min_frequency=7) == [("e", "s"), ("es", "t</w>"), ("l", "o")]


def test_merge_rules_on_a_hand_made_parent():
    base = vocab.base_symbols()
    parent_tokens = base + ["ab", "abc</w>"] + list(vocab.SPECIAL_TOKENS)
    parent_merges = [("a", "b"), ("ab", "c</w>")]
    learned = [("a", "b"), ("x", "y"), ("ab", "d</w>"), ("b", "c</w>"), ("xy", "z</w>")]
    tokens, merges, sizes = vocab.merge_vocabularies(parent_tokens, parent_merges, learned)
    assert tokens[: len(parent_tokens)] == parent_tokens  # old ids unchanged, special tokens included
    assert tokens[len(parent_tokens) :] == ["xy", "abd</w>", "bc</w>", "xyz</w>"]  # V̂'s order
    assert merges == parent_merges + learned[1:]  # old merges first, the duplicate (a, b) dropped
    assert (sizes.old, sizes.new_vocab, sizes.overlap, sizes.new, sizes.total) == (516, 519, 515, 4, 520)
    assert (sizes.merges_duplicate, sizes.merges_total) == (1, 6)
    tokenizer = vocab.ClipBpeTokenizer(tokens, merges)
    ids = {token: i for i, token in enumerate(tokens)}
    assert tokenizer.encode("abd xyz") == [ids["abd</w>"], ids["xyz</w>"]]
    # Old merges keep priority: a+b fires before the new b+c</w>, so "abc" stays the parent's token.
    assert tokenizer.encode("abc") == [ids["abc</w>"]]
    assert tokenizer.encode("bc") == [ids["bc</w>"]]


def test_protected_words_keep_the_parents_ids():
    clip = vocab.clip_tokenizer()
    assert [clip.tokens[i] for i in clip.encode("parasailing")] == ["paras", "ailing</w>"]
    learned = [("paras", "ailing</w>"), ("ĳ", "ĵ"), ("ĳĵ", "ķ</w>")]  # the last two touch no English word
    tokens, merges, _ = vocab.merge_vocabularies(clip.tokens, clip.merges, learned)
    assert vocab.ClipBpeTokenizer(tokens, merges).encode("parasailing") == [tokens.index("parasailing</w>")]
    kept = vocab.drop_merges_changing(clip, learned, vocab.word_frequencies(["a parasailing trip"]))
    assert kept == learned[1:]
    tokens, merges, _ = vocab.merge_vocabularies(clip.tokens, clip.merges, kept)
    assert vocab.ClipBpeTokenizer(tokens, merges).encode("parasailing") == clip.encode("parasailing")
    # Through training: protecting the task's own text keeps all of it at CLIP's ids (so no new token is used).
    texts = corpus("en")
    free = vocab.train_vocabulary(texts, "en", None, SMALL_SIZE, 2)
    assert any(free.tokenizer.encode(t) != clip.encode(t) for t in texts)
    protected = vocab.train_vocabulary(texts, "en", None, SMALL_SIZE, 2, protected_texts=texts)
    assert all(protected.tokenizer.encode(t) == clip.encode(t) for t in texts)
    assert protected.sizes.merges_protected > 0 and protected.tasks[-1]["new_tokens_produced"] == 0


# ----------------------------------------------------------------------------------------------------------------
# A chain of four tasks through the artifacts (en -> de -> ru -> zh)
# ----------------------------------------------------------------------------------------------------------------


def test_chain_keeps_ids_merges_and_special_tokens(chain):
    _, paths = chain
    parent = vocab.load_vocabulary(None)
    for lang, path in zip(TASKS, paths):
        manifest = artifacts.read_manifest(path, "vocab")
        current = vocab.load_vocabulary(path)
        tokenizer, sizes = current.tokenizer, current.sizes
        assert tokenizer.tokens[: parent.vocab_size] == parent.tokenizer.tokens
        assert tokenizer.merges[: len(parent.tokenizer.merges)] == parent.tokenizer.merges
        assert len(set(tokenizer.merges)) == len(tokenizer.merges)
        assert (tokenizer.sot_token_id, tokenizer.eot_token_id) == (SOT, EOT)
        assert sizes.old == parent.vocab_size and sizes.overlap + sizes.new == sizes.new_vocab
        assert sizes.total == tokenizer.vocab_size == sizes.old + sizes.new == manifest["vocab_size"]
        assert sizes.merges_total == len(tokenizer.merges) > len(parent.tokenizer.merges)
        assert manifest["languages"] == list(TASKS[: TASKS.index(lang) + 1]) and manifest["lang"] == lang
        parent = current


def test_new_tokens_of_every_task_are_produced_after_reload(chain):
    """The authors' reload kept only the first task's merges; here every task's merges survive."""
    _, paths = chain
    final = vocab.load_tokenizer(paths[-1])
    firsts = [vocab.load_vocabulary(p).sizes.old for p in paths] + [final.vocab_size]
    for k, lang in enumerate(TASKS):
        ids = {i for text in corpus(lang) for i in final.encode(text)}
        own_new = {i for i in ids if firsts[k] <= i < firsts[k + 1]}
        assert firsts[k + 1] > firsts[k] and own_new, f"task {lang} produced none of its new tokens"
        assert all(final.decode(final.encode(t)).strip() == vocab.clean_text(t) for t in corpus(lang)[:20])
    # A frequent Chinese word is one new token of the zh task; a Cyrillic one ends in a new token of the ru task
    # (CLIP's own merges, which keep priority, first join the bytes of "му" their way, so the learned path from
    # the raw bytes is only partly reachable: see the manifest's new_tokens_produced).
    chinese = final.encode("男人")
    assert len(chinese) == 1 and firsts[3] <= chinese[0] < firsts[4]
    assert firsts[2] <= final.encode("мужчина")[-1] < firsts[3]


def test_english_keeps_clips_ids_through_the_chain(chain, open_clip_tokenizer):
    final = vocab.load_tokenizer(chain[1][-1])
    common = [s for s in ENGLISH_SENTENCES if "mojibake" not in s]
    for text in common:
        assert final.encode(text) == open_clip_tokenizer.encode(text), text
    assert final(common).equal(open_clip_tokenizer(common))


def test_task_counts_follow_their_definition(chain):
    """prior_task_counts[j] = tasks before this one whose tokenised text held j, CLIP counted once for its tokens;
    task_token_freq[j] = occurrences of j in this task's text tokenised with this task's vocabulary."""
    _, paths = chain
    seen_sets = []
    for k, (lang, path) in enumerate(zip(TASKS, paths)):
        current = vocab.load_vocabulary(path)
        size = current.vocab_size
        train = [t for i, t in enumerate(corpus(lang)) if i % 10]
        freq = Counter(i for text in train for i in current.tokenizer.encode(text))
        expected_freq = np.zeros(size, np.int64)
        expected_freq[list(freq)] = list(freq.values())
        assert np.array_equal(current.task_token_freq, expected_freq)
        expected_prior = np.zeros(size, np.int64)
        expected_prior[:CLIP_SIZE] = 1
        for earlier in seen_sets:
            expected_prior[list(earlier)] += 1
        assert np.array_equal(current.prior_task_counts, expected_prior)
        assert current.prior_task_counts.dtype == np.int64
        seen_sets.append(set(freq))
        assert np.array_equal(current.counts_after_task(), expected_prior + (expected_freq > 0))
    # A brand-new zh token has c = 0, so TEIR gives it lambda 1.
    last = vocab.load_vocabulary(paths[-1])
    assert (last.prior_task_counts[last.sizes.old :] == 0).all()


def test_token_sets_by_membership_of_each_tasks_new_vocabulary(chain):
    """TEIR's token sets as the paper words them: the tokens of V̂_t, counted over earlier V̂ (CLIP's as one)."""
    _, paths = chain
    earlier_sets = []
    for lang, path in zip(TASKS, paths):
        current = vocab.load_vocabulary(path)
        train = [t for i, t in enumerate(corpus(lang)) if i % 10]
        learned = vocab.train_bpe(vocab.word_frequencies(train), SMALL_SIZE, 2)
        new_vocabulary = set(vocab.base_symbols()) | set(vocab.SPECIAL_TOKENS) | {"".join(m) for m in learned}
        ids, counts = current.token_set("vocabulary")
        assert {current.tokenizer.tokens[i] for i in ids} == new_vocabulary
        expected = np.zeros(current.vocab_size, np.int64)
        expected[:CLIP_SIZE] = 1
        for earlier in earlier_sets:
            expected[list(earlier)] += 1
        assert np.array_equal(counts, expected)
        earlier_sets.append(set(ids.tolist()))
        occurrence_ids, _ = current.token_set("occurrence")
        assert np.array_equal(occurrence_ids, current.present_token_ids())
        assert set(ids.tolist()) != set(occurrence_ids.tolist())  # the two definitions really differ
    with pytest.raises(ConfigError, match="--token-sets"):
        current.token_set("both")


def test_vocab_files_are_text_json_and_npy(chain):
    path = chain[1][1]
    manifest = artifacts.read_manifest(path, "vocab")
    assert set(manifest["files"]) == {
        "merges.txt",
        "vocab.json",
        "prior_task_counts.npy",
        "task_token_freq.npy",
        "prior_vocab_counts.npy",
        "task_vocab_member.npy",
    }
    assert json.loads((path / "vocab.json").read_text(encoding="utf-8"))["<end_of_text>"] == EOT
    assert (path / "merges.txt").read_text(encoding="utf-8").splitlines()[1] == "i n"  # CLIP's first merge
    assert [t["lang"] for t in manifest["tasks"]] == ["en", "de"]
    assert manifest["sizes"]["merges_total"] == len(vocab.load_tokenizer(path).merges)


def test_build_vocab_takes_an_in_memory_table(tmp_path):
    path = mltk.build_vocab(captions_table(("ru",)), "ru", tmp_path / "ru", size=600, split=None)
    manifest = artifacts.read_manifest(path, "vocab")
    assert manifest["inputs"] == [] and manifest["languages"] == ["ru"]
    assert manifest["tasks"][0]["captions"] == len(corpus("ru"))


def test_bad_inputs_raise_mltk_errors(chain, tmp_path):
    captions, paths = chain
    with pytest.raises(ConfigError, match="no captions with lang='fr'"):
        mltk.build_vocab(captions, "fr", tmp_path / "v")
    with pytest.raises(ConfigError, match="--size"):
        vocab.train_vocabulary(["a b"], "en", None, 100, 2)
    with pytest.raises(ArtifactError, match="is a captions artifact"):
        vocab.load_vocabulary(captions)
    broken = tmp_path / "broken"
    shutil.copytree(paths[0], broken)
    (broken / "merges.txt").write_text("#header\nq zz\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="merges.txt has 13 bytes"):  # the recorded size catches it first
        vocab.load_vocabulary(broken)
    manifest = json.loads((broken / "manifest.json").read_text(encoding="utf-8"))
    manifest["checksums"] = artifacts.integrity.checksums(broken, manifest["files"])  # forged consistently
    (broken / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ArtifactError, match="merge whose result"):
        vocab.load_vocabulary(broken)


# ----------------------------------------------------------------------------------------------------------------
# Real captions (multi30k), when the shared data is present
# ----------------------------------------------------------------------------------------------------------------


def test_german_vocabulary_and_english_captions(shared_data, open_clip_tokenizer):
    raw = shared_data / "multi30k" / "task1" / "raw"
    if not (raw / "val.en").is_file() or not (raw / "train.de").is_file():
        pytest.skip(f"multi30k text not found under {raw}")
    read = lambda name: [line.rstrip("\r\n") for line in (raw / name).open(encoding="utf-8")]  # noqa: E731
    english, german = read("val.en"), read("train.de")[:8000]
    clip = vocab.clip_tokenizer()
    merged = vocab.train_vocabulary(german, "de", None, 4000, 2).tokenizer
    # Words CLIP keeps whole can never change; only words CLIP splits may be re-merged by German merges.
    for piece in vocab.word_frequencies(english):
        if len(clip.encode_piece(piece)) == 1:
            assert merged.encode_piece(piece) == clip.encode_piece(piece)
    # With the English captions protected, every English caption keeps CLIP's ids exactly.
    protected = vocab.train_vocabulary(german, "de", None, 4000, 2, protected_texts=english)
    assert protected.tokenizer(english).equal(open_clip_tokenizer(english))
    assert protected.tasks[-1]["new_tokens_produced"] > 500


# ----------------------------------------------------------------------------------------------------------------
# mltk build-vocab
# ----------------------------------------------------------------------------------------------------------------


def test_cli_build_vocab_chain_and_pipe(chain, tmp_path):
    captions, _ = chain
    result = runner.invoke(
        app,
        [
            "build-vocab",
            str(captions),
            "--lang",
            "de",
            "--size",
            "600",
            "--protect-lang",
            "en",
            "--out",
            str(tmp_path / "de"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'de'}\n"
    assert "vocab de" in result.stderr
    manifest = artifacts.read_manifest(tmp_path / "de", "vocab")
    assert manifest["created_by"]["config"]["protect_lang"] == "en"
    assert manifest["inputs"][0]["path"] == str(captions) and manifest["inputs"][0]["kind"] == "captions"
    result = runner.invoke(
        app,
        [
            "build-vocab",
            "-",
            "--lang",
            "ru",
            "--parent",
            str(tmp_path / "de"),
            "--size",
            "600",
            "--out",
            str(tmp_path / "ru"),
            "--json",
        ],
        input=f"{captions}\n",
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["path"] == str(tmp_path / "ru") and payload["languages"] == ["de", "ru"]
    assert payload["sizes"]["old"] == vocab.load_vocabulary(tmp_path / "de").vocab_size


def test_cli_errors_are_one_line_exit_2(chain, tmp_path):
    captions, _ = chain
    result = runner.invoke(app, ["build-vocab", str(captions), "--lang", "fr", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "lang='fr'" in result.stderr and str(captions) in result.stderr
    result = runner.invoke(
        app,
        [
            "build-vocab",
            str(captions),
            "--lang",
            "de",
            "--parent",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert result.exit_code == 2 and "no such file" in result.stderr


def test_vocab_files_round_trip_through_artifacts_and_are_checked(chain, tmp_path):
    path = chain[1][-1]
    files = artifacts.read_vocab_files(path)
    tokenizer = vocab.load_tokenizer(path)
    assert files.tokens == tokenizer.tokens and files.merges == tokenizer.merges
    assert files.prior_task_counts.dtype == np.int64 and files.prior_task_counts.shape == (len(files.tokens),)
    artifacts.write_vocab_files(tmp_path, files.tokens, files.merges, files.prior_task_counts, files.task_token_freq)
    again = artifacts.read_vocab_files(tmp_path)
    assert again.tokens == files.tokens and again.merges == files.merges
    assert np.array_equal(again.task_token_freq, files.task_token_freq)
    np.save(tmp_path / "task_token_freq.npy", np.zeros(3, np.int64))
    with pytest.raises(SchemaError, match=r"task_token_freq.npy has shape \(3,\)"):
        artifacts.read_vocab_files(tmp_path)
    np.save(tmp_path / "task_token_freq.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ArtifactError, match="cannot read NPY"):  # never unpickled
        artifacts.read_vocab_files(tmp_path)
    (tmp_path / "vocab.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(SchemaError, match="vocab.json is not a JSON object"):
        artifacts.read_vocab_files(tmp_path)


def test_build_vocab_takes_its_sizes_from_the_cll_clip_recipe(chain, tmp_path, monkeypatch):
    """build-vocab and train-continual follow one vocabulary size: the cll-clip recipe's, unless given."""
    from mltk.recipes import load_recipe
    from mltk.settings import vocab as vocab_settings

    recipe = load_recipe("cll-clip")
    assert vocab_settings.vocabulary_sizes(None, None) == (
        recipe.config["vocab_size"],
        recipe.config["vocab_min_frequency"],
    )
    assert vocab_settings.vocabulary_sizes(600, 3) == (600, 3)
    smaller = dataclasses.replace(recipe, config={**recipe.config, "vocab_size": 530, "vocab_min_frequency": 3})
    monkeypatch.setattr(vocab_settings, "load_recipe", lambda name: smaller)
    captions, _ = chain
    path = mltk.build_vocab(captions, "de", tmp_path / "de")
    manifest = artifacts.read_manifest(path, "vocab")
    recorded = manifest["created_by"]["config"]
    assert recorded["size"] == 530 and recorded["min_frequency"] == 3
    assert manifest["sizes"]["new_vocab"] <= 530
