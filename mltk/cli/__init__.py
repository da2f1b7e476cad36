"""The ``mltk`` command line: thin typer commands that parse options, call one library function and print the
artifact path."""

from mltk.cli.app import app, main

__all__ = ["app", "main"]
