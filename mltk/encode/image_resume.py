"""The work of ``mltk encode-images`` cut into shards with fixed boundaries (``shard_ranges``, ``batch_plan``), and
the resume state that records the finished ones in the partial directory (``ResumeState``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mltk import artifacts
from mltk.core.runtime import log

RESUME_STATE = "encode-state.json"  # lives in the partial directory only; removed before the manifest is written


def shard_ranges(count: int, shard_size: int) -> list[range]:
    """Shard ``i`` covers rows ``[i * shard_size, (i + 1) * shard_size)``, the same on every run."""
    return [range(start, min(start + shard_size, count)) for start in range(0, count, shard_size)]


def batch_plan(shards: dict[int, range], batch_size: int) -> tuple[list[list[int]], list[int]]:
    """Batches never cross a shard boundary, so a shard's vectors do not depend on which shards were done
    before. Returns the batches (lists of source rows) and the shard of each batch."""
    batches, owners = [], []
    for shard, rows in shards.items():
        for start in range(rows.start, rows.stop, batch_size):
            batches.append(list(range(start, min(start + batch_size, rows.stop))))
            owners.append(shard)
    return batches, owners


@dataclass
class ResumeState:
    """What previous work finished, kept in the partial directory: ``key`` identifies the source and every
    setting that changes the vectors; a rerun with another key starts over. One process writes ``RESUME_STATE``;
    under torchrun rank r writes ``encode-state.rank{r}.json``, and loading merges every state file of the same
    key, so a run resumes whatever the number of processes before."""

    key: dict
    done: dict[str, dict] = field(default_factory=dict)  # shard index -> {"entry": ..., "skipped": [...], "dim"}
    file_name: str = RESUME_STATE

    @classmethod
    def load_or_reset(
        cls, directory: Path, key: dict, file_name: str = RESUME_STATE, reset: bool = True
    ) -> ResumeState:
        """The merged state of ``directory``; with ``reset`` (one process, or rank 0 before the others read),
        files of another key are removed first."""
        saved = []
        for path in sorted(directory.glob("encode-state*.json")):
            try:
                saved.append(json.loads(path.read_text(encoding="utf-8")))
            except ValueError:
                saved.append({})
        if reset and any(state.get("key") != key for state in saved):
            log(
                "encode-images: the unfinished run in the partial directory used another source or settings; "
                "starting over"
            )
            for stale in directory.iterdir():
                if stale.is_file():
                    stale.unlink()
            saved = []
        state = cls(key, {}, file_name)
        for previous in saved:
            if previous.get("key") == key:
                state.done.update(previous.get("done", {}))
        state._drop_incomplete(directory)
        return state

    def _drop_incomplete(self, directory: Path) -> None:
        for shard, record in list(self.done.items()):
            entry = record.get("entry")
            if entry and not all((directory / entry[name]).is_file() for name in ("vectors", "rows")):
                del self.done[shard]

    def mark_done(
        self,
        directory: Path,
        shard: int,
        entry: dict | None,
        skipped: list[dict],
        dim: int | None,
        bad_shard: dict | None = None,
    ) -> None:
        self.done[str(shard)] = {
            "entry": entry,
            "skipped": skipped,
            "dim": dim,
            **({"bad_shard": bad_shard} if bad_shard else {}),
        }
        artifacts.write_json(directory / self.file_name, {"key": self.key, "done": self.done})
