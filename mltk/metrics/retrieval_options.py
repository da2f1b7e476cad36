"""The options of a retrieval evaluation and their check, made before any caption is encoded (``mltk evaluate``
calls it first; ``evaluate_retrieval`` again on its own input)."""

from __future__ import annotations

from collections.abc import Sequence

from mltk.core.errors import ConfigError
from mltk.metrics import ranks as M

METRIC_NAMES = ("recall", "mrv", "c2c")
PROTOCOLS = ("all-captions", "first-caption")
MRV_INSTANCES = ("auto", "image", "caption_id")
C2C_RELEVANCE = ("image", "caption_id")


def check_options(
    metrics: Sequence[str], with_images: bool, mrv_variant: str, mrv_instance: str, c2c_relevance: str, protocol: str
) -> tuple[str, ...]:
    """Every option of a retrieval evaluation checked at once (the stage calls it before encoding anything);
    returns the metrics to compute."""
    metrics = _check_metric_names(metrics, with_images)
    _check_choice("--mrv-variant", mrv_variant, M.MRV_VARIANTS)
    _check_choice("--mrv-instance", mrv_instance, MRV_INSTANCES)
    _check_choice("--c2c-relevance", c2c_relevance, C2C_RELEVANCE)
    _check_choice("--protocol", protocol, PROTOCOLS)
    return metrics


def _check_choice(option: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{option} must be one of {', '.join(choices)}, got {value!r}")


def _check_metric_names(metrics: Sequence[str], with_images: bool = True) -> tuple[str, ...]:
    """The metrics to compute: recall always when there are images; without images only c2c is possible."""
    unknown = [m for m in metrics if m not in METRIC_NAMES]
    if unknown:
        raise ConfigError(f"unknown --metric {', '.join(unknown)} (choose from {', '.join(METRIC_NAMES)})")
    if not with_images:
        needing = [m for m in dict.fromkeys(metrics) if m != "c2c"]
        if needing:
            raise ConfigError(
                f"--metric {', '.join(needing)} needs image embeddings (--images); only c2c runs from "
                "text embeddings alone"
            )
        return tuple(dict.fromkeys(metrics))
    return tuple(dict.fromkeys(("recall", *metrics)))
