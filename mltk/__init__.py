"""mltk: turn an English CLIP into a multilingual one and measure cross-lingual retrieval.

The public Python API: the library function behind every command, the configuration it takes, and
``load_model`` to encode in memory. Each name is imported on first use, so ``import mltk`` costs nothing and a
script pays only for the stages it runs::

    import mltk

    world = mltk.synth_data(mltk.SynthConfig(train=300, val=50, test=50, out="runs/api/world"))
    native = mltk.pretrain(mltk.PretrainConfig(images=world / "images", captions=world / "captions",
                                               out="runs/api/native", loop={"steps": 40}))
    images = mltk.encode_images(world / "images", "runs/api/img", model=str(native))
    model = mltk.load_model(native)
    vectors = model.encode(["a red circle", "a blue square"])  # float32 [2, D], L2-normalised

A stage with a configuration is ``fn(config)`` and returns the path it wrote (``config.out``). Functions are named
as their commands (``train-nlt`` is ``train_nlt``) except where the name is taken; ``docs/api.md`` lists every
command's function and scripts a whole pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mltk.core.version import __version__

# public name -> the module that defines it (imported on first access)
_EXPORTS: dict[str, str] = {
    # data: the embedded world, importers, translation, vocabularies
    "SynthConfig": "mltk.data.synth",
    "synth_data": "mltk.data.synth",
    "VideoWorldConfig": "mltk.data.synth_video",
    "synth_videos": "mltk.data.synth_video",
    "import_data": "mltk.data.importers",
    "merge_captions": "mltk.data.importers",
    "check_overlap": "mltk.data.overlap",
    "TranslateConfig": "mltk.translate",
    "JoinConfig": "mltk.translate",
    "translate_data": "mltk.translate",
    "build_vocab": "mltk.settings.vocab",
    "load_vocabulary": "mltk.vocab",
    "import_muse": "mltk.ame.lexicon",
    "induce_lexicon": "mltk.ame.induce",
    # encoding with frozen towers
    "encode_images": "mltk.encode.images",
    "encode_texts": "mltk.encode.texts",
    "encode_captions": "mltk.encode.texts",
    "write_text_embeddings": "mltk.encode.texts",
    "VideoEncodeConfig": "mltk.encode.videos",
    "encode_videos": "mltk.encode.videos",
    "load_model": "mltk.encode.model",
    "Encoder": "mltk.encode.model",
    # training
    "load_recipe": "mltk.recipes",
    "AlignmentConfig": "mltk.ame.alignment_config",
    "PretrainConfig": "mltk.settings.pretrain",
    "pretrain": "mltk.train.pretrain",
    "MlaConfig": "mltk.settings.mla",
    "train_nlt": "mltk.train.mla",
    "train_le": "mltk.train.mla",
    "train_nlt_le": "mltk.train.mla",
    "ContinualTrainConfig": "mltk.settings.continual",
    "train_continual": "mltk.train.continual",
    "CcrkConfig": "mltk.settings.ccrk",
    "train_ccrk": "mltk.train.ccrk",
    "import_mla": "mltk.export.import_mla",
    # evaluation, indexing, export
    "EvaluateConfig": "mltk.evaluate",
    "run_evaluation": "mltk.evaluate",
    "ContinualConfig": "mltk.evaluate",
    "evaluate_continual": "mltk.evaluate",
    "evaluate_retrieval": "mltk.metrics.retrieval",
    "ClassifyConfig": "mltk.evaluate.zero_shot",
    "classify": "mltk.evaluate.zero_shot",
    "CompareConfig": "mltk.evaluate.compare",
    "compare": "mltk.evaluate.compare",
    "IndexConfig": "mltk.index.faiss_index",
    "build_index": "mltk.index.faiss_index",
    "query": "mltk.index.faiss_index",
    "ExportConfig": "mltk.export",
    "export_checkpoint": "mltk.export",
    "prune": "mltk.artifacts.prune",
    # artifacts
    "read_manifest": "mltk.artifacts",
    "load_embeddings": "mltk.artifacts",
    "load_captions": "mltk.artifacts",
    "load_metrics": "mltk.artifacts",
    "verify_artifact": "mltk.artifacts",
    "MltkError": "mltk.core.errors",
}
# a public name whose definition is spelled otherwise in its module
_ALIASES = {
    "import_data": "import_dataset",
    "evaluate_continual": "run_continual",
    "compare": "compare_runs",
    "import_mla": "import_mla_checkpoint",
    "prune": "prune_state",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first access (PEP 562) and keep the name."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mltk' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), _ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # what a type checker and an IDE see: the same names, imported eagerly
    from mltk.ame.alignment_config import AlignmentConfig
    from mltk.ame.induce import induce_lexicon
    from mltk.ame.lexicon import import_muse
    from mltk.artifacts import load_captions, load_embeddings, load_metrics, read_manifest, verify_artifact
    from mltk.artifacts.prune import prune_state as prune
    from mltk.core.errors import MltkError
    from mltk.data.importers import import_dataset as import_data
    from mltk.data.importers import merge_captions
    from mltk.data.overlap import check_overlap
    from mltk.data.synth import SynthConfig, synth_data
    from mltk.data.synth_video import VideoWorldConfig, synth_videos
    from mltk.encode.images import encode_images
    from mltk.encode.model import Encoder, load_model
    from mltk.encode.texts import encode_captions, encode_texts, write_text_embeddings
    from mltk.encode.videos import VideoEncodeConfig, encode_videos
    from mltk.evaluate import ContinualConfig, EvaluateConfig, run_evaluation
    from mltk.evaluate import run_continual as evaluate_continual
    from mltk.evaluate.compare import CompareConfig
    from mltk.evaluate.compare import compare_runs as compare
    from mltk.evaluate.zero_shot import ClassifyConfig, classify
    from mltk.export import ExportConfig, export_checkpoint
    from mltk.export.import_mla import import_mla_checkpoint as import_mla
    from mltk.index.faiss_index import IndexConfig, build_index, query
    from mltk.metrics.retrieval import evaluate_retrieval
    from mltk.recipes import load_recipe
    from mltk.settings.ccrk import CcrkConfig
    from mltk.settings.continual import ContinualTrainConfig
    from mltk.settings.mla import MlaConfig
    from mltk.settings.pretrain import PretrainConfig
    from mltk.settings.vocab import build_vocab
    from mltk.train.ccrk import train_ccrk
    from mltk.train.continual import train_continual
    from mltk.train.mla import train_le, train_nlt, train_nlt_le
    from mltk.train.pretrain import pretrain
    from mltk.translate import JoinConfig, TranslateConfig, translate_data
    from mltk.vocab import load_vocabulary
