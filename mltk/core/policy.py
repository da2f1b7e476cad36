"""Two permissions a user grants for one command, and one place to look, readable anywhere in the library.

``--overwrite`` and ``--trust-torchscript`` are options of every command that writes an artifact or loads
weights, ``--base`` of every command that may load a checkpoint; threading them through each stage's configuration
would touch every stage for a value that only the artifact writer and the weights and checkpoint loaders read.
The CLI sets them for the duration of one command; library callers use the context managers.
"""

from __future__ import annotations

import contextlib
import contextvars

# Replace an existing artifact made by another command or with other settings (and discard a partial run started
# with other settings) instead of refusing.
OVERWRITE: contextvars.ContextVar[bool] = contextvars.ContextVar("mltk_overwrite", default=False)
# Load an OpenAI TorchScript ``.pt`` given as --pretrained: ``torch.jit.load`` can run code the file carries.
TRUST_TORCHSCRIPT: contextvars.ContextVar[bool] = contextvars.ContextVar("mltk_trust_torchscript", default=False)
# Where a checkpoint's base model or tokenizer now lies (--base, repeatable), when the checkpoint moved without it;
# each place is used only for the dependency whose pinned fingerprint it matches (``mltk.artifacts.dependencies``).
BASE_PATHS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("mltk_base_paths", default=())


@contextlib.contextmanager
def granted(variable: contextvars.ContextVar[bool], enabled: bool = True):
    token = variable.set(enabled)
    try:
        yield
    finally:
        variable.reset(token)


@contextlib.contextmanager
def base_paths(*paths: str):
    """Library callers' ``--base``: the places to look for a moved checkpoint's dependencies."""
    token = BASE_PATHS.set(tuple(str(p) for p in paths))
    try:
        yield
    finally:
        BASE_PATHS.reset(token)


def overwriting(enabled: bool = True):
    return granted(OVERWRITE, enabled)


def trusting_torchscript(enabled: bool = True):
    return granted(TRUST_TORCHSCRIPT, enabled)
