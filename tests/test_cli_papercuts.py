"""Command-line papercuts: a closed pipe on stdout (``mltk recipes list | head``) is a normal end; a list given
with spaces where the input path was left out says so; help texts say what each command does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mltk.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_a_reader_that_left_is_a_normal_end():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "mltk", "recipes", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    process.stdout.close()  # the reader leaves before the first line is written (as `head` does after its lines)
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, stderr
    assert stderr == ""


def test_a_list_with_spaces_and_no_input_says_why_the_word_was_read_as_a_path(tmp_path):
    result = runner.invoke(app, ["train-nlt", "--lang", "de", "zh", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "zh: no such file or directory (zh was read as the command's input path" in result.stderr
    assert "a list takes commas, not spaces: --lang de,zh" in result.stderr
    missing = runner.invoke(app, ["train-nlt", str(tmp_path / "nothere"), "--lang", "de", "-o", str(tmp_path / "x")])
    assert missing.exit_code == 2 and "commas" not in missing.stderr


def test_the_recipes_commands_help_speaks_of_recipes_not_artifacts():
    """They read and copy recipe files: no artifact path to print, no artifact to overwrite."""
    for command in ("list", "show", "cp"):
        result = runner.invoke(app, ["recipes", command, "--help"])
        assert result.exit_code == 0 and "--json" in result.stdout
        assert "artifact" not in result.stdout, command
    assert "Replace the file if it exists" in runner.invoke(app, ["recipes", "cp", "--help"]).stdout
