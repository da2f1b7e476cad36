"""What a newcomer meets in the first hour: every command honours MLTK_OVERWRITE (the Makefiles export it, so a
rerun with a changed variable replaces each out-of-date output), hub ids of text towers, one rule for languages,
plain sentences in, a summary at the end of the main job."""

from __future__ import annotations

import json

import click
import numpy as np
import typer
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()


def _commands(group: click.Group, prefix: str = ""):
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if hasattr(command, "list_commands"):  # a group (typer may bring its own click)
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_every_overwrite_option_reads_mltk_overwrite():
    """The Makefiles export MLTK_OVERWRITE=1 so that a stage make reruns may replace its out-of-date output; an
    --overwrite that ignores it stops the rerun (index query's --contact-sheet did)."""
    options = [(name, param) for name, command in _commands(typer.main.get_command(app))
               for param in command.params if "--overwrite" in getattr(param, "opts", [])]
    assert len(options) > 10 and "index query" in {name for name, _ in options}
    assert [name for name, param in options if param.envvar != "MLTK_OVERWRITE"] == []


def test_a_rerun_query_replaces_its_contact_sheet_under_mltk_overwrite(tmp_path):
    """The quickstart's last stage after a changed variable: the query runs again over its own contact sheet."""
    import io

    import pyarrow as pa
    from PIL import Image

    ids = [f"img{i}" for i in range(6)]
    vectors = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    embeddings = artifacts.write_embeddings(tmp_path / "img", ids, vectors, normalized=False)
    pictures = []
    for i in range(len(ids)):
        buffer = io.BytesIO()
        Image.new("RGB", (16, 16), (40 * i, 90, 200)).save(buffer, format="PNG")
        pictures.append(buffer.getvalue())
    images = artifacts.write_images(tmp_path / "images", pa.table(
        {"image_id": ids, "split": ["test"] * 6, "image": pa.array(pictures, pa.binary())}))
    index = runner.invoke(app, ["index", "build", str(embeddings), "--out", str(tmp_path / "index")])
    assert index.exit_code == 0, index.stderr
    sheet = tmp_path / "query.png"

    def query(first_id: str, **env: str):
        return runner.invoke(app, ["index", "query", str(tmp_path / "index"), "--images", str(embeddings), "--ids",
                                   first_id, "--k", "3", "--contact-sheet", str(sheet), "--image-source",
                                   str(images)], env=env)

    assert query("img0").exit_code == 0
    refused = query("img1")
    assert refused.exit_code == 2 and "--overwrite" in refused.stderr
    rerun = query("img1", MLTK_OVERWRITE="1")
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout.splitlines()[0])["query"] == "img1"
