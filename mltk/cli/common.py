"""Option aliases shared by commands, and the one way a command prints its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

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
