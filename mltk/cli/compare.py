"""``mltk compare``: the consistency report of several evaluated runs, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from mltk.cli.common import emit, examples, lang_option, out_option, split_list
from mltk.cli.options import JsonOpt

EXAMPLE = examples("mltk compare m-le m-ccrk --name le,ccrk -o cmp")


def compare_command(
    runs: List[Path] = typer.Argument(
        ...,
        help="Metrics artifacts from `mltk evaluate` (with --metric mrv; "
        "caption-to-caption results from --metric c2c get the same table over language pairs).",
    ),
    out: Path = out_option("Directory of the comparison metrics artifact to write."),
    name: List[str] = typer.Option(
        [],
        "--name",
        metavar="A[,B...]",
        help="A label per run, in order (default: folder names); repeat or comma-separate.",
    ),
    lang: List[str] = lang_option(
        "Languages for mean AR and spread (default: those every run evaluated); for c2c, the pairs of two of them."
    ),
    report_format: str = typer.Option("table", "--format", help="table (rich on stderr), markdown or csv."),
    as_json: JsonOpt = False,
) -> None:
    """Print mean AR, MRV (both directions) and the per-language recall spread (max - min AR) of several evaluated
    runs side by side on stderr, and write them as a metrics artifact; runs evaluated with --metric c2c get the
    same figures over their caption-to-caption language pairs."""
    from mltk.evaluate.compare import CompareConfig, compare_runs

    emit(
        compare_runs(
            CompareConfig(
                runs=tuple(runs),
                out=out,
                names=split_list(name),
                languages=split_list(lang),
                report_format=report_format,
            )
        ),
        as_json,
    )


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=EXAMPLE)(compare_command)
