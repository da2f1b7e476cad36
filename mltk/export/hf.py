"""A text encoder on a Hugging Face tower -> a transformers folder or a sentence-transformers folder.

Two kinds of checkpoint fold into the tower's own weights, so the exported model is an ordinary BERT-style encoder
that ``AutoModel`` / ``SentenceTransformer`` load with no mltk code:

- a ``train-nlt --train full`` student (the distillation baseline): the student's encoder weights, and as word
  embeddings the non-native table through its projection, ``E = table @ proj.weight.T + proj.bias`` [V, W]
  (``NonNativeEmbedding`` applies exactly this to every token before the tower adds positions);
- a CLL-CLIP grown table on a text-only tower (``train-continual`` on all-MiniLM-L6-v2) whose method leaves the
  forward alone (plain CLL-CLIP, oEWC, ER, DER): the table [V_t, W] is the word embeddings and the grown WordPiece
  vocabulary the tokenizer.

The encoder keeps the base folder's pooler weights, position and token-type embeddings; the sentence-transformers
folder adds the tower's pooling, its ``Dense`` layers (the student's own) and ``Normalize`` when the base has it,
``max_seq_length`` = mltk's context length and ``do_lower_case`` as mltk's tokenizer applies it. Both folders'
tokenizers truncate at that context length too (``model_max_length``), and ``mltk_export.json`` records it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.export.folder import EXPORT_INFO

ST_MODULE = "sentence_transformers.models."
ST_POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "end": "pooling_mode_lasttoken"}


@dataclass
class HFTextModel:
    """What the exported folders hold. ``transformer``: a transformers encoder (with the folded word embeddings);
    ``write_tokenizer(dir)`` writes its tokenizer files; ``dense``: ``Sequential(Linear, activation)`` layers."""

    transformer: nn.Module
    write_tokenizer: Callable[[Path], None]
    pooling: str
    max_seq_length: int
    lower_case: bool = False
    dense: list[nn.Module] = field(default_factory=list)
    normalize: bool = False
    info: dict = field(default_factory=dict)


def transformer_folder(base: Path) -> Path:
    """The folder of the transformers model inside a sentence-transformers folder (its ``Transformer`` module), or
    the folder itself."""
    modules_file = base / "modules.json"
    if not modules_file.is_file():
        return base
    for module in json.loads(modules_file.read_text(encoding="utf-8")):
        if module.get("type", "").rsplit(".", 1)[-1] == "Transformer":
            return base / module.get("path", "")
    return base


def encoder_with_words(
    base: Path,
    words: torch.Tensor,
    encoder_state: dict[str, torch.Tensor] | None = None,
    pad_token_id: int | None = None,
) -> nn.Module:
    """The base folder's transformers model (pooler included) with ``encoder_state`` loaded over it and
    ``words`` [V, W] as its word embeddings (``config.vocab_size`` = V)."""
    from transformers import AutoModel

    from mltk.models.hf_text import quiet_transformers
    from mltk.models.hub import from_pretrained

    with quiet_transformers():
        model = from_pretrained(AutoModel, transformer_folder(base)).eval()
    word_key = "embeddings.word_embeddings.weight"
    if encoder_state is not None:
        state = {k: v for k, v in encoder_state.items() if k != word_key}
        missing, unexpected = model.load_state_dict(state, strict=False)
        left = [k for k in missing if k != word_key and not k.startswith("pooler.")]
        if unexpected or left:
            raise ConfigError(
                f"the trained encoder does not fit the base model (missing {left[:3]}, unexpected {unexpected[:3]})",
                base,
            )
    width = model.get_input_embeddings().weight.shape[1]
    if words.shape[1] != width:
        raise ConfigError(f"word embeddings are {words.shape[1]} wide, the base model {width}", base)
    table = nn.Embedding(words.shape[0], width, padding_idx=pad_token_id)
    with torch.no_grad():
        table.weight.copy_(words.detach().float())
    model.set_input_embeddings(table)
    model.config.vocab_size = int(words.shape[0])
    return model


def write_transformers(model: HFTextModel, out_dir: Path, info: dict) -> None:
    """``config.json``, ``model.safetensors`` and the tokenizer files: ``AutoModel`` / ``AutoTokenizer`` read them;
    pool the last hidden state as ``mltk_export.json`` says to get mltk's features."""
    from mltk.models.hf_text import quiet_transformers

    with quiet_transformers():  # no progress bar on mltk's stderr
        model.transformer.save_pretrained(out_dir, safe_serialization=True)
    model.write_tokenizer(out_dir)
    limit_tokenizer(out_dir, model.max_seq_length)
    artifacts.write_json(
        out_dir / EXPORT_INFO,
        {
            **info,
            **model.info,
            "pooling": model.pooling,
            "normalize": model.normalize,
            "dense_layers": len(model.dense),
            "context_length": model.max_seq_length,
        },
    )


