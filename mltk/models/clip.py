"""One way to build CLIP models through open_clip.

A model is named by an open_clip architecture plus a source of weights:

- a pretrained tag, ``load_clip("ViT-B-32-quickgelu", "openai")`` (downloads; the path users with internet rely on);
- a local weights file, ``load_clip("ViT-B-32-quickgelu", "/ckpt/model.safetensors")`` (safetensors or an
  open_clip ``.bin``/``.pth`` state dict; OpenAI TorchScript ``.pt`` files go through open_clip's own loader);
- an ``hf-hub:org/repo`` name or a ``local-dir:/folder`` (open_clip's schemas; config and weights come from there),
  including architectures whose text tower is a Hugging Face transformer (``xlm-roberta-base-ViT-B-32``,
  ``nllb-clip-base``);
- an mltk checkpoint artifact written by ``mltk pretrain`` (``load_clip("runs/native")``), whose checkpoint config
  names the architecture;
- nothing, for random weights (tests and ``mltk pretrain``).

mltk registers its tiny architectures (``mltk/models/configs/*.json``) with open_clip on import, so
``mltk-tiny`` is built by the very same code as ViT-B/32.
"""

from __future__ import annotations

import contextlib
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import open_clip
import torch

from mltk import artifacts
from mltk.artifacts import schema
from mltk.artifacts.content_check import check_content
from mltk.core import policy
from mltk.core.download import model_download, require_existing_if_local
from mltk.core.errors import ArtifactError, ConfigError

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


def load_clip(
    model: str = DEFAULT_MODEL, pretrained: str | None = None, device: str | torch.device = "cpu", freeze: bool = True
) -> ClipBundle:
    """Build a CLIP (see the module docstring for what ``model`` and ``pretrained`` may be)."""
    if pretrained is None and artifacts.is_artifact(model):
        return _load_artifact(Path(model), device, freeze)
    require_existing_if_local(model, "model")
    check_open_clip_name(model, pretrained)
    if pretrained and _is_torchscript(pretrained):
        if not policy.TRUST_TORCHSCRIPT.get():  # torch.jit.load (and open_clip's fallback) can run its code
            raise ConfigError(
                "is a TorchScript archive, and loading one can run code it carries; pass "
                "--trust-torchscript if you trust this file",
                pretrained,
            )
        clip = open_clip.load_openai_model(pretrained, precision="fp32", device=device)
    else:
        if pretrained and os.path.sep in pretrained and not os.path.isfile(pretrained):
            raise ConfigError("weights file not found", pretrained)
        try:
            with quiet_open_clip(), model_download(model):  # random init is intended when no weights are named
                clip = open_clip.create_model(
                    model,
                    pretrained=pretrained or None,
                    device=device,
                    pretrained_text=False,
                    pretrained_image=False,
                    weights_only=True,
                )
        except ConfigError:  # a download failure, already one line (mltk.core.download)
            raise
        except Exception as exc:  # torch's unpickler raises anything on a damaged file
            source = (
                pretrained
                if pretrained and os.path.isfile(pretrained)
                else model[len("local-dir:") :]
                if model.startswith("local-dir:")
                else None
            )
            if source is None:
                raise
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(
                f"cannot load weights from this {'file' if pretrained else 'folder'} "
                f"({type(exc).__name__}: {first[:100]})",
                source,
            ) from None
    return _bundle(clip, model, {"model": model, "pretrained": pretrained}, freeze)


# --- which names open_clip builds (kept apart from the rest: the hf16 loading code) ------------------------------

HUB_PREFIXES = ("hf-hub:", "local-dir:")  # open_clip's schemas: config and weights come from the hub / a folder


