"""Shared fixtures: where the shared multilingual data lives, and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# ../shared/data beside the project root; MLTK_SHARED_DATA names another place (a worktree elsewhere)
SHARED_DATA = Path(os.environ.get("MLTK_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (only present in the development checkout)")
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="session")
def cpu_bf16_calibration_in_a_temporary_cache(tmp_path_factory):
    """``--precision auto`` may calibrate bf16 on this CPU once and cache the result: in the tests, not in the
    user's cache directory."""
    folder = tmp_path_factory.mktemp("cpu-bf16-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mltk.core.cpu_bf16.cache_root", lambda: folder)
        yield
