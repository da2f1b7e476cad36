"""Option aliases shared by commands, and the one way a command prints its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import functools
import inspect
from collections.abc import Callable

import typer

from mltk import policy

DeviceOption = typer.Option("auto", "--device", help="auto (CUDA when available), cpu or cuda.")
PrecisionOption = typer.Option(
    "auto", "--precision", help="auto (bf16/fp16 autocast on CUDA, fp32 on CPU), fp32, bf16 or fp16."
)
JsonOption = typer.Option(False, "--json", help="Print one JSON object instead of the bare artifact path.")
SeedOption = typer.Option(0, "--seed", help="Random seed; the same seed gives the same result on the CPU.")




def _grant(variable):
    def callback(value: bool) -> bool:
        if value:
            variable.set(True)  # reset when the command ends (MltkGroup.invoke)
        return value
    return callback


# Options every command of a kind gets, attached by ``with_shared_options`` when the app is built, so that no
# command can lack them: --overwrite on each command with an --out, --trust-torchscript on each with --pretrained.
OverwriteOption = typer.Option(
    False, "--overwrite", expose_value=False, callback=_grant(policy.OVERWRITE),
    help="Replace an existing --out artifact made by another command, with other settings or from inputs that "
    "changed (and discard an interrupted run started with other settings). Without it such an output is refused; "
    "one made by this command with the same settings and inputs is reused as it is.")
TrustTorchscriptOption = typer.Option(
    False, "--trust-torchscript", expose_value=False, callback=_grant(policy.TRUST_TORCHSCRIPT),
    help="Allow an OpenAI TorchScript .pt as --pretrained: loading one can run code it carries, so only for "
    "files you trust.")
SHARED_OPTIONS = (("out", "overwrite", OverwriteOption), ("pretrained", "trust_torchscript", TrustTorchscriptOption))


def with_shared_options(function: Callable) -> Callable:
    """``function`` (a command) with the shared options that go with its own options added to its signature."""
    signature = inspect.signature(function)
    extra = [(name, info) for companion, name, info in SHARED_OPTIONS
             if companion in signature.parameters and name not in signature.parameters]
    if not extra:
        return function

    @functools.wraps(function)
    def command(*args, **kwargs):
        for name, _ in extra:
            kwargs.pop(name, None)
        return function(*args, **kwargs)

    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=bool)
             for name, info in extra]
    command.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *added])
    command.__annotations__ = {**function.__annotations__, **{name: bool for name, _ in extra}}
    return command


def add_shared_options(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) its shared options."""
    for info in app.registered_commands:
        info.callback = with_shared_options(info.callback)
    for group in app.registered_groups:
        add_shared_options(group.typer_instance)


def emit(path: Path, as_json: bool = False, **extra: Any) -> None:
    """Print the artifact path (or a JSON object with it) as the one stdout line of a command."""
    path = Path(path).resolve()
    if as_json:
        typer.echo(json.dumps({"path": str(path), **extra}, ensure_ascii=False, default=str))
    else:
        typer.echo(str(path))
