"""The typer app, its error mapping and the registry of command modules."""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
import traceback
from typing import Iterable

import typer
from typer.core import TyperGroup

from mltk.cli.common import HELP_SETTINGS, add_shared_options
from mltk.core import policy
from mltk.core.errors import MltkError, user_os_error
from mltk.core.names import one_line
from mltk.core.version import __version__

# Every command and the module that registers it (``register(app)``), in pipeline order (the order of --help).
# A command runs with only its own module imported, so `mltk evaluate` does not pay for open_clip or transformers.
COMMAND_MODULES = {
    "synth-data": "mltk.cli.data",
    "import-data": "mltk.cli.data",
    "merge-captions": "mltk.cli.data",
    "induce-lexicon": "mltk.cli.data",
    "check-overlap": "mltk.cli.check_overlap",
    "translate-data": "mltk.cli.translate",
    "build-vocab": "mltk.cli.vocab",
    "pretrain": "mltk.cli.pretrain",
    "encode-images": "mltk.cli.encode",
    "encode-texts": "mltk.cli.encode_texts",
    "synth-videos": "mltk.cli.video",
    "encode-videos": "mltk.cli.video",
    "train-nlt": "mltk.cli.train",
    "train-le": "mltk.cli.train",
    "train-nlt-le": "mltk.cli.train",
    "train-continual": "mltk.cli.continual",
    "train-ccrk": "mltk.cli.ccrk",
    "compare": "mltk.cli.compare",
    "import-mla": "mltk.cli.import_mla",
    "index": "mltk.cli.index",
    "evaluate": "mltk.cli.evaluate",
    "evaluate-continual": "mltk.cli.evaluate",
    "classify": "mltk.cli.classify",
    "inspect": "mltk.cli.inspect",
    "prune": "mltk.cli.prune",
    "export": "mltk.cli.export",
    "recipes": "mltk.cli.recipes",
}


class MltkGroup(TyperGroup):
    """Maps ``MltkError`` to exit code 2 and other exceptions to exit code 1, each as one line on stderr."""

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # registration order, not alphabetical: the pipeline reads top to bottom

    def invoke(self, ctx):
        tokens = [variable.set(False) for variable in (policy.OVERWRITE, policy.TRUST_TORCHSCRIPT)]
        base_token = policy.BASE_PATHS.set(())
        try:
            return self._invoke(ctx)
        finally:
            for variable, token in zip((policy.OVERWRITE, policy.TRUST_TORCHSCRIPT), tokens):
                variable.reset(token)
            policy.BASE_PATHS.reset(base_token)

    def _invoke(self, ctx):
        words = list(ctx.args)  # the command's own words, for a hint on a usage error
        try:
            return super().invoke(ctx)
        except MltkError as exc:
            _report(exc, f"{_speaker(ctx)}: error: {one_line(str(exc))}{missing_path_hint(exc, words)}")
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            typer.echo("mltk: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # `mltk recipes list | head`: the reader left, a normal end for every command
            _discard_stdout()
            ctx.exit(0)
        except Exception as exc:  # the last line of defence
            refused = user_os_error(exc)  # a full disk, a refused write: bad input of the machine, exit 2
            if refused is not None:
                _report(exc, f"{_speaker(ctx)}: error: {one_line(str(refused))}")
                ctx.exit(refused.exit_code)
            if _from_cli_framework(exc):
                if _is_usage_error(exc):  # one line, like every other bad input (not click's usage box)
                    _report(exc, f"{_speaker(ctx)}: error: {exc.format_message()}{list_hint(exc, words)} (see --help)")
                    ctx.exit(2)
                raise  # --help, exits
            _report(
                exc, f"{_speaker(ctx)}: internal error: {type(exc).__name__}: {exc} (set MLTK_DEBUG=1 for a traceback)"
            )
            ctx.exit(1)


def _discard_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush at exit does not hit the closed pipe
    again (Python's documented way out of a broken pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (a test runner's capture): nothing to flush
        pass


def list_hint(exc: BaseException, words: list[str]) -> str:
    """For ``--lang de zh``: the extra word follows an option's value, so the user meant a list, which takes
    commas (``--lang de,zh``); empty for any other usage error."""
    extra = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.+)\)", exc.format_message())
    if not extra:
        return ""
    first = extra.group(1).split()[0]
    spot = _after_option_value(words, first)
    if spot is None:
        return ""
    items = [words[spot - 1], *extra.group(1).split()]
    return f"; lists take commas, not spaces: {words[spot - 2]} {','.join(items)}"


