"""``mltk prune``: drop the resume state (``state/``: optimizer moments, the best-step copy) from a finished
checkpoint.

A finished training artifact keeps ``state/`` so that a longer rerun can continue from it; it is often several
times the size of the model (130 MB beside a 33 MB model). Deleting it by hand breaks the artifact (its manifest
lists every file with its sha256), so prune rebuilds the artifact without it: the kept files are hard-linked into
a staging directory beside it (no copy), the manifest is rewritten without the state files (its ``created_by`` is
kept, so the same training command still finds the artifact up to date), and the staging directory replaces the
artifact by rename. An interrupted prune leaves the original artifact as it was.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from mltk import artifacts
from mltk.artifacts import locks, schema
from mltk.artifacts.integrity import member
from mltk.core.errors import ArtifactError
from mltk.core.runtime import log


def state_files(manifest: dict) -> list[str]:
    """The manifest's files that belong to the resume state."""
    return [name for name in manifest.get("files", []) if name.split("/")[0] == schema.CHECKPOINT_STATE_DIR]


def prune_state(path: Path | str) -> Path:
    """Remove ``state/`` from the checkpoint at ``path`` (verified first); returns its path. A checkpoint without
    resume state is left as it is."""
    artifact = Path(path).resolve()
    report = artifacts.verify_artifact(artifact, decode=False)
    manifest = report["manifest"]
    if manifest["kind"] != "checkpoint":
        raise ArtifactError(f"is a {manifest['kind']} artifact; only checkpoints keep resume state", artifact)
    dropped = state_files(manifest)
    if not dropped:
        log(f"{artifact} holds no resume state; nothing to prune")
        return artifact
    lock = locks.OutputLock(artifact)
    lock.acquire()
    try:
        staging = _stage_without(artifact, manifest, dropped)
        _swap(staging, artifact)
    finally:
        lock.release()
    freed = sum(manifest["checksums"][name]["size"] for name in dropped if name in manifest.get("checksums", {}))
    log(f"{artifact}: dropped the resume state ({len(dropped)} files, {freed / 1e6:.1f} MB); a longer rerun of "
        f"the same command now starts from scratch")
    return artifact


def _stage_without(artifact: Path, manifest: dict, dropped: list[str]) -> Path:
    """A copy of the artifact (hard links) without ``dropped``, its manifest written last."""
    staging = Path(tempfile.mkdtemp(prefix=f".{artifact.name}.prune-", dir=artifact.parent))  # never a user's
    try:
        staging.chmod(artifact.stat().st_mode & 0o7777)
        kept = [name for name in manifest["files"] if name not in dropped]
        for name in kept:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(member(artifact, name), target)
        pruned = dict(manifest, files=kept, checksums={name: manifest["checksums"][name] for name in kept})
        pruned["pruned"] = {"dropped": schema.CHECKPOINT_STATE_DIR + "/",
                            "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        artifacts.write_json(staging / schema.MANIFEST, pruned)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _swap(staging: Path, artifact: Path) -> None:
    """Put ``staging`` in the artifact's place; the old directory is removed only after the rename."""
    old = artifact.parent / f".{artifact.name}.pruned-original-{os.getpid()}-{secrets.token_hex(6)}"
    os.replace(artifact, old)
    os.replace(staging, artifact)
    shutil.rmtree(old, ignore_errors=True)
