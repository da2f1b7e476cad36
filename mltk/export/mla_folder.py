"""An MLA acquirer checkpoint -> a self-contained folder with a standalone loader (``--format mla``).

Acquirers run after every block of the frozen tower, so they cannot be folded into its weights. The folder holds
everything instead, and ``mla_loader.py`` (copied from ``mltk/export/mla_loader.py``; torch, safetensors and
open_clip or transformers only) runs it:

    base/                  the frozen base: an open_clip local-dir: folder (a CLIP) or a transformers folder
                           (a text-only tower; its Dense layers as dense_N.safetensors)
    tokenizer/             the non-native transformers tokenizer (absent when it is the base's own)
    acquirers.safetensors  embedding.table.weight [V, E], embedding.proj.{weight,bias}, acquirers.LANG.I.*
    mla_config.json        languages, acquirer kind, base kind, pooling, context length, lower case, dense layers
    mla_loader.py          load(folder).encode(texts, lang) -> features [B, D], as mltk encodes them
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.export.folder import EXPORT_INFO

LOADER = Path(__file__).with_name("mla_loader.py")


def export_mla(checkpoint: Path, out_dir: Path, info: dict) -> None:
    """Write the folder of an MLA acquirer checkpoint (see the module docstring)."""
    from mltk.models.multilingual import load_encoder

    config = artifacts.read_checkpoint_config(checkpoint)
    if config.get("format") != "mla" or config.get("train", "acquirers") != "acquirers":
        raise ConfigError(
            "--format mla takes an MLA acquirer checkpoint (train-nlt, train-le, import-mla); a "
            "--train full student exports with --format transformers",
            checkpoint,
        )
    encoder = load_encoder(checkpoint).eval()
    kind = encoder.non_native.kind
    if kind == "vocab":
        raise ConfigError(
            "the acquirers read an mltk BPE vocabulary (build-vocab), which no tokenizer outside mltk "
            "reads; train with a transformers tokenizer (--tokenizer NAME) to export them",
            checkpoint,
        )
    (out_dir / "base").mkdir()
    base_config = _write_base(encoder, out_dir / "base", checkpoint)
    tokenizer = "base"
    if kind == "hf":
        tokenizer = "tokenizer"
        encoder.non_native.transformers_tokenizer.save_pretrained(out_dir / tokenizer)
    artifacts.save_tensors(out_dir / "acquirers.safetensors", encoder.state_tensors())
    artifacts.write_json(
        out_dir / "mla_config.json",
        {
            **base_config,
            "tokenizer": tokenizer,
            "native_lang": encoder.native_lang,
            "languages": encoder.languages,
            "acquirer": encoder.acquirer,
        },
    )
    shutil.copyfile(LOADER, out_dir / LOADER.name)
    artifacts.write_json(
        out_dir / EXPORT_INFO,
        {
            **info,
            "keeps": "the frozen base, the non-native embedding and tokenizer, every language's acquirers",
            "load": "sys.path.insert(0, FOLDER); from mla_loader import load; load(FOLDER).encode(texts, lang)",
        },
    )


def _write_base(encoder, base_dir: Path, checkpoint: Path) -> dict:
    """The frozen base into ``base_dir``; returns its part of ``mla_config.json``."""
    tower = encoder.tower
    if encoder.clip is not None:
        from mltk.export.open_clip_dir import write_open_clip_folder
        from mltk.models.clip import has_hf_text_tower

        if has_hf_text_tower(encoder.clip.model):
            raise ConfigError(
                "the base CLIP has a Hugging Face text tower, which open_clip's local-dir: loader "
                "builds from the hub by name; mltk exports MLA on CLIPs with open_clip's own text "
                "tower or on text-only transformers towers",
                checkpoint,
            )
        spec = encoder.clip.spec
        write_open_clip_folder(encoder.clip.model, spec.get("architecture", spec.get("model")), base_dir, checkpoint)
        return {"base": "open_clip", "normalize": False}  # CLIP's users normalise, as open_clip's encode_text
    from transformers import AutoModel

    from mltk.export.hf import dense_layers, transformer_folder
    from mltk.models.hf_text import quiet_transformers
    from mltk.models.hub import from_pretrained

    with quiet_transformers():
        from_pretrained(AutoModel, transformer_folder(Path(encoder.spec["model"]))).save_pretrained(base_dir)
    tower.tokenizer.tokenizer.save_pretrained(base_dir)
    dense = []
    for index, layer in enumerate(dense_layers(tower.projection, checkpoint)):
        artifacts.save_tensors(base_dir / f"dense_{index}.safetensors", layer[0].state_dict())
        dense.append({"file": f"dense_{index}.safetensors", "activation": type(layer[1]).__name__})
    return {
        "base": "transformers",
        "pooling": tower.pooling,
        "context_length": tower.context_length,
        "lower_case": bool(getattr(tower.tokenizer, "lower_case", False)),
        "dense": dense,
        "normalize": tower.normalizes_output,
    }