def limit_tokenizer(out_dir: Path, context_length: int) -> None:
    """The exported tokenizer truncates where mltk did: ``model_max_length`` (what ``truncation=True`` cuts at)
    is mltk's context length, special tokens included, so a caption past it gives the consumer mltk's vector
    (the base's own tokenizer may say 512 where mltk read 256, or nothing where the position table ends)."""
    path = out_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    artifacts.write_json(path, {**config, "model_max_length": int(context_length)})


def write_sentence_transformers(model: HFTextModel, out_dir: Path, info: dict) -> None:
    """The transformers files plus ``modules.json`` (Transformer, Pooling, Dense..., Normalize),
    ``sentence_bert_config.json`` and each module's folder, as sentence-transformers saves a model."""
    write_transformers(model, out_dir, info)
    artifacts.write_json(
        out_dir / "sentence_bert_config.json",
        {"max_seq_length": model.max_seq_length, "do_lower_case": model.lower_case},
    )
    width = model.transformer.config.hidden_size
    modules = [("Transformer", "")]
    pooling = {
        key: False
        for key in (
            "pooling_mode_cls_token",
            "pooling_mode_mean_tokens",
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens",
            "pooling_mode_lasttoken",
        )
    }
    pooling[ST_POOLING_KEYS[model.pooling]] = True
    modules.append(("Pooling", _module_dir(out_dir, len(modules), "Pooling")))
    artifacts.write_json(out_dir / modules[-1][1] / "config.json", {"word_embedding_dimension": width, **pooling})
    for layer in model.dense:
        modules.append(("Dense", _module_dir(out_dir, len(modules), "Dense")))
        _write_dense(layer, out_dir / modules[-1][1])
    if model.normalize:
        modules.append(("Normalize", _module_dir(out_dir, len(modules), "Normalize")))
    artifacts.write_json(
        out_dir / "modules.json",
        [{"idx": i, "name": str(i), "path": path, "type": ST_MODULE + kind} for i, (kind, path) in enumerate(modules)],
    )


def _module_dir(out_dir: Path, index: int, kind: str) -> str:
    name = f"{index}_{kind}"
    (out_dir / name).mkdir()
    return name


def _write_dense(layer: nn.Module, folder: Path) -> None:
    """sentence-transformers' ``Dense``: ``config.json`` and ``model.safetensors`` (``linear.weight``/``bias``)."""
    linear, activation = layer[0], layer[1]
    kind = type(activation)
    artifacts.write_json(
        folder / "config.json",
        {
            "in_features": linear.in_features,
            "out_features": linear.out_features,
            "bias": linear.bias is not None,
            "activation_function": f"{kind.__module__}.{kind.__name__}",
        },
    )
    artifacts.save_tensors(folder / "model.safetensors", {f"linear.{k}": v for k, v in linear.state_dict().items()})


def dense_layers(projection: nn.Module, path: Path) -> list[nn.Module]:
    """The tower's projection as sentence-transformers ``Dense`` layers (mltk builds it from them)."""
    if isinstance(projection, nn.Identity):
        return []
    layers = list(projection) if isinstance(projection, nn.Sequential) else [projection]
    if not all(
        isinstance(layer, nn.Sequential) and len(layer) == 2 and isinstance(layer[0], nn.Linear) for layer in layers
    ):
        raise ConfigError(f"the tower's projection {type(projection).__name__} is no stack of Dense layers", path)
    return layers
