"""Prompt baselines: P-Tuning, DualPrompt and CODA-Prompt on the frozen text tower (each beside the table).

- **P-Tuning** (Liu et al. 2021): a continuous prompt of ``ptuning_length`` vectors (30 in the CLL-CLIP paper) is
  inserted into the input right after the start token and shared by every task. The prompt takes context
  positions: texts are tokenised to ``context - 30`` tokens, and the feature is pooled at the first end token
  shifted by the prompt length.
- **DualPrompt** (Wang et al. 2022), prefix-tuning form: a general prompt trained in every task is prepended to
  the keys and values of blocks ``dual_g_layers``, and one expert prompt per task to those of
  ``dual_e_layers``. Each expert prompt has a key; the query is the feature of the text through the tower without
  prompts (detached). Training uses the current task's expert prompt and adds the matching loss
  ``pull_weight * (1 - cos(query, key_t))``; at test time each text takes the expert prompt whose key is nearest
  (no task identity). A new key starts at the normalised mean query of the task's captions (the minimiser of
  its matching loss) instead of a random point: with a learning rate sized for the table, a random key would
  not reach its queries within a few epochs.
- **CODA-Prompt** (Smith et al. 2023): per block in ``coda_layers`` a prompt is a weighted sum of components,
  ``P = sum_m alpha_m P_m`` with ``alpha_m = cos(query * A_m, K_m)`` (A_m an attention vector, K_m a key), split
  into key and value halves for prefix-tuning. Each task adds ``coda_components`` components (orthogonal to the
  earlier ones, Gram-Schmidt) and trains only its own; earlier ones are frozen. No task identity is needed.
  The paper's optional orthogonality penalty is left out (its default weight in the authors' code is 0).

Initialisation follows the CODA-Prompt authors' code (which also holds their DualPrompt): prompts, keys and
attention vectors uniform in [0, 1), CODA's orthonormalised. Prefix prompts add no positions (see
``mltk.continual.blocks``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.continual.base import ContinualMethod
from mltk.continual.blocks import forward_text
from mltk.models.text import trim_to_lengths


def _generator(seed: int, *parts: int) -> torch.Generator:
    return torch.Generator().manual_seed(hash((seed,) + parts) % (2 ** 63))


def prompt_query(encoder, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The frozen-path query [B, D]: the L2-normalised feature of the text through the tower without prompts."""
    with torch.no_grad():
        return F.normalize(encoder.tower.forward_embeddings(x.detach(), lengths).float(), dim=-1)


