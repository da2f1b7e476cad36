"""Growing a Hugging Face tower's WordPiece vocabulary one language at a time (CLL-CLIP on BERT-style towers).

CLL-CLIP grows CLIP's byte-level BPE (``mltk.vocab.merge``). A BERT tower such as all-MiniLM-L6-v2 reads WordPiece
instead: a vocabulary of whole-word and ``##``-continuation pieces, applied by greedy longest match within each
pre-tokenised word. The same rule, V_t = V_{t-1} ∪ V̂_t, applies:

- V̂_t is a WordPiece vocabulary learned on the task's training text after the tower's own normalisation and
  pre-tokenisation (``train_wordpiece``): the special tokens, the alphabet (each character as a word start and as a
  ``##`` continuation), then the results of BPE-style merges of the most frequent adjacent pair, as the
  ``tokenizers`` library's ``WordPieceTrainer`` builds it. That trainer breaks ties between equally frequent pairs
  by hash order, so it learns a different vocabulary in every process; mltk's trainer (``learn_merges``, shared
  with the BPE trainer) breaks them lexicographically and is deterministic.
- The tokens of V̂_t missing from V_{t-1} are appended in V̂_t's order; old ids never change. The grown tokenizer
  is the tower's own ``tokenizers`` pipeline (normaliser, pre-tokeniser, ``[CLS] ... [SEP]`` template, special
  tokens) with the merged list as its WordPiece vocabulary, so new tokens are ordinary vocabulary entries that
  greedy longest match produces, not "added tokens"; before any growth it tokenises exactly as the tower does.
- Greedy longest match would let a new piece re-segment a word of an earlier task (``mltk.vocab.wordpiece_protect``);
  by default (``growth="keep"``) the new pieces that would do so are left out, so every word of every earlier
  task's training text keeps its ids. ``growth="resegment"`` appends all of V̂_t (mltk's earlier growth).

A vocab artifact of this kind holds ``vocab.json`` ({token: id}), ``tokenizer.json`` (the whole pipeline, plain
JSON), ``protected_words.json`` (the words whose segmentation later growth keeps) and the TEIR count arrays of
every vocab artifact; its manifest says ``tokenizer: wordpiece``.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log
from mltk.vocab.bpe_trainer import learn_merges
from mltk.vocab.vocabulary import MergeSizes, Vocabulary
from mltk.vocab.wordpiece_protect import WORDPIECE_GROWTH, keep_segmentations

WORDPIECE = "wordpiece"
TOKENIZER_FILE = "tokenizer.json"  # the tokenizers pipeline with the merged vocabulary
PROTECTED_WORDS_FILE = "protected_words.json"  # words of the tasks so far, whose segmentation growth keeps
WORD_START = "\x00"  # marks word-initial symbols while learning (BERT's normaliser removes control characters)


class WordPieceTokenizer:
    """A tower's ``tokenizers`` WordPiece pipeline over an arbitrary (grown) vocabulary.

    ``__call__(texts) -> LongTensor [B, L]``: ``[CLS] ... [SEP]`` rows cut to ``context_length`` and padded on the
    right with the pad id to the longest row, as the tower's own tokenizer pads them (``mltk.models.hf_text``);
    ``lower_case`` is sentence-transformers' ``do_lower_case``, applied before the pipeline as it does."""

    kind = WORDPIECE

    def __init__(self, pipeline: dict, context_length: int, lower_case: bool = False, pad_token: str = "[PAD]"):
        from tokenizers import Tokenizer

        model = pipeline.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ConfigError(
                f"train-continual grows WordPiece vocabularies; this tokenizer's model is {model.get('type')!r}"
            )
        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
            raise ArtifactError("the WordPiece vocabulary must map its tokens to the ids 0..V-1")
        self.pipeline = {**pipeline, "truncation": None, "padding": None}  # set per call
        self.tokens = sorted(vocab, key=vocab.__getitem__)
        self.encoder = dict(vocab)
        self.prefix = model.get("continuing_subword_prefix") or "##"
        self.unk_token = model.get("unk_token") or "[UNK]"
        self.context_length = int(context_length)
        self.lower_case = bool(lower_case)
        if pad_token not in self.encoder:
            raise ArtifactError(f"the vocabulary lacks its pad token {pad_token!r}")
        self.pad_token = pad_token
        self.pad_token_id = self.encoder[pad_token]
        self.special_tokens = [t["content"] for t in pipeline.get("added_tokens", []) if t.get("special")]
        self.all_special_ids = sorted({self.encoder[t] for t in self.special_tokens if t in self.encoder})
        self._backend = Tokenizer.from_str(json.dumps(self.pipeline))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def with_tokens(self, tokens: Sequence[str]) -> WordPieceTokenizer:
        """The same pipeline over ``tokens`` (id = position)."""
        pipeline = copy.deepcopy(self.pipeline)
        pipeline["model"]["vocab"] = {token: index for index, token in enumerate(tokens)}
        return WordPieceTokenizer(pipeline, self.context_length, self.lower_case, self.pad_token)

    def _texts(self, texts: Sequence[str]) -> list[str]:
        return [text.lower() for text in texts] if self.lower_case else list(texts)

    def __call__(self, texts: str | Sequence[str], context_length: int | None = None) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            return torch.zeros(0, 0, dtype=torch.long)
        self._backend.enable_truncation(max_length=context_length or self.context_length)
        self._backend.enable_padding(pad_id=self.pad_token_id, pad_token=self.pad_token)
        encodings = self._backend.encode_batch(self._texts(texts))
        return torch.tensor([e.ids for e in encodings], dtype=torch.long).reshape(len(texts), -1)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without ``[CLS]`` and ``[SEP]``."""
        self._backend.no_truncation()
        self._backend.no_padding()
        return self._backend.encode(self._texts([text])[0], add_special_tokens=False).ids

    def token_frequencies(self, texts: Sequence[str]) -> np.ndarray:
        """Occurrences [V] (int64) of each token in ``texts`` (no special tokens)."""
        self._backend.no_truncation()
        self._backend.no_padding()
        freq = np.zeros(self.vocab_size, np.int64)
        for encoding in self._backend.encode_batch(self._texts(texts), add_special_tokens=False):
            np.add.at(freq, np.asarray(encoding.ids, np.int64), 1)
        return freq

    def words(self, texts: Sequence[str]) -> Counter:
        """How often each word occurs in ``texts`` after the pipeline's normaliser and pre-tokeniser."""
        normalizer, pre_tokenizer = self._backend.normalizer, self._backend.pre_tokenizer
        counts: Counter = Counter()
        for text in self._texts(texts):
            text = normalizer.normalize_str(text) if normalizer is not None else text
            pieces = pre_tokenizer.pre_tokenize_str(text) if pre_tokenizer is not None else [(text, None)]
            counts.update(piece for piece, _ in pieces)
        return counts

    def manifest_fields(self) -> dict:
        specials = {token: self.encoder[token] for token in self.special_tokens if token in self.encoder}
        return {
            "tokenizer": WORDPIECE,
            "special_tokens": specials,
            "pad_token": self.pad_token,
            "lower_case": self.lower_case,
            "context_length": self.context_length,
        }


