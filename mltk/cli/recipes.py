"""``mltk recipes list``, ``mltk recipes show NAME`` and ``mltk recipes cp NAME FILE``: the recipes, the one home of
every training hyper-parameter (``mltk.recipes``), seen and copied from the command line (torchtune's ``tune ls``
and ``tune cp``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from mltk.cli.common import HELP_SETTINGS, emit, examples, out_option, overwrite_option

recipes_app = typer.Typer(
    help="The recipes: the published hyper-parameters of each training command, as data.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings=HELP_SETTINGS,
)
RecipeArg = typer.Argument(..., metavar="NAME", help="A packaged recipe (mltk recipes list) or a recipe JSON file.")
ShowJsonOpt = typer.Option(
    False,
    "--json",
    help="Print the recipe as one JSON object (name, stage, path, values with their sources) instead of the table.",
)
CopyOverwriteOpt = overwrite_option("Replace the file if it exists (without it an existing file is refused).")


@recipes_app.command("list", epilog=examples("mltk recipes list", "mltk recipes list --json"))
def list_command(
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the recipes as one JSON array (name, stage, default, extends) instead of the table.",
    ),
) -> None:
    """The packaged recipes: name, the training command it is for (* its default), what it extends."""
    from mltk.recipes.catalog import recipe_summaries

    rows = recipe_summaries()
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False))
        return
    for row in rows:
        extends = f" (extends {row['extends']})" if row["extends"] else ""
        typer.echo(f"{row['name']:<18} {row['stage'] + ('*' if row['default'] else ''):<17}{extends}")


@recipes_app.command("show", epilog=examples("mltk recipes show mla-le", "mltk recipes show mla-le --json"))
def show_command(name: str = RecipeArg, as_json: bool = ShowJsonOpt) -> None:
    """Every value of a recipe and where it comes from: its own file, or the recipe it extends. Each key can be
    given to a training command as --set KEY=VALUE."""
    from mltk.settings.show import recipe_values

    recipe, rows = recipe_values(name)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "name": recipe.name,
                    "stage": recipe.stage,
                    "path": str(recipe.path),
                    "values": [
                        {"key": r.key, "value": r.value, "source": r.source, "meaning": r.meaning} for r in rows
                    ],
                },
                ensure_ascii=False,
            )
        )
        return
    typer.echo(f"{recipe.name}: {recipe.stage} ({recipe.path})")
    for row in rows:
        typer.echo(f"  {row.key:<32} {json.dumps(row.value):<16} {row.source:<18} {row.meaning}".rstrip())


@recipes_app.command(
    "cp", epilog=examples("mltk recipes cp mla-nlt my-nlt.json", "mltk recipes cp mla-nlt my-nlt.json --overwrite")
)
def cp_command(
    name: str = RecipeArg,
    file: Optional[Path] = typer.Argument(None, metavar="[FILE]", help="The JSON file to write (or -o/--out)."),
    out: Optional[Path] = out_option(
        "The JSON file to write (over mltk's own earlier copy only, with --overwrite).", required=False
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object with the written file's path instead of the bare path."
    ),
    overwrite: bool = CopyOverwriteOpt,
) -> None:
    """Copy a recipe to a file, to edit and give as --recipe FILE (it keeps the 'extends' of the packaged one)."""
    from mltk.core.errors import ConfigError
    from mltk.recipes.catalog import copy_recipe

    if (file is None) == (out is None):
        raise ConfigError("give the file to write once: as FILE or as -o/--out")
    emit(copy_recipe(name, file or out), as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(recipes_app, name="recipes")
