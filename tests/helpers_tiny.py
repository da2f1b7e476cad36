"""Tiny locally built models for tests (no network): a WordPiece tokenizer in M-BERT's format."""

from __future__ import annotations

from pathlib import Path

WORDS = ("ein roter kreis blauer blaues quadrat links von einem un cercle rouge carré bleu à gauche d' "
         "красный круг синий квадрат слева от 一 个 红 色 的 圆 蓝 方 形 左 边 two red circle blue square").split()


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
