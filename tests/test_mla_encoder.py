"""MLA's language acquisition encoder: English is the base model, acquirers sit after every block."""

from __future__ import annotations

import pytest
import torch
from helpers_tiny import tiny_wordpiece_tokenizer

from mltk import artifacts
from mltk.models.acquirer import acquirer_parameter_count
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.multilingual import LanguageAcquisitionEncoder, load_encoder, save_encoder
from mltk.models.nonnative import HFTokenizer
from mltk.models.text import OpenClipTextTower


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    torch.manual_seed(0)
    tokenizer = HFTokenizer(str(tiny_wordpiece_tokenizer(tmp_path_factory.mktemp("tok"))))
    base = load_clip("mltk-tiny")
    saved = artifacts.write_checkpoint(
        tmp_path_factory.mktemp("base") / "native",
        base.model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    return LanguageAcquisitionEncoder(load_clip(str(saved)), tokenizer, ["de", "ru", "zh"])


def test_english_bypasses_acquirers_and_equals_the_base_model(encoder):
    texts = ["a red circle left of a blue square", "two stars"]
    tokens = encoder.clip.tokenizer(texts)
    with torch.no_grad():
        base_mltk = OpenClipTextTower(encoder.clip.model).encode(tokens)  # how mltk encodes the base model
        base_open_clip = encoder.clip.model.encode_text(tokens)
        ours = encoder.encode(texts, "en")
    assert torch.equal(ours, base_mltk)  # bit-identical: the very same computation
    assert (ours - base_open_clip).abs().max() < 1e-5  # trimmed vs full length: float rounding only


def test_non_native_pools_at_the_first_sep_and_ignores_what_follows(encoder):
    tokens = encoder.tokenize(["ein roter kreis", "ein roter kreis links von einem blaues quadrat"], "de")
    assert tokens[0, 0].item() == encoder.non_native._tok.cls_token_id
    sep = encoder.non_native.end_token_id
    short = tokens[:1, : (tokens[0] == sep).nonzero()[0].item() + 1]
    padded = torch.cat([short, torch.full((1, 5), 7)], dim=1)  # garbage after [SEP]
    with torch.no_grad():
        assert torch.allclose(encoder.encode_tokens(short, "de"), encoder.encode_tokens(padded, "de"), atol=1e-6)


def test_each_language_has_its_own_acquirers(encoder):
    with torch.no_grad():
        encoder.acquirers["ru"][0].c_proj.bias.fill_(0.5)
        tokens = encoder.tokenize(["красный круг"], "ru")
        de, ru = encoder.encode_tokens(tokens, "de"), encoder.encode_tokens(tokens, "ru")
        encoder.acquirers["ru"][0].c_proj.bias.zero_()
    assert not torch.allclose(de, ru)


def test_unknown_language_is_a_clear_error(encoder):
    with pytest.raises(Exception, match="no acquirers"):
        encoder.encode(["x"], "fr")


def test_checkpoint_round_trip_holds_only_trained_tensors(encoder, tmp_path):
    with torch.no_grad():
        for p in encoder.trainable_tensors().values():
            p.add_(0.01 * torch.randn_like(p))
    path = save_encoder(encoder, tmp_path / "mla", stage="train-nlt")
    loaded = load_encoder(path)
    assert set(loaded.state_tensors()) == set(encoder.state_tensors())
    assert not any(k.startswith(("tower", "clip")) for k in loaded.state_tensors())
    with torch.no_grad():
        texts = ["un cercle rouge"]
        assert torch.allclose(loaded.encode(texts, "ru"), encoder.encode(texts, "ru"), atol=1e-6)


def test_a_random_base_cannot_be_named_by_a_checkpoint(tmp_path):
    tokenizer = HFTokenizer(str(tiny_wordpiece_tokenizer(tmp_path / "tok")))
    with pytest.raises(Exception, match="random weights"):
        save_encoder(LanguageAcquisitionEncoder(load_clip("mltk-tiny"), tokenizer, ["de"]), tmp_path / "x")


def test_parameter_count_per_language_for_vit_b_32():
    assert acquirer_parameter_count(width=512, num_blocks=12) == 3_154_944


def test_parameter_count_per_language_in_a_random_vit_b_32(tmp_path):
    tokenizer = HFTokenizer(str(tiny_wordpiece_tokenizer(tmp_path / "tok")))
    encoder = LanguageAcquisitionEncoder(load_clip("ViT-B-32"), tokenizer, ["de"])
    assert sum(p.numel() for p in encoder.acquirers["de"].parameters()) == 3_154_944


@pytest.mark.parametrize("kind", ["linear", "none"])
def test_acquirer_ablations_round_trip_through_the_checkpoint_config(encoder, tmp_path, kind):
    ablated = LanguageAcquisitionEncoder(encoder.clip, encoder.non_native, ["de"], acquirer=kind)
    with torch.no_grad():
        for p in ablated.trainable_tensors().values():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    tensors = ablated.state_tensors()
    if kind == "none":  # embedding only: no acquirer tensors at all
        assert tensors and all(k.startswith("embedding.") for k in tensors)
    else:  # the bottleneck without its ReLU: h + W_up(W_down(h)) is affine in h
        acquirer = ablated.acquirers["de"][0]
        a, b = torch.randn(3, 128), torch.randn(3, 128)
        delta = lambda h: acquirer(h) - h  # noqa: E731
        assert torch.allclose(delta(a) + delta(b) - delta(torch.zeros_like(a)), delta(a + b), atol=1e-5)
        assert torch.allclose(delta(a), acquirer.c_proj(acquirer.c_fc(a)), atol=1e-6)
    path = save_encoder(ablated, tmp_path / kind, stage="train-nlt")
    assert artifacts.load_checkpoint(path)[1]["acquirer"] == kind
    loaded = load_encoder(path)
    assert loaded.acquirer == kind
    with torch.no_grad():
        assert torch.allclose(
            loaded.encode(["ein roter kreis"], "de"), ablated.encode(["ein roter kreis"], "de"), atol=1e-6
        )
    with pytest.raises(Exception, match="--acquirer must be one of"):
        LanguageAcquisitionEncoder(encoder.clip, encoder.non_native, ["de"], acquirer="deep")
