"""Load an MLA text encoder exported by ``mltk export CKPT --format mla`` (this file is copied into the folder).

Needs only torch, safetensors and open_clip (a CLIP base) or transformers (a text-only base); no mltk::

    import sys; sys.path.insert(0, "FOLDER")
    from mla_loader import load
    encoder = load("FOLDER")
    features = encoder.encode(["Ein Hund rennt."], "de")  # [B, D]; "en" reads the base as it is

MLA (Zhang et al., "Generalizing Multimodal Pre-training into Multilingual via Language Acquisition"): English takes
the frozen base tower's own path. Every other language is tokenised by the non-native tokenizer (``tokenizer/``,
or the base's own), embedded by ``E = table @ proj.T + bias`` (the shared non-native embedding), given the base's
positions, and after each block ``i`` of the base goes through its language's acquirer
``h <- h + W_up(ReLU(W_down(h)))`` (``linear``: no ReLU; ``none``: no acquirer), then is pooled and projected as
the base pools (CLIP: at the first end token, ``ln_final``, ``text_projection``; a transformers tower: mean, CLS or
last token over the real tokens, then its Dense layers). Folder: ``base/`` (an open_clip ``local-dir:`` folder or
a transformers folder), ``acquirers.safetensors``, ``mla_config.json``, ``tokenizer/`` when the non-native tokenizer
is not the base's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import load_file

ACTIVATIONS = {"Identity": nn.Identity, "Tanh": nn.Tanh, "ReLU": nn.ReLU, "GELU": nn.GELU, "Sigmoid": nn.Sigmoid}


def first_end(tokens: torch.Tensor, end_id: int) -> torch.Tensor:
    """Lengths [B] of rows [B, L] that end at their FIRST ``end_id`` (the last position when absent)."""
    is_end = tokens == end_id
    first = is_end.int().argmax(dim=-1)
    return torch.where(is_end.any(dim=-1), first, torch.full_like(first, tokens.shape[1] - 1)) + 1


class ClipBase:
    """An open_clip CLIP's text tower, run block by block."""

    def __init__(self, folder: Path):
        import open_clip

        self.model = open_clip.create_model_and_transforms(f"local-dir:{folder}")[0].eval()
        self.tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
        self.end_id = int(getattr(self.tokenizer, "eot_token_id", 49407))
        self.context_length = self.model.positional_embedding.shape[0]
        self.word_embeddings = self.model.token_embedding

    def native(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.tokenizer(texts)
        return tokens, first_end(tokens, self.end_id)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, after_block) -> torch.Tensor:
        model, length = self.model, int(lengths.max())
        x = x[:, :length] + model.positional_embedding[:length]
        mask = model.attn_mask[:length, :length] if model.attn_mask is not None else None
        batch_first = getattr(model.transformer, "batch_first", False)
        x = x if batch_first else x.transpose(0, 1)
        for index, block in enumerate(model.transformer.resblocks):
            x = after_block(index, block(x, attn_mask=mask))
        x = x if batch_first else x.transpose(0, 1)
        x = model.ln_final(x[torch.arange(x.shape[0]), lengths - 1])
        proj = model.text_projection
        return proj(x) if isinstance(proj, nn.Linear) else x @ proj


