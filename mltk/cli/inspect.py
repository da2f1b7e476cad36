"""``mltk inspect``: validate an artifact (containment, sizes, hashes, decoding) and summarise its manifest."""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from mltk.cli.common import BaseOption, examples, resolve_input
from mltk.cli.options import JsonOpt

EXAMPLE = examples(
    "mltk inspect runs/le", "mltk encode-images world/images -m runs/native -o emb | mltk inspect --json"
)


def inspect(
    path: Optional[str] = typer.Argument(None, help="Artifact directory, or - / nothing to read its path from stdin."),
    quick: bool = typer.Option(False, "--quick", help="Check sizes and sha256 only; do not decode every file."),
    base: Optional[List[str]] = BaseOption,
    as_json: JsonOpt = False,
) -> None:
    """Check that PATH is a complete, intact mltk artifact: every file it names lies inside it, has the recorded
    size and sha256, and decodes (unless --quick); exit 2 naming the first file that does not. Inputs that changed
    since the artifact was made are reported (it was made from something that is no longer there), and so are a
    checkpoint's base model and tokenizer: pinned by fingerprint, with a warning when one changed or is gone. A
    metrics artifact's tables are printed as evaluate printed them."""
    from mltk import artifacts
    from mltk.core.runtime import log

    resolved = resolve_input(path, what="artifact").resolve()
    report = artifacts.verify_artifact(resolved, decode=not quick)
    manifest = report["manifest"]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "path": str(resolved),
                    "manifest": manifest,
                    "verified": report["verified"],
                    "changed_inputs": report["changed_inputs"],
                    "dependencies": report["dependencies"],
                },
                ensure_ascii=False,
            )
        )
        return
    summary = {k: v for k, v in manifest.items() if k not in ("files", "inputs", "created_by", "shards", "checksums")}
    log(f"{manifest['kind']} artifact at {resolved}")
    for key, value in summary.items():
        log(f"  {key}: {value}")
    log(f"  stage: {manifest['created_by'].get('stage')}  inputs: {len(manifest['inputs'])}")
    log(f"  verified: {report['verified']}")
    for entry in report["changed_inputs"]:
        if entry.get("now"):  # found where the moved tree put it, with the recorded fingerprint: no warning
            log(f"  input {entry['path']} {entry['change']}: now {entry['now']}")
        else:
            log(f"  warning: input {entry['path']} {entry['change']} since this artifact was made")
    for line in dependency_lines(report["dependencies"]):
        log(line)
    if manifest["kind"] == "metrics":
        from mltk.present.report import print_metrics_artifact

        print_metrics_artifact(resolved)
    typer.echo(str(resolved))


def dependency_lines(rows: list[dict]) -> list[str]:
    """A checkpoint's base model and tokenizer as ``inspect`` prints them (a warning when one changed or is gone)."""
    lines = []
    for row in rows:
        if row["status"] == "a name":
            lines.append(f"  {row['role']}: {row['name']} (a name: {row['note']})")
        elif row["status"] in ("changed", "is gone"):
            now = f", now {row['now']}" if row.get("now") else ""
            lines.append(
                f"  warning: {row['role']} {row['location']} {row['status']} since this checkpoint was made "
                f"(made with {row['fingerprint']}{now}); loading it is refused"
            )
        else:
            lines.append(f"  {row['role']}: {row['location']} {row['status']} ({row['fingerprint']})")
    return lines


def register(app: typer.Typer) -> None:
    app.command("inspect", epilog=EXAMPLE)(inspect)