def check_open_clip_name(model: str, pretrained: str | None = None) -> None:
    """Refuse, before any download, a ``--model`` open_clip cannot build.

    Accepted: a built-in or registered architecture (``ViT-B-32``, ``xlm-roberta-base-ViT-B-32``, ``nllb-clip-base``,
    ``mltk-tiny``), an ``hf-hub:org/repo`` name and a ``local-dir:/folder`` holding ``open_clip_config.json``. Those
    schemas carry their own weights, so a ``--pretrained`` beside them is an error rather than silently ignored.
    """
    if model.startswith(HUB_PREFIXES):
        schema, _, identifier = model.partition(":")
        if not identifier.strip():
            raise ConfigError(f"model {model!r} names no repository after '{schema}:'")
        if pretrained:
            raise ConfigError(
                f"--pretrained {pretrained!r} does not apply to {model!r}: a {schema}: model carries its own weights"
            )
        if schema == "local-dir" and not (Path(identifier) / "open_clip_config.json").is_file():
            raise ConfigError("local-dir: model folder has no open_clip_config.json", identifier)
        return
    if model in open_clip.list_models():
        if pretrained and os.path.sep not in pretrained and not os.path.exists(pretrained):
            tags = open_clip.list_pretrained_tags_by_model(model)
            if pretrained not in tags:
                raise ConfigError(
                    f"unknown pretrained tag {pretrained!r} for {model} (known: "
                    f"{', '.join(tags) or 'none'}; or pass a weights file)"
                )
        return
    if is_hf_model_folder(model):
        raise ConfigError(
            "a text-only Hugging Face model folder (no image tower): this needs a CLIP; use it where "
            "a text tower is asked for",
            model,
        )
    raise ConfigError(
        f"unknown model {model!r}: not an open_clip architecture, an hf-hub:/local-dir: name nor an mltk "
        f"checkpoint artifact (see `open_clip.list_models()`)"
    )


def is_hf_model_folder(model: str | os.PathLike | None) -> bool:
    """A local transformers / sentence-transformers model folder (``config.json`` of a transformers model, or a
    sentence-transformers ``modules.json``), as opposed to an mltk artifact or an open_clip ``local-dir:``; or a
    hub id of one (``mltk.models.hub``: its snapshot in the local cache, downloaded when online)."""
    if model is None:  # no --model (a stage starting from --init)
        return False
    path = Path(model)
    if not path.exists():  # a hub id (sentence-transformers/all-MiniLM-L6-v2) stands for its local snapshot
        from mltk.models.hub import hub_text_folder

        path = hub_text_folder(model) or path
    if not path.is_dir() or artifacts.is_artifact(path):
        return False
    return (path / "modules.json").is_file() or (path / "config.json").is_file()


def has_hf_text_tower(clip: torch.nn.Module) -> bool:
    """Whether an open_clip model's text tower is a Hugging Face transformer (``CustomTextCLIP.text``)."""
    from open_clip.hf_model import HFTextEncoder

    return isinstance(getattr(clip, "text", None), HFTextEncoder)


def _load_artifact(path: Path, device, freeze: bool) -> ClipBundle:
    """An mltk checkpoint holding a whole CLIP (checkpoint config: {"format": "open_clip", "model": NAME})."""
    manifest = artifacts.read_manifest(path, "checkpoint")
    config = artifacts.read_checkpoint_config(path)
    if config.get("format") != "open_clip":
        raise ConfigError(
            f"checkpoint holds {config.get('format')!r} weights, not a whole CLIP "
            f"(stage {manifest['created_by'].get('stage')})",
            path,
        )
    where = path / schema.CHECKPOINT_CONFIG
    if config["model"].startswith(HUB_PREFIXES) or config["model"] not in open_clip.list_models():
        raise ArtifactError(
            f"names the architecture {config['model'][:80]!r}, which is no open_clip architecture "
            f"(a whole CLIP checkpoint names the one it was trained as)",
            where,
        )
    check_content(path, "base model")  # same-size replacement of its weights is caught here, hashed once
    with quiet_open_clip():
        clip = open_clip.create_model(config["model"], pretrained=None, device=device)
    state = artifacts.load_tensors(path / schema.CHECKPOINT_WEIGHTS, device=str(device))
    try:
        clip.load_state_dict(state, strict=True)
    except RuntimeError as error:  # the tensors are of another architecture than the config names
        first = str(error).splitlines()[1:2] or [type(error).__name__]
        raise ArtifactError(
            f"the weights do not fit the architecture {config['model']!r} it names ({first[0].strip()[:160]})", where
        ) from None
    return _bundle(
        clip,
        config["model"],
        {"model": str(path.resolve()), "pretrained": None, "architecture": config["model"]},
        freeze,
    )


@contextlib.contextmanager
def quiet_open_clip():
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
    preprocess = open_clip.image_transform(
        clip.visual.image_size,
        is_train=False,
        mean=getattr(clip.visual, "image_mean", None),
        std=getattr(clip.visual, "image_std", None),
    )
    with model_download(arch):  # an HF text tower's tokenizer is fetched from the hub
        tokenizer = open_clip.get_tokenizer(arch)
    return ClipBundle(clip, preprocess, tokenizer, spec)


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
