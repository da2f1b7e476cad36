"""The modules of a sentence-transformers folder that ``mltk.models.hf_text`` reads besides the transformer: its
JSON files (``read_json``), the Pooling mode (``read_pooling``) and the Dense layers (``load_dense``)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn

from mltk.core.errors import ConfigError


def read_pooling(config_path: Path) -> str:
    """sentence-transformers' ``1_Pooling/config.json`` -> "mean", "cls" or "end" (exactly one mode on)."""
    config = read_json(config_path)
    modes = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "end"}
    chosen = [name for key, name in modes.items() if config.get(key)]
    others = [key for key, on in config.items() if key.startswith("pooling_mode_") and on and key not in modes]
    if others or len(chosen) != 1:
        raise ConfigError(
            f"unsupported pooling {', '.join(others + chosen) or 'none'} (mltk pools with exactly one "
            f"of mean, CLS, last token)",
            config_path,
        )
    return chosen[0]


_ACTIVATIONS = {"Identity": nn.Identity, "Tanh": nn.Tanh, "ReLU": nn.ReLU, "GELU": nn.GELU, "Sigmoid": nn.Sigmoid}


def load_dense(folder: Path) -> nn.Module:
    """sentence-transformers' ``Dense``: Linear(in, out, bias) then an activation (weights ``linear.*``)."""
    config = read_json(folder / "config.json")
    activation = str(config.get("activation_function", "torch.nn.modules.linear.Identity")).rsplit(".", 1)[-1]
    if activation not in _ACTIVATIONS:
        raise ConfigError(f"unsupported Dense activation {activation!r}", folder / "config.json")
    linear = nn.Linear(config["in_features"], config["out_features"], bias=config.get("bias", True))
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(folder / "model.safetensors")
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise ConfigError("Dense layer has no model.safetensors", folder)
    linear.load_state_dict({k.removeprefix("linear."): v for k, v in state.items()})
    return nn.Sequential(linear, _ACTIVATIONS[activation]())


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"unreadable JSON ({str(exc)[:200] or type(exc).__name__})", path) from None