def tower_tokenizer(tower, model: str = "the base model") -> WordPieceTokenizer:
    """The WordPiece tokenizer of a text-only Hugging Face tower (``mltk.models.hf_text``), rebuilt from its own
    ``tokenizers`` pipeline; a one-line refusal for tokenizers it cannot grow (SentencePiece, byte-level BPE)."""
    padded = tower.tokenizer
    hf = getattr(padded, "tokenizer", None)
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None or not hasattr(padded, "lower_case"):
        raise ConfigError(
            f"train-continual grows a Hugging Face tower's WordPiece vocabulary through its fast "
            f"(tokenizers) tokenizer; {model!r} has none"
        )
    pipeline = json.loads(backend.to_str())
    kind = (pipeline.get("model") or {}).get("type")
    if kind != "WordPiece":
        raise ConfigError(
            f"train-continual grows WordPiece (BERT) vocabularies; {model!r} has a {kind} tokenizer it cannot grow"
        )
    tokenizer = WordPieceTokenizer(
        pipeline, padded.context_length or tower.context_length, padded.lower_case, hf.pad_token
    )
    if int(tower.lengths(torch.tensor([[tokenizer.pad_token_id]]))[0]) != 0:  # the tower must see it as padding
        raise ConfigError(f"{model!r}: the tokenizer's pad id {tokenizer.pad_token_id} is not the tower's padding id")
    return tokenizer


