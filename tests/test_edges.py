"""The edges of every command: what mltk replaces, what it refuses to reach, the exit code and line of a refusal,
the bounds on what a user hands over, and what a failed or killed run leaves behind (``docs/safety.md``)."""

from __future__ import annotations

import pytest

from mltk.artifacts import loose, ownership
from mltk.core import policy
from mltk.core.errors import ArtifactError
from mltk.present import plots

CONTINUAL = {"continual": {"tasks": ["en", "de"], "metric": "t2i.R@1", "matrix": [[50.0, None], [45.0, 60.0]],
                           "AR": [50.0, 52.5], "F": [None, 5.0]}}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """mltk's record of the files it wrote lives under the cache root: one per test."""
    monkeypatch.setenv("MLTK_CACHE_DIR", str(tmp_path / "cache"))


# -- a user file is never replaced --------------------------------------------------------------------------------

def test_a_single_file_writer_replaces_its_own_file_only_with_overwrite(tmp_path):
    target = tmp_path / "out.txt"
    loose.write_file(target, b"first")
    with pytest.raises(ArtifactError, match="pass --overwrite"):
        loose.write_file(target, b"second")
    with policy.overwriting():
        loose.write_file(target, b"second")
    assert target.read_bytes() == b"second" and ownership.made_by_mltk(target)


@pytest.mark.parametrize("change", ["a user's file", "edited after mltk wrote it", "same size, other bytes"])
def test_a_file_mltk_did_not_write_is_never_replaced_even_with_overwrite(tmp_path, change):
    target = tmp_path / "notes.png"
    if change == "a user's file":
        target.write_bytes(b"my notes")
    else:
        loose.write_file(target, b"written by mltk")
        target.write_bytes(b"my notes" if change == "edited after mltk wrote it" else b"WRITTEN BY MLTK")
    before = target.read_bytes()
    with policy.overwriting(), pytest.raises(ArtifactError, match="mltk did not write it"):
        loose.write_file(target, b"new")
    assert target.read_bytes() == before and not ownership.made_by_mltk(target)


def test_evaluation_pictures_never_replace_a_users_file_of_the_same_name(tmp_path):
    folder = tmp_path / "plots"
    plots.write_evaluation_plots(CONTINUAL, folder)
    with policy.overwriting():
        plots.write_evaluation_plots(CONTINUAL, folder)  # its own pictures: replaced
    (folder / "continual_curve.svg").write_text("<svg>mine</svg>")
    with policy.overwriting(), pytest.raises(ArtifactError, match="mltk did not write it"):
        plots.check_plot_dir(folder)
    assert (folder / "continual_curve.svg").read_text() == "<svg>mine</svg>"


def test_an_export_folder_and_an_artifact_are_mltks_and_a_plain_folder_is_not(tmp_path):
    from mltk import artifacts

    metrics = artifacts.write_metrics(tmp_path / "m", {"a": 1})
    export = tmp_path / "e"
    export.mkdir()
    (export / ownership.EXPORT_INFO).write_text('{"made_by": "mltk export"}')
    (tmp_path / "plain").mkdir()
    assert ownership.made_by_mltk(metrics) and ownership.made_by_mltk(export)
    assert not ownership.made_by_mltk(tmp_path / "plain")
