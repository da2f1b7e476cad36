"""Settings: the torch-free half of training. The loop's and each stage's config (plain values: what a caller
gave, the rest left to the recipe), the one resolution point ``resolve(config, stage)`` that reads the recipe,
applies what was given, checks every value and returns a complete, frozen config, and the ``--set`` parser.

Modules: ``loop`` (``LoopConfig``), ``mla``, ``ccrk``, ``continual`` and ``pretrain`` (the stage configs),
``fields`` (metadata several configs share), ``resolve`` (resolution and ``--set``), ``sections`` (the
recipe sections of components chosen by name: the continual methods', the losses'), ``vocab`` (build-vocab's
sizes from the ``cll-clip`` recipe), ``show`` (``mltk recipes show``). Imported by ``mltk --help`` and the CLI:
no torch, numpy or pyarrow at import time.
"""

from mltk.settings.resolve import resolve

__all__ = ["resolve"]
