"""``mltk prune``: drop the resume state from a finished checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mltk.cli.common import emit, examples, resolve_input
from mltk.cli.options import JsonOpt

EXAMPLE = examples(
    "mltk prune runs/nlt",
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-le --captions world/captions --init runs/nlt --steps 200 \\",
    "      -o runs/le | mltk prune",
)


def prune_command(
    path: Optional[str] = typer.Argument(
        None, metavar="[CHECKPOINT]", help="A checkpoint artifact, or - / nothing to read its path from stdin."
    ),
    as_json: JsonOpt = False,
) -> None:
    """Drop a finished checkpoint's resume state (state/: optimizer moments and the best-step copy), which a longer
    rerun of the same command would continue from. The weights, config and steps.csv stay; the manifest is
    rewritten without the state files, so `mltk inspect` still verifies the artifact."""
    from mltk.artifacts.prune import prune_state

    given = Path(path) if path not in (None, "-") else None  # may be missing: a killed prune's rerun restores it
    emit(prune_state(given or resolve_input(path, what="checkpoint")), as_json)


def register(app: typer.Typer) -> None:
    app.command("prune", epilog=EXAMPLE)(prune_command)
