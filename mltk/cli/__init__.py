"""The ``mltk`` command line: thin typer commands that parse options, call one library function and print the
artifact path. The app and its registry live in ``mltk.cli.application``."""

from mltk.cli.application import main

__all__ = ["app", "main"]


def __getattr__(name: str):
    """``app``, the typer app with every command, is built on first use: building it imports every command module,
    which the ``mltk`` script avoids by importing only the module of the command it runs."""
    if name == "app":
        from mltk.cli.application import full_app

        return full_app()
    raise AttributeError(name)