def gram_schmidt(existing: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """Orthonormalise the rows of ``new`` [n, d] against ``existing`` [m, d] (orthonormal) and each other; rows
    beyond the dimension d cannot be orthogonal and are only normalised."""
    basis = [row for row in existing.float()]
    out = []
    for row in new.float():
        vector = row.clone()
        if len(basis) < row.numel():
            for b in basis:
                vector = vector - (vector @ b) * b
        vector = vector / vector.norm().clamp_min(1e-12)
        basis.append(vector)
        out.append(vector)
    return torch.stack(out).to(new.dtype)


class PTuning(ContinualMethod):
    name = "ptuning"
    description = "P-Tuning: a shared continuous prompt inserted after the start token"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        length = self.options.ptuning_length
        self.prompt = nn.Parameter(torch.randn(length, self.width, generator=_generator(self.seed, 1)) * 0.02)

    @property
    def reserved_positions(self) -> int:
        return self.options.ptuning_length

    def trainable(self) -> dict[str, nn.Parameter]:
        return {"prompt": self.prompt}

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        prompt = self.prompt.to(x.dtype).unsqueeze(0).expand(x.shape[0], -1, -1)  # [B, P, W]
        x = torch.cat([x[:, :1], prompt, x[:, 1:]], dim=1)  # start token, prompt, the rest
        return encoder.tower.forward_embeddings(x, lengths + prompt.shape[1])


class DualPrompt(ContinualMethod):
    name = "dualprompt"
    description = "DualPrompt: general + per-task expert prefix prompts, expert chosen by key matching"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.g_layers = [layer for layer in self.options.dual_g_layers if layer < self.num_blocks]
        self.e_layers = [layer for layer in self.options.dual_e_layers if layer < self.num_blocks]
        shape = (len(self.g_layers), 2, self.options.dual_g_length, self.width)  # [layers, key/value, length, W]
        self.g_prompt = nn.Parameter(torch.rand(shape, generator=_generator(self.seed, 2)))
        self.e_prompts = nn.ParameterList()  # per task [e layers, 2, length, W]
        self.e_keys = nn.ParameterList()  # per task [D]
        self.current: int | None = None

    def structure(self) -> dict[str, Any]:
        return {"tasks": len(self.e_prompts)}

    def build(self, structure: dict[str, Any]) -> None:
        while len(self.e_prompts) < structure.get("tasks", 0):
            self._add_task(torch.rand(self.output_dim))

    def _add_task(self, key: torch.Tensor) -> None:
        device = self.g_prompt.device
        shape = (len(self.e_layers), 2, self.options.dual_e_length, self.width)
        generator = _generator(self.seed, 3, len(self.e_prompts))
        self.e_prompts.append(nn.Parameter(torch.rand(shape, generator=generator).to(device)))
        self.e_keys.append(nn.Parameter(key.to(device)))

    def begin_task(self, run) -> None:
        tokens, lengths = trim_to_lengths(run.sample_tokens(512), run.encoder.tokenizer.eot_token_id)
        device = run.encoder.table.device
        query = prompt_query(run.encoder, F.embedding(tokens.to(device), run.encoder.table), lengths.to(device))
        self._add_task(F.normalize(query.mean(dim=0), dim=0).cpu())
        self.current = len(self.e_prompts) - 1
        for index, (prompt, key) in enumerate(zip(self.e_prompts, self.e_keys)):
            prompt.requires_grad_(index == self.current)
            key.requires_grad_(index == self.current)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {"g_prompt": self.g_prompt}
        return {"g_prompt": self.g_prompt, f"e_prompts.{self.current}": self.e_prompts[self.current],
                f"e_keys.{self.current}": self.e_keys[self.current]}

    def select(self, query: torch.Tensor) -> torch.Tensor:
        """Expert index per text [B]: the nearest key (cosine)."""
        keys = F.normalize(torch.stack(list(self.e_keys)).float(), dim=-1)  # [T, D]
        return (query @ keys.T).argmax(dim=-1)

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        batch = x.shape[0]
        expert = None
        if len(self.e_prompts):
            query = prompt_query(encoder, x, lengths)
            if self.training and self.current is not None:
                chosen = torch.full((batch,), self.current, device=x.device)
                key = F.normalize(self.e_keys[self.current].float(), dim=0)
                self.auxiliary_loss = self.options.pull_weight * (1 - query @ key).mean()
            else:
                chosen = self.select(query)
            expert = torch.stack(list(self.e_prompts))[chosen]  # [B, e layers, 2, length, W]

        def prefix(index: int):
            parts = []
            if index in self.g_layers:
                parts.append(self.g_prompt[self.g_layers.index(index)].unsqueeze(0).expand(batch, -1, -1, -1))
            if expert is not None and index in self.e_layers:
                parts.append(expert[:, self.e_layers.index(index)])
            if not parts:
                return None
            prompt = torch.cat(parts, dim=2)  # [B, 2, P, W]
            return prompt[:, 0], prompt[:, 1]

        return forward_text(encoder.tower, x, lengths, prefix=prefix)


class CodaPrompt(ContinualMethod):
    name = "codaprompt"
    description = "CODA-Prompt: attention-weighted sums of prompt components, new components per task"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.layers = [layer for layer in self.options.coda_layers if layer < self.num_blocks]
        self.prompts = nn.ParameterList()  # per task [c, layers, length, W]
        self.keys = nn.ParameterList()  # per task [c, layers, D]
        self.attention = nn.ParameterList()  # per task [c, layers, D]
        self.current: int | None = None

    def structure(self) -> dict[str, Any]:
        return {"tasks": len(self.prompts)}

    def build(self, structure: dict[str, Any]) -> None:
        while len(self.prompts) < structure.get("tasks", 0):
            self._add_task()

    def _orthogonal(self, existing: list[torch.Tensor], shape: tuple[int, ...], generator) -> torch.Tensor:
        """c new components of ``shape`` = (c, layers, ...), orthonormal per layer to the existing ones."""
        new = torch.rand(shape, generator=generator)
        flat_new = new.reshape(shape[0], shape[1], -1)
        flat_old = torch.cat([e.detach().cpu().reshape(e.shape[0], e.shape[1], -1) for e in existing]) \
            if existing else flat_new[:0]
        per_layer = [gram_schmidt(flat_old[:, layer], flat_new[:, layer]) for layer in range(shape[1])]
        return torch.stack(per_layer, dim=1).reshape(shape)

    def _add_task(self) -> None:
        count, layers = self.options.coda_components, len(self.layers)
        task = len(self.prompts)
        device = next(self.parameters(), torch.zeros(())).device
        shapes = {"prompts": (count, layers, self.options.coda_length, self.width),
                  "keys": (count, layers, self.output_dim), "attention": (count, layers, self.output_dim)}
        for number, (name, shape) in enumerate(shapes.items()):
            store: nn.ParameterList = getattr(self, name)
            value = self._orthogonal(list(store), shape, _generator(self.seed, 4, task, number))
            store.append(nn.Parameter(value.to(device)))

    def begin_task(self, run) -> None:
        self._add_task()
        self.current = len(self.prompts) - 1
        for store in (self.prompts, self.keys, self.attention):
            for index, tensor in enumerate(store):
                tensor.requires_grad_(index == self.current)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {}
        return {f"{name}.{self.current}": getattr(self, name)[self.current]
                for name in ("prompts", "keys", "attention")}

    def weights(self, query: torch.Tensor) -> torch.Tensor:
        """alpha [B, M, layers] = cos(query * A_m, K_m) per layer."""
        keys = torch.cat(list(self.keys)).float()  # [M, layers, D]
        attention = torch.cat(list(self.attention)).float()
        attended = F.normalize(query[:, None, None, :] * attention[None], dim=-1)  # [B, M, layers, D]
        return (attended * F.normalize(keys, dim=-1)[None]).sum(dim=-1)

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        if not len(self.prompts):
            return encoder.tower.forward_embeddings(x, lengths)
        alpha = self.weights(prompt_query(encoder, x, lengths))  # [B, M, layers]
        components = torch.cat(list(self.prompts))  # [M, layers, length, W]
        prompts = torch.einsum("bml,mlpw->blpw", alpha.to(components.dtype), components)  # [B, layers, P, W]
        half = self.options.coda_length // 2

        def prefix(index: int):
            if index not in self.layers:
                return None
            prompt = prompts[:, self.layers.index(index)]
            return prompt[:, :half], prompt[:, half:]

        return forward_text(encoder.tower, x, lengths, prefix=prefix)
