"""Every loss's options: a frozen dataclass per loss of the registry (``mltk.losses.registry``), each field with its
meaning and the source of its value, no defaults. The values live in the recipe: train-ccrk's losses in its
recipe's ``losses`` section (``mltk/recipes/ccrk.json``, one object per loss, the run's chosen by ``config.loss``),
filled, typed and checked by the settings layer (``mltk.settings.sections``); the other stages' losses take theirs
from their recipe's config keys (``mse_form``, ``gamma1``, ``gamma2``, the alignment's ``k``).

Torch-free, like the names of the forms and weightings the losses accept (``mltk --help`` and ``mltk recipes
show`` read them); the loss classes import them from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mltk.core.scorers import SIMILARITIES
from mltk.recipes.options import NoOptions
from mltk.recipes.options import option as _option

ONE_TO_K_WEIGHTINGS = ("paper", "code")
TEMPERATURE_FORMS = ("temperature", "log")  # T itself, clamped to a range (the authors'); log(1/T), s <= 100
MSE_FORMS = ("mean", "sum")
MLMME_FORMS = ("paper", "english-pivot")  # K > 2: every language and pair summed, or English pivoting each
AME_MARGINS = {"cosine": 0.2, "order": 0.05}  # AME's margins: symmetric (cosine) 0.2, asymmetric (order) 0.05


@dataclass(frozen=True)
class ContrastiveOptions:
    """A contrastive loss's temperature: its start, whether and how it trains, and its optimizer group."""

    temperature: float = _option("Initial temperature T (CCR_k: 0.07).")
    learn_temperature: bool = _option("Train T (the paper); false keeps it fixed.")
    temperature_range: tuple[float, float] | None = _option("The clamp [low, high] of T (CCR_k's code: 0.001, 0.5).")
    temperature_form: str = _option(
        "How T trains: temperature (T itself, clamped to temperature_range: the authors') or log (log(1/T), "
        "open_clip's).",
        choices=TEMPERATURE_FORMS,
    )
    temperature_lr_scale: float = _option("T's learning rate as a multiple of the lr (CCR_k's code: 2).", min=0.0)
    temperature_weight_decay: float = _option(
        "Decoupled weight decay on T (CCR_k's code: 0.01, the run's decay).", min=0.0
    )

    def check(self) -> str | None:
        low, high = self.temperature_range or (None, None)
        if not self.temperature > 0:
            return f"temperature must be positive, got {self.temperature}"
        if self.temperature_range and not 0 < low < high:
            return f"temperature_range needs 0 < low < high, got {list(self.temperature_range)}"
        if self.temperature_range and not low <= self.temperature <= high:
            return f"temperature must lie in the clamp range [{low}, {high}], got {self.temperature}"
        if self.temperature_form == "temperature" and self.learn_temperature and not self.temperature_range:
            return "temperature_form temperature trains T itself inside temperature_range; give the range"
        return None


@dataclass(frozen=True)
class OneToKOptions(ContrastiveOptions):
    weighting: str = _option(
        "paper (both directions weigh alike) or code (the authors' code: the sum divided by K).",
        choices=ONE_TO_K_WEIGHTINGS,
    )


@dataclass(frozen=True)
class HingeOptions:
    margin: float | None = _option(
        "The hinge's margin; null: AME's margin of the similarity (0.2 cosine, 0.05 order), recorded as the number.",
        min=0.0,
    )
    similarity: str = _option(
        "cosine (symmetric) or order (AME's asymmetric order violation, Vendrov et al. 2016); validation and "
        "evaluate rank by it too.",
        choices=SIMILARITIES,
    )
    max_violation: bool = _option("Each anchor's hardest in-batch negative only (VSE++, AME's option), not the sum.")

    def completed(self) -> HingeOptions:
        """The margin of the similarity when none is given, so the manifest records the one used."""
        return self if self.margin is not None else dataclasses.replace(self, margin=AME_MARGINS[self.similarity])


@dataclass(frozen=True)
class MlmmeOptions:
    margin: float = _option("The margin of each ranking term (AME's cosine margin: 0.2).", min=0.0)
    beta: float = _option(
        "beta * S_I + (1 - beta) * S_S (Calixto et al. 2017: 0.5); 1 = the image-sentence terms alone.",
        min=0.0,
        max=1.0,
    )
    form: str = _option(
        "With K > 2 languages: paper (sum over every language and every language pair) or english-pivot (each "
        "language paired with English, averaged over the languages).",
        choices=MLMME_FORMS,
    )
    max_violation: bool = _option("Each anchor's hardest in-batch negative only (VSE++, AME's option), not the sum.")


@dataclass(frozen=True)
class MseOptions:
    form: str = _option(
        "The MSE to the English teacher: mean over elements (the authors' code) or sum (over D, the written form).",
        choices=MSE_FORMS,
    )


@dataclass(frozen=True)
class CllClipOptions:
    gamma1: float = _option("Weight of the image-text InfoNCE term (CLL-CLIP: 0.01).")
    gamma2: float = _option("Weight of the MSE to the English teacher (CLL-CLIP: 1).")
    form: str = _option("The MSE's form: mean over elements (the authors') or sum (over D).", choices=MSE_FORMS)


@dataclass(frozen=True)
class RcslsOptions:
    k: int = _option("RCSLS's k nearest neighbours (AME: 5).", min=1)


# Every registered loss's options (``mltk.losses.registry.LOSSES`` holds the same names), and the ones
# ``train-ccrk --loss`` chooses from, whose options are its recipe's ``losses`` section.
LOSS_OPTIONS: dict[str, type] = {
    "one-to-k": OneToKOptions,
    "one-to-one": ContrastiveOptions,
    "english-bridge": NoOptions,
    "hinge": HingeOptions,
    "mlmme": MlmmeOptions,
    "infonce": NoOptions,
    "mse": MseOptions,
    "cll-clip": CllClipOptions,
    "rcsls": RcslsOptions,
}
CCRK_LOSSES = ("one-to-k", "one-to-one", "english-bridge", "hinge", "mlmme")
CCRK_LOSS_OPTIONS = {name: LOSS_OPTIONS[name] for name in CCRK_LOSSES}

__all__ = [
    "AME_MARGINS",
    "CCRK_LOSSES",
    "CCRK_LOSS_OPTIONS",
    "LOSS_OPTIONS",
    "MLMME_FORMS",
    "MSE_FORMS",
    "ONE_TO_K_WEIGHTINGS",
    "TEMPERATURE_FORMS",
    "CllClipOptions",
    "ContrastiveOptions",
    "HingeOptions",
    "MlmmeOptions",
    "MseOptions",
    "NoOptions",
    "OneToKOptions",
    "RcslsOptions",
]
