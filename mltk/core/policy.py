"""Two permissions a user grants for one command, readable anywhere in the library.

``--overwrite`` and ``--trust-torchscript`` are options of every command that writes an artifact or loads
weights; threading them through each stage's configuration would touch every stage for a yes/no that only the
artifact writer and the weights loader read. The CLI sets them for the duration of one command; library callers
use the context managers.
"""

from __future__ import annotations

import contextlib
import contextvars

# Replace an existing artifact made by another command or with other settings (and discard a partial run started
# with other settings) instead of refusing.
OVERWRITE: contextvars.ContextVar[bool] = contextvars.ContextVar("mltk_overwrite", default=False)
# Load an OpenAI TorchScript ``.pt`` given as --pretrained: ``torch.jit.load`` can run code the file carries.
TRUST_TORCHSCRIPT: contextvars.ContextVar[bool] = contextvars.ContextVar("mltk_trust_torchscript", default=False)


@contextlib.contextmanager
def granted(variable: contextvars.ContextVar[bool], enabled: bool = True):
    token = variable.set(enabled)
    try:
        yield
    finally:
        variable.reset(token)


def overwriting(enabled: bool = True):
    return granted(OVERWRITE, enabled)


def trusting_torchscript(enabled: bool = True):
    return granted(TRUST_TORCHSCRIPT, enabled)
