"""Text encoders behind one interface (``TextEncoder``), and loading one from a model name or checkpoint: the home
that ``mltk.encode.texts`` (batched encoding), ``mltk.evaluate`` and ``mltk.index.faiss_index`` share.

``load_text_encoder(model)`` (and ``load_model_encoder``, which first names a missing path as such) accepts:

- an MLA checkpoint artifact (``train-nlt``/``train-le``): English through CLIP, other languages through their
  acquirers;
- a frozen text tower as ``mltk.models.towers.load_text_base`` reads it (an mltk ``pretrain`` checkpoint, an
  open_clip name with ``pretrained``, an ``hf-hub:`` name, a transformers / sentence-transformers folder): every
  language through the tower's own tokenizer, the baseline of a model reading a language it was not taught;
- any other checkpoint format registered in ``TEXT_ENCODER_LOADERS`` (train-continual, train-ccrk add theirs).

Every encoder has ``tokenize(texts, lang) -> tokens [B, L]``, ``encode_tokens(tokens, lang) -> Tensor [B, D]``
(unnormalised) and ``languages`` (``None`` when it reads any language); each reaches its text tower only through
``mltk.models.text.TextTower``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import torch

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.models.clip import ClipBundle, is_hf_model_folder, load_clip
from mltk.models.towers import TextBase, base_from_clip, load_text_base


class TextEncoder(Protocol):
    languages: list[str] | None

    def tokenize(self, texts: list[str], lang: str) -> torch.Tensor: ...

    def encode_tokens(self, tokens: torch.Tensor, lang: str) -> torch.Tensor: ...


class TowerTextEncoder(torch.nn.Module):
    """A frozen text tower alone: every language through the tower's own tokenizer and forward (trimmed)."""

    languages = None

    def __init__(self, base: TextBase):
        super().__init__()
        self.base = base
        self.clip = base.clip
        self.tower = base.tower

    def tokenize(self, texts: list[str], lang: str) -> torch.Tensor:
        return self.tower.tokenize(list(texts))[0]  # [B, L] padded on the right

    def encode_tokens(self, tokens: torch.Tensor, lang: str) -> torch.Tensor:
        lengths = self.tower.lengths(tokens)
        return self.tower.encode(tokens[:, : int(lengths.max())], lengths)


class ClipTextEncoder(TowerTextEncoder):
    """A loaded CLIP's text tower (either family) as a text encoder."""

    def __init__(self, clip: ClipBundle):
        super().__init__(base_from_clip(clip))


def _load_mla(path: Path, device) -> TextEncoder:
    from mltk.models.multilingual import load_encoder

    return load_encoder(path, device=device)


def _load_cll(path: Path, device) -> TextEncoder:
    from mltk.cll_clip.model import load_continual_encoder

    return load_continual_encoder(path, device)


# checkpoint config "format" -> loader(path, device); other stages register their formats here.
TEXT_ENCODER_LOADERS: dict[str, Callable[[Path, torch.device], TextEncoder]] = {
    "mla": _load_mla,
    "open_clip": lambda path, device: ClipTextEncoder(load_clip(str(path), device=device)),
    "cll": _load_cll,
}


def load_text_encoder(
    model: str | Path, pretrained: str | None = None, device: str | torch.device = "cpu"
) -> TextEncoder:
    """The text encoder behind ``model`` as the stages use it: an MLA or CLL-CLIP checkpoint (every language
    through its own path), a whole-CLIP checkpoint, an open_clip name with ``pretrained``, or a transformers /
    sentence-transformers folder; ``encode_tokens`` gives unnormalised torch features. ``mltk.load_model`` wraps
    it for users (normalised numpy, ``mltk.encode.model``)."""
    path = Path(model)
    if artifacts.is_artifact(path):
        fmt = artifacts.read_checkpoint_config(path).get("format")
        if fmt not in TEXT_ENCODER_LOADERS:
            raise ConfigError(
                f"checkpoint format {fmt!r} has no text encoder (known: {', '.join(TEXT_ENCODER_LOADERS)})", path
            )
        encoder = TEXT_ENCODER_LOADERS[fmt](path, torch.device(device))
    else:
        encoder = TowerTextEncoder(load_text_base(str(model), pretrained, device=device))
    encoder.eval()
    return encoder


def load_model_encoder(model: str, pretrained: str | None, device: torch.device) -> TextEncoder:
    """A text encoder from a checkpoint artifact (any format in ``TEXT_ENCODER_LOADERS``), a transformers /
    sentence-transformers folder, or an open_clip architecture name (with ``pretrained`` weights). A path that
    does not exist is named as such instead of being taken for an unknown architecture."""
    path = Path(model)
    if is_hf_model_folder(path):  # a transformers / sentence-transformers folder: a text tower, no artifact
        return load_text_encoder(model, pretrained, device=device)
    if pretrained is None and (path.exists() or os.sep in model or model.startswith(".")):
        artifacts.read_manifest(path, "checkpoint")
    return load_text_encoder(model, pretrained, device=device)


def check_model_languages(encoder: TextEncoder, languages: Sequence[str], model: str) -> None:
    """Every language must have a path through the encoder (an encoder whose ``languages`` is None reads any)."""
    if encoder.languages is None:
        return
    known = [getattr(encoder, "native_lang", "en"), *encoder.languages]
    unknown = [lang for lang in languages if lang not in known]
    if unknown:
        raise ConfigError(
            f"the model has no path for language(s) {', '.join(unknown)} (it reads "
            f"{', '.join(known)}); pick languages with --lang",
            model,
        )


def readable_languages(
    encoder: TextEncoder, requested: Sequence[str], available: Sequence[str], model: str
) -> list[str]:
    """The one rule of every command that reads text through a model: the ``requested`` languages (each must
    have a path through the model), or by default the ``available`` ones the model reads, saying on stderr which
    it skipped; a model that reads none of them is refused in one line."""
    if requested:
        check_model_languages(encoder, requested, model)
        return list(requested)
    if encoder.languages is None:
        return list(available)
    known = [getattr(encoder, "native_lang", "en"), *encoder.languages]
    kept = [lang for lang in available if lang in known]
    skipped = [lang for lang in available if lang not in known]
    if not kept:
        raise ConfigError(
            f"the model reads none of the languages here ({', '.join(available)}; it reads {', '.join(known)})", model
        )
    if skipped:
        from mltk.core.runtime import log

        log(
            f"languages: {', '.join(kept)} (skipped {', '.join(skipped)}: {model} has no path for them; pick "
            f"languages with --lang)"
        )
    return kept
