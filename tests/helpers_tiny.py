"""Tiny locally built models for tests (no network): a WordPiece tokenizer in M-BERT's format, a random BERT folder,
an open_clip config whose text tower is that BERT."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (
    "ein roter kreis blauer blaues quadrat links von einem un cercle rouge carré bleu à gauche d' "
    "красный круг синий квадрат слева от 一 个 红 色 的 圆 蓝 方 形 左 边 two red circle blue square"
).split()


def tiny_wordpiece_tokenizer(directory: Path) -> Path:
    """Write a tiny cased WordPiece tokenizer (``[CLS] ... [SEP]``, like bert-base-multilingual-cased) and return
    its folder, loadable with ``transformers.AutoTokenizer.from_pretrained``."""
    from transformers import BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # a dict, not vocab_file=: transformers 5 ignores vocab_file= and would leave only the special tokens
    BertTokenizerFast(vocab={word: i for i, word in enumerate(vocab)}, do_lower_case=False).save_pretrained(directory)
    return directory


def tiny_bert_folder(directory, seed=0, layers=2):
    """A random 2-layer BERT (width 32) with a WordPiece tokenizer, saved as a transformers folder."""
    import torch
    from transformers import BertConfig, BertModel

    tiny_wordpiece_tokenizer(directory)
    vocab = len((directory / "vocab.txt").read_text(encoding="utf-8").split())
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    BertModel(config).eval().save_pretrained(directory)
    return directory


def register_hf_clip(directory, bert_dir, name, pooler="mean_pooler", proj="linear"):
    """An open_clip config (tiny ViT, text tower = the tiny local BERT) registered under ``name``."""
    import open_clip

    config = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 16, "head_width": 8},
        "text_cfg": {
            "hf_model_name": str(bert_dir),
            "hf_tokenizer_name": str(bert_dir),
            "hf_pooler_type": pooler,
            "hf_proj_type": proj,
            "context_length": 24,
        },
    }
    path = directory / f"{name}.json"
    path.write_text(json.dumps(config))
    open_clip.add_model_config(path)
    return name
