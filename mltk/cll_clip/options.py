"""The continual methods' options: a frozen dataclass per method, each field with its meaning and the source of
the value CLL-CLIP's authors ran (their ``methods.yaml`` and adapter/prompt configuration files).

The values live in the train-continual recipe's ``methods`` section (``mltk/recipes/cll-clip.json``), one object
per method; the dataclasses have no defaults. The settings layer (``mltk.settings.methods``) fills the chosen
method's options from the recipe and ``--set method.KEY=VALUE``, typed by each field (a field's ``choices`` are
checked there) and then by the dataclass's ``check()``. The resolved options are recorded in the stage
configuration (the manifest) and in the checkpoint config.

Torch-free: ``mltk --help`` and ``mltk recipes show`` read the fields.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mltk.core.errors import ConfigError
from mltk.recipes.values import check_value


def _option(help_text: str, **more: Any) -> Any:
    """A field without a default (its value is the recipe's), with its meaning as ``help``."""
    return dataclasses.field(metadata={"help": help_text, **more})


@dataclass(frozen=True)
class NoOptions:
    """Plain CLL-CLIP has no options of its own (the table's settings are the stage's)."""


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


def options_dict(options: Any) -> dict[str, Any]:
    """JSON-ready ``{key: value}`` of an options dataclass (tuples as lists)."""
    return {
        f.name: list(v) if isinstance(v := getattr(options, f.name), tuple) else v for f in dataclasses.fields(options)
    }


def option_fields(method: str) -> dict[str, tuple[Any, Any]]:
    """Each option of ``method``: its type and its metadata (``help``, ``choices``)."""
    options_class = METHOD_OPTIONS[method]
    hints = typing.get_type_hints(options_class)
    return {f.name: (hints[f.name], f.metadata) for f in dataclasses.fields(options_class)}


def unknown_options(method: str, keys: Iterable[str], how: str) -> None:
    """Refuse the keys of ``keys`` that are no option of ``method``, naming them (as ``how`` writes a key, e.g.
    ``--set method.{}``), the method and its options."""
    fields = option_fields(method)
    unknown = [key for key in keys if key not in fields]
    if unknown:
        named = ", ".join(how.format(key) for key in unknown)
        raise ConfigError(f"{named}: not an option of method {method} (its options: {', '.join(fields) or 'none'})")


def checked_options(method: str, values: Mapping[str, Any]) -> Any:
    """The options dataclass of ``method`` from every option's typed value, refused unless its ``check()``
    passes."""
    options = METHOD_OPTIONS[method](**values)
    problem = options.check() if hasattr(options, "check") else None
    if problem:
        raise ConfigError(f"the options of method {method}: {problem}")
    return options


def options_from_mapping(method: str, values: Mapping[str, Any], source: str | Path | None = None) -> Any:
    """The options of ``method`` from a mapping of JSON values naming every option (a checkpoint's recorded
    options), each checked against its field; an unknown or a missing key is refused, naming ``source``."""
    fields = option_fields(method)
    unknown_options(method, values, "option {}")
    missing = [key for key in fields if key not in values]
    if missing:
        raise ConfigError(f"the options of method {method} lack {', '.join(missing)}", source)
    plain = {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}
    return checked_options(
        method,
        {
            key: check_value(plain[key], hint, key, source, what="option", metadata=metadata)
            for key, (hint, metadata) in fields.items()
        },
    )
