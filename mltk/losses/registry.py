"""Every loss of every training stage, by name: each entry a class and its options dataclass
(``mltk.losses.options``, no defaults: the values are the recipe's), so a stage builds its loss with
``build_loss(name, options)`` and no stage holds an if-chain over loss names or plumbs a loss's settings by hand
(as ``mltk.cll_clip.methods.METHODS`` is for the continual methods).

=================  ========================  ==========================  ================================
name               class                     options                     stage
=================  ========================  ==========================  ================================
``one-to-k``       ``OneToKLoss``            ``OneToKOptions``           train-ccrk (the recipe's losses)
``one-to-one``     ``OneToOneLoss``          ``ContrastiveOptions``      train-ccrk
``english-bridge`` ``EnglishBridgeLoss``     none                        train-ccrk
``hinge``          ``PairwiseRankingLoss``   ``HingeOptions``            train-ccrk (AME)
``mlmme``          ``MLMMELoss``             ``MlmmeOptions``            train-ccrk (MLMME)
``infonce``        ``InfoNCELoss``           none (the scale is given)   train-le, pretrain
``mse``            ``MSEDistillLoss``        ``MseOptions``              train-nlt (``mse_form``)
``cll-clip``       ``CLLCLIPLoss``           ``CllClipOptions``          train-continual (gamma1, gamma2)
``rcsls``          ``RcslsLoss``             ``RcslsOptions``            the alignment (``alignment.k``)
=================  ========================  ==========================  ================================

A loss's ``context`` is what the run, not the recipe, decides: the English slot of train-ccrk's languages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from mltk.core.errors import ConfigError
from mltk.losses.contrastive import InfoNCELoss, OneToKLoss, OneToOneLoss
from mltk.losses.distill import CLLCLIPLoss, EnglishBridgeLoss, MSEDistillLoss
from mltk.losses.options import CCRK_LOSSES, LOSS_OPTIONS
from mltk.losses.ranking import MLMMELoss, PairwiseRankingLoss
from mltk.losses.rcsls import RcslsLoss


@dataclass(frozen=True)
class LossEntry:
    """A loss: its class, its options dataclass, how one is built from the options (and the run's context), and
    what a stage needs to know about it."""

    cls: type[nn.Module]
    options: type
    build: Callable[[Any, Mapping[str, Any]], nn.Module]
    description: str
    images: bool = True  # reads the image features (the English bridge compares texts only)
    needs_english: Callable[[Any], bool] = lambda options: False  # aligns languages with English


def _contrastive(cls: type[nn.Module], **more: Any) -> Callable[[Any, Mapping[str, Any]], nn.Module]:
    def build(o: Any, context: Mapping[str, Any]) -> nn.Module:
        extra = {key: getattr(o, key) for key in more}
        return cls(
            o.temperature,
            o.learn_temperature,
            temperature_range=o.temperature_range,
            temperature_form=o.temperature_form,
            **extra,
        )

    return build


LOSSES: dict[str, LossEntry] = {
    "one-to-k": LossEntry(
        OneToKLoss, LOSS_OPTIONS["one-to-k"], _contrastive(OneToKLoss, weighting=True), "1-to-K contrastive (CCR_k)"
    ),
    "one-to-one": LossEntry(
        OneToOneLoss,
        LOSS_OPTIONS["one-to-one"],
        _contrastive(OneToOneLoss),
        "1-to-1 contrastive, one sampled language per image",
    ),
    "english-bridge": LossEntry(
        EnglishBridgeLoss,
        LOSS_OPTIONS["english-bridge"],
        lambda o, context: EnglishBridgeLoss(context["english_index"]),
        "MSE of each language to English",
        images=False,
        needs_english=lambda options: True,
    ),
    "hinge": LossEntry(
        PairwiseRankingLoss,
        LOSS_OPTIONS["hinge"],
        lambda o, context: PairwiseRankingLoss(o.margin, o.max_violation, o.similarity),
        "bidirectional pairwise ranking hinge",
    ),
    "mlmme": LossEntry(
        MLMMELoss,
        LOSS_OPTIONS["mlmme"],
        lambda o, context: MLMMELoss(o.margin, o.beta, context["english_index"], o.max_violation, o.form),
        "MLMME: image-sentence and sentence-sentence ranking",
        needs_english=lambda options: options.form == "english-pivot",
    ),
    "infonce": LossEntry(
        InfoNCELoss,
        LOSS_OPTIONS["infonce"],
        lambda o, context: InfoNCELoss(),
        "symmetric InfoNCE (CLIP), at the scale the caller gives",
    ),
    "mse": LossEntry(
        MSEDistillLoss,
        LOSS_OPTIONS["mse"],
        lambda o, context: MSEDistillLoss(o.form),
        "MSE to a frozen teacher (MLA's NLT)",
    ),
    "cll-clip": LossEntry(
        CLLCLIPLoss,
        LOSS_OPTIONS["cll-clip"],
        lambda o, context: CLLCLIPLoss(o.gamma1, o.gamma2, o.form),
        "gamma1 x InfoNCE + gamma2 x MSE to the English teacher (CLL-CLIP)",
    ),
    "rcsls": LossEntry(
        RcslsLoss,
        LOSS_OPTIONS["rcsls"],
        lambda o, context: RcslsLoss(o.k),
        "RCSLS over a lexicon's pairs (Joulin et al. 2018; AME's alignment)",
    ),
}
assert set(LOSSES) == set(LOSS_OPTIONS), "every loss has an options dataclass, every options dataclass a loss"
CCRK_CHOICES = CCRK_LOSSES  # train-ccrk --loss


def build_loss(name: str, options: Any = None, **context: Any) -> nn.Module:
    """The loss ``name`` built from ``options`` (its entry's dataclass; None or a mapping of every option, as a
    recipe or a checkpoint records them, is checked and built into one) and the run's ``context``."""
    if name not in LOSSES:
        raise ConfigError(f"no loss {name!r} (losses: {', '.join(LOSSES)})")
    entry = LOSSES[name]
    return entry.build(loss_options(name, options), context)


def loss_options(name: str, options: Any) -> Any:
    """``options`` as the dataclass of loss ``name``: the dataclass itself, or a mapping naming every option
    (None: no options) checked against its fields."""
    from mltk.recipes.options import from_mapping

    options_class = LOSSES[name].options
    if isinstance(options, options_class):
        return options
    if options is None or isinstance(options, Mapping):
        return from_mapping(options_class, f"loss {name}", dict(options or {}))
    raise ConfigError(f"loss {name} takes {options_class.__name__}, got {type(options).__name__}")


def options_of(name: str, **values: Any) -> Any:
    """The options dataclass of loss ``name`` from keyword values (a stage that keeps the values in its own
    config keys: ``options_of("mse", form=config.mse_form)``), each checked against its field."""
    from mltk.recipes.options import checked, fields_of
    from mltk.recipes.values import check_value

    fields = fields_of(LOSSES[name].options)
    if set(values) != set(fields):
        raise ConfigError(f"loss {name} takes the options {', '.join(sorted(fields)) or 'none'}")
    typed = {
        key: check_value(values[key], hint, key, None, what=f"loss {name}", metadata=metadata)
        for key, (hint, metadata) in fields.items()
    }
    return checked(LOSSES[name].options, f"loss {name}", typed)
