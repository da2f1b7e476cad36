"""CLL-CLIP's text encoder: the frozen CLIP text tower reading an expandable token-embedding table.

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning" (AAAI
2024). The tower (positions, blocks, final norm, projection) stays frozen; its token-embedding table is replaced
by a trainable table ``[V_t, W]`` that grows with each task's vocabulary (``mltk.vocab``: old ids never change, new
tokens are appended). Every language is tokenised with the current vocabulary; English keeps CLIP's ids unless a
later task's merges re-merge its rare words (``--protect-lang en`` prevents that, see ``mltk.vocab``). The
features are pooled at the FIRST end token: after expansion the end token is no longer the largest id.

A continual-learning method (``mltk.continual.base.ContinualMethod``) may change the forward (adapters, LoRA,
prompts); plain CLL-CLIP runs the tower as it is.

Checkpoint format ``cll`` (its checkpoint config): ``base`` (the frozen CLIP, as ``load_clip`` takes it), ``vocab``
(the vocabulary artifact, a path relative to the checkpoint), ``method`` (name, options, structure),
``languages`` (tasks trained, in order) and ``needs_task_identity``; ``model.safetensors`` holds ``table``
[V, W], ``logit_scale`` (log 1/T) and ``method.*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk import artifacts
from mltk.continual.base import ContinualMethod
from mltk.continual.options import options_dict
from mltk.errors import ConfigError
from mltk.losses import LogitScale
from mltk.models.clip import ClipBundle, load_clip
from mltk.models.text import trim_to_lengths
from mltk.models.towers import clip_text_tower
from mltk.vocab import ClipBpeTokenizer, load_tokenizer

CHECKPOINT_FORMAT = "cll"
VOCAB_SUBDIR = "vocab"
INIT_TEMPERATURE = 0.07


def check_growable(clip: ClipBundle | None, model: str) -> None:
    """CLL-CLIP grows CLIP's byte-level BPE (new merges and tokens appended, old ids kept) and reaches inside
    open_clip's blocks for its prompt / prefix / LoRA methods. A Hugging Face text tower (WordPiece or SentencePiece
    vocabulary, transformers layers) supports neither: refuse it in one line before any work."""
    from mltk.models.clip import has_hf_text_tower

    if clip is None or has_hf_text_tower(clip.model):
        raise ConfigError(f"train-continual grows CLIP's byte-level BPE vocabulary inside open_clip's text tower; "
                          f"{model!r} has a Hugging Face text tower (WordPiece/SentencePiece vocabulary) it cannot "
                          f"grow")


def check_growable_name(model: str) -> None:
    """``check_growable`` before loading anything, for the models whose tower family the name tells."""
    from mltk.models.towers import names_hf_tower

    if names_hf_tower(model):
        check_growable(None, model)


def load_growable_clip(model: str, pretrained: str | None, device) -> ClipBundle:
    """The base CLIP of ``train-continual``, refused in one line when its text tower cannot be grown."""
    check_growable_name(model)
    clip = load_clip(model, pretrained, device=device)
    check_growable(clip, model)
    return clip


class ContinualTextEncoder(nn.Module):
    """Frozen CLIP text tower + trainable table [V, W] + learnable temperature + a method's own modules."""

    languages = None  # reads every language; methods that route by language say so (needs_task_identity)
    native_trains = True  # English reads the same trained table as every other language
    native_lang = "en"

    def __init__(self, clip: ClipBundle, tokenizer: ClipBpeTokenizer, method: ContinualMethod,
                 table: torch.Tensor | None = None, init_temperature: float = INIT_TEMPERATURE):
        super().__init__()
        check_growable(clip, clip.spec.get("model", "the base model"))
        self.clip = clip
        self.tower = clip_text_tower(clip, end_token_id=tokenizer.eot_token_id)
        self.tower.requires_grad_(False)
        device = clip.model.positional_embedding.device
        weight = clip.model.token_embedding.weight if table is None else table
        self.table = nn.Parameter(weight.detach().to(device=device, dtype=torch.float32).clone())
        self.logit_scale = LogitScale(init_temperature).to(device)
        self.method = method.to(device)
        self.tokenizer = tokenizer
        self.trained_languages: list[str] = []
        self._check_vocabulary()

    @property
    def vocab_size(self) -> int:
        return self.table.shape[0]

    def _check_vocabulary(self) -> None:
        if self.tokenizer.vocab_size != self.vocab_size:
            raise ConfigError(f"the vocabulary has {self.tokenizer.vocab_size} tokens but the embedding table "
                              f"{self.vocab_size} rows")

    def grow(self, tokenizer: ClipBpeTokenizer, new_rows: torch.Tensor) -> None:
        """Switch to the next task's vocabulary: append ``new_rows`` [V_t - V_{t-1}, W] to the table."""
        with torch.no_grad():
            grown = torch.cat([self.table.detach(), new_rows.to(self.table.device, self.table.dtype)])
        self.table = nn.Parameter(grown)
        self.tokenizer = tokenizer
        self._check_vocabulary()

    def tokenize(self, texts: list[str], lang: str | None = None) -> torch.Tensor:
        """Texts (any language) -> ids [B, context - reserved] with the current vocabulary."""
        return self.tokenizer(list(texts), context_length=self.tower.context_length - self.method.reserved_positions)

    def encode_tokens(self, tokens: torch.Tensor, lang: str | None = None) -> torch.Tensor:
        """Token ids [B, L] -> unnormalised text features [B, D] (``lang`` selects a language's adapter)."""
        tokens, lengths = trim_to_lengths(tokens, self.tokenizer.eot_token_id)
        return self.method.encode(self, F.embedding(tokens, self.table), lengths, lang)

    def encode(self, texts: list[str], lang: str | None = None) -> torch.Tensor:
        return self.encode_tokens(self.tokenize(texts, lang).to(self.table.device), lang)

    def trainable_tensors(self, languages: list[str] | None = None, embedding: bool = True) -> dict[str, nn.Parameter]:
        """What a stage that tunes this tower trains (``train-ccrk``): the one token table every language reads."""
        return {"table": self.table}

    # --- checkpoints ------------------------------------------------------------------------------------------

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"table": self.table.detach(), "logit_scale": self.logit_scale.log_scale.detach(),
                **{f"method.{k}": v for k, v in self.method.state_tensors().items()}}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            if tuple(tensors["table"].shape) != tuple(self.table.shape):
                raise ConfigError(f"checkpoint table has shape {tuple(tensors['table'].shape)}, the encoder "
                                  f"{tuple(self.table.shape)}")
            self.table.copy_(tensors["table"])
            self.logit_scale.log_scale.copy_(tensors["logit_scale"])
        self.method.load_state_tensors({k[len("method."):]: v for k, v in tensors.items() if k.startswith("method.")})

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "base": base_spec(self.clip),
            "vocab": VOCAB_SUBDIR,
            "vocab_size": self.vocab_size,
            "languages": list(self.trained_languages),
            "method": {"name": self.method.name, "options": options_dict(self.method.options),
                       "structure": self.method.structure()},
            "needs_task_identity": self.method.needs_task_identity,
            "pooling": "first end token",
        }


