"""MLA's language acquisition encoder: a frozen CLIP text tower that reads new languages.

English (the native language) takes CLIP's own path (CLIP tokenizer, token embedding, no acquirers), so its
embeddings equal the base model's exactly. Every other language goes through the shared non-native embedding and
its own stack of acquirers::

    tokens [B, L] -> NonNativeEmbedding -> + CLIP positions -> block_1 -> acquirer_1[lang] -> ... -> block_n
        -> acquirer_n[lang] -> pool at the first end token -> ln_final -> text projection   [B, D]

CLIP's causal mask is kept, and batches are trimmed to their longest sequence (``mltk.models.text``).

``acquirer`` selects MLA's ablations (``mltk.models.acquirer``: ``mlp``, ``linear``, ``none`` = embedding only); the
checkpoint config records it, and checkpoints without the field are ``mlp``.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from mltk import artifacts
from mltk.errors import ConfigError
from mltk.models.acquirer import ACQUIRER_HIDDEN, AcquirerStack, check_acquirer_kind
from mltk.models.clip import ClipBundle, load_clip
from mltk.models.nonnative import NonNativeEmbedding, NonNativeTokenizer, load_non_native_tokenizer
from mltk.models.text import trim_to_lengths
from mltk.models.towers import clip_text_tower
from mltk.schema import NATIVE_LANG

CHECKPOINT_FORMAT = "mla"


class LanguageAcquisitionEncoder(nn.Module):
    native_trains = False  # English is the frozen CLIP's own path: its features are constants

    def __init__(self, clip: ClipBundle, non_native: NonNativeTokenizer, languages: list[str],
                 embed_dim: int | None = None, hidden: int = ACQUIRER_HIDDEN, native_lang: str = NATIVE_LANG,
                 embedding_init: torch.Tensor | None = None, acquirer: str = "mlp"):
        super().__init__()
        check_acquirer_kind(acquirer)
        self.acquirer = acquirer
        self.clip = clip
        self.tower = clip_text_tower(clip)
        self.tower.requires_grad_(False)
        self.non_native = non_native
        self.native_lang = native_lang
        self.hidden = hidden
        embed_dim = embed_dim or (embedding_init.shape[1] if embedding_init is not None else self.tower.width)
        self.embedding = NonNativeEmbedding(non_native.vocab_size, embed_dim, self.tower.width, embedding_init)
        self.acquirers = nn.ModuleDict()
        for lang in languages:
            self.add_language(lang)

    @property
    def languages(self) -> list[str]:
        return list(self.acquirers.keys())

    def add_language(self, lang: str) -> None:
        if lang == self.native_lang:
            raise ConfigError(f"{lang} is the native language: it uses CLIP's own path and has no acquirers")
        if lang not in self.acquirers:
            self.acquirers[lang] = AcquirerStack(self.tower.width, self.tower.num_blocks, self.hidden, self.acquirer)

    def tokenize(self, texts: list[str], lang: str) -> torch.Tensor:
        """Texts of one language -> token ids [B, L] for that language's path."""
        if lang == self.native_lang:
            return self.clip.tokenizer(list(texts))
        self._check_lang(lang)
        return self.non_native(list(texts), context_length=self.tower.context_length)

    def encode_tokens(self, tokens: torch.Tensor, lang: str) -> torch.Tensor:
        """Token ids [B, L] of one language -> unnormalised text features [B, D]."""
        if lang == self.native_lang:
            return self.tower.encode(*trim_to_lengths(tokens, self.clip.end_token_id))
        self._check_lang(lang)
        tokens, lengths = trim_to_lengths(tokens, self.non_native.end_token_id)
        stack = self.acquirers[lang]
        return self.tower.forward_embeddings(self.embedding(tokens), lengths, after_block=stack if len(stack) else None)

    def encode(self, texts: list[str], lang: str) -> torch.Tensor:
        device = self.embedding.table.weight.device
        return self.encode_tokens(self.tokenize(texts, lang).to(device), lang)

    def _check_lang(self, lang: str) -> None:
        if lang not in self.acquirers:
            raise ConfigError(f"language {lang!r} has no acquirers in this encoder (has: "
                              f"{', '.join([self.native_lang] + self.languages)})")

    # --- what a checkpoint holds ------------------------------------------------------------------------------

    def trainable_tensors(self, languages: list[str] | None = None, embedding: bool = True) -> dict[str, nn.Parameter]:
        """Parameters to train, by checkpoint key: the acquirers of ``languages`` (default all) and, with
        ``embedding``, the shared non-native embedding and its projection."""
        chosen = self.languages if languages is None else languages
        params = {}
        if embedding:
            params.update({f"embedding.{k}": p for k, p in self.embedding.named_parameters()})
        for lang in chosen:
            self._check_lang(lang)
            params.update({f"acquirers.{lang}.{k}": p for k, p in self.acquirers[lang].named_parameters()})
        return params

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {k: p.detach() for k, p in self.trainable_tensors().items()}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], strict: bool = True) -> None:
        own = self.trainable_tensors()
        missing = [k for k in own if k not in tensors]
        unexpected = [k for k in tensors if k not in own]
        if strict and (missing or unexpected):
            raise ConfigError(f"checkpoint tensors do not match the encoder (missing {missing[:3]}, unexpected "
                              f"{unexpected[:3]})")
        with torch.no_grad():
            for key, value in tensors.items():
                if key in own:
                    own[key].copy_(value)

    def checkpoint_config(self) -> dict:
        if not self.clip.spec.get("pretrained") and not artifacts.is_artifact(self.clip.spec.get("model", "")):
            raise ConfigError("the base CLIP has random weights, so a checkpoint could not name it; train or save "
                              "it first (mltk pretrain) and build the encoder on that checkpoint")
        return {
            "format": CHECKPOINT_FORMAT,
            "base": {k: v for k, v in self.clip.spec.items() if k in ("model", "pretrained")},
            "native_lang": self.native_lang,
            "languages": self.languages,
            "non_native": {"kind": self.non_native.kind, "source": self.non_native.source,
                           "vocab_size": self.non_native.vocab_size,
                           "embed_dim": self.embedding.table.embedding_dim},
            "acquirer_hidden": self.hidden,
            "acquirer": self.acquirer,
        }


