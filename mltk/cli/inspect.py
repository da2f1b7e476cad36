"""``mltk inspect``: validate an artifact and summarise its manifest."""

from __future__ import annotations

import json
from typing import Optional

import typer

from mltk.cli.common import JsonOption, examples, resolve_input

EXAMPLE = examples("mltk inspect runs/le", "mltk train-le ... | mltk inspect --json")


def inspect(
    path: Optional[str] = typer.Argument(None, help="Artifact directory, or - / nothing to read its path from stdin."),
    as_json: bool = JsonOption,
) -> None:
    """Check that PATH is a complete mltk artifact and summarise its manifest on stderr."""
    from mltk import artifacts
    from mltk.runtime import console

    resolved = resolve_input(path, what="artifact").resolve()
    manifest = artifacts.read_manifest(resolved)
    if as_json:
        typer.echo(json.dumps({"path": str(resolved), "manifest": manifest}, ensure_ascii=False))
        return
    summary = {k: v for k, v in manifest.items() if k not in ("files", "inputs", "created_by", "shards")}
    console.print(f"[bold]{manifest['kind']}[/bold] artifact at {resolved}")
    for key, value in summary.items():
        console.print(f"  {key}: {value}", markup=False)
    console.print(f"  stage: {manifest['created_by'].get('stage')}  inputs: {len(manifest['inputs'])}", markup=False)
    typer.echo(str(resolved))


def register(app: typer.Typer) -> None:
    app.command("inspect", epilog=EXAMPLE)(inspect)
