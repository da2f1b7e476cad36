"""CLL-CLIP's text encoder: a frozen text tower reading an expandable token-embedding table.

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning" (AAAI
2024). The tower (positions, blocks, final norm, projection) stays frozen; its token-embedding table is replaced
by a trainable table ``[V_t, W]`` that grows with each task's vocabulary (``mltk.vocab``: old ids never change, new
tokens are appended). Every language is tokenised with the current vocabulary; English keeps CLIP's ids unless a
later task's merges re-merge its rare words (``--protect-lang en`` prevents that, see ``mltk.vocab``). The
features are pooled at the FIRST end token: after expansion the end token is no longer the largest id.

The tower is a CLIP's own (byte-level BPE) or a text-only Hugging Face tower (``mltk.models.hf_text``, e.g.
all-MiniLM-L6-v2) whose WordPiece vocabulary grows the same way (``mltk.vocab.wordpiece``); there the table
replaces the word embeddings only (position and token-type embeddings and the embedding LayerNorm stay the
tower's), rows are padded with the pad id and pooled as the tower pools (mean over the real tokens).

A continual-learning method (``mltk.cll_clip.base.ContinualMethod``) may change the forward (adapters, LoRA,
prompts); plain CLL-CLIP runs the tower as it is.

Checkpoint format ``cll`` (its checkpoint config): ``base`` (the frozen tower, as ``load_text_base`` takes it),
``tokenizer`` (``clip-bpe`` or ``wordpiece``), ``vocab``
(the vocabulary artifact, a path relative to the checkpoint), ``method`` (name, options, structure),
``languages`` (tasks trained, in order) and ``needs_task_identity``; ``model.safetensors`` holds ``table``
[V, W], ``logit_scale`` (log 1/T, whichever form trained T) and ``method.*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk import artifacts
from mltk.cll_clip.base import ContinualMethod
from mltk.cll_clip.options import options_dict
from mltk.core.errors import ConfigError
from mltk.losses import LogitScale, Temperature
from mltk.models.clip import ClipBundle
from mltk.models.towers import TextBase, clip_text_tower, load_text_base
from mltk.recipes import load_recipe
from mltk.vocab import load_tokenizer

CHECKPOINT_FORMAT = "cll"
VOCAB_SUBDIR = "vocab"


def check_growable(base: TextBase | None, model: str) -> None:
    """CLL-CLIP grows a vocabulary behind the tower's word-embedding table: CLIP's byte-level BPE inside open_clip's
    own text tower, or the WordPiece vocabulary of a text-only Hugging Face tower (a transformers /
    sentence-transformers folder such as all-MiniLM-L6-v2; ``mltk.vocab.wordpiece``, which refuses other tokenizer
    families). A CLIP whose text tower is a Hugging Face encoder (``xlm-roberta-base-ViT-B-32``: SentencePiece)
    cannot be grown: refuse it in one line before any work."""
    if base is None or (base.clip is not None and base.hugging_face):
        raise ConfigError(
            f"train-continual grows CLIP's byte-level BPE inside open_clip's text tower or a text-only "
            f"Hugging Face tower's WordPiece vocabulary; {model!r} is a CLIP with a Hugging Face text "
            f"tower (WordPiece/SentencePiece vocabulary) it cannot grow"
        )
    if base.clip is None:
        from mltk.vocab.wordpiece import tower_tokenizer

        tower_tokenizer(base.tower, model)  # refuses the tokenizers it cannot grow


def check_growable_name(model: str) -> None:
    """``check_growable`` before loading anything, for the models whose tower family the name tells: a CLIP with
    a Hugging Face text tower is refused (a text-only folder is checked once its tokenizer is loaded)."""
    from mltk.models.clip import is_hf_model_folder
    from mltk.models.towers import names_hf_tower

    if names_hf_tower(model) and not is_hf_model_folder(model):
        check_growable(None, model)


def load_growable_base(model: str, pretrained: str | None, device) -> TextBase:
    """The frozen base of ``train-continual`` (a CLIP, or a text-only Hugging Face tower), refused in one line when
    its vocabulary cannot be grown."""
    check_growable_name(model)
    base = load_text_base(model, pretrained, device=device)
    check_growable(base, model)
    return base


def root_vocabulary(base: TextBase):
    """The vocabulary a chain of tasks grows from: CLIP's own, or the Hugging Face tower's WordPiece vocabulary;
    refused when the tower's word table does not have one row per token."""
    from mltk.vocab import clip_vocabulary, tower_vocabulary

    root = clip_vocabulary() if base.clip is not None else tower_vocabulary(base.tower, base.spec.get("model"))
    rows = base.tower.token_embedding.weight.shape[0]
    if rows != root.vocab_size:
        raise ConfigError(
            f"the base model's word table has {rows} rows but its vocabulary {root.vocab_size} tokens: "
            f"CLL-CLIP appends new tokens after the last row"
        )
    return root