def build_encoder(base_model: str, base_pretrained: str | None, non_native_source: str, languages: list[str],
                  init_embeddings: bool = False, device: str | torch.device = "cpu",
                  hidden: int = ACQUIRER_HIDDEN, embed_dim: int | None = None,
                  acquirer: str = "mlp") -> LanguageAcquisitionEncoder:
    """A fresh encoder over a frozen CLIP. ``init_embeddings`` copies the word embeddings of the transformers
    model behind the tokenizer (M-BERT in the paper)."""
    clip = load_clip(base_model, base_pretrained, device=device)
    tokenizer = load_non_native_tokenizer(non_native_source)
    init = tokenizer.word_embeddings() if init_embeddings and tokenizer.kind == "hf" else None
    return LanguageAcquisitionEncoder(clip, tokenizer, languages, embed_dim=embed_dim, hidden=hidden,
                                      embedding_init=init, acquirer=acquirer).to(device)


def load_encoder(path: str | Path, device: str | torch.device = "cpu") -> LanguageAcquisitionEncoder:
    """Rebuild an encoder from an MLA checkpoint artifact (frozen base named in its checkpoint config)."""
    tensors, config = artifacts.load_checkpoint(path)
    if config.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(f"not an MLA checkpoint (format {config.get('format')!r})", path)
    clip = load_clip(config["base"]["model"], config["base"].get("pretrained"), device=device)
    tokenizer = load_non_native_tokenizer(config["non_native"]["source"])
    if tokenizer.vocab_size != config["non_native"]["vocab_size"]:
        raise ConfigError(f"tokenizer {config['non_native']['source']} has {tokenizer.vocab_size} tokens, the "
                          f"checkpoint was trained with {config['non_native']['vocab_size']}", path)
    encoder = LanguageAcquisitionEncoder(clip, tokenizer, config["languages"],
                                         embed_dim=config["non_native"]["embed_dim"],
                                         hidden=config["acquirer_hidden"], native_lang=config["native_lang"],
                                         acquirer=config.get("acquirer", "mlp"))
    encoder.load_state_tensors(tensors)
    return encoder.to(device)


def save_encoder(encoder: LanguageAcquisitionEncoder, out_dir: str | Path, tensors: dict[str, torch.Tensor] | None = None,
                 **writer_kwargs) -> Path:
    """Write an MLA checkpoint artifact: trained tensors only (safetensors) plus the checkpoint config naming the base."""
    return artifacts.write_checkpoint(out_dir, tensors if tensors is not None else encoder.state_tensors(),
                                      encoder.checkpoint_config(), **writer_kwargs)
