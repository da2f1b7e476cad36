"""The typer app, its error mapping and the registry of command modules."""

from __future__ import annotations

import importlib
import importlib.util
import os
import traceback

import typer
from typer.core import TyperGroup

from mltk import __version__
from mltk.errors import MltkError

# One module per group of commands; each exposes ``register(app)``. A stage appears here once it is real.
COMMAND_MODULES = (
    "mltk.cli.data",        # synth-data, import-data
    "mltk.cli.translate",   # translate-data
    "mltk.cli.vocab",       # build-vocab
    "mltk.cli.pretrain",    # pretrain
    "mltk.cli.encode",      # encode-images
    "mltk.cli.train",       # train-nlt, train-le
    "mltk.cli.continual",   # train-continual
    "mltk.cli.ccrk",        # train-ccrk
    "mltk.cli.convert",     # import-mla
    "mltk.cli.index",       # index
    "mltk.cli.evaluate",    # evaluate
    "mltk.cli.inspect",     # inspect
)


class MltkGroup(TyperGroup):
    """Maps ``MltkError`` to exit code 2 and other exceptions to exit code 1, each as one line on stderr."""

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # registration order, not alphabetical: the pipeline reads top to bottom

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MltkError as exc:
            _report(exc, f"mltk: error: {exc}")
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            typer.echo("mltk: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if _from_cli_framework(exc):  # usage errors, --help, exits: click/typer report them (exit code 2)
                raise
            _report(exc, f"mltk: internal error: {type(exc).__name__}: {exc} (set MLTK_DEBUG=1 for a traceback)")
            ctx.exit(1)


def _from_cli_framework(exc: BaseException) -> bool:
    """typer vendors click (``typer._click``) in recent versions, so match both by module."""
    return type(exc).__module__.split(".")[0] in ("click", "typer")


def _report(exc: BaseException, line: str) -> None:
    if os.environ.get("MLTK_DEBUG") == "1":
        traceback.print_exception(exc)
    typer.echo(" ".join(line.split("\n")[:1]), err=True)


app = typer.Typer(
    cls=MltkGroup,
    name="mltk",
    help="Turn an English CLIP into a multilingual one and measure cross-lingual retrieval.\n\n"
    "Every command prints one line on stdout, the path of the artifact it wrote (or JSON with --json); "
    "logs and progress go to stderr. Exit codes: 0 ok, 2 bad input, 1 internal error (MLTK_DEBUG=1 for a "
    "traceback).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mltk {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """mltk: multilingual CLIP toolkit."""


for _module in COMMAND_MODULES:
    if importlib.util.find_spec(_module) is not None:  # a stage appears once its module exists
        importlib.import_module(_module).register(app)


def main() -> None:
    app()