def train_wordpiece(
    word_counts: dict[str, int], size: int, min_frequency: int, prefix: str = "##", special_tokens: Sequence[str] = ()
) -> list[str]:
    """V̂: a WordPiece vocabulary of at most ``size`` tokens learned on word counts, in order: the special
    tokens, the alphabet (sorted), then one token per merge (``learn_merges``: most frequent adjacent pair, ties
    lexicographic, stopping below ``min_frequency``). Within a word the first symbol is a word start and the
    others are ``prefix`` continuations, so "haus" starts as h ##a ##u ##s."""
    words, freqs = [], []
    for word, count in sorted(word_counts.items()):
        if word and WORD_START not in word:
            words.append([WORD_START + word[0]] + list(word[1:]))
            freqs.append(int(count))
    alphabet = sorted({symbol for word in words for symbol in word})
    vocab = set(special_tokens) | set(alphabet)
    merges = learn_merges(words, freqs, vocab, size, min_frequency)

    def piece(symbol: str) -> str:
        return symbol[1:] if symbol.startswith(WORD_START) else prefix + symbol

    order = list(special_tokens) + [piece(s) for s in alphabet] + [piece(a + b) for a, b in merges]
    return list(dict.fromkeys(order))


def train_wordpiece_vocabulary(
    texts: Sequence[str],
    lang: str,
    parent,
    size: int,
    min_frequency: int = 2,
    protected_texts: Sequence[str] = (),
    growth: str = "keep",
):
    """V_t = V_{t-1} ∪ V̂_t for a WordPiece ``parent`` vocabulary (``mltk.vocab.vocabulary.Vocabulary``), with the
    TEIR counts of ``train_vocabulary``: occurrences of each token in the texts tokenised with V_t, and
    membership of V̂_t. ``growth="keep"`` leaves out the new pieces that would re-segment a word of an earlier
    task (or of ``protected_texts``); ``"resegment"`` appends them all, protecting ``protected_texts`` only."""
    if growth not in WORDPIECE_GROWTH:
        raise ConfigError(f"--wordpiece-growth must be one of {', '.join(WORDPIECE_GROWTH)}, got {growth!r}")
    old = parent.tokenizer
    words = old.words(texts)
    learned = train_wordpiece(words, size, min_frequency, old.prefix, old.special_tokens)
    known = set(old.tokens)
    appended = [token for token in learned if token not in known]
    earlier = set(parent.protected_words or ()) if growth == "keep" else set()
    protected = earlier | set(old.words(protected_texts))
    appended, dropped = keep_segmentations(appended, protected, known, old.prefix)
    if growth == "keep" and parent.protected_words is None and parent.tasks:
        log(
            f"vocab {lang}: the parent vocabulary records no protected words (built by an older mltk): growth "
            f"cannot keep its tasks' segmentation"
        )
    learned = [token for token in learned if token not in frozenset(dropped)]
    tokenizer = old.with_tokens(old.tokens + appended)
    sizes = MergeSizes(
        old=old.vocab_size,
        new_vocab=len(learned),
        overlap=len(learned) - len(appended),
        new=len(appended),
        total=tokenizer.vocab_size,
        merges_parent=0,
        merges_learned=0,
        merges_duplicate=0,
        merges_total=0,
    )
    freq = tokenizer.token_frequencies(texts)
    prior = np.zeros(sizes.total, np.int64)
    prior[: sizes.old] = parent.counts_after_task()
    learned_set = set(learned)
    member = np.fromiter((token in learned_set for token in tokenizer.tokens), np.int64, sizes.total)
    prior_vocab = np.zeros(sizes.total, np.int64)
    prior_vocab[: sizes.old] = parent.vocab_counts_after_task()
    produced = int(np.count_nonzero(freq[sizes.old :]))
    task = {
        "lang": lang,
        "captions": len(texts),
        "new_vocab_size": sizes.new_vocab,
        "new_tokens": sizes.new,
        "new_tokens_produced": produced,
        "first_new_id": sizes.old,
        "min_frequency": min_frequency,
        "tokenizer": WORDPIECE,
        "growth": growth,
        "pieces_protected": len(dropped),
        "protected_words": len(protected),
    }
    log(
        f"vocab {lang}: {len(texts)} captions; WordPiece V̂ {sizes.new_vocab} tokens ({sizes.overlap} already "
        f"known, {sizes.new} new, {produced} of them produced on the task text; {len(dropped)} left out to keep "
        f"{len(protected)} earlier words' segmentation); vocabulary {sizes.old} -> {sizes.total}"
    )
    return Vocabulary(
        tokenizer,
        prior,
        freq,
        list(parent.tasks) + [task],
        sizes,
        prior_vocab_counts=prior_vocab,
        task_vocab_member=member,
        protected_words=tuple(sorted(earlier | set(words))),
    )


