"""One way to build CLIP models through open_clip.

A model is named by an open_clip architecture plus a source of weights:

- a pretrained tag, ``load_clip("ViT-B-32-quickgelu", "openai")`` (downloads; the path users with internet rely on);
- a local weights file, ``load_clip("ViT-B-32-quickgelu", "/ckpt/model.safetensors")`` (safetensors or an
  open_clip ``.bin``/``.pth`` state dict; OpenAI TorchScript ``.pt`` files go through open_clip's own loader);
- an mltk checkpoint artifact written by ``mltk pretrain`` (``load_clip("runs/native")``), whose ``config.json``
  names the architecture;
- nothing, for random weights (tests and ``mltk pretrain``).

mltk registers its tiny architectures (``mltk/models/configs/*.json``) with open_clip on import, so
``mltk-tiny`` is built by the very same code as ViT-B/32.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import open_clip
import torch

from mltk import artifacts, policy, schema
from mltk.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "configs"
open_clip.add_model_config(CONFIG_DIR)

DEFAULT_MODEL = "mltk-tiny"


@dataclass
class ClipBundle:
    """A frozen CLIP with what is needed to feed it."""

    model: torch.nn.Module  # open_clip CLIP, eval mode
    preprocess: Callable  # PIL image -> [3, H, W] tensor (eval transform)
    tokenizer: Callable  # list[str] -> LongTensor [B, context_length]
    spec: dict[str, Any] = field(default_factory=dict)  # how to rebuild it: {"model": ..., "pretrained": ...}

    @property
    def end_token_id(self) -> int:
        """The id CLIP's text tower pools at, read from the tokenizer (49407 for OpenAI's BPE)."""
        return getattr(self.tokenizer, "eot_token_id", 49407)


def available_models() -> list[str]:
    return open_clip.list_models()


def load_clip(model: str = DEFAULT_MODEL, pretrained: str | None = None, device: str | torch.device = "cpu",
              freeze: bool = True) -> ClipBundle:
    """Build a CLIP (see the module docstring for what ``model`` and ``pretrained`` may be)."""
    if pretrained is None and artifacts.is_artifact(model):
        return _load_artifact(Path(model), device, freeze)
    if model not in open_clip.list_models():
        raise ConfigError(f"unknown model {model!r}: not an open_clip architecture nor an mltk checkpoint artifact "
                          f"(see `open_clip.list_models()`)")
    if pretrained and _is_torchscript(pretrained):
        if not policy.TRUST_TORCHSCRIPT.get():  # torch.jit.load (and open_clip's fallback) can run its code
            raise ConfigError("is a TorchScript archive, and loading one can run code it carries; pass "
                              "--trust-torchscript if you trust this file", pretrained)
        clip = open_clip.load_openai_model(pretrained, precision="fp32", device=device)
    else:
        if pretrained and os.path.sep in pretrained and not os.path.isfile(pretrained):
            raise ConfigError("weights file not found", pretrained)
        try:
            with _quiet_open_clip():  # random init is intended when no weights are named
                clip = open_clip.create_model(model, pretrained=pretrained or None, device=device,
                                              pretrained_text=False, pretrained_image=False, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - torch's unpickler raises anything on a damaged file
            if not (pretrained and os.path.isfile(pretrained)):
                raise
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"cannot load weights from this file ({type(exc).__name__}: {first[:100]})",
                              pretrained) from None
    return _bundle(clip, model, {"model": model, "pretrained": pretrained}, freeze)


def _load_artifact(path: Path, device, freeze: bool) -> ClipBundle:
    """An mltk checkpoint holding a whole CLIP (``config.json``: {"format": "open_clip", "model": NAME})."""
    manifest = artifacts.read_manifest(path, "checkpoint")
    config = json.loads((path / schema.CHECKPOINT_CONFIG).read_text(encoding="utf-8"))
    if config.get("format") != "open_clip":
        raise ConfigError(f"checkpoint holds {config.get('format')!r} weights, not a whole CLIP "
                          f"(stage {manifest['created_by'].get('stage')})", path)
    with _quiet_open_clip():
        clip = open_clip.create_model(config["model"], pretrained=None, device=device)
    state = artifacts.load_tensors(path / schema.CHECKPOINT_WEIGHTS, device=str(device))
    clip.load_state_dict(state, strict=True)
    return _bundle(clip, config["model"], {"model": str(path.resolve()), "pretrained": None,
                                           "architecture": config["model"]}, freeze)


@contextlib.contextmanager
def _quiet_open_clip():
    """open_clip warns on the root logger when it builds a model without weights; mltk often means to."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _bundle(clip: torch.nn.Module, name: str, spec: dict, freeze: bool) -> ClipBundle:
    clip.eval()
    if freeze:
        clip.requires_grad_(False)
    arch = spec.get("architecture", name)
    preprocess = open_clip.image_transform(clip.visual.image_size, is_train=False,
                                           mean=getattr(clip.visual, "image_mean", None),
                                           std=getattr(clip.visual, "image_std", None))
    return ClipBundle(clip, preprocess, open_clip.get_tokenizer(arch), spec)


def _is_torchscript(path: str) -> bool:
    """OpenAI's released ``.pt`` files are TorchScript archives (zip files holding a ``constants.pkl``)."""
    if not (path.endswith(".pt") and os.path.isfile(path)):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("constants.pkl") for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def clip_state_for_checkpoint(clip: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict of a CLIP under open_clip key names (what ``mltk pretrain`` saves)."""
    return {k: v for k, v in clip.state_dict().items()}


def clip_checkpoint_config(architecture: str) -> dict:
    return {"format": "open_clip", "model": architecture}
