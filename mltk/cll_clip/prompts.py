"""Prompt baselines: P-Tuning, DualPrompt and CODA-Prompt on the frozen text tower (each beside the table).

- **P-Tuning** as the CLL-CLIP authors ran it: AdapterHub's built-in ``prefix_tuning`` config under the
  ``adapters`` 0.1.0 they pin (prefix tuning, Li and Liang 2021; prefix length 30, bottleneck 512, tanh): per task,
  ``length`` learned vectors [P, W] pass through ``Linear(W, 512) -> tanh -> Linear(512, blocks x 2 x W)``, giving
  each block its own P keys and P values (``separate_kv=true``; AdapterHub's ``PrefixTuning`` views the output as
  [P, blocks x 2, W] and splits it into (key, value) per block), with no LayerNorm. ``separate_kv=false
  layer_norm=true`` is the variant of the authors' unused ``p_tuning.json`` (``different_kv`` false, ``use_ln``):
  one vector per position serves as key and value, after a LayerNorm over W. The prefixes take no input positions:
  the text keeps all context positions and is pooled where it would be without them. Task-specific: one prefix
  encoder per language, chosen by the caption's language at evaluation (task identity).
- **DualPrompt** (Wang et al. 2022), prefix-tuning form as in the CLL-CLIP authors' ``prompt.py``: a general
  prompt of length 2 in blocks 0-1 and one expert prompt of length 16 per task (pool 36) in blocks 2-4; a prompt
  of length L gives L/2 keys and L/2 values to its block's attention. (The authors' loop over blocks stops
  before the last expert block, ``range(max(layers))``; mltk prompts every block listed.) Each expert prompt has a
  key; the query is the feature of the text through the tower without prompts (detached). Training uses the current
  task's expert prompt and adds the matching loss
  ``pull_weight * (1 - cos(query, key_t))``; at test time each text takes the expert prompt whose key is nearest
  (no task identity). As the authors' code has it (CODA-Prompt's DualPrompt): the whole pool of keys and expert
  prompts exists from the start, uniform in [-1, 1), task t trains entry t, and at test time all ``pool`` keys
  are candidates, untrained ones included (``candidates=all``). ``key_init=mean`` starts a task's key at the
  normalised mean query of its captions instead (the minimiser of its matching loss) and ``candidates=trained``
  ranks only the keys of trained tasks (mltk's earlier form).
- **CODA-Prompt** (Smith et al. 2023): per block in ``coda_layers`` a prompt is a weighted sum of components,
  ``P = sum_m alpha_m P_m`` with ``alpha_m = cos(query * A_m, K_m)`` (A_m an attention vector, K_m a key), split
  into key and value halves for prefix-tuning. Each task adds ``coda_components`` components (orthogonal to the
  earlier ones, Gram-Schmidt) and trains only its own; earlier ones are frozen. No task identity is needed.
  The paper's optional orthogonality penalty is left out (its default weight in the authors' code is 0).

Initialisation follows the CLL-CLIP authors' ``prompt.py`` (adapted from CODA-Prompt's code): prompts, keys and
attention vectors uniform in [-1, 1), CODA's orthonormalised. Prefix prompts add no positions (see
``mltk.cll_clip.blocks``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mltk.cll_clip.base import ContinualMethod, PerLanguageMethod, TaskContext
from mltk.cll_clip.blocks import forward_text
from mltk.cll_clip.options import CodaPromptOptions, DualPromptOptions, PTuningOptions
from mltk.core.errors import ConfigError
from mltk.models.text import trim_to_lengths


def _generator(seed: int, *parts: int) -> torch.Generator:
    return torch.Generator().manual_seed(hash((seed,) + parts) % (2**63))


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


class PrefixEncoder(nn.Module):
    """One task's prefixes: ``vectors`` [P, W] -> MLP -> keys and values [blocks, P, W] each (separate: the MLP's
    output viewed as [P, blocks, 2, W], AdapterHub's order; shared: [P, blocks, W] serves as both)."""

    def __init__(
        self,
        length: int,
        width: int,
        blocks: int,
        bottleneck: int,
        layer_norm: bool,
        seed: int,
        separate_kv: bool = True,
    ):
        super().__init__()
        self.kinds = 2 if separate_kv else 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.vectors = nn.Parameter(torch.randn(length, width))  # nn.Embedding's N(0, 1)
            self.mlp = nn.Sequential(
                nn.Linear(width, bottleneck), nn.Tanh(), nn.Linear(bottleneck, blocks * self.kinds * width)
            )
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()
        self.blocks, self.width = blocks, width

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.mlp(self.vectors).reshape(-1, self.blocks, self.kinds, self.width)  # [P, blocks, 1 or 2, W]
        out = self.norm(out).permute(2, 1, 0, 3)  # [1 or 2, blocks, P, W]
        return out[0], out[-1]  # keys, values: [blocks, P, W] each (the same tensor when shared)


