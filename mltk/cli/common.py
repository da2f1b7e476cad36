"""Option aliases shared by commands, the one way a command reads its main input (a path, ``-`` or a pipe) and
the one way it prints its result. The library never reads stdin: commands resolve it here and pass a path."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from mltk import artifacts
from mltk.errors import ArtifactError

DeviceOption = typer.Option("auto", "--device", help="auto (CUDA when available), cpu or cuda.")
PrecisionOption = typer.Option(
    "auto", "--precision", help="auto (bf16/fp16 autocast on CUDA, fp32 on CPU), fp32, bf16 or fp16."
)
JsonOption = typer.Option(False, "--json", help="Print one JSON object instead of the bare artifact path.")
SeedOption = typer.Option(0, "--seed", help="Random seed; the same seed gives the same result on the CPU.")
LogEveryOption = typer.Option(None, "--log-every", help="Steps between stderr log lines and steps.csv rows "
                              "(default 10).")
TensorboardOption = typer.Option(None, "--tensorboard", help="Also write TensorBoard event files under this "
                                 "directory (needs the tensorboard extra).")


def emit(path: Path, as_json: bool = False, **extra: Any) -> None:
    """Print the artifact path (or a JSON object with it) as the one stdout line of a command."""
    path = Path(path).resolve()
    if as_json:
        typer.echo(json.dumps({"path": str(path), **extra}, ensure_ascii=False, default=str))
    else:
        typer.echo(str(path))


def resolve_input(path: str | None, *, what: str = "input", stdin=None) -> Path:
    """The main input of a stage: a path, or ``-``/nothing with the path of an artifact piped on stdin.

    A pipe carries the one stdout line of the previous stage (its artifact path, or a JSON object with a
    ``path`` field).
    """
    stdin = stdin if stdin is not None else sys.stdin
    if path not in (None, "-"):
        resolved = Path(path)
        if not resolved.exists():
            raise ArtifactError("no such file or directory", resolved)
        return resolved
    if path is None and (stdin is None or stdin.isatty()):
        raise ArtifactError(f"no {what} given (pass a path or pipe one on stdin)", "<stdin>")
    text = stdin.read().strip() if stdin is not None else ""
    if not text:
        raise ArtifactError(f"empty stdin; expected the path of an artifact ({what})", "<stdin>")
    line = text.splitlines()[-1].strip()
    if line.startswith("{"):
        try:
            line = json.loads(line)["path"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ArtifactError("stdin JSON has no 'path' field", "<stdin>")
    resolved = Path(line)
    if not artifacts.is_artifact(resolved):
        raise ArtifactError("stdin does not name an mltk artifact", line[:200])
    return resolved
