"""Growing CLIP's BPE vocabulary one language at a time (CLL-CLIP).

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning"
(AAAI 2024) learn languages in sequence. Before task t they train a BPE vocabulary V̂_t (10K tokens) on the
task's text with CLIP's own pre-processing and merge it into the previous vocabulary:

    V_t = V_{t-1} ∪ V̂_t        old ids unchanged, tokens of V̂_t missing from V_{t-1} appended in V̂_t's order,
    merges_t = merges_{t-1} + [m in merges(V̂_t) not already in merges_{t-1}]   (old merges keep priority)

The first parent is CLIP's own vocabulary (``bpe_simple_vocab_16e6.txt.gz`` inside open_clip: 256 byte symbols,
the same 256 with ``</w>``, 48,894 merges, then ``<start_of_text>`` = 49406 and ``<end_of_text>`` = 49407).
The start and end tokens keep their ids, so after expansion the end token is no longer the largest id (pool at
the first end token, not at argmax).

The authors' code reloaded the merged tokenizer in a way that kept only the merges of the first task, so every
later task's new tokens existed in the embedding table but were never produced. Here the artifact stores the
complete merge list and ``ClipBpeTokenizer`` applies all of it; the tests check that the new tokens of every task
are produced after a reload.

Two consequences of "old merges keep priority" that the paper's scheme has and mltk measures:

- A learned merge can also fire on text of an earlier language (English included) wherever the earlier
  tokenization leaves its two halves side by side: a rare English word that CLIP splits ("bal" "ding</w>") is
  re-merged by a vocabulary that learned "balding</w>" that way. Words CLIP encodes as one token never change.
  On Multi30K, an English task's own V̂ changes the ids of 92 of the 1,014 validation captions, and a German V̂
  alone about 1% of them. ``protected_texts`` (CLI ``--protect-lang en``) drops exactly the learned merges that
  would change the parent's ids for the protected words, so those captions keep CLIP's ids.
- Not every new token is reachable: old merges first join the bytes their own way (CLIP already merges the two
  UTF-8 bytes of most Cyrillic letters), so a learned path from raw bytes may never form. The manifest's
  ``new_tokens_produced`` counts the new tokens that occur in the task's tokenised text (about 40% on
  Multi30K German); the others get lambda 0 under TEIR.

The package, one seam per module:

- ``tokenizer``: CLIP's pre-processing, ``ClipBpeTokenizer`` over any merge list, CLIP's own vocabulary;
- ``bpe_trainer``: learning V̂_t's merges on one language's text;
- ``merge``: V_t = V_{t-1} ∪ V̂_t, ``Vocabulary`` with TEIR's per-token task counts, ``train_vocabulary``;
- ``build``: the vocab artifact (write, load) and ``build_vocab`` (``mltk build-vocab``);
- ``wordpiece``: the same growth for a Hugging Face tower's WordPiece vocabulary (CLL-CLIP on BERT-style towers);
- ``wordpiece_protect``: the rule that keeps earlier tasks' words segmented as they were when WordPiece grows.
"""

from mltk.vocab.bpe_trainer import train_bpe, word_frequencies
from mltk.vocab.build import build_vocab, load_tokenizer, load_vocabulary, select_captions, write_vocabulary
from mltk.vocab.merge import (
    clip_vocabulary,
    drop_merges_changing,
    merge_vocabularies,
    minimum_vocabulary_size,
    token_frequencies,
    train_vocabulary,
    vocabulary_size_problem,
)
from mltk.vocab.tokenizer import (
    CLIP_BPE_FILE,
    CLIP_MERGE_COUNT,
    CLIP_ROOT_NAME,
    DEFAULT_CONTEXT_LENGTH,
    EOT_TOKEN,
    SOT_TOKEN,
    SPECIAL_TOKENS,
    WORD_END,
    ClipBpeTokenizer,
    base_symbols,
    bytes_to_unicode,
    clean_text,
    clip_bpe_path,
    clip_pattern,
    clip_tokenizer,
    merge_pair,
    pre_tokenize,
)
from mltk.vocab.vocabulary import TOKEN_SETS, MergeSizes, Vocabulary
from mltk.vocab.wordpiece import WORDPIECE, WordPieceTokenizer, tower_tokenizer, tower_vocabulary, train_wordpiece

__all__ = [
    "CLIP_BPE_FILE",
    "CLIP_MERGE_COUNT",
    "CLIP_ROOT_NAME",
    "DEFAULT_CONTEXT_LENGTH",
    "EOT_TOKEN",
    "SOT_TOKEN",
    "SPECIAL_TOKENS",
    "TOKEN_SETS",
    "WORDPIECE",
    "WORD_END",
    "ClipBpeTokenizer",
    "MergeSizes",
    "Vocabulary",
    "WordPieceTokenizer",
    "tower_tokenizer",
    "tower_vocabulary",
    "train_wordpiece",
    "base_symbols",
    "build_vocab",
    "bytes_to_unicode",
    "clean_text",
    "clip_bpe_path",
    "clip_pattern",
    "clip_tokenizer",
    "clip_vocabulary",
    "drop_merges_changing",
    "load_tokenizer",
    "load_vocabulary",
    "merge_pair",
    "merge_vocabularies",
    "minimum_vocabulary_size",
    "pre_tokenize",
    "select_captions",
    "token_frequencies",
    "train_bpe",
    "train_vocabulary",
    "vocabulary_size_problem",
    "word_frequencies",
    "write_vocabulary",
]
