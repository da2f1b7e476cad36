"""Progress on stderr: plain lines when stderr is not a terminal (pipes, Slurm logs), bars that leave no finished
sub-bar behind on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

import mltk.core.runtime as runtime


def _capture(monkeypatch, terminal: bool) -> io.StringIO:
    stream = io.StringIO()
    monkeypatch.setattr(runtime, "console", Console(file=stream, force_terminal=terminal, width=100))
    monkeypatch.delenv("MLTK_PROGRESS", raising=False)
    return stream


def test_plain_lines_when_not_a_terminal(monkeypatch):
    stream = _capture(monkeypatch, terminal=False)
    monkeypatch.setenv("MLTK_PROGRESS_SECONDS", "0")
    assert list(runtime.track(range(4), "encoding de")) == [0, 1, 2, 3]
    lines = stream.getvalue().splitlines()
    assert [line.split(" elapsed")[0].rsplit(" ", 1)[0] for line in lines] == [
        "encoding de 1/4 (25%)",
        "encoding de 2/4 (50%)",
        "encoding de 3/4 (75%)",
        "encoding de 4/4 (100%)",
    ]
    assert "\x1b" not in stream.getvalue()  # no terminal control codes in a log file


def test_quick_tasks_stay_silent_and_long_ones_end_with_their_total(monkeypatch):
    stream = _capture(monkeypatch, terminal=False)
    monkeypatch.setenv("MLTK_PROGRESS_SECONDS", "3600")
    list(runtime.track(range(50), "ranks"))
    assert stream.getvalue() == ""
    with runtime.PlainProgress(interval=0) as progress:
        task = progress.add_task("translate", total=None)
        progress.advance(task, 5)
        progress.advance(task, 5)
    assert [line.split(" 00:")[0] for line in stream.getvalue().splitlines()] == [
        "translate 5",
        "translate 10",
        "translate 10",
    ]


def test_terminal_bars_are_removed_when_finished(monkeypatch):
    stream = _capture(monkeypatch, terminal=True)
    bar = runtime.progress_bar()
    assert bar.live.transient
    list(runtime.track(range(3), "encoding zh"))
    assert "encoding zh" in stream.getvalue()
    assert stream.getvalue().endswith("\x1b[1A\x1b[2K")  # the finished bar line is erased


def test_encode_images_reports_progress_in_plain_lines(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mltk.cli import app
    from mltk.data.synth import SynthConfig, synthesize

    world = synthesize(tmp_path / "w", SynthConfig(train=8, val=4, test=4, langs=("en",)))
    monkeypatch.setenv("MLTK_PROGRESS_SECONDS", "0")
    result = CliRunner().invoke(
        app,
        [
            "encode-images",
            str(world.images_path),
            "--model",
            "mltk-tiny",
            "--out",
            str(tmp_path / "img"),
            "--batch-size",
            "8",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "encode-images 8/16 (50%)" in result.stderr and "encode-images 16/16 (100%)" in result.stderr
    assert result.stdout.strip() == str((tmp_path / "img").resolve())