class PTuning(PerLanguageMethod):
    name = "ptuning"
    description = "P-Tuning (prefix tuning, 30 per block from a tanh MLP), one prefix per language (task identity)"
    Options = PTuningOptions
    modules_name = "prefixes"

    def new_module(self, lang: str) -> nn.Module:
        options = self.options
        return PrefixEncoder(
            options.length,
            self.width,
            self.num_blocks,
            options.bottleneck,
            options.layer_norm,
            self.seed * 7919 + len(self.prefixes),
            separate_kv=options.separate_kv,
        )

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        if lang not in self.prefixes:
            return encoder.tower.forward_embeddings(x, lengths)
        keys, values = (t.to(x.dtype) for t in self.prefixes[lang]())  # [blocks, P, W] each
        batch = x.shape[0]

        def prefix(index: int):  # [B, P, W] keys and values of block ``index``
            return (keys[index].unsqueeze(0).expand(batch, -1, -1), values[index].unsqueeze(0).expand(batch, -1, -1))

        return forward_text(encoder.tower, x, lengths, prefix=prefix)


def _uniform(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Uniform in [-1, 1), the authors' ``tensor_prompt`` initialisation."""
    return torch.rand(shape, generator=generator) * 2 - 1


def _key_value(prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A prompt [B, L, W] as prefix keys (its first L/2 vectors) and values (the rest), as the authors split it."""
    half = prompt.shape[1] // 2
    return prompt[:, :half], prompt[:, half:]


class DualPrompt(ContinualMethod):
    name = "dualprompt"
    description = "DualPrompt: general + per-task expert prefix prompts, expert chosen by key matching (top-1)"
    Options = DualPromptOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.g_layers = [layer for layer in self.options.g_layers if layer < self.num_blocks]
        self.e_layers = [layer for layer in self.options.e_layers if layer < self.num_blocks]
        shape = (len(self.g_layers), self.options.g_length, self.width)  # [g layers, length, W]
        self.g_prompt = nn.Parameter(_uniform(shape, _generator(self.seed, 2)))
        self.e_prompts = nn.ParameterList()  # per pool entry [e layers, length, W]
        self.e_keys = nn.ParameterList()  # per pool entry [D]
        self.trained = 0  # tasks that have begun: entries 0..trained-1 are theirs
        self.current: int | None = None
        if self.options.candidates == "all":  # the whole pool from the start (the authors' code)
            self._grow(self.options.pool)

    def structure(self) -> dict[str, Any]:
        return {"tasks": self.trained}

    def build(self, structure: dict[str, Any]) -> None:
        self.trained = structure.get("tasks", 0)
        self._grow(self.trained)

    def _grow(self, entries: int) -> None:
        """Pool entries up to ``entries``: expert prompts and keys uniform in [-1, 1)."""
        if entries > self.options.pool:
            raise ConfigError(
                f"DualPrompt's pool holds {self.options.pool} expert prompts, one per task; "
                f"raise it with --set method.pool=N"
            )
        device = self.g_prompt.device
        shape = (len(self.e_layers), self.options.e_length, self.width)
        while len(self.e_prompts) < entries:
            index = len(self.e_prompts)
            self.e_prompts.append(nn.Parameter(_uniform(shape, _generator(self.seed, 3, index)).to(device)))
            self.e_keys.append(nn.Parameter(_uniform((self.output_dim,), _generator(self.seed, 5, index)).to(device)))

    def begin_task(self, task: TaskContext) -> None:
        self._grow(self.trained + 1)
        self.current, self.trained = self.trained, self.trained + 1
        if self.options.key_init == "mean":
            tokens, lengths = trim_to_lengths(task.sample_tokens(512), task.encoder.tokenizer.eot_token_id)
            device = task.encoder.table.device
            query = prompt_query(task.encoder, F.embedding(tokens.to(device), task.encoder.table), lengths.to(device))
            with torch.no_grad():
                self.e_keys[self.current].copy_(F.normalize(query.mean(dim=0), dim=0))
        for index, (prompt, key) in enumerate(zip(self.e_prompts, self.e_keys)):
            prompt.requires_grad_(index == self.current)
            key.requires_grad_(index == self.current)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {"g_prompt": self.g_prompt}
        return {
            "g_prompt": self.g_prompt,
            f"e_prompts.{self.current}": self.e_prompts[self.current],
            f"e_keys.{self.current}": self.e_keys[self.current],
        }

    def select(self, query: torch.Tensor) -> torch.Tensor:
        """Expert index per text [B]: the nearest candidate key (cosine, top-1)."""
        candidates = len(self.e_keys) if self.options.candidates == "all" else self.trained
        keys = F.normalize(torch.stack(list(self.e_keys)[:candidates]).float(), dim=-1)  # [T, D]
        return (query @ keys.T).argmax(dim=-1)

    def prompts(self, index: int, batch: int, expert: torch.Tensor | None) -> list[torch.Tensor]:
        """The prefix prompt [B, P, W] of block ``index``: its expert prompt, then its general prompt."""
        parts = []
        if expert is not None and index in self.e_layers:
            parts.append(expert[:, self.e_layers.index(index)])
        if index in self.g_layers:
            parts.append(self.g_prompt[self.g_layers.index(index)].unsqueeze(0).expand(batch, -1, -1))
        return parts

    def encode(self, encoder, x: torch.Tensor, lengths: torch.Tensor, lang: str | None) -> torch.Tensor:
        batch = x.shape[0]
        expert = None
        if self.trained:
            query = prompt_query(encoder, x, lengths)
            if self.training and self.current is not None:
                chosen = torch.full((batch,), self.current, device=x.device)
                key = F.normalize(self.e_keys[self.current].float(), dim=0)
                pull = (1 - query @ key).mean()
                self.auxiliary_loss = self.options.pull_weight * pull, {"prompt_pull": pull}
            else:
                chosen = self.select(query)
            expert = torch.stack(list(self.e_prompts))[chosen]  # [B, e layers, length, W]

        def prefix(index: int):
            parts = [_key_value(p) for p in self.prompts(index, batch, expert)]
            if not parts:
                return None
            return torch.cat([k for k, _ in parts], dim=1), torch.cat([v for _, v in parts], dim=1)

        return forward_text(encoder.tower, x, lengths, prefix=prefix)


class CodaPrompt(ContinualMethod):
    name = "codaprompt"
    description = "CODA-Prompt: attention-weighted sums of prompt components, new components per task"
    Options = CodaPromptOptions

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.layers = [layer for layer in self.options.layers if layer < self.num_blocks]
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
        new = _uniform(shape, generator)
        flat_new = new.reshape(shape[0], shape[1], -1)
        flat_old = (
            torch.cat([e.detach().cpu().reshape(e.shape[0], e.shape[1], -1) for e in existing])
            if existing
            else flat_new[:0]
        )
        per_layer = [gram_schmidt(flat_old[:, layer], flat_new[:, layer]) for layer in range(shape[1])]
        return torch.stack(per_layer, dim=1).reshape(shape)

    def _add_task(self) -> None:
        count, layers = self.options.components, len(self.layers)
        task = len(self.prompts)
        if task >= self.options.tasks:
            raise ConfigError(
                f"CODA-Prompt was set up for {self.options.tasks} tasks; raise it with --set method.tasks=N"
            )
        device = next(self.parameters(), torch.zeros(())).device
        shapes = {
            "prompts": (count, layers, self.options.length, self.width),
            "keys": (count, layers, self.output_dim),
            "attention": (count, layers, self.output_dim),
        }
        for number, (name, shape) in enumerate(shapes.items()):
            store: nn.ParameterList = getattr(self, name)
            value = self._orthogonal(list(store), shape, _generator(self.seed, 4, task, number))
            store.append(nn.Parameter(value.to(device)))

    def begin_task(self, task: TaskContext) -> None:
        self._add_task()
        self.current = len(self.prompts) - 1
        for store in (self.prompts, self.keys, self.attention):
            for index, tensor in enumerate(store):
                tensor.requires_grad_(index == self.current)

    def trainable(self) -> dict[str, nn.Parameter]:
        if self.current is None:
            return {}
        return {
            f"{name}.{self.current}": getattr(self, name)[self.current] for name in ("prompts", "keys", "attention")
        }

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
        half = self.options.length // 2

        def prefix(index: int):
            if index not in self.layers:
                return None
            prompt = prompts[:, self.layers.index(index)]
            return prompt[:, :half], prompt[:, half:]

        return forward_text(encoder.tower, x, lengths, prefix=prefix)
