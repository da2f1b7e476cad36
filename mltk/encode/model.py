"""``mltk.load_model``: one encoder for every model mltk loads, used as ``SentenceTransformer`` is::

    model = mltk.load_model("runs/quickstart/mla")
    model.encode(["a red circle", "a blue square"])   # float32 [2, D], L2-normalised, English
    model.encode(["ein roter Kreis"], lang="de")       # German through the model's German path
    model.encode("a red circle")                       # one sentence -> [D]
    model.encode_images(["cat.png", pil_image])        # float32 [N, D], where the model has an image tower

It reads an MLA checkpoint (``train-nlt``/``train-le``, and ``train-ccrk`` on acquirers), a CLL-CLIP checkpoint
(``train-continual``, and ``train-ccrk`` on its table), a whole-CLIP checkpoint (``pretrain``), an open_clip name
with ``pretrained`` weights, and a transformers / sentence-transformers folder (a text tower alone). The vectors
are detached float32 numpy, L2-normalised unless ``normalize=False``, as ``SentenceTransformer.encode`` returns them.

Images have a method of their own rather than sharing ``encode`` (sentence-transformers' CLIP takes PIL images in
``encode``): a string could be a sentence or an image file, and only text has a language.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, resolve_runtime
from mltk.encode.text_encoders import TextEncoder, check_model_languages, load_model_encoder

DEFAULT_BATCH_SIZE = 32  # sentence-transformers' default


class Encoder:
    """A loaded model's text path (every language it reads) and, where it has one, its image tower.

    It is also a text encoder in mltk's own sense (``tokenize``, ``encode_tokens``, ``languages``), so
    ``mltk.encode_texts`` and ``mltk.encode_captions`` take it as they take the stages' encoders."""

    def __init__(self, text: TextEncoder, name: str, runtime: Runtime):
        self.text = text
        self.name = name
        self.runtime = runtime

    # --- mltk's text-encoder interface, delegated -----------------------------------------------------------

    @property
    def languages(self) -> list[str] | None:
        """The non-native languages with a path of their own (None: the tower reads any language as it is)."""
        return self.text.languages

    @property
    def native_lang(self) -> str:
        """The language the base model was trained in (English for every model mltk trains)."""
        return getattr(self.text, "native_lang", "en")

    def tokenize(self, texts: list[str], lang: str) -> torch.Tensor:
        return self.text.tokenize(texts, lang)  # [B, L]

    def encode_tokens(self, tokens: torch.Tensor, lang: str) -> torch.Tensor:
        return self.text.encode_tokens(tokens, lang)  # [B, D], unnormalised

    # --- the public encode ------------------------------------------------------------------------------------

    @property
    def has_image_tower(self) -> bool:
        """Whether ``encode_images`` works: a CLIP (or a model built on one), not a text tower alone."""
        return getattr(self.text, "clip", None) is not None

    def encode(
        self,
        texts: str | Sequence[str],
        lang: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        normalize: bool = True,
    ) -> np.ndarray:
        """Sentences of one language -> float32 ``[N, D]`` (one string -> ``[D]``), detached, in input order.

        ``lang`` defaults to the model's native language (English); a language the model has no path for is
        refused (``MltkError``) rather than read through another language's path."""
        from mltk.encode.texts import encode_texts

        lang = lang or self.native_lang
        check_model_languages(self, [lang], self.name)
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        _check_batch_size(batch_size)
        vectors = encode_texts(self.text, batch, lang, self.runtime, batch_size, normalize=normalize)  # [N, D]
        return vectors[0] if single else vectors

    @torch.no_grad()
    def encode_images(
        self, images: Sequence, batch_size: int = DEFAULT_BATCH_SIZE, normalize: bool = True
    ) -> np.ndarray:
        """Images (PIL images or image files) -> float32 ``[N, D]``, detached, through the frozen image tower with
        the model's own preprocessing (what ``mltk encode-images`` stores, in float32)."""
        clip = getattr(self.text, "clip", None)
        if clip is None:
            raise ConfigError(
                "is a text tower alone: it has no image tower to encode images with (load a CLIP, or "
                "a model trained on one)",
                self.name,
            )
        _check_batch_size(batch_size)
        pixels = [clip.preprocess(_open_image(image)) for image in images]  # each [3, H, W]
        if not pixels:
            return np.zeros((0, 0), dtype=np.float32)
        out = []
        for start in range(0, len(pixels), batch_size):
            batch = torch.stack(pixels[start : start + batch_size]).to(self.runtime.device)  # [B, 3, H, W]
            with self.runtime.autocast():
                features = clip.model.encode_image(batch).float()  # [B, D]
            out.append((F.normalize(features, dim=-1) if normalize else features).cpu())
        return torch.cat(out).numpy()

    def __repr__(self) -> str:
        return f"Encoder({self.name!r}, languages={self.languages}, image_tower={self.has_image_tower})"


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")


def _open_image(image):
    """A PIL image as it is, or an image file opened; RGB either way."""
    from PIL import Image

    if isinstance(image, (str, os.PathLike)):
        try:
            with Image.open(image) as opened:
                return opened.convert("RGB")
        except OSError as exc:
            raise ConfigError(f"cannot read the image ({type(exc).__name__}: {exc})", image) from None
    if not isinstance(image, Image.Image):
        raise ConfigError(f"an image must be a PIL image or a file path, got {type(image).__name__}")
    return image.convert("RGB")


def load_model(
    path_or_name: str | os.PathLike, pretrained: str | None = None, device: str = "auto", precision: str = "fp32"
) -> Encoder:
    """The model behind ``path_or_name`` as an ``Encoder`` (``encode`` for text, ``encode_images`` for images):
    an MLA, CLL-CLIP or CCR_k checkpoint, a whole-CLIP checkpoint, an open_clip name (with ``pretrained``: a tag or
    a weights file), or a transformers / sentence-transformers folder. ``device`` ``auto`` takes CUDA when there
    is one; ``precision`` ``fp32`` (the default) gives the vectors the stages compute on the CPU."""
    name = os.fspath(path_or_name) if isinstance(path_or_name, Path) else str(path_or_name)
    runtime = resolve_runtime(device, precision)
    encoder = load_model_encoder(name, pretrained, runtime.device)
    return Encoder(encoder, name, runtime)
