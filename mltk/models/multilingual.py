"""MLA's language acquisition encoder: a frozen text tower that reads new languages.

English (the native language) takes the tower's own path (its tokenizer, word embeddings, no acquirers), so its
embeddings equal the base model's exactly. Every other language goes through the shared non-native embedding and
its own stack of acquirers::

    tokens [B, L] -> NonNativeEmbedding -> (tower: + positions [+ token types, embedding LayerNorm]) -> block_1
        -> acquirer_1[lang] -> ... -> block_n -> acquirer_n[lang] -> pool as the tower pools -> final norm /
        projection   [B, D]

The tower is any ``mltk.models.text.TextTower``: open_clip's own (causal, pooled at the first end token) or a
Hugging Face encoder (bidirectional with a padding mask, pooled by mean / CLS), whole CLIPs or text-only
sentence-transformers folders. Batches are trimmed to their longest sequence.

``acquirer`` selects MLA's ablations (``mltk.models.acquirer``: ``mlp``, ``linear``, ``none`` = embedding only); the
checkpoint config records it, and checkpoints without the field are ``mlp``.

``train="full"`` is the multilingual knowledge-distillation baseline (Reimers and Gurevych 2020; M-CLIP): instead of
acquirers, a trainable copy of the whole tower (the student, initialised from the frozen teacher) reads every
non-native language; English stays on the frozen tower. The checkpoint then holds the student's weights.
``train="mkd"`` is the same student replacing the English text encoder as well, as M-CLIP and MLA's MKD baseline
do: English is tokenised by the non-native tokenizer and read by the student, and NLT distils English captions to
the frozen tower's embedding of themselves beside the translations (so English accuracy can drop, MLA's finding).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
import torch.nn as nn

from mltk import artifacts
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.models.acquirer import ACQUIRER_HIDDEN, AcquirerStack, check_acquirer_kind
from mltk.models.clip import is_hf_model_folder
from mltk.models.nonnative import TOWER_SOURCE, NonNativeEmbedding, NonNativeTokenizer, load_non_native_tokenizer
from mltk.models.text import trim_to_lengths
from mltk.models.towers import TextBase, base_from_clip, load_text_base

CHECKPOINT_FORMAT = "mla"
# MLA's acquirers per language; a whole student tower for the non-native languages; the student for English too (MKD)
TRAIN_MODES = ("acquirers", "full", "mkd")
STUDENT_MODES = ("full", "mkd")


class LanguageAcquisitionEncoder(nn.Module):
    native_trains = False  # English is the frozen tower's own path: its features are constants

    def __init__(
        self,
        base,
        non_native: NonNativeTokenizer,
        languages: list[str],
        embed_dim: int | None = None,
        hidden: int = ACQUIRER_HIDDEN,
        native_lang: str = NATIVE_LANG,
        embedding_init: torch.Tensor | None = None,
        train: str = "acquirers",
        acquirer: str = "mlp",
    ):
        super().__init__()
        if not isinstance(base, TextBase):  # a ClipBundle
            base = base_from_clip(base)
        if train not in TRAIN_MODES:
            raise ConfigError(f"unknown --train {train!r} (one of {', '.join(TRAIN_MODES)})")
        check_acquirer_kind(acquirer)
        self.acquirer = acquirer
        self.base = base
        self.clip = base.clip  # None for a text-only tower
        self.spec = base.spec
        self.tower = base.tower
        self.tower.requires_grad_(False)
        self.non_native = non_native
        self.native_lang = native_lang
        self.hidden = hidden
        self.train_mode = train
        from_tower = non_native.kind == TOWER_SOURCE
        embed_dim = embed_dim or (embedding_init.shape[1] if embedding_init is not None else self.tower.width)
        self.embedding = NonNativeEmbedding(
            non_native.vocab_size, embed_dim, self.tower.width, embedding_init, identity_proj=from_tower
        )
        self.acquirers = nn.ModuleDict()
        self.student = None
        self._full_languages: list[str] = []
        self.english_student = train == "mkd"  # English reads the student (the teacher is the frozen tower)
        self.native_trains = self.english_student
        if train in STUDENT_MODES:  # the student: a trainable copy of the whole tower (its tokenizer object is shared)
            memo = {id(getattr(self.tower, "tokenizer", None)): getattr(self.tower, "tokenizer", None)}
            self.student = copy.deepcopy(self.tower, memo)
            self.student.requires_grad_(True)
            self.student.token_embedding.requires_grad_(False)  # unused: the non-native table replaces it
        for lang in languages:
            self.add_language(lang)

    def train(self, mode: bool = True) -> "LanguageAcquisitionEncoder":
        """Training mode for what trains (acquirers, embedding, student: a BERT student's dropout is on); the frozen
        tower stays in eval mode, so the non-native path trains through the very function English is encoded by."""
        super().train(mode)
        self.tower.eval()
        return self

    def parameter_count(self, languages: list[str] | None = None, embedding: bool = True) -> int:
        """Number of trained numbers (``trainable_tensors``), e.g. per language for a report."""
        return sum(p.numel() for p in self.trainable_tensors(languages, embedding).values())

    @property
    def languages(self) -> list[str]:
        return list(self._full_languages) if self.student is not None else list(self.acquirers.keys())

    def add_language(self, lang: str) -> None:
        if lang == self.native_lang:
            raise ConfigError(f"{lang} is the native language: it uses the tower's own path and has no acquirers")
        if self.student is not None:
            if lang not in self._full_languages:
                self._full_languages.append(lang)
        elif lang not in self.acquirers:
            self.acquirers[lang] = AcquirerStack(self.tower.width, self.tower.num_blocks, self.hidden, self.acquirer)

    def tokenize(self, texts: list[str], lang: str) -> torch.Tensor:
        """Texts of one language -> token ids [B, L] for that language's path."""
        if lang == self.native_lang and not self.english_student:
            return self.tower.tokenize(list(texts))[0]
        self._check_lang(lang)
        return self.non_native(list(texts), context_length=self.tower.context_length)

    def encode_tokens(self, tokens: torch.Tensor, lang: str) -> torch.Tensor:
        """Token ids [B, L] of one language -> unnormalised text features [B, D]."""
        if lang == self.native_lang and not self.english_student:
            lengths = self.tower.lengths(tokens)
            return self.tower.encode(tokens[:, : int(lengths.max())], lengths)
        self._check_lang(lang)
        tokens, lengths = trim_to_lengths(tokens, self.non_native.end_token_id)
        if self.student is not None:
            return self.student.forward_embeddings(self.embedding(tokens, lengths), lengths)
        stack = self.acquirers[lang]
        words = self.embedding(tokens, lengths)  # the real tokens only; zeros at padding
        return self.tower.forward_embeddings(words, lengths, after_block=stack if len(stack) else None)

    def encode(self, texts: list[str], lang: str) -> torch.Tensor:
        device = self.embedding.table.weight.device
        return self.encode_tokens(self.tokenize(texts, lang).to(device), lang)

    def _check_lang(self, lang: str) -> None:
        if lang not in self.languages and not (self.english_student and lang == self.native_lang):
            what = "no acquirers" if self.student is None else "no path through the student"
            raise ConfigError(
                f"language {lang!r} has {what} in this encoder (has: {', '.join([self.native_lang] + self.languages)})"
            )

    # --- what a checkpoint holds ------------------------------------------------------------------------------

    def trainable_tensors(self, languages: list[str] | None = None, embedding: bool = True) -> dict[str, nn.Parameter]:
        """Parameters to train, by checkpoint key: the acquirers of ``languages`` (default all), or the student
        tower (``train="full"``, shared by every non-native language), and with ``embedding`` the shared
        non-native embedding and its projection."""
        chosen = self.languages if languages is None else languages
        params = {}
        if embedding:
            params.update({f"embedding.{k}": p for k, p in self.embedding.named_parameters()})
        for lang in chosen:
            self._check_lang(lang)
        if self.student is not None:
            unused = self.student.token_embedding.weight
            params.update({f"student.{k}": p for k, p in self.student.named_parameters() if p is not unused})
            return params
        for lang in chosen:
            params.update({f"acquirers.{lang}.{k}": p for k, p in self.acquirers[lang].named_parameters()})
        return params

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {k: p.detach() for k, p in self.trainable_tensors().items()}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], strict: bool = True) -> None:
        own = self.trainable_tensors()
        missing = [k for k in own if k not in tensors]
        unexpected = [k for k in tensors if k not in own]
        if strict and (missing or unexpected):
            raise ConfigError(
                f"checkpoint tensors do not match the encoder (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        with torch.no_grad():
            for key, value in tensors.items():
                if key in own:
                    own[key].copy_(value)

    def checkpoint_config(self) -> dict:
        model = self.spec.get("model", "")
        if (
            not self.spec.get("pretrained")
            and not artifacts.is_artifact(model)
            and not is_hf_model_folder(model)
            and not str(model).startswith(("hf-hub:", "local-dir:"))
        ):
            raise ConfigError(
                "the base CLIP has random weights, so a checkpoint could not name it; train or save "
                "it first (mltk pretrain) and build the encoder on that checkpoint"
            )
        return {
            "format": CHECKPOINT_FORMAT,
            "base": {k: v for k, v in self.spec.items() if k in ("model", "pretrained")},
            "native_lang": self.native_lang,
            "languages": self.languages,
            "non_native": {
                "kind": self.non_native.kind,
                "source": self.non_native.source,
                "vocab_size": self.non_native.vocab_size,
                "embed_dim": self.embedding.table.embedding_dim,
            },
            "acquirer_hidden": self.hidden,
            "acquirer": self.acquirer,
            "train": self.train_mode,
        }


def build_encoder(
    base_model: str,
    base_pretrained: str | None,
    non_native_source: str | None,
    languages: list[str],
    init_embeddings: bool = False,
    device: str | torch.device = "cpu",
    hidden: int = ACQUIRER_HIDDEN,
    embed_dim: int | None = None,
    train: str = "acquirers",
    acquirer: str = "mlp",
) -> LanguageAcquisitionEncoder:
    """A fresh encoder over a frozen text tower. ``init_embeddings`` copies the word embeddings of the
    transformers model behind the tokenizer (M-BERT in the paper); the ``tower`` tokenizer always starts from a
    copy of the tower's own table, and is the default (``non_native_source`` None) on a Hugging Face tower."""
    base = load_text_base(base_model, base_pretrained, device=device)
    if non_native_source is None:
        if not base.hugging_face:
            raise ConfigError(
                "--tokenizer is needed for open_clip's own text tower (a vocabulary artifact from "
                "`mltk build-vocab`, a transformers name like bert-base-multilingual-cased, or "
                "'tower' for CLIP's own BPE)"
            )
        non_native_source = TOWER_SOURCE
    tokenizer = load_non_native_tokenizer(non_native_source, base.tower)
    wants_init = tokenizer.kind == TOWER_SOURCE or (init_embeddings and tokenizer.kind == "hf")
    init = tokenizer.word_embeddings() if wants_init else None
    return LanguageAcquisitionEncoder(
        base,
        tokenizer,
        languages,
        embed_dim=embed_dim,
        hidden=hidden,
        embedding_init=init,
        train=train,
        acquirer=acquirer,
    ).to(device)


def load_encoder(path: str | Path, device: str | torch.device = "cpu") -> LanguageAcquisitionEncoder:
    """Rebuild an encoder from an MLA checkpoint artifact (frozen base named in its checkpoint config)."""
    tensors, config = artifacts.load_checkpoint(path)
    if config.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(f"not an MLA checkpoint (format {config.get('format')!r})", path)
    base = load_text_base(config["base"]["model"], config["base"].get("pretrained"), device=device)
    tokenizer = load_non_native_tokenizer(config["non_native"]["source"], base.tower)
    if tokenizer.vocab_size != config["non_native"]["vocab_size"]:
        raise ConfigError(
            f"tokenizer {config['non_native']['source']} has {tokenizer.vocab_size} tokens, the "
            f"checkpoint was trained with {config['non_native']['vocab_size']}",
            path,
        )
    encoder = LanguageAcquisitionEncoder(
        base,
        tokenizer,
        config["languages"],
        embed_dim=config["non_native"]["embed_dim"],
        hidden=config["acquirer_hidden"],
        native_lang=config["native_lang"],
        train=config.get("train", "acquirers"),
        acquirer=config.get("acquirer", "mlp"),
    )
    encoder.load_state_tensors(tensors)
    return encoder.to(device)


def save_encoder(
    encoder: LanguageAcquisitionEncoder,
    out_dir: str | Path,
    tensors: dict[str, torch.Tensor] | None = None,
    **writer_kwargs,
) -> Path:
    """Write an MLA checkpoint artifact: trained tensors only (safetensors) plus the checkpoint config naming the
    base."""
    return artifacts.write_checkpoint(
        out_dir,
        tensors if tensors is not None else encoder.state_tensors(),
        encoder.checkpoint_config(),
        **writer_kwargs,
    )
