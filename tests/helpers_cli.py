"""The command tree, walked once for the tests that check every command (options, help, examples)."""

from __future__ import annotations

import typer

from mltk.cli.application import full_app


def leaf_commands() -> list:
    """(name, click command) of every leaf command; typer may vendor click, so classes are matched by duck type."""

    def walk(command, prefix: str):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{prefix} {name}".strip())
        else:
            yield prefix, command

    return list(walk(typer.main.get_command(full_app()), ""))
