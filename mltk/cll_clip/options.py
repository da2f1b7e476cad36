"""The continual methods' options: a frozen dataclass per method, each field with its meaning and the source of
the value CLL-CLIP's authors ran (their ``methods.yaml`` and adapter/prompt configuration files).

The values live in the train-continual recipe's ``methods`` section (``mltk/recipes/cll-clip.json``), one object
per method; the dataclasses have no defaults. The settings layer (``mltk.settings.sections``) fills the chosen
method's options from the recipe and ``--set method.KEY=VALUE``, typed by each field (a field's ``choices`` are
checked there) and then by the dataclass's ``check()``. The resolved options are recorded in the stage
configuration (the manifest) and in the checkpoint config.

Torch-free: ``mltk --help`` and ``mltk recipes show`` read the fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk.recipes.options import NoOptions, checked, fields_of, from_mapping, options_dict, refuse_unknown
from mltk.recipes.options import option as _option

__all__ = [
    "METHOD_OPTIONS",
    "NoOptions",
    "checked_options",
    "option_fields",
    "options_dict",
    "options_from_mapping",
    "unknown_options",
]


@dataclass(frozen=True)
class EwcOptions:
    penalty: float = _option("oEWC's lambda, the weight of the penalty (methods.yaml: fisher_penalty_scale 1000).")
    gamma: float = _option("oEWC's decay of earlier tasks' Fisher information (methods.yaml: fisher_gamma 1).")
    fisher_batches: int | None = _option(
        "Batches that estimate the Fisher after a task; null: every batch of one "
        "pass over the task (the authors' code; mltk's earlier estimate: 32)."
    )
    half: bool = _option("lambda / 2, the papers' form, instead of the authors' code's lambda.")

    def check(self) -> str | None:
        return "fisher_batches must be at least 1" if (self.fisher_batches or 1) < 1 else None


@dataclass(frozen=True)
class ReplayOptions:
    memory_size: int = _option(
        "Replay memory: examples the reservoir keeps of earlier tasks (methods.yaml: memory_size 8000)."
    )
    replay_batch: int | None = _option("Replayed examples per step; null: the batch size (CLFM's double_batch_size).")
    replay_loss: str = _option(
        "Replayed examples in the task's InfoNCE with a distillation mean of their own "
        "(clfm, the authors'), in the task's batch for both terms (joint), or in a loss "
        "apart (separate).",
        choices=("clfm", "joint", "separate"),
    )

    def check(self) -> str | None:
        if self.memory_size < 1 or (self.replay_batch is not None and self.replay_batch < 1):
            return "memory_size and replay_batch must be at least 1"
        return None


@dataclass(frozen=True)
class DerOptions(ReplayOptions):
    alpha: float = _option("DER's weight of the stored-feature regression (the authors' DER: 1).")


@dataclass(frozen=True)
class AdapterOptions:
    reduction: int = _option("MLA adapters' bottleneck = width / reduction (MLA.json: reduction_factor 2).")
    position: str = _option(
        "Where an adapter sits: after the block's residual add (block, MLA.json) or on the MLP's output (mlp).",
        choices=("block", "mlp"),
    )
    init: str = _option(
        "Adapter initialisation: AdapterHub's init_weights bert (N(0, 0.02)), or zero (W_up zero, "
        "a new adapter is the identity).",
        choices=("bert", "zero"),
    )

    def check(self) -> str | None:
        return "reduction must be at least 1" if self.reduction < 1 else None


@dataclass(frozen=True)
class LoraOptions:
    rank: int = _option("LoRA's rank r (lora.json: r 8).")
    alpha: float = _option("LoRA's scale alpha / r (lora.json: alpha 8).")
    dropout: float = _option("Dropout on the input of LoRA's A (lora.json: 0).")
    targets: str = _option("Projections with LoRA, of q, k, v joined by + (lora.json: q+v; the paper's appendix: k+v).")

    @property
    def projections(self) -> tuple[str, ...]:
        """The targets in q, k, v order."""
        return tuple(p for p in "qkv" if p in self.targets.split("+"))

    def check(self) -> str | None:
        if self.rank < 1 or not 0 <= self.dropout < 1:
            return f"rank must be at least 1 and dropout in [0, 1) (got {self.rank}, {self.dropout})"
        parts = self.targets.split("+")
        if not parts or len(set(parts)) != len(parts) or not set(parts) <= {"q", "k", "v"}:
            return f"targets must be q, k and/or v joined by + (e.g. q+v or k+v), got {self.targets!r}"
        return None


@dataclass(frozen=True)
class PTuningOptions:
    length: int = _option("P-Tuning's prefix vectors per block (prefix_tuning: prefix_length 30).")
    bottleneck: int = _option("Hidden width of P-Tuning's tanh MLP (prefix_tuning: bottleneck_size 512).")
    separate_kv: bool = _option(
        "Keys and values of their own per block (prefix_tuning); false: one vector for both (p_tuning.json)."
    )
    layer_norm: bool = _option("LayerNorm on the produced prefixes (p_tuning.json's use_ln; prefix_tuning has none).")

    def check(self) -> str | None:
        return "length and bottleneck must be at least 1" if min(self.length, self.bottleneck) < 1 else None


@dataclass(frozen=True)
class DualPromptOptions:
    g_length: int = _option("DualPrompt's general prompt length (prompt.py: g_p_length 2, 1 key + 1 value).")
    e_length: int = _option("DualPrompt's expert prompt length (prompt.py: e_p_length 16, 8 keys + 8 values).")
    g_layers: tuple[int, ...] = _option("Blocks with the general prompt (prompt.py: 0, 1).")
    e_layers: tuple[int, ...] = _option("Blocks with the expert prompt (prompt.py: 2, 3, 4).")
    pool: int = _option("Expert prompts, one per task (prompt.py: e_pool_size 36).")
    pull_weight: float = _option("Weight of the key-query matching loss (pull_constraint_coeff 1).")
    key_init: str = _option(
        "A new key: uniform in [-1, 1) (the authors' code), or the task's mean query.", choices=("uniform", "mean")
    )
    candidates: str = _option(
        "Keys ranked at test time: the whole pool (all, the authors' code), or the trained ones.",
        choices=("all", "trained"),
    )

    def check(self) -> str | None:
        if self.g_length < 2 or self.e_length < 2 or self.g_length % 2 or self.e_length % 2:
            return "g_length and e_length must be even and at least 2 (half keys, half values)"
        return "pool must be at least 1" if self.pool < 1 else None


@dataclass(frozen=True)
class CodaPromptOptions:
    components: int = _option("CODA-Prompt's components added per task (prompt.py: e_pool_size 36 x 5 for 36 tasks).")
    length: int = _option("CODA-Prompt's prompt length (prompt.py: e_p_length 2, 1 key + 1 value).")
    layers: tuple[int, ...] = _option("Blocks with CODA prompts (prompt.py: 0-4).")
    tasks: int = _option("The most tasks CODA-Prompt is set up for (prompt.py: n_tasks 36).")

    def check(self) -> str | None:
        if self.length < 2 or self.length % 2:
            return "length must be even and at least 2 (half keys, half values)"
        return "components and tasks must be at least 1" if min(self.components, self.tasks) < 1 else None


# Each method's options (``--method``; ``mltk.cll_clip.methods.METHODS`` holds the same names).
METHOD_OPTIONS: dict[str, type] = {
    "cll-clip": NoOptions,
    "oewc": EwcOptions,
    "er": ReplayOptions,
    "der": DerOptions,
    "mla": AdapterOptions,
    "lora": LoraOptions,
    "ptuning": PTuningOptions,
    "dualprompt": DualPromptOptions,
    "codaprompt": CodaPromptOptions,
}


def option_fields(method: str) -> dict[str, tuple[Any, Any]]:
    """Each option of ``method``: its type and its metadata (``help``, ``choices``)."""
    return fields_of(METHOD_OPTIONS[method])


def unknown_options(method: str, keys: Iterable[str], how: str) -> None:
    """Refuse the keys of ``keys`` that are no option of ``method``, naming them (as ``how`` writes a key, e.g.
    ``--set method.{}``), the method and its options."""
    refuse_unknown(METHOD_OPTIONS[method], f"method {method}", keys, how)


def checked_options(method: str, values: Mapping[str, Any]) -> Any:
    """The options dataclass of ``method`` from every option's typed value, refused unless its ``check()``
    passes."""
    return checked(METHOD_OPTIONS[method], f"method {method}", values)


def options_from_mapping(method: str, values: Mapping[str, Any], source: str | Path | None = None) -> Any:
    """The options of ``method`` from a mapping of JSON values naming every option (a checkpoint's recorded
    options), each checked against its field; an unknown or a missing key is refused, naming ``source``."""
    return from_mapping(METHOD_OPTIONS[method], f"method {method}", values, source)
