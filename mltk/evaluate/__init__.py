"""Cross-lingual, cross-modal retrieval evaluation, in three parts:

- ``mltk.metrics.retrieval``: ``evaluate_retrieval`` on tables and vectors in memory (per-language recall, MRV,
  caption-to-caption retrieval; training stages call it for validation), built on the pure rank functions of
  ``mltk.metrics.ranks``;
- ``mltk.evaluate.stage``: ``mltk evaluate`` from artifacts to a metrics artifact (``run_evaluation``), including
  the encoding of captions through a checkpoint and the overlap warning; ``mltk.evaluate.continual``: ``mltk
  evaluate-continual`` (``run_continual``); both write through ``mltk.evaluate.metrics_artifact``;
- ``mltk.present.report``: the tables, Markdown, CSV, tidy long CSV and CLIP_benchmark JSON written from a result.
"""

from mltk.evaluate.continual import ContinualConfig, run_continual
from mltk.evaluate.metrics_artifact import REPORT_FORMATS
from mltk.evaluate.stage import (
    EvaluateConfig,
    TextVectors,
    check_text_source,
    load_normalized_embeddings,
    run_evaluation,
    text_embeddings_for,
)
from mltk.metrics.retrieval import evaluate_retrieval, mrv_instance_mode
from mltk.metrics.retrieval_options import C2C_RELEVANCE, METRIC_NAMES, MRV_INSTANCES, PROTOCOLS

__all__ = [
    "C2C_RELEVANCE",
    "METRIC_NAMES",
    "MRV_INSTANCES",
    "PROTOCOLS",
    "REPORT_FORMATS",
    "ContinualConfig",
    "EvaluateConfig",
    "TextVectors",
    "check_text_source",
    "evaluate_retrieval",
    "load_normalized_embeddings",
    "mrv_instance_mode",
    "run_continual",
    "run_evaluation",
    "text_embeddings_for",
]