def missing_path_hint(exc: MltkError, words: list[str]) -> str:
    """For ``mltk train-nlt --lang de zh`` without its input: ``zh`` became the missing positional path, so the
    file error says why that word was read as a path (a list option takes commas); empty otherwise."""
    if exc.path is None or not str(exc).endswith("no such file or directory"):
        return ""
    spot = _after_option_value(words, exc.path)
    if spot is None:
        return ""
    return (
        f" ({exc.path} was read as the command's input path; if it belongs to {words[spot - 2]}, a list takes "
        f"commas, not spaces: {words[spot - 2]} {words[spot - 1]},{exc.path})"
    )


def _after_option_value(words: list[str], word: str) -> int | None:
    """Where ``word`` follows ``--option value`` in ``words`` (the spot a space-separated list leaves it at)."""
    return next(
        (
            i
            for i in range(2, len(words))
            if words[i] == word and words[i - 2].startswith("--") and not words[i - 1].startswith("-")
        ),
        None,
    )


def _speaker(ctx) -> str:
    """Who speaks in an error line: ``mltk train-le`` (the command, so that in a failed pipe the user can tell which
    stage failed), or ``mltk`` before a command is known."""
    return f"mltk {ctx.invoked_subcommand}" if ctx.invoked_subcommand else "mltk"


def _from_cli_framework(exc: BaseException) -> bool:
    """typer vendors click (``typer._click``) in recent versions, so match both by module."""
    return type(exc).__module__.split(".")[0] in ("click", "typer")


def _is_usage_error(exc: BaseException) -> bool:
    """click's UsageError and BadParameter (vendored by typer or not): they carry ``format_message`` and exit 2."""
    return hasattr(exc, "format_message") and getattr(exc, "exit_code", None) == 2


def _report(exc: BaseException, line: str) -> None:
    if os.environ.get("MLTK_DEBUG") == "1":
        traceback.print_exception(exc)
    typer.echo(" ".join(line.split("\n")[:1]), err=True)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mltk {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """mltk: multilingual CLIP toolkit."""


def build_app(modules: Iterable[str] | None = None) -> typer.Typer:
    """The typer app with the commands of ``modules`` (default: all of them)."""
    app = typer.Typer(
        cls=MltkGroup,
        name="mltk",
        help="Turn an English CLIP into a multilingual one and measure cross-lingual retrieval.\n\n"
        "Every command prints one line on stdout, the path of the artifact it wrote (or JSON with --json); "
        "logs and progress go to stderr. Exit codes: 0 ok, 2 bad input, 1 internal error (MLTK_DEBUG=1 for a "
        "traceback).\n\nThe training commands take every hyper-parameter they are not given from a recipe, the "
        "published settings as data (--recipe NAME or FILE; mltk/recipes/*.json), and record the values used in "
        "the manifest.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain click help: never cuts an option name in 80 columns, shows flags as flags
        context_settings=HELP_SETTINGS,
    )
    app.callback()(_root)
    for module in dict.fromkeys(modules if modules is not None else COMMAND_MODULES.values()):
        importlib.import_module(module).register(app)
    add_shared_options(app)
    return app


def _modules_for(argv: list[str]) -> list[str] | None:
    """Only the module of the command being run; all of them for `mltk`, `mltk --help` or an unknown command."""
    if argv[:1] == ["--version"]:
        return []
    return [COMMAND_MODULES[argv[0]]] if argv and argv[0] in COMMAND_MODULES else None


@functools.cache
def full_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str):
    """``mltk.cli.application.app`` (as used by tests with ``typer.testing``) is the app with every command, built
    lazily."""
    if name == "app":
        return full_app()
    raise AttributeError(name)


def main() -> None:
    try:
        build_app(_modules_for(sys.argv[1:]))()
    except BrokenPipeError:  # `mltk ... | head`: the reader left, nothing is wrong
        sys.stderr.close()