class TransformersBase:
    """A BERT-style transformers encoder, run block by block as transformers runs it, pooled as configured."""

    def __init__(self, folder: Path, config: dict):
        from transformers import AutoModel, AutoTokenizer

        self.model = AutoModel.from_pretrained(folder, trust_remote_code=False).eval()  # never code from a folder
        self.tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        self.pooling, self.lower_case = config["pooling"], config["lower_case"]
        self.context_length = config["context_length"]
        self.end_id = self.tokenizer.sep_token_id
        self.word_embeddings = self.model.embeddings.word_embeddings
        self.dense = nn.Sequential(*[self._dense(layer, folder) for layer in config["dense"]])

    @staticmethod
    def _dense(layer: dict, folder: Path) -> nn.Module:
        state = load_file(str(folder / layer["file"]))
        linear = nn.Linear(state["weight"].shape[1], state["weight"].shape[0], bias="bias" in state)
        linear.load_state_dict(state)
        return nn.Sequential(linear, ACTIVATIONS[layer["activation"]]())

    def native(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        texts = [t.lower() for t in texts] if self.lower_case else texts
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.context_length, return_tensors="pt"
        )
        return batch["input_ids"], batch["attention_mask"].sum(dim=1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, after_block) -> torch.Tensor:
        embeddings, length = self.model.embeddings, int(lengths.max())
        x = x[:, :length]
        positions = torch.arange(length)
        real = positions[None, :] < lengths[:, None]  # [B, L] True on real tokens
        h = x + embeddings.position_embeddings(positions[None, :].expand(x.shape[0], -1))
        if getattr(embeddings, "token_type_embeddings", None) is not None:
            h = h + embeddings.token_type_embeddings(torch.zeros_like(real, dtype=torch.long))
        h = embeddings.LayerNorm(h)
        mask = self._mask(real, h)
        for index, layer in enumerate(self.model.encoder.layer):
            out = layer(h, mask)
            h = after_block(index, out[0] if isinstance(out, tuple) else out)
        if self.pooling == "mean":
            weights = real.to(h.dtype).unsqueeze(-1)
            pooled = (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        elif self.pooling == "end":
            pooled = h[torch.arange(h.shape[0]), lengths - 1]
        else:
            pooled = h[:, 0]
        return self.dense(pooled)

    def _mask(self, real: torch.Tensor, h: torch.Tensor):
        try:
            from transformers.masking_utils import create_bidirectional_mask
        except ImportError:  # transformers 4.x
            return self.model.get_extended_attention_mask(real.long(), real.shape)
        return create_bidirectional_mask(config=self.model.config, inputs_embeds=h, attention_mask=real.long())


class MlaTextEncoder:
    """English through the base; other languages through the non-native embedding and their acquirers."""

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        self.config = json.loads((folder / "mla_config.json").read_text(encoding="utf-8"))
        base = folder / "base"
        self.base = ClipBase(base) if self.config["base"] == "open_clip" else TransformersBase(base, self.config)
        self.tensors = load_file(str(folder / "acquirers.safetensors"))
        source = self.config["tokenizer"]
        if source == "base":
            self.non_native, self.end_id = None, self.base.end_id
        else:
            from transformers import AutoTokenizer

            self.non_native = AutoTokenizer.from_pretrained(folder / source, trust_remote_code=False)
            self.end_id = (
                self.non_native.sep_token_id
                if self.non_native.sep_token_id is not None
                else self.non_native.eos_token_id
            )
        self.native_lang, self.languages = self.config["native_lang"], self.config["languages"]

    def tokenize(self, texts: list[str], lang: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Texts -> (tokens [B, L], lengths [B]) cut to the longest row: the base's own tokenizer for English (and
        for every language when the non-native tokenizer is the base's), else the non-native one."""
        if self.non_native is None or lang == self.native_lang:
            tokens, lengths = self.base.native(list(texts))
        else:
            tokens = self.non_native(
                list(texts),
                padding="longest",
                truncation=True,
                max_length=self.base.context_length,
                return_tensors="pt",
            )["input_ids"]
            lengths = first_end(tokens, self.end_id)
        return tokens[:, : int(lengths.max())], lengths

    def acquirer(self, lang: str):
        t, kind = self.tensors, self.config["acquirer"]

        def after_block(index: int, h: torch.Tensor) -> torch.Tensor:
            if lang == self.native_lang or kind == "none":
                return h
            key = f"acquirers.{lang}.{index}"
            down = h @ t[f"{key}.c_fc.weight"].T + t[f"{key}.c_fc.bias"]
            down = torch.relu(down) if kind == "mlp" else down
            return h + down @ t[f"{key}.c_proj.weight"].T + t[f"{key}.c_proj.bias"]

        return after_block

    @torch.no_grad()
    def encode(self, texts: list[str], lang: str) -> torch.Tensor:
        """Texts of one language -> features [B, D], L2-normalised when ``mla_config.json`` says ``normalize``
        (a base whose users normalise its output, sentence-transformers' ``Normalize``), else as the base gives
        them (a CLIP's, as open_clip's ``encode_text``)."""
        if lang != self.native_lang and lang not in self.languages:
            raise ValueError(f"no acquirers for {lang!r} (has {self.native_lang}, {', '.join(self.languages)})")
        tokens, lengths = self.tokenize(texts, lang)
        if lang == self.native_lang:
            x = self.base.word_embeddings(tokens)
        else:
            t = self.tensors
            x = t["embedding.table.weight"][tokens] @ t["embedding.proj.weight"].T + t["embedding.proj.bias"]
        features = self.base.forward(x, lengths, self.acquirer(lang))  # [B, D]
        return nn.functional.normalize(features, dim=-1) if self.config.get("normalize") else features


def load(folder: str | Path) -> MlaTextEncoder:
    return MlaTextEncoder(folder)
