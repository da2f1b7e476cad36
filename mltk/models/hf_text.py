"""Hugging Face text towers (BERT-, RoBERTa- and XLM-R-style encoders) behind mltk's one text-tower interface.

Two sources give such a tower:

- an open_clip model whose text tower is a transformers encoder (``xlm-roberta-base-ViT-B-32``, ``hf-hub:`` repos
  with an ``hf_model_name`` text config): open_clip's ``HFTextEncoder`` holds the encoder, a pooler and a
  projection into the joint space;
- a local transformers or sentence-transformers folder (e.g. all-MiniLM-L6-v2): text only, pooled as its
  ``1_Pooling/config.json`` says (mean when absent), an optional ``Dense`` layer, an optional ``Normalize``.

``HFTextTower`` re-runs the encoder's own modules step by step (word embeddings -> + position and token-type
embeddings -> embedding LayerNorm and dropout -> layers -> pooling -> projection) so that MLA's acquirers can run
after each layer through ``after_block`` and a non-native embedding can replace the word embeddings only. With no
hook the result equals the transformers model's own output: the position ids, token types and attention mask are
built exactly as transformers builds them from input ids (RoBERTa counts positions from ``padding_idx + 1``).

Attention is bidirectional with a padding mask, so cutting a batch to its longest row changes nothing for the
real tokens: a frozen tower runs the batch's real tokens packed end to end, a training one length groups
(``LENGTH_BUCKETS``) each at its own longest row (``HFTextTower.forward_embeddings``).

Under bf16 autocast on the CPU the layers' matrix products run in bf16 (on AMX about 4x faster than fp32, on
AVX512-BF16 about 2-3x) but attention itself runs in fp32 (``mltk.models.hf_attention``).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from mltk.core.download import model_download
from mltk.core.errors import ConfigError
from mltk.models.hf_attention import FP32_SDPA, PACKED_SDPA, PackedRows, attention_named, register_attention
from mltk.models.st_modules import load_dense, read_json, read_pooling
from mltk.models.text import LENGTH_BUCKETS, AfterBlock

POOLINGS = ("mean", "cls", "end")  # over the real tokens; at position 0; at the last real token


class HFTextTower(nn.Module):
    """A transformers encoder as a ``TextTower`` (see /work/tower_interface.md and ``mltk.models.text``).

    ``tokenizer(texts) -> (tokens [B, L], lengths [B])``. ``cls_head`` is BERT's pooler (dense + tanh), used only
    when the tower pools at CLS through it (open_clip's ``cls_pooler``). ``normalizes_output`` says whether the
    model's users L2-normalise its features (sentence-transformers' ``Normalize``); ``encode`` itself never does.
    """

    pack_rows = True  # a frozen tower runs a batch's real tokens packed end to end (``forward_embeddings``)

    def __init__(
        self,
        transformer: nn.Module,
        tokenizer: Callable[[list[str]], tuple[torch.Tensor, torch.Tensor]],
        pooling: str = "mean",
        projection: nn.Module | None = None,
        cls_head: nn.Module | None = None,
        context_length: int | None = None,
        normalizes_output: bool = False,
    ):
        super().__init__()
        if pooling not in POOLINGS:
            raise ConfigError(
                f"unsupported pooling {pooling!r} for a Hugging Face text tower (one of {', '.join(POOLINGS)})"
            )
        _check_architecture(transformer)
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.cls_head = cls_head
        self.projection = projection if projection is not None else nn.Identity()
        self.normalizes_output = normalizes_output
        embeddings = transformer.embeddings
        self.token_embedding = embeddings.word_embeddings
        config = transformer.config
        # RoBERTa / XLM-R number real tokens from padding_idx + 1 and give padding the id padding_idx
        self._roberta_positions = hasattr(embeddings, "create_position_ids_from_input_ids")
        self._padding_idx = getattr(embeddings, "padding_idx", config.pad_token_id)
        position_offset = self._padding_idx + 1 if self._roberta_positions else 0
        most = config.max_position_embeddings - position_offset
        self.context_length = min(context_length, most) if context_length else most
        self.width = config.hidden_size
        self.num_blocks = len(self.blocks)
        with torch.no_grad():
            probe = torch.zeros(
                1, self.width, device=self.token_embedding.weight.device, dtype=self.token_embedding.weight.dtype
            )
            self.output_dim = int(self.projection(probe).shape[-1])

    @property
    def blocks(self) -> nn.ModuleList:
        return self.transformer.encoder.layer

    def tokenize(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Texts -> (tokens [B, L], lengths [B]) with the tower's own tokenizer, L = the longest row."""
        tokens, lengths = self.tokenizer(list(texts))
        return tokens[:, : int(lengths.max())], lengths

    def lengths(self, tokens: torch.Tensor) -> torch.Tensor:
        """Lengths [B] of token rows [B, L] padded on the right with the pad id: the ids that are not padding
        (BERT's and XLM-R's tokenizers never give a real token the pad id)."""
        return (tokens != self._padding_idx).sum(dim=1)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids [B, L] -> word embeddings [B, L, W] (no positions, no token types, no LayerNorm)."""
        return self.token_embedding(tokens)

    def forward_embeddings(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor,
        after_block: AfterBlock | None = None,
        buckets: int = LENGTH_BUCKETS,
    ) -> torch.Tensor:
        """Word embeddings [B, L, W] -> features [B, D]; ``after_block(i, h)`` after layer i's output.

        Rows never see each other (padding mask, per-row pooling), so a batch need not run as one padded block.
        A frozen tower (eval mode, SDPA attention) packs the batch's real tokens end to end and runs its layers
        on them alone (``mltk.models.hf_attention``: no padded token at all; attention in ``buckets`` length
        groups); otherwise (a training student, whose dropout draws per padded position, or another attention
        implementation) a batch of at least ``2 * buckets`` rows runs as ``buckets`` groups of similar length,
        each cut to its own longest row. Either way the features are the batch's, for fewer padded tokens.
        ``after_block`` must treat tokens independently: it sees the packed tokens ``[1, T, W]``, or one length
        group ``[b, L', W]`` at a time."""
        lengths = lengths.to(x.device)
        if self._packs():
            return self._forward_packed(x, lengths, after_block, buckets)
        if buckets <= 1 or len(x) < 2 * buckets:
            return self._forward_trimmed(x, lengths, after_block)
        order = torch.argsort(lengths, stable=True)  # [B], shortest first
        features = torch.cat(
            [self._forward_trimmed(x[group], lengths[group], after_block) for group in order.tensor_split(buckets)]
        )
        return features[torch.argsort(order)]  # back to batch order

    def _packs(self) -> bool:
        """Whether ``forward_embeddings`` packs: an encoder in eval mode (no dropout) whose layers attend through
        transformers' attention interface by SDPA, unless ``pack_rows`` is off (benchmarks compare both)."""
        config = self.transformer.config
        return (
            self.pack_rows
            and not self.transformer.training
            and getattr(config, "_attn_implementation", None) == "sdpa"
            and not getattr(config, "is_decoder", False)
            and hasattr(sys.modules.get(type(self.blocks[0]).__module__), "ALL_ATTENTION_FUNCTIONS")
            and register_attention()
        )

    def _forward_packed(
        self, x: torch.Tensor, lengths: torch.Tensor, after_block: AfterBlock | None, buckets: int
    ) -> torch.Tensor:
        """``forward_embeddings`` on the real tokens packed end to end, [1, T, W]: [B, L, W] -> [B, D]."""
        rows = PackedRows(lengths, max(buckets, 1))
        positions = torch.arange(rows.length, device=x.device)  # [L']
        real = positions[None, :] < lengths[:, None]  # [B, L'] True on real tokens, batch order
        h = self._embed(rows.pack(x), rows.pack(self._position_ids(positions, real)))[None]  # [1, T, W]
        with attention_named(self.transformer.config, PACKED_SDPA):
            for index, layer in enumerate(self.blocks):
                out = layer(h, rows)  # the layers hand the "mask" to packed_sdpa
                h = out[0] if isinstance(out, tuple) else out
                if after_block is not None:
                    h = after_block(index, h)
        return self.projection(self._pool(rows.unpack(h[0]), real, lengths))  # [B, D]

    def _forward_trimmed(self, x: torch.Tensor, lengths: torch.Tensor, after_block: AfterBlock | None) -> torch.Tensor:
        """``forward_embeddings`` of one group, cut to its longest row: [b, L, W] -> [b, D]."""
        length = int(lengths.max())
        x = x[:, :length]
        positions = torch.arange(length, device=x.device)  # [L']
        real = positions[None, :] < lengths[:, None]  # [B, L'] True on real tokens
        h = self._embed(x, self._position_ids(positions, real))
        with self._fp32_attention_under_cpu_autocast(x.device):
            mask = self._attention_mask(real, h)
            for index, layer in enumerate(self.blocks):
                out = layer(h, mask)
                h = out[0] if isinstance(out, tuple) else out  # transformers 4.x layers return tuples
                if after_block is not None:
                    h = after_block(index, h)
        return self.projection(self._pool(h, real, lengths))  # [B, D]

    @contextlib.contextmanager
    def _fp32_attention_under_cpu_autocast(self, device: torch.device):
        """While the layers run under CPU autocast, their SDPA attention is computed in fp32
        (``mltk.models.hf_attention``); without autocast, or on CUDA, nothing changes."""
        config = self.transformer.config
        if (
            device.type != "cpu"
            or not torch.is_autocast_enabled("cpu")
            or getattr(config, "_attn_implementation", None) != "sdpa"
            or not register_attention()
        ):
            yield
            return
        with attention_named(config, FP32_SDPA):
            yield

    def encode(
        self, tokens: torch.Tensor, lengths: torch.Tensor | None = None, after_block: AfterBlock | None = None
    ) -> torch.Tensor:
        """Token ids [B, L] -> features [B, D], unnormalised, the batch trimmed to its longest row. ``lengths``
        None: counted from the padding."""
        if lengths is None:
            lengths = self.lengths(tokens)
        tokens = tokens[:, : int(lengths.max())]
        return self.forward_embeddings(self.embed_tokens(tokens), lengths, after_block)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return self.encode(tokens, lengths)

    # --- the steps transformers would take ------------------------------------------------------------------------

    def _position_ids(self, positions: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """Position ids [B, L'] of rows whose real tokens are ``real`` [B, L'], as transformers numbers them."""
        if self._roberta_positions:  # as create_position_ids_from_input_ids: cumsum of real tokens + padding_idx
            return torch.where(
                real,
                positions[None, :] + self._padding_idx + 1,
                torch.full_like(real, self._padding_idx, dtype=torch.long),
            )
        return positions[None, :].expand(real.shape[0], -1)

    def _embed(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """Word embeddings [..., W] + token-type + position embeddings (ids [...]), then the embedding LayerNorm
        and dropout; a padded batch [B, L', W] or packed tokens [T, W] alike."""
        embeddings = self.transformer.embeddings
        h = x
        if getattr(embeddings, "token_type_embeddings", None) is not None:  # one sentence: token type 0
            h = h + embeddings.token_type_embeddings(torch.zeros_like(position_ids))
        h = h + embeddings.position_embeddings(position_ids)
        return embeddings.dropout(embeddings.LayerNorm(h))

    def _attention_mask(self, real: torch.Tensor, h: torch.Tensor):
        """The padding mask in the form the layers' attention implementation expects (None when nothing is
        padded), built by transformers' own helper."""
        try:
            from transformers.masking_utils import create_bidirectional_mask
        except ImportError:  # transformers 4.x: the additive [B, 1, 1, L] mask
            return self.transformer.get_extended_attention_mask(real.long(), real.shape)
        return create_bidirectional_mask(config=self.transformer.config, inputs_embeds=h, attention_mask=real.long())

    def _pool(self, h: torch.Tensor, real: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L', W] -> [B, W] as the tower pools."""
        if self.pooling == "mean":  # sentence-transformers' and open_clip's MeanPooler
            weights = real.to(h.dtype).unsqueeze(-1)  # [B, L', 1]
            return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        if self.pooling == "end":
            return h[torch.arange(h.shape[0], device=h.device), lengths - 1]
        if self.cls_head is not None:  # BERT's pooler reads position 0 itself
            return self.cls_head(h)
        return h[:, 0]


def _check_architecture(transformer: nn.Module) -> None:
    """The encoder must be built like BERT: ``embeddings`` (word, position, token type, LayerNorm) and
    ``encoder.layer``, with absolute positions."""
    embeddings = getattr(transformer, "embeddings", None)
    layers = getattr(getattr(transformer, "encoder", None), "layer", None)
    model_type = getattr(getattr(transformer, "config", None), "model_type", type(transformer).__name__)
    needed = ("word_embeddings", "position_embeddings", "LayerNorm", "dropout")
    if embeddings is None or layers is None or not all(hasattr(embeddings, n) for n in needed):
        raise ConfigError(
            f"unsupported Hugging Face text tower {model_type!r}: mltk runs BERT-, RoBERTa- and "
            f"XLM-R-style encoders (embeddings + encoder.layer)"
        )
    kind = getattr(transformer.config, "position_embedding_type", "absolute") or "absolute"
    if kind != "absolute":
        raise ConfigError(f"unsupported position embeddings {kind!r} in {model_type!r} (only absolute)")


# --- tokenizers -------------------------------------------------------------------------------------------------


class PaddedTokenizer:
    """A transformers tokenizer giving (ids [B, L], lengths [B]), padded on the right to the longest row."""

    def __init__(self, tokenizer, context_length: int | None = None, lower_case: bool = False):
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.lower_case = lower_case
        tokenizer.padding_side = "right"

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        if self.lower_case:  # sentence-transformers' do_lower_case
            texts = [text.lower() for text in texts]
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.context_length, return_tensors="pt"
        )
        return batch["input_ids"], batch["attention_mask"].sum(dim=1)


class OpenClipHFTokenizer:
    """open_clip's ``HFTokenizer`` (its own text cleaning, rows padded to the context) with lengths counted as
    open_clip's ``HFTextEncoder`` masks: every id that is not the pad id is a real token."""

    def __init__(self, tokenizer, pad_token_id: int):
        self.tokenizer = tokenizer
        self.pad_token_id = pad_token_id

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.tokenizer(texts)  # [B, context_length]
        return tokens, (tokens != self.pad_token_id).sum(dim=1)


# --- building towers ----------------------------------------------------------------------------------------------


def tower_from_open_clip(clip: nn.Module, tokenizer) -> HFTextTower:
    """The text tower of an open_clip ``CustomTextCLIP`` whose text tower is an ``HFTextEncoder`` (shares, does
    not copy, its parameters); ``tokenizer`` is open_clip's ``HFTokenizer`` for that model."""
    from open_clip.hf_model import ClsLastHiddenStatePooler, ClsPooler, HFTextEncoder, MeanPooler

    encoder = getattr(clip, "text", None)
    if not isinstance(encoder, HFTextEncoder):
        raise ConfigError(f"{type(clip).__name__} has no Hugging Face text tower")
    pooler, cls_head = encoder.pooler, None
    if isinstance(pooler, MeanPooler):
        pooling = "mean"
    elif isinstance(pooler, (ClsPooler, ClsLastHiddenStatePooler)):
        pooling = "cls"
        if isinstance(pooler, ClsPooler) and pooler.use_pooler_output:
            cls_head = getattr(encoder.transformer, "pooler", None)
    else:
        raise ConfigError(f"unsupported open_clip text pooler {type(pooler).__name__} (mean or CLS)")
    pad_id = encoder.config.pad_token_id
    return HFTextTower(
        encoder.transformer,
        OpenClipHFTokenizer(tokenizer, pad_id),
        pooling,
        encoder.proj,
        cls_head,
        context_length=getattr(tokenizer, "context_length", None),
    )


def load_hf_text_tower(
    name_or_path: str, device: str | torch.device = "cpu", pretrained: str | None = None, freeze: bool = True
) -> HFTextTower:
    """A Hugging Face text tower from a local transformers / sentence-transformers folder, or from an open_clip
    name whose text tower is a transformers encoder (``xlm-roberta-base-ViT-B-32``, ``hf-hub:org/repo``)."""
    from mltk.models.clip import has_hf_text_tower, is_hf_model_folder, load_clip

    if is_hf_model_folder(name_or_path):
        from mltk.models.hub import hub_text_folder

        tower = _load_folder(hub_text_folder(name_or_path) or Path(name_or_path))
    else:
        bundle = load_clip(name_or_path, pretrained, device=device, freeze=freeze)
        if not has_hf_text_tower(bundle.model):
            raise ConfigError(f"{name_or_path!r} has open_clip's own text tower, not a Hugging Face one")
        tower = tower_from_open_clip(bundle.model, bundle.tokenizer)
    tower = tower.to(device).eval()
    if freeze:
        tower.requires_grad_(False)
    return tower


def _load_folder(path: Path) -> HFTextTower:
    """A transformers folder, or a sentence-transformers folder (``modules.json``: Transformer, Pooling, Dense,
    Normalize)."""
    from transformers import AutoModel, AutoTokenizer

    from mltk.core.no_remote_code import refuse_custom_code
    from mltk.models.hub import from_pretrained

    refuse_custom_code(path)
    modules = read_json(path / "modules.json") if (path / "modules.json").is_file() else []
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ConfigError("modules.json is not a list of modules", path / "modules.json")
    model_dir, pooling, dense, normalize = path, "mean", [], False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        relative = module.get("path", "")
        if not isinstance(relative, str) or Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise ConfigError(f"module path {str(relative)[:60]!r} leaves the model folder", path / "modules.json")
        folder = path / relative
        if kind == "Transformer":
            model_dir = folder
        elif kind == "Pooling":
            pooling = read_pooling(folder / "config.json")
        elif kind == "Dense":
            dense.append(load_dense(folder))
        elif kind == "Normalize":
            normalize = True
        else:
            raise ConfigError(f"unsupported sentence-transformers module {module.get('type')!r}", path / "modules.json")
    if not (model_dir / "config.json").is_file():
        raise ConfigError("no transformers config.json in the model folder", model_dir)
    st_config = (
        read_json(model_dir / "sentence_bert_config.json")
        if (model_dir / "sentence_bert_config.json").is_file()
        else {}
    )
    with model_download(str(path)), quiet_transformers():  # a folder naming its base model may reach for the hub
        try:
            transformer = from_pretrained(AutoModel, model_dir, add_pooling_layer=False)  # BERT's pooler is unused
        except TypeError:  # encoders without a pooler take no such argument
            transformer = from_pretrained(AutoModel, model_dir)
        hf_tokenizer = from_pretrained(AutoTokenizer, model_dir)
    tokenizer = PaddedTokenizer(hf_tokenizer, lower_case=bool(st_config.get("do_lower_case")))
    context = st_config.get("max_seq_length") or _tokenizer_limit(hf_tokenizer)
    tower = HFTextTower(
        transformer,
        tokenizer,
        pooling,
        nn.Sequential(*dense) if dense else None,
        context_length=context,
        normalizes_output=normalize,
    )
    tokenizer.context_length = tower.context_length  # the position table may be the tighter limit
    return tower


@contextlib.contextmanager
def quiet_transformers():
    """transformers reports the unused BERT pooler weights and a progress bar on every load; mltk means to skip
    the pooler, and its stderr is for its own progress."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()


def _tokenizer_limit(tokenizer) -> int | None:
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and limit < 100_000 else None  # "no limit" is a huge sentinel
