"""``mltk check-overlap TRAIN TEST``: test images that are also training images, by canonical image id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from mltk.cli.common import emit, examples, out_option
from mltk.cli.options import JsonOpt

EXAMPLE = examples("mltk check-overlap data/coco/captions data/xtd10/captions -o runs/overlap")


def check_overlap(
    train: Path = typer.Argument(
        ...,
        help="Training data: a captions, images or embeddings artifact (a captions "
        "artifact counts its train rows when it has a train split).",
    ),
    test: Path = typer.Argument(..., help="Test data: a captions, images or embeddings artifact."),
    out: Optional[Path] = out_option(
        "Write a metrics artifact listing every shared image id, and print its path.", required=False
    ),
    as_json: JsonOpt = False,
) -> None:
    """Count the test images that appear in the training set (the report goes to stderr). Prints the artifact
    path with --out, one JSON object with --json, nothing otherwise."""
    from mltk.data.overlap import run_check_overlap

    report, path = run_check_overlap(train, test, out)
    if path is not None:
        emit(path, as_json, **report.as_dict())
    elif as_json:
        typer.echo(json.dumps(report.as_dict()))


def register(app: typer.Typer) -> None:
    app.command("check-overlap", epilog=EXAMPLE)(check_overlap)