class ContinualTextEncoder(nn.Module):
    """Frozen text tower + trainable table [V, W] + learnable temperature + a method's own modules.

    ``base``: a ``TextBase`` (``mltk.models.towers``; a CLIP's own tower, or a text-only Hugging Face tower), or a
    loaded CLIP. On a Hugging Face tower the table replaces the word embeddings only: the tower still adds its
    position and token-type embeddings and its embedding LayerNorm (``HFTextTower.forward_embeddings``)."""

    languages = None  # reads every language; methods that route by language say so (needs_task_identity)
    native_trains = True  # English reads the same trained table as every other language (not in a text-only run)
    native_lang = "en"

    def __init__(
        self,
        base: TextBase | ClipBundle,
        tokenizer,
        method: ContinualMethod,
        table: torch.Tensor | None = None,
        *,
        init_temperature: float | None = None,
        temperature: LogitScale | Temperature | None = None,
    ):
        super().__init__()
        if isinstance(base, ClipBundle):  # checked before its tower is built: an HF-tower CLIP has no open_clip one
            check_growable(TextBase(None, dict(base.spec), base), base.spec.get("model", "the base model"))
            base = TextBase(clip_text_tower(base, end_token_id=tokenizer.eot_token_id), dict(base.spec), base)
        check_growable(base, base.spec.get("model", "the base model"))
        self.base = base
        self.clip = base.clip  # None on a text-only tower
        self.native_trains = base.clip is not None  # text only: English is the teacher (``_teacher_reads``)
        self.tower = base.tower
        self.tower.requires_grad_(False)
        device = self.tower.token_embedding.weight.device
        weight = self.tower.token_embedding.weight if table is None else table
        self.table = nn.Parameter(weight.detach().to(device=device, dtype=torch.float32).clone())
        # the learnable temperature: given (train-continual's form, ``mltk.losses.make_temperature``), or log(1/T)
        if temperature is None and init_temperature is None:
            raise TypeError("ContinualTextEncoder needs init_temperature (the recipe's) or a temperature module")
        self.logit_scale = (LogitScale(init_temperature) if temperature is None else temperature).to(device)
        self.method = method.to(device)
        self.tokenizer = tokenizer
        self.trained_languages: list[str] = []
        self._check_vocabulary()

    def train(self, mode: bool = True) -> "ContinualTextEncoder":
        """Training mode for what trains; the frozen tower stays in evaluation mode (a BERT tower's dropout off)."""
        super().train(mode)
        self.tower.eval()
        return self

    @property
    def vocab_size(self) -> int:
        return self.table.shape[0]

    def _check_vocabulary(self) -> None:
        if self.tokenizer.vocab_size != self.vocab_size:
            raise ConfigError(
                f"the vocabulary has {self.tokenizer.vocab_size} tokens but the embedding table {self.vocab_size} rows"
            )

    def grow(self, tokenizer, new_rows: torch.Tensor) -> None:
        """Switch to the next task's vocabulary: append ``new_rows`` [V_t - V_{t-1}, W] to the table."""
        with torch.no_grad():
            grown = torch.cat([self.table.detach(), new_rows.to(self.table.device, self.table.dtype)])
        self.table = nn.Parameter(grown)
        self.tokenizer = tokenizer
        self._check_vocabulary()

    def _teacher_reads(self, lang: str | None) -> bool:
        """A text-only run's English is its teacher, the frozen tower with its own tokenizer and table (the tasks
        are the other languages), so ``evaluate`` on its checkpoint scores English as the run did. On a CLIP,
        English is the first task and reads the trained table like every language."""
        return lang == self.native_lang and not self.native_trains

    def tokenize(self, texts: list[str], lang: str | None = None) -> torch.Tensor:
        """Texts (any language) -> ids [B, context - reserved] with the current vocabulary."""
        if self._teacher_reads(lang):
            return self.tower.tokenize(list(texts))[0]
        return self.tokenizer(list(texts), context_length=self.tower.context_length - self.method.reserved_positions)

    def encode_tokens(self, tokens: torch.Tensor, lang: str | None = None) -> torch.Tensor:
        """Token ids [B, L] -> unnormalised text features [B, D] (``lang`` selects a language's adapter)."""
        if self._teacher_reads(lang):
            return self.tower.encode(tokens, self.tower.lengths(tokens))
        lengths = self.tower.lengths(tokens)  # [B] real tokens (CLIP: up to the first end token)
        tokens = tokens[:, : int(lengths.max())]
        return self.method.encode(self, F.embedding(tokens, self.table), lengths, lang)

    def encode(self, texts: list[str], lang: str | None = None) -> torch.Tensor:
        return self.encode_tokens(self.tokenize(texts, lang).to(self.table.device), lang)

    def trainable_tensors(self, languages: list[str] | None = None, embedding: bool = True) -> dict[str, nn.Parameter]:
        """What a stage that tunes this tower trains (``train-ccrk``): the one token table every language reads."""
        return {"table": self.table}

    # --- checkpoints ------------------------------------------------------------------------------------------

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {
            "table": self.table.detach(),
            "logit_scale": self.logit_scale.log_scale_value(),
            **{f"method.{k}": v for k, v in self.method.state_tensors().items()},
        }

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            if tuple(tensors["table"].shape) != tuple(self.table.shape):
                raise ConfigError(
                    f"checkpoint table has shape {tuple(tensors['table'].shape)}, the encoder {tuple(self.table.shape)}"
                )
            self.table.copy_(tensors["table"])
            self.logit_scale.load_log_scale(tensors["logit_scale"])
        self.method.load_state_tensors({k[len("method.") :]: v for k, v in tensors.items() if k.startswith("method.")})

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "base": base_spec(self.base.spec),
            "tokenizer": getattr(self.tokenizer, "kind", "clip-bpe"),
            "vocab": VOCAB_SUBDIR,
            "vocab_size": self.vocab_size,
            "languages": list(self.trained_languages),
            "method": {
                "name": self.method.name,
                "options": options_dict(self.method.options),
                "structure": self.method.structure(),
            },
            "needs_task_identity": self.method.needs_task_identity,
            "pooling": "first end token" if self.tower.pooling == "end" else self.tower.pooling,
            "english": "the trained table" if self.native_trains else "the frozen tower (the teacher)",
        }


