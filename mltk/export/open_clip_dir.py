"""A whole CLIP (``mltk pretrain``, the base of ``mltk import-mla``) -> an open_clip ``local-dir:`` folder.

open_clip's ``create_model_and_transforms('local-dir:DIR')`` reads ``DIR/open_clip_config.json`` (``model_cfg``:
the architecture itself, so no name has to be registered; ``preprocess_cfg``: the eval transform) and the weights
file it prefers, ``open_clip_model.safetensors``; ``get_tokenizer('local-dir:DIR')`` builds CLIP's BPE tokenizer
from the same ``model_cfg``. Nothing of mltk is needed to load the folder.
"""

from __future__ import annotations

import copy
from pathlib import Path

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ConfigError
from mltk.export.folder import EXPORT_INFO

OPEN_CLIP_CONFIG = "open_clip_config.json"
OPEN_CLIP_WEIGHTS = "open_clip_model.safetensors"


def open_clip_model_config(architecture: str, path: Path) -> dict:
    """The full ``model_cfg`` of an architecture open_clip (or mltk's registry) knows, refused for a CLIP whose text
    tower is a Hugging Face encoder (its config and tokenizer would still be fetched by name)."""
    import open_clip

    import mltk.models.clip  # noqa: F401 - registers mltk's own architectures (mltk-tiny) with open_clip

    model_cfg = open_clip.get_model_config(architecture)
    if not model_cfg:
        raise ConfigError(f"open_clip does not know the architecture {architecture!r} this checkpoint names", path)
    if model_cfg.get("text_cfg", {}).get("hf_model_name"):
        raise ConfigError(
            f"{architecture!r} has a Hugging Face text tower, which open_clip's local-dir: loader "
            f"builds from the hub by name; mltk exports CLIPs with open_clip's own text tower",
            path,
        )
    return copy.deepcopy(model_cfg)


def export_open_clip(checkpoint: Path, out_dir: Path, info: dict) -> None:
    """Write the open_clip folder of an ``open_clip`` checkpoint into ``out_dir``, after loading its weights into
    the architecture strictly."""
    from mltk.models.clip import load_clip

    architecture = artifacts.read_checkpoint_config(checkpoint).get("model", "")
    model_cfg = open_clip_model_config(architecture, checkpoint)  # refused before loading any weights
    write_open_clip_folder(load_clip(str(checkpoint)).model, architecture, out_dir, checkpoint, model_cfg)
    artifacts.write_json(
        out_dir / EXPORT_INFO,
        {
            **info,
            "architecture": architecture,
            "keeps": "the whole CLIP (both towers, logit scale) and its eval transform",
            "load": "open_clip.create_model_and_transforms('local-dir:FOLDER')",
        },
    )


def write_open_clip_folder(clip, architecture: str, out_dir: Path, source: Path, model_cfg: dict | None = None) -> None:
    """``open_clip_config.json`` (``model_cfg`` + ``preprocess_cfg``) and ``open_clip_model.safetensors`` of a loaded
    open_clip CLIP of ``architecture``."""
    import open_clip

    model_cfg = model_cfg or open_clip_model_config(architecture, source)
    preprocess = {
        k: list(v) if isinstance(v, tuple) else v for k, v in open_clip.get_model_preprocess_cfg(clip).items()
    }
    artifacts.write_json(out_dir / OPEN_CLIP_CONFIG, {"model_cfg": model_cfg, "preprocess_cfg": preprocess})
    artifacts.save_tensors(out_dir / OPEN_CLIP_WEIGHTS, {k: v.detach() for k, v in clip.state_dict().items()})


def check_open_clip_source(checkpoint: Path, config: dict) -> None:
    """Only a whole CLIP exports to open_clip; the others are refused in one line saying why."""
    fmt = config.get("format")
    if fmt == schema.FORMAT_OPEN_CLIP:
        return
    if fmt == schema.FORMAT_CLL:
        raise ConfigError(
            "a CLL-CLIP model grows the tokenizer's vocabulary, which open_clip's tokenizer cannot "
            "read (it loads only CLIP's own merges and pools at the largest token id); a table on a "
            "text-only Hugging Face tower exports with --format transformers",
            checkpoint,
        )
    if fmt == schema.FORMAT_MLA:
        raise ConfigError(
            "an MLA checkpoint adds acquirers or a student to a frozen base, which open_clip cannot "
            "run; export acquirers with --format mla, a --train full student on a Hugging Face tower "
            "with --format transformers",
            checkpoint,
        )
    raise ConfigError(
        f"--format open_clip takes a whole CLIP (mltk pretrain); this is a {fmt!r} checkpoint", checkpoint
    )
