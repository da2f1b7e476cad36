"""MLA's MKD baseline with English through the student (``train-nlt --train mkd``): the student replaces the
English text encoder, as M-CLIP does, so English accuracy is no longer equal to the frozen CLIP's by construction
(MLA's zero-shot finding); ``--train full`` keeps English on the frozen tower."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch
from helpers_tiny import tiny_bert_folder

from mltk import artifacts
from mltk.encode.text_encoders import TowerTextEncoder, load_text_encoder
from mltk.models.multilingual import build_encoder, save_encoder

ENGLISH = ["a red circle left of a blue square", "two green stars", "one small triangle", "a big blue circle"]
GERMAN = [
    "ein roter kreis links von einem blauen quadrat",
    "zwei grüne sterne",
    "ein kleines dreieck",
    "ein großer blauer kreis",
]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return tiny_bert_folder(tmp_path_factory.mktemp("bert"))


def _nudge(student: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in student.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))


def test_the_mkd_student_reads_english_and_its_checkpoint_says_so(bert_dir, tmp_path):
    encoder = build_encoder(str(bert_dir), None, "tower", ["de"], train="mkd")
    _nudge(encoder.student)
    tower = TowerTextEncoder(encoder.base)
    with torch.no_grad():
        english, frozen = encoder.encode(ENGLISH, "en"), _frozen(tower, ENGLISH)
        through_student = encoder.student.forward_embeddings(*_student_inputs(encoder, ENGLISH))
    assert torch.allclose(english, through_student) and not torch.allclose(english, frozen, atol=1e-3)
    loaded = load_text_encoder(save_encoder(encoder, tmp_path / "mkd"))
    assert artifacts.load_checkpoint(tmp_path / "mkd")[1]["train"] == "mkd"
    with torch.no_grad():
        assert torch.equal(loaded.encode(ENGLISH, "en"), english)
    full = build_encoder(str(bert_dir), None, "tower", ["de"], train="full")
    _nudge(full.student)
    with torch.no_grad():  # --train full: English stays the frozen tower's
        assert torch.allclose(full.encode(ENGLISH, "en"), frozen)


def _frozen(tower: TowerTextEncoder, texts: list[str]) -> torch.Tensor:
    return tower.encode_tokens(tower.tokenize(texts, "en"), "en")  # [B, D], the frozen tower's English


def _student_inputs(encoder, texts: list[str]):
    from mltk.models.text import trim_to_lengths

    tokens, lengths = trim_to_lengths(
        encoder.non_native(texts, context_length=encoder.tower.context_length), encoder.non_native.end_token_id
    )
    return encoder.embedding(tokens), lengths


def test_nlt_with_english_through_the_student_distils_english_to_the_frozen_tower(bert_dir, tmp_path):
    from mltk.train.mla import MlaConfig, train_nlt

    rows = [
        {"image_id": f"i{k}", "lang": lang, "caption": text, "caption_id": f"c{k}", "split": split}
        for split in ("train", "val")
        for k, (en, de) in enumerate(zip(ENGLISH, GERMAN))
        for lang, text in (("en", en), ("de", de))
    ]
    captions = artifacts.write_captions(tmp_path / "captions", pa.Table.from_pylist(rows))
    out = {}
    for mode in ("full", "mkd"):
        config = MlaConfig(
            captions=captions,
            out=tmp_path / mode,
            model=str(bert_dir),
            tokenizer="tower",
            train=mode,
            languages=("de",),
            batch_size=4,
            device="cpu",
            cache_dir=tmp_path / "cache",
            loop={"steps": 3, "lr": 1e-2, "seed": 0},
        )
        out[mode] = train_nlt(config)
    history = artifacts.read_json(out["mkd"] / "history.json")
    trained = {key for entry in history if isinstance(entry, dict) for key in entry if key.startswith("mse_")}
    assert trained == {"mse_de", "mse_en"}  # the English pairs are distilled (validated) beside the German ones
    frozen = TowerTextEncoder(load_text_encoder(out["full"]).base)
    with torch.no_grad():
        reference = _frozen(frozen, ENGLISH)
        assert torch.allclose(load_text_encoder(out["full"]).encode(ENGLISH, "en"), reference)
        assert not torch.allclose(load_text_encoder(out["mkd"]).encode(ENGLISH, "en"), reference, atol=1e-4)