def base_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """How a checkpoint names its frozen base (``TextBase.spec``); random weights cannot be named (save them as a
    checkpoint). A transformers folder holds its weights."""
    from mltk.models.clip import is_hf_model_folder

    model = spec.get("model", "")
    if not spec.get("pretrained") and not artifacts.is_artifact(model) and not is_hf_model_folder(model):
        raise ConfigError(
            "the base CLIP has random weights, so a checkpoint could not name it; train or save it "
            "first (mltk pretrain) and train on that checkpoint"
        )
    return {k: v for k, v in spec.items() if k in ("model", "pretrained")}


# Checkpoints written before each method had its own options recorded one flat set for all methods; the keys that
# still mean the same thing are carried over (method, old key) -> new key. The old MLA adapters sat after the block.
LEGACY_KEYS = {
    ("oewc", "ewc_lambda"): "penalty",
    ("oewc", "ewc_gamma"): "gamma",
    ("oewc", "fisher_batches"): "fisher_batches",
    ("er", "memory_size"): "memory_size",
    ("er", "replay_batch"): "replay_batch",
    ("der", "memory_size"): "memory_size",
    ("der", "replay_batch"): "replay_batch",
    ("der", "der_alpha"): "alpha",
    ("codaprompt", "coda_components"): "components",
    ("codaprompt", "coda_length"): "length",
    ("codaprompt", "coda_layers"): "layers",
}
LEGACY_UNREADABLE = ("lora", "ptuning", "dualprompt")  # their tensors changed shape (task-specific, prefix lengths)
# Options added later (when the authors' forms became the defaults), with the value that keeps the meaning of a
# checkpoint recorded before they existed.
ADDED_OPTIONS = {
    "oewc": {"half": True},
    "er": {"replay_loss": "separate"},
    "der": {"replay_loss": "separate"},
    "mla": {"init": "zero"},
    "ptuning": {"separate_kv": False},
    "dualprompt": {"key_init": "mean", "candidates": "trained"},
}


