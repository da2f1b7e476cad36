"""Finished translation shards inside an artifact's partial directory, so an interrupted run resumes.

A shard holds the translations of one contiguous chunk of a target language's plan (its unique source texts in
a fixed order) as a Parquet table of (source, translation). Shards are written atomically as each finishes; a
rerun with the same plan loads them instead of translating again. ``plan.json`` records what the shards were
made from (input fingerprint, model and decoding settings); when it differs, the old shards are discarded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from mltk import artifacts
from mltk.core.errors import ArtifactError
from mltk.core.names import check_name

PLAN_FILE = "plan.json"


def _read_plan(path: Path) -> dict | None:
    """The recorded plan; None when it cannot be read (the shards beside it are then discarded)."""
    try:
        return artifacts.read_json(path)
    except ArtifactError:
        return None


class ShardStore:
    def __init__(self, directory: Path, plan: dict):
        self.directory = Path(directory)
        plan = json.loads(json.dumps(plan, sort_keys=True, default=str))
        plan_path = self.directory / PLAN_FILE
        if plan_path.is_file() and _read_plan(plan_path) != plan:
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        artifacts.write_json(plan_path, plan)

    def _path(self, target: str, index: int) -> Path:
        return self.directory / f"{check_name(target, 'target language')}-{index:05d}.parquet"

    def load(self, target: str, index: int, sources: Sequence[str]) -> dict[str, str] | None:
        """The finished shard's translations, or None when it is absent or was made from other sources."""
        path = self._path(target, index)
        if not path.is_file():
            return None
        table = artifacts.read_table(path)
        if table.column("source").to_pylist() != list(sources):
            return None
        return dict(zip(table.column("source").to_pylist(), table.column("translation").to_pylist()))

    def write(self, target: str, index: int, sources: Sequence[str], translations: Sequence[str]) -> None:
        table = pa.table(
            {"source": pa.array(list(sources), pa.string()), "translation": pa.array(list(translations), pa.string())}
        )
        artifacts.write_table(self._path(target, index), table)

    def remove(self) -> None:
        """Called once the artifact is assembled: the shards are not part of the finished artifact."""
        shutil.rmtree(self.directory, ignore_errors=True)
