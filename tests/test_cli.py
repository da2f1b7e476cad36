"""The command line: version, help, pipes and error mapping (stdout and stderr checked separately)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from mltk import __version__, artifacts
from mltk.cli import app
from mltk.cli.common import resolve_input
from mltk.core.errors import ArtifactError

runner = CliRunner()


def test_version_and_help():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"mltk {__version__}"
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "inspect" in result.stdout


def test_inspect_prints_only_the_path_on_stdout(tmp_path):
    path = artifacts.write_embeddings(tmp_path / "emb", ["a"], np.ones((1, 2)))
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 0
    assert result.stdout == f"{path}\n"
    assert "embeddings artifact" in result.stderr


def test_inspect_reads_the_path_from_stdin_and_prints_json(tmp_path):
    path = artifacts.write_embeddings(tmp_path / "emb", ["a"], np.ones((1, 2)))
    result = runner.invoke(app, ["inspect", "-", "--json"], input=f"{path}\n")
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["path"] == str(path) and payload["manifest"]["kind"] == "embeddings"


def test_empty_stdin_is_exit_2_with_one_line():
    result = runner.invoke(app, ["inspect", "-"], input="")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "empty stdin" in result.stderr


def test_non_artifact_stdin_is_exit_2(tmp_path):
    result = runner.invoke(app, ["inspect", "-"], input=f"{tmp_path}\n")
    assert result.exit_code == 2
    assert "does not name an mltk artifact" in result.stderr and str(tmp_path) in result.stderr


def test_missing_file_is_exit_2_naming_the_file(tmp_path):
    result = runner.invoke(app, ["inspect", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert str(tmp_path / "missing") in result.stderr and "no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_unexpected_errors_are_exit_1_and_debug_shows_traceback(tmp_path, monkeypatch):
    path = artifacts.write_embeddings(tmp_path / "emb", ["a"], np.ones((1, 2)))

    def boom(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(artifacts, "verify_artifact", boom)  # what inspect calls
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 1
    assert "internal error: ZeroDivisionError: boom" in result.stderr and "Traceback" not in result.stderr
    monkeypatch.setenv("MLTK_DEBUG", "1")
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 1 and "Traceback" in result.stderr


def test_unknown_command_is_a_usage_error():
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.stderr


class _Pipe(io.StringIO):
    def __init__(self, text: str, tty: bool = False):
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_resolve_input_reads_the_last_line_or_its_json_path(tmp_path):
    """The CLI, not the library, resolves `-` and pipes: the last stdout line of the previous stage wins."""
    path = artifacts.write_embeddings(tmp_path / "emb", ["a"], np.ones((1, 2)))
    assert resolve_input("-", stdin=_Pipe(f"log line\n{path}\n")) == path
    assert resolve_input(None, stdin=_Pipe(json.dumps({"path": str(path), "n": 1}) + "\n")) == path
    assert resolve_input(str(path), stdin=_Pipe("ignored")) == path  # a path given is not read from stdin
    with pytest.raises(ArtifactError, match="no images given"):
        resolve_input(None, what="images", stdin=_Pipe(str(path), tty=True))
    with pytest.raises(ArtifactError, match="no 'path' field"):
        resolve_input("-", stdin=_Pipe('{"other": 1}'))


def test_build_vocab_refuses_a_minimum_frequency_below_one_and_names_its_default(tmp_path):
    result = runner.invoke(
        app, ["build-vocab", str(tmp_path), "--lang", "de", "-o", str(tmp_path / "v"), "--min-frequency", "0"]
    )
    assert result.exit_code == 2 and "--min-frequency must be at least 1, got 0" in result.output
    assert not (tmp_path / "v").exists()
    help_text = " ".join(runner.invoke(app, ["build-vocab", "--help"]).output.split())
    assert "cll-clip recipe's vocab_size" in help_text