def legacy_options(name: str, raw: dict[str, Any], width: int, path: Path) -> dict[str, Any]:
    """The options of a checkpoint in the current form: as recorded, or translated from the old flat set."""
    if "ewc_lambda" not in raw:  # the current form (perhaps from before some options existed)
        return {**ADDED_OPTIONS.get(name, {}), **raw}
    if name in LEGACY_UNREADABLE:
        raise ConfigError(
            f"this {name} checkpoint was written by an older mltk whose {name} differs from the "
            f"paper's (now task-specific or with other prompt shapes); train it again",
            path,
        )
    options = {new: raw[old] for (method, old), new in LEGACY_KEYS.items() if method == name and old in raw}
    if name == "mla":
        hidden = int(raw.get("adapter_hidden", 256))
        if width % hidden:
            raise ConfigError(
                f"this mla checkpoint's adapters ({hidden} wide) are no width / reduction of the "
                f"{width}-wide tower; train it again",
                path,
            )
        options = {"position": "block", "reduction": width // hidden}
    # the options the flat set did not record had the values the cll-clip recipe gives them now
    return {**load_recipe("cll-clip").methods.get(name, {}), **ADDED_OPTIONS.get(name, {}), **options}


def load_continual_encoder(path: str | Path, device: str | torch.device = "cpu") -> ContinualTextEncoder:
    """Rebuild an encoder from a ``cll`` checkpoint (``mltk train-continual``, or one task of it)."""
    from mltk.cll_clip.methods import make_method

    path = Path(path)
    tensors, config = artifacts.load_checkpoint(path)
    if config.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(f"not a train-continual checkpoint (format {config.get('format')!r})", path)
    base = load_text_base(config["base"]["model"], config["base"].get("pretrained"), device=device)
    tokenizer = load_tokenizer(path / config["vocab"])
    spec = config["method"]
    width = base.tower.width
    method = make_method(spec["name"], legacy_options(spec["name"], spec.get("options", {}), width, path), base.tower)
    method.build(spec.get("structure", {}))
    # the temperature the checkpoint holds (load_state_tensors then copies its exact tensor)
    saved_temperature = float(1.0 / tensors["logit_scale"].exp())
    encoder = ContinualTextEncoder(base, tokenizer, method, table=tensors["table"], init_temperature=saved_temperature)
    encoder.load_state_tensors(tensors)
    encoder.trained_languages = list(config.get("languages", []))
    return encoder.to(device)
