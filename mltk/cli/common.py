"""The option vocabulary, the one way a command reads its main input (a path, ``-`` or a pipe) and the one way
it prints its result (the option aliases themselves: ``mltk.cli.options``). The library never reads stdin:
commands resolve it here and pass a path.

This module is imported by ``mltk --help``: it must stay free of torch, numpy and pyarrow (library imports
happen inside the functions that run a command).

The option vocabulary (``VOCABULARY``) names each idea once; ``tests/test_cli_vocabulary.py`` holds every
command to it."""

from __future__ import annotations

import functools
import inspect
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Iterable, List, Optional

import typer

from mltk.core import policy
from mltk.core.errors import ArtifactError, ConfigError

# -h as well as --help; help text wrapped to the terminal (at most 100 columns), option names never cut.
HELP_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# One name per idea across every command. A command that has the idea uses this name (and no other spelling).
VOCABULARY = {
    "--out": "the artifact (or folder) a command writes; always with the short form -o",
    "--images": "image embeddings (an embeddings artifact from encode-images)",
    "--image-source": "raw images (an images artifact) where a command also takes image embeddings",
    "--captions": "a captions artifact (or captions Parquet file)",
    "--texts": "text embeddings",
    "--model": "the base model: open_clip name, hf-hub name, checkpoint artifact or transformers folder; always "
    "with the short form -m",
    "--recipe": "the hyper-parameters a training command leaves out: a recipe name or JSON file (mltk.recipes)",
    "--pretrained": "open_clip pretrained tag or weights file of --model",
    "--init": "a trained checkpoint to start from",
    "--base": "where a moved checkpoint's base model or tokenizer now lies (matched by fingerprint)",
    "--tokenizer": "the non-native tokenizer (vocab artifact or transformers name)",
    "--lang": "languages: repeat the option or comma-separate",
    "--metric": "retrieval metrics of evaluate (recall, mrv, c2c)",
    "--continual-metric": "a_{j,i}'s metric of the continual matrix (AR or <i2t|t2i>.R@K)",
    "--cache-dir": "cache root (default $MLTK_CACHE_DIR, else ~/.cache/mltk)",
    "--train-embedding": "train the shared non-native embedding (--freeze-embedding: do not)",
    "--split": "the data split to use",
    "--steps": "optimizer steps",
    "--lr": "peak learning rate",
    "--weight-decay": "decoupled (AdamW) weight decay",
    "--warmup": "fraction of the steps of linear warm-up",
    "--eval-every": "steps between validations",
    "--batch-size": "examples per batch",
    "--seed": "random seed",
    "--device": "auto, cpu or cuda",
    "--precision": "auto, fp32, bf16 or fp16",
    "--json": "print one JSON object instead of the bare path",
    "--log-every": "steps between log lines and steps.csv rows",
    "--tensorboard": "TensorBoard event file directory",
    "--set": "one recipe key's value, KEY=VALUE, on a training command (repeatable)",
}

# Spellings that name an idea of VOCABULARY differently; no visible option may use them.
NON_CANONICAL = {
    "--langs": "--lang",
    "--language": "--lang",
    "--languages": "--lang",
    "--cache": "--cache-dir",
    "--train-embeddings": "--train-embedding",
    "--freeze-embeddings": "--train-embedding",
    "--output": "--out",
    "--image-emb": "--images",
    "--image-embeddings": "--images",
    "--metrics": "--metric",
    "--caption": "--captions",
    "--text-emb": "--texts",
    "--batch": "--batch-size",
}

LIST_METAVAR = "A[,B...]"


def out_option(help: str, required: bool = True) -> Any:
    """``-o/--out``: where a command writes (every writer has both spellings)."""
    return typer.Option(... if required else None, "--out", "-o", help=help)


def lang_option(help: str) -> Any:
    """``--lang``: a list of languages, repeated or comma-separated."""
    return typer.Option([], "--lang", metavar=LIST_METAVAR, help=help)


def hidden_alias(name: str, default: Any = None) -> Any:
    """An old spelling kept working but not shown in --help."""
    return typer.Option(default, name, hidden=True)


