"""Test fixture (not shipped in the package): tiny random-weight translation models built locally, no download.

A Marian/OPUS-MT model with a ``MarianTokenizer`` and an M2M-100 model with an ``M2M100Tokenizer``, both on
SentencePiece models trained on the spot. Tests and ``benchmarks/translate.py`` run the real transformers code
path on them; their output is gibberish, but deterministic for a given seed.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Sequence
from pathlib import Path

import torch

_WORDS = (
    "a the two man woman child dog cat boy girl people group young old red blue green black white small "
    "big is are sitting running standing playing walking riding on in at near with of and grass street beach "
    "water park ball bike shirt hat table front building snow field"
).split()


def synthetic_sentences(count: int, seed: int = 0, min_words: int = 3, max_words: int = 16) -> list[str]:
    """Caption-like word salad with a spread of lengths (for tokenizer training and benchmarks)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(min_words, max_words))) for _ in range(count)]


def _train_sentencepiece(texts: Sequence[str], vocab_size: int) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        minloglevel=2,
        num_threads=1,
    )
    return model.getvalue()


def _pieces(spm_model: bytes) -> list[str]:
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=spm_model)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def build_tiny_marian(
    out_dir: str | Path,
    *,
    source_lang: str = "en",
    target_lang: str = "de",
    texts: Sequence[str] | None = None,
    d_model: int = 16,
    layers: int = 1,
    seed: int = 0,
    vocab_size: int = 120,
    init_std: float = 1.0,
) -> Path:
    """Save a tiny ``MarianMTModel`` + ``MarianTokenizer`` to ``out_dir`` (loadable with ``from_pretrained``).

    ``init_std`` 1.0 (instead of Marian's 0.02) makes the random model's output depend on its input, so
    different captions get different "translations"; pass 0.02 for a model that is to be trained.
    """
    from transformers import MarianConfig, MarianMTModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spm_model = _train_sentencepiece(texts or synthetic_sentences(400, seed), vocab_size)
    (out / "source.spm").write_bytes(spm_model)
    (out / "target.spm").write_bytes(spm_model)
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in _pieces(spm_model):
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "MarianTokenizer",
                "source_lang": source_lang,
                "target_lang": target_lang,
                "model_max_length": 128,
            }
        ),
        encoding="utf-8",
    )
    config = MarianConfig(
        vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_position_embeddings=256,
        init_std=init_std,
        scale_embedding=False,
        pad_token_id=vocab["<pad>"],
        eos_token_id=0,
        decoder_start_token_id=vocab["<pad>"],
        forced_eos_token_id=0,
    )
    torch.manual_seed(seed)
    MarianMTModel(config).save_pretrained(out)
    return out


def build_tiny_m2m100(
    out_dir: str | Path,
    *,
    texts: Sequence[str] | None = None,
    d_model: int = 16,
    layers: int = 1,
    seed: int = 0,
    vocab_size: int = 120,
) -> Path:
    """Save a tiny ``M2M100ForConditionalGeneration`` + ``M2M100Tokenizer`` (all 100 language tokens)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spm_model = _train_sentencepiece(texts or synthetic_sentences(400, seed), vocab_size)
    (out / "sentencepiece.bpe.model").write_bytes(spm_model)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in _pieces(spm_model):
        vocab.setdefault(piece, len(vocab))
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "M2M100Tokenizer", "src_lang": "en", "model_max_length": 128}), encoding="utf-8"
    )
    madeup_words = 8
    config = M2M100Config(
        vocab_size=len(vocab) + len(FAIRSEQ_LANGUAGE_CODES["m2m100"]) + madeup_words,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_position_embeddings=256,
        init_std=1.0,
        scale_embedding=False,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    torch.manual_seed(seed)
    M2M100ForConditionalGeneration(config).save_pretrained(out)
    return out