def base_spec(clip: ClipBundle) -> dict[str, Any]:
    """How a checkpoint names its frozen CLIP; random weights cannot be named (save them as a checkpoint)."""
    if not clip.spec.get("pretrained") and not artifacts.is_artifact(clip.spec.get("model", "")):
        raise ConfigError("the base CLIP has random weights, so a checkpoint could not name it; train or save it "
                          "first (mltk pretrain) and train on that checkpoint")
    return {k: v for k, v in clip.spec.items() if k in ("model", "pretrained")}


# Checkpoints written before each method had its own options recorded one flat set for all methods; the keys that
# still mean the same thing are carried over (method, old key) -> new key. The old MLA adapters sat after the block.
LEGACY_KEYS = {("oewc", "ewc_lambda"): "penalty", ("oewc", "ewc_gamma"): "gamma", ("oewc", "fisher_batches"):
               "fisher_batches", ("er", "memory_size"): "memory_size", ("er", "replay_batch"): "replay_batch",
               ("der", "memory_size"): "memory_size", ("der", "replay_batch"): "replay_batch",
               ("der", "der_alpha"): "alpha", ("codaprompt", "coda_components"): "components",
               ("codaprompt", "coda_length"): "length", ("codaprompt", "coda_layers"): "layers"}
LEGACY_UNREADABLE = ("lora", "ptuning", "dualprompt")  # their tensors changed shape (task-specific, prefix lengths)


def legacy_options(name: str, raw: dict[str, Any], width: int, path: Path) -> dict[str, Any]:
    """The options of a checkpoint in the current form: as recorded, or translated from the old flat set."""
    if "ewc_lambda" not in raw:  # the current form
        return raw
    if name in LEGACY_UNREADABLE:
        raise ConfigError(f"this {name} checkpoint was written by an older mltk whose {name} differs from the "
                          f"paper's (now task-specific or with other prompt shapes); train it again", path)
    options = {new: raw[old] for (method, old), new in LEGACY_KEYS.items() if method == name and old in raw}
    if name == "mla":
        hidden = int(raw.get("adapter_hidden", 256))
        if width % hidden:
            raise ConfigError(f"this mla checkpoint's adapters ({hidden} wide) are no width / reduction of the "
                              f"{width}-wide tower; train it again", path)
        options = {"position": "block", "reduction": width // hidden}
    return options


def load_continual_encoder(path: str | Path, device: str | torch.device = "cpu") -> ContinualTextEncoder:
    """Rebuild an encoder from a ``cll`` checkpoint (``mltk train-continual``, or one task of it)."""
    from mltk.continual import make_method

    path = Path(path)
    tensors, config = artifacts.load_checkpoint(path)
    if config.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(f"not a train-continual checkpoint (format {config.get('format')!r})", path)
    clip = load_clip(config["base"]["model"], config["base"].get("pretrained"), device=device)
    tokenizer = load_tokenizer(path / config["vocab"])
    spec = config["method"]
    width = clip_text_tower(clip).width
    method = make_method(spec["name"], legacy_options(spec["name"], spec.get("options", {}), width, path), clip)
    method.build(spec.get("structure", {}))
    encoder = ContinualTextEncoder(clip, tokenizer, method, table=tensors["table"])
    encoder.load_state_tensors(tensors)
    encoder.trained_languages = list(config.get("languages", []))
    return encoder.to(device)