def tower_vocabulary(tower, model: str = "the base model"):
    """The root of a WordPiece chain: the tower's own vocabulary, counted as one task for all its tokens."""
    tokenizer = tower_tokenizer(tower, model)
    size = tokenizer.vocab_size
    return Vocabulary(
        tokenizer,
        np.zeros(size, np.int64),
        np.ones(size, np.int64),
        prior_vocab_counts=np.zeros(size, np.int64),
        task_vocab_member=np.ones(size, np.int64),
        protected_words=(),
    )


def write_wordpiece_files(
    directory: Path, tokenizer: WordPieceTokenizer, protected_words: Sequence[str] | None = None
) -> None:
    """The tokenizer files of a WordPiece vocab artifact (the count arrays are written beside them)."""
    artifacts.write_json(directory / schema.VOCAB_TOKENS_FILE, tokenizer.encoder)
    artifacts.write_json(directory / TOKENIZER_FILE, tokenizer.pipeline)
    if protected_words is not None:
        artifacts.write_json(directory / PROTECTED_WORDS_FILE, list(protected_words))


def read_protected_words(path: Path) -> tuple[str, ...] | None:
    """The protected words of a WordPiece vocab artifact (None: written before they were recorded)."""
    if not (path / PROTECTED_WORDS_FILE).exists():
        return None
    words = artifacts.read_json(path / PROTECTED_WORDS_FILE)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ArtifactError(f"{PROTECTED_WORDS_FILE} must be a list of words", path)
    return tuple(words)


def read_wordpiece_tokenizer(path: Path, manifest: dict) -> WordPieceTokenizer:
    """The tokenizer of a WordPiece vocab artifact; ``vocab.json`` and the pipeline must agree."""
    pipeline = artifacts.read_json(path / TOKENIZER_FILE)
    tokens = artifacts.read_json(path / schema.VOCAB_TOKENS_FILE)
    if not isinstance(pipeline, dict) or (pipeline.get("model") or {}).get("vocab") != tokens:
        raise ArtifactError(f"{TOKENIZER_FILE} and {schema.VOCAB_TOKENS_FILE} disagree on the vocabulary", path)
    try:
        return WordPieceTokenizer(
            pipeline, int(manifest["context_length"]), bool(manifest.get("lower_case")), str(manifest["pad_token"])
        )
    except (KeyError, TypeError, ValueError):
        raise ArtifactError("manifest.json: a WordPiece vocabulary needs context_length and pad_token", path) from None
    except ConfigError as exc:
        raise ArtifactError(str(exc), path) from None
