"""``mltk prune``: drop the resume state (``state/``: optimizer moments, the best-step copy) from a finished
checkpoint.

A finished training artifact keeps ``state/`` so that a longer rerun can continue from it; it is often several
times the size of the model (130 MB beside a 33 MB model). Deleting it by hand breaks the artifact (its manifest
lists every file with its sha256), so prune rebuilds the artifact without it, under the artifact rules:

- the output lock is taken before the manifest is read, so a training run writing the same path at the same time
  is refused, never mixed with;
- every file but ``state/`` is hard-linked (no copy) into a staging directory beside the artifact, nested
  artifacts included (a ``train-ccrk`` checkpoint started from CLL-CLIP holds ``vocab/`` with its own manifest);
  the manifest is rewritten without the state files, its ``created_by`` kept (so the same training command still
  finds the artifact up to date), the original manifest kept in it (``pruned.original_manifest``) so that the
  artifact keeps the identity that artifacts built on it recorded (``mltk.artifacts.manifest.fingerprint``);
- the staging directory takes the artifact's place in one atomic swap (``mltk.artifacts.swap``): a kill at any
  point leaves a complete checkpoint at the path, the old or the new one. Where the system cannot swap, two
  renames; a rerun after a kill between them puts the original back and prunes again. What a killed run left
  beside the artifact is removed by the next one;
- a full disk or a refused write is exit 2 naming the file; the original stays as it was.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path

from mltk import artifacts
from mltk.artifacts import locks, schema
from mltk.artifacts.prune_leftovers import PARTIAL_MARKER, clean_leftovers
from mltk.artifacts.swap import replace_directory
from mltk.artifacts.writer import disk_full
from mltk.core.errors import ArtifactError
from mltk.core.names import sibling_stem
from mltk.core.runtime import log


def state_files(manifest: dict) -> list[str]:
    """The manifest's files that belong to the resume state."""
    return [name for name in manifest.get("files", []) if name.split("/")[0] == schema.CHECKPOINT_STATE_DIR]


def prune_state(path: Path | str) -> Path:
    """Remove ``state/`` from the checkpoint at ``path`` (verified first, under its lock); returns its path. A
    checkpoint without resume state is left as it is."""
    artifact = Path(path).resolve()
    _check_writable(artifact)
    lock = locks.OutputLock(artifact)
    lock.acquire()
    try:
        clean_leftovers(artifact)
        report = artifacts.verify_artifact(artifact, decode=False)
        manifest = report["manifest"]
        if manifest["kind"] != "checkpoint":
            raise ArtifactError(f"is a {manifest['kind']} artifact; only checkpoints keep resume state", artifact)
        dropped = state_files(manifest)
        if not dropped:
            log(f"{artifact} holds no resume state; nothing to prune")
            return artifact
        staging = _stage_without(artifact, manifest, dropped)
        (staging / PARTIAL_MARKER).unlink()
        old = artifact.parent / f".{sibling_stem(artifact)}.pruned-original-{os.getpid()}-{secrets.token_hex(6)}"
        shutil.rmtree(replace_directory(staging, artifact, old), ignore_errors=True)
    finally:
        lock.release()
    freed = sum(manifest["checksums"][name]["size"] for name in dropped if name in manifest.get("checksums", {}))
    log(
        f"{artifact}: dropped the resume state ({len(dropped)} files, {freed / 1e6:.1f} MB); a longer rerun of "
        f"the same command now starts from scratch"
    )
    return artifact


def _check_writable(artifact: Path) -> None:
    if not artifact.parent.is_dir():
        raise ArtifactError("no such file or directory", artifact)
    if not os.access(artifact.parent, os.W_OK | os.X_OK):
        raise ArtifactError(
            f"cannot prune: {artifact.parent} is not writable (the checkpoint is rebuilt beside itself)", artifact
        )


def _kept_files(artifact: Path) -> list[str]:
    """Every file of the artifact on disk but its manifest and ``state/``: nested artifacts' own manifests, which
    the outer manifest does not list, included."""
    return sorted(
        p.relative_to(artifact).as_posix()
        for p in artifact.rglob("*")
        if p.is_file() and p.relative_to(artifact).parts[0] not in (schema.MANIFEST, schema.CHECKPOINT_STATE_DIR)
    )


def _stage_without(artifact: Path, manifest: dict, dropped: list[str]) -> Path:
    """A copy of the artifact (hard links) without ``dropped``, its manifest written last."""
    staging = artifact.parent / f".{sibling_stem(artifact)}.prune-{secrets.token_hex(6)}"  # never a user's name
    try:
        staging.mkdir()
        staging.chmod(artifact.stat().st_mode & 0o7777)
        (staging / PARTIAL_MARKER).touch()
        for name in _kept_files(artifact):
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(artifact / name, target)
        kept = [name for name in manifest["files"] if name not in dropped]
        pruned = dict(manifest, files=kept, checksums={name: manifest["checksums"][name] for name in kept})
        pruned["pruned"] = {
            "dropped": schema.CHECKPOINT_STATE_DIR + "/",
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "original_manifest": (artifact / schema.MANIFEST).read_text(encoding="utf-8"),
        }
        artifacts.write_json(staging / schema.MANIFEST, pruned)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        error = _user_error(exc, artifact, staging)
        if error is not None:
            raise error from None
        raise
    return staging


def _user_error(exc: BaseException, artifact: Path, staging: Path) -> ArtifactError | None:
    """A full disk or a refused write as exit 2 naming the file (None for any other error)."""
    if not isinstance(exc, OSError):
        return None
    full = disk_full(exc)
    if not full and exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EMLINK, errno.EXDEV):
        return None
    name = str(exc.filename or artifact / schema.MANIFEST)
    shown = str(artifact / Path(name).relative_to(staging)) if name.startswith(str(staging) + os.sep) else name
    reason = "no space left on device" if full else f"cannot write ({exc.strerror or exc})"
    return ArtifactError(
        f"{reason} while writing {shown.removesuffix('.tmp')}; the checkpoint was not changed", artifact
    )