def split_list(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """Repeated options that may also hold comma-separated items: ``["fr,de", "ja"]`` -> ``("fr", "de", "ja")``."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def either(new: Any, old: Any, new_name: str, old_name: str) -> Any:
    """The value of an option given under its name or its old, hidden spelling (not both)."""
    if old in (None, [], ()):
        return new
    if new not in (None, [], ()):
        raise ConfigError(f"{old_name} is the old spelling of {new_name}; give only {new_name}")
    return old


def _grant(variable):
    def callback(value: bool) -> bool:
        if value:
            variable.set(True)  # reset when the command ends (MltkGroup.invoke)
        return value

    return callback


# Options every command of a kind gets, attached by ``with_shared_options`` when the app is built, so that no
# command can lack them: --overwrite on each command with an --out, --trust-torchscript on each with --pretrained.
def overwrite_option(help_text: str) -> Any:
    """``--overwrite`` (granting ``policy.OVERWRITE``) with the help of the command that takes it."""
    return typer.Option(
        False,
        "--overwrite",
        expose_value=False,
        callback=_grant(policy.OVERWRITE),
        envvar="MLTK_OVERWRITE",
        help=help_text,
    )


OverwriteOption = overwrite_option(
    "Replace an existing --out artifact made by another command, with other settings or from inputs that "
    "changed (and discard an interrupted run started with other settings). Without it such an output is refused; "
    "one made by this command with the same settings and inputs is reused as it is."
)
TrustTorchscriptOption = typer.Option(
    False,
    "--trust-torchscript",
    expose_value=False,
    callback=_grant(policy.TRUST_TORCHSCRIPT),
    help="Allow an OpenAI TorchScript .pt as --pretrained: loading one can run code it carries, so only for "
    "files you trust.",
)


def _base_paths(values: list[str] | None) -> list[str] | None:
    if values:
        policy.BASE_PATHS.set(split_list(values))  # reset when the command ends (MltkGroup.invoke)
    return values


# On every command with --init (added here) and on those whose --model may be a trained checkpoint (declared there).
BaseOption = typer.Option(
    None,
    "--base",
    expose_value=False,
    callback=_base_paths,
    metavar=LIST_METAVAR,
    help="Where a checkpoint's base model or tokenizer now lies, when the checkpoint was moved without it (a "
    "checkpoint finds them itself when they moved together). Used only if its content fingerprint is the one the "
    "checkpoint recorded; repeat or comma-separate for base and tokenizer.",
)
SHARED_OPTIONS = (
    ("out", "overwrite", OverwriteOption),
    ("pretrained", "trust_torchscript", TrustTorchscriptOption),
    ("init", "base", BaseOption),
)
SHARED_ANNOTATIONS = {"base": Optional[List[str]]}  # the others are flags


def with_shared_options(function: Callable) -> Callable:
    """``function`` (a command) with the shared options that go with its own options added to its signature."""
    signature = inspect.signature(function, eval_str=True)  # Annotated option aliases resolved
    extra = [
        (name, info)
        for companion, name, info in SHARED_OPTIONS
        if companion in signature.parameters and name not in signature.parameters
    ]
    if not extra:
        return function

    @functools.wraps(function)
    def command(*args, **kwargs):
        for name, _ in extra:
            kwargs.pop(name, None)
        return function(*args, **kwargs)

    added = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=SHARED_ANNOTATIONS.get(name, bool)
        )
        for name, info in extra
    ]
    command.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *added])
    command.__annotations__ = {
        **function.__annotations__,
        **{name: SHARED_ANNOTATIONS.get(name, bool) for name, _ in extra},
    }
    return command


def add_shared_options(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) its shared options."""
    for info in app.registered_commands:
        info.callback = with_shared_options(info.callback)
    for group in app.registered_groups:
        add_shared_options(group.typer_instance)


def emit(path: Path, as_json: bool = False, **extra: Any) -> None:
    """Print the artifact path (or a JSON object with it) as the one stdout line of a command."""
    from mltk.core.names import check_output_path

    check_output_path(path, "the output path")  # a newline would make it two lines
    path = Path(path).resolve()
    if as_json:
        typer.echo(json.dumps({"path": str(path), **extra}, ensure_ascii=False, default=str))
    else:
        typer.echo(str(path))


def _stdin_may_hold_a_pipe(stdin) -> bool:
    """True for a pipe or a redirected file; False for a terminal or /dev/null-like devices (nothing to wait for)."""
    if stdin is None or stdin.isatty():
        return False
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests): read it
        return True
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _path_from_stdin(stdin, what: str, required: bool) -> Path | None:
    text = stdin.read().strip() if stdin is not None else ""
    if not text:
        if not required:
            return None
        if _is_pipe(stdin):
            raise ArtifactError(
                f"the previous stage of the pipe wrote nothing (it failed; see its error above); "
                f"expected the path of an artifact ({what})",
                "<stdin>",
            )
        raise ArtifactError(f"empty stdin; expected the path of an artifact ({what})", "<stdin>")
    line = text.splitlines()[-1].strip()
    if line.startswith("{"):
        try:
            line = json.loads(line)["path"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ArtifactError("stdin JSON has no 'path' field", "<stdin>")
    from mltk import artifacts

    resolved = Path(line)
    if not artifacts.is_artifact(resolved):
        raise ArtifactError("stdin does not name an mltk artifact", line[:200])
    return resolved


def resolve_input(path: str | None, *, what: str = "input", stdin=None) -> Path:
    """The main input of a stage: a path, or ``-``/nothing with the path of an artifact piped on stdin.

    A pipe carries the one stdout line of the previous stage (its artifact path, or a JSON object with a
    ``path`` field).
    """
    stdin = stdin if stdin is not None else sys.stdin
    if path not in (None, "-"):
        resolved = Path(path)
        if not resolved.exists():
            raise ArtifactError(_missing(resolved), resolved)
        return resolved
    if path is None and (stdin is None or stdin.isatty()):
        raise ArtifactError(f"no {what} given (pass a path or pipe one on stdin)", "<stdin>")
    return _path_from_stdin(stdin, what, required=True)


def artifact_role(path: Path) -> str | None:
    """What an artifact is to a stage: its manifest kind, with embeddings told apart as ``image-embeddings`` or
    ``text-embeddings`` (by the stage that wrote them). None for a path that is not an artifact."""
    from mltk import artifacts

    if not artifacts.is_artifact(path):
        return None
    manifest = artifacts.read_manifest(path)
    if manifest["kind"] != "embeddings":
        return manifest["kind"]
    stage = (manifest.get("created_by") or {}).get("stage", "")
    return "text-embeddings" if "text" in str(stage) else "image-embeddings"


class RoutedInputs(dict):
    """``route_input``'s result: role -> path, and whether stdin was a pipe that carried nothing (the stage before
    it in a shell pipe failed), so that a missing input can say so instead of asking for a pipe that was given."""

    def __init__(self, routed: dict, empty_pipe: bool = False):
        super().__init__(routed)
        self.empty_pipe = empty_pipe


def _is_pipe(stdin) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stdin.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def route_input(
    value: str | None,
    slots: dict[str, Any],
    *,
    default: str,
    options: dict[str, str],
    stdin=None,
    wanting: Iterable[str] | None = None,
) -> dict[str, Path | None]:
    """Put a stage's positional input (a path, ``-``, or a path piped on stdin) into the slot of its kind.

    ``slots`` maps a role (``captions``, ``image-embeddings``, ``checkpoint``, ...) to the value given by that
    role's option (or None); ``options`` names each role's option for messages; ``default`` is the role of a
    positional path that is no artifact (a Parquet file, a folder). So ``mltk encode-images ... | mltk STAGE
    --captions CAPS`` takes the piped path as image embeddings because its manifest says so. Returns the slots,
    every given value as a Path; stdin is read only when ``-`` is given, or when one of the ``wanting`` roles
    (default: every role) is still empty and stdin is a pipe or a file.
    """
    stdin = stdin if stdin is not None else sys.stdin
    routed = {role: Path(given) if given not in (None, "") else None for role, given in slots.items()}
    kinds = " or ".join(f"{role.replace('-', ' ')} ({options[role]})" for role in slots)
    if value is None:
        empty = [role for role in (wanting if wanting is not None else routed) if routed.get(role) is None]
        if not empty or not _stdin_may_hold_a_pipe(stdin):
            return routed
        path = _path_from_stdin(stdin, kinds, required=False)
        if path is None:
            return RoutedInputs(routed, empty_pipe=_is_pipe(stdin))
        source = "<stdin>"
    elif value == "-":
        path, source = _path_from_stdin(stdin, kinds, required=True), "<stdin>"
    else:
        path, source = Path(value), value
        if not path.exists():
            raise ArtifactError(_missing(path), path)
    role = artifact_role(path)
    if role is None:
        role = default
    if role not in routed:
        raise ArtifactError(
            f"is a {role} artifact; this command takes {kinds}", path if source != "<stdin>" else f"<stdin> ({path})"
        )
    if routed[role] is not None:
        raise ConfigError(f"{role.replace('-', ' ')} given twice: {options[role]} {routed[role]} and {source} ({path})")
    routed[role] = path
    return routed


def require(routed: dict[str, Path | None], role: str, option: str) -> Path:
    """The routed input of ``role``; a one-line usage error when neither the positional, stdin nor ``option``
    gave it."""
    if routed.get(role) is None:
        if getattr(routed, "empty_pipe", False):
            raise ConfigError(
                f"no {role.replace('-', ' ')} given: the previous stage of the pipe wrote nothing on "
                f"stdin (it failed; see its error above), and {option} was not given"
            )
        raise ConfigError(
            f"no {role.replace('-', ' ')} given (pass it as the positional path, pipe it on stdin, or use {option})"
        )
    return routed[role]


def examples(*commands: str) -> str:
    """The epilog of a command's --help: its example command lines, kept as written (click's ``\\b``)."""
    return "\b\nExample" + ("s" if len(commands) > 1 else "") + ":\n" + "\n".join(f"  {c}" for c in commands)


def _missing(path: Path) -> str:
    """Why an input is not there, in one phrase (``mltk.artifacts.manifest.missing_reason``)."""
    from mltk.artifacts.manifest import missing_reason

    return missing_reason(path)
