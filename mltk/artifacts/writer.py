"""Atomic artifact directories (``ArtifactWriter``), and what happens to an existing artifact: reuse, refuse,
replace with ``--overwrite``; one writer per output (a lock)."""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mltk.artifacts import dependencies, integrity, locks, schema
from mltk.artifacts.manifest import (
    PathLike,
    canonical_settings,
    describe_input,
    is_artifact,
    jsonable,
    read_manifest,
    write_json,
)
from mltk.artifacts.prune_leftovers import clean_leftovers
from mltk.core import policy
from mltk.core.errors import ArtifactError, MltkError
from mltk.core.file_modes import give_normal_modes
from mltk.core.names import check_output_path, sibling_stem
from mltk.core.version import __version__

# ----------------------------------------------------------------------------------------------------------------
# Atomic artifact directories, and what happens to an existing one
# ----------------------------------------------------------------------------------------------------------------

PARTIAL_SETTINGS = ".mltk-settings.json"  # inside a partial directory: the settings that started it


def partial_dir(out_dir: PathLike) -> Path:
    """Where an artifact is built before it is renamed into place (stable, so a rerun can resume)."""
    out_dir = Path(out_dir).resolve()
    return out_dir.parent / f".{sibling_stem(out_dir)}.partial"


def _trash_dir(out_dir: Path) -> Path:
    """A fresh name for the artifact being replaced, which no user artifact has (pid and random suffix)."""
    return out_dir.parent / f".{sibling_stem(out_dir)}.old-{os.getpid()}-{secrets.token_hex(6)}"


def _our_trash(out_dir: Path) -> list[Path]:
    """Replaced artifacts left by a crash between the two renames of ``commit`` (names ``_trash_dir`` made)."""
    pattern = re.compile(re.escape(f".{sibling_stem(out_dir)}.old-") + r"[0-9]+-[0-9a-f]{12}")
    if not out_dir.parent.is_dir():
        return []
    return sorted(
        (p for p in out_dir.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()),
        key=lambda p: p.stat().st_mtime,
    )


def is_our_partial(directory: Path) -> bool:
    """Whether ``directory`` (a ``.NAME.partial``) is mltk's work in progress: a real directory holding the settings
    record a writer puts there first (or still empty). A user's own artifact of that name is never touched."""
    if directory.is_symlink() or not directory.is_dir():
        return False
    return (directory / PARTIAL_SETTINGS).is_file() or not any(directory.iterdir())


def disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT, or numpy's short write ("2764800 requested and 25568 written") and pyarrow's wrapped errno 28,
    which carry no errno of their own."""
    if not isinstance(exc, OSError):
        return False
    text = str(exc)
    return (
        exc.errno in (errno.ENOSPC, errno.EDQUOT)
        or bool(re.search(r"\d+ requested and \d+ written", text))
        or "no space left on device" in text.lower()
    )


def _plain(value: Any) -> Any:
    """The value as it reads back from a manifest (tuples become lists, paths strings)."""
    return json.loads(json.dumps(jsonable(value), ensure_ascii=False, default=str))


class ArtifactWriter:
    """Build an artifact atomically, under one policy for an existing one::

        writer = ArtifactWriter(out, "metrics", stage="evaluate", config=cfg, inputs=[a, b])
        if writer.existing:                     # made by the same stage, settings and inputs: reuse it
            return writer.existing
        with writer:
            write_json(writer.dir / "metrics.json", numbers)
            writer.manifest["summary"] = {...}  # extra manifest fields
        writer.path                             # the final absolute path

    The policy, decided on construction (so a stage can ask before its expensive work; ``reusable()`` is the same
    question without a writer): ``out`` overlapping an input is refused; a complete artifact made by the same
    stage, configuration and input fingerprints is ``existing``, with ``--overwrite`` too (a stage returns it
    instead of building; entering
    the writer anyway builds and replaces it, since data handed to the writer directly is not in the settings);
    one made otherwise, or damaged, is refused unless ``--overwrite`` (``policy.OVERWRITE``); a
    directory that is no artifact is never replaced. One writer per output holds a lock beside the partial
    directory. On success the manifest (with each file's size and sha256) is written last and the directory
    renamed to ``out``; the old artifact stays until the new one is complete. On an exception the partial
    directory is kept when ``resume`` is true (so the next run continues from it), except in a run that started
    it after bad input (``MltkError``) or before any work (nothing but ``bookkeeping``); otherwise it is removed.
    """

    def __init__(
        self,
        out_dir: PathLike,
        kind: str,
        *,
        stage: str | None = None,
        config: Any = None,
        inputs: Iterable[PathLike] = (),
        resume: bool = False,
        overwrite: bool | None = None,
    ):
        if kind not in schema.KINDS:
            raise ValueError(f"unknown artifact kind {kind!r}")
        check_output_path(out_dir)
        self.path = Path(out_dir).resolve()
        self.kind = kind
        self.resume = resume
        self.overwrite = policy.OVERWRITE.get() if overwrite is None else overwrite
        self.dir = partial_dir(self.path)
        described = [describe_input(p) for p in inputs]
        self.manifest: dict[str, Any] = {
            "kind": kind,
            "schema_version": schema.SCHEMA_VERSION,
            "created_by": {
                "stage": stage or kind,
                "config": canonical_settings(config, [entry["path"] for entry in described]),
            },
            "mltk_version": __version__,
            "inputs": described,
        }
        self._lock = locks.OutputLock(self.path)
        self._started_partial = False
        self.bookkeeping = {PARTIAL_SETTINGS}  # files of a partial that record settings, not work (a stage adds)
        self.existing: Path | None = self._existing_policy()

    # -- the policy -------------------------------------------------------------------------------------------

    def _settings(self) -> dict:
        return {
            "kind": self.kind,
            "created_by": _plain(self.manifest["created_by"]),
            "inputs": [entry["fingerprint"] for entry in self.manifest["inputs"]],
        }

    def _existing_policy(self) -> Path | None:
        for entry in self.manifest["inputs"]:
            source = Path(entry["path"])
            if source == self.path or source in self.path.parents or self.path in source.parents:
                raise ArtifactError("is an input of this command; write the result elsewhere", self.path)
        check_writable(self.path)
        locks.refuse_if_held(self.path)
        if (self.dir.exists() or self.dir.is_symlink()) and not is_our_partial(self.dir):
            raise ArtifactError(
                f"{self.dir.name} beside it is not an interrupted mltk run (it holds no "
                f"{PARTIAL_SETTINGS}); mltk builds there, so move it away",
                self.path,
            )
        if not self.path.exists() and not self.path.is_symlink():
            return None
        if not self.path.is_dir() or not (is_artifact(self.path) or _is_empty_dir(self.path)):
            raise ArtifactError("exists and is not an mltk artifact; refusing to overwrite it", self.path)
        if _is_empty_dir(self.path):
            return None
        try:
            manifest = read_manifest(self.path)
            made = {
                "kind": manifest["kind"],
                "created_by": manifest["created_by"],
                "inputs": [entry.get("fingerprint") for entry in manifest["inputs"]],
            }
        except (ArtifactError, TypeError, AttributeError) as exc:
            if self.overwrite:
                return None
            raise ArtifactError(f"exists but is damaged ({_reason(exc)}); pass --overwrite to replace it", self.path)
        difference = _difference(made, self._settings())
        if difference is None:
            return self.path  # up to date: reused, --overwrite or not (it replaces only what differs)
        if self.overwrite:
            return None
        raise ArtifactError(f"exists, made {difference}; pass --overwrite to replace it", self.path)

    def reuse(self) -> Path | None:
        """``existing``, saying on stderr that it is reused."""
        if self.existing is not None:
            print(
                f"{self.existing} is up to date (same command, settings and inputs); reusing it (remove it "
                "to rebuild it)",
                file=sys.stderr,
            )
        return self.existing

    # -- building -----------------------------------------------------------------------------------------------

    def __enter__(self) -> ArtifactWriter:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except OSError as exc:
            raise ArtifactError(f"cannot create the output ({exc.strerror or exc})", self.path) from None
        try:
            self._restore_interrupted_swap()
            self._prepare_partial()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _restore_interrupted_swap(self) -> None:
        """A crash between the two renames of a replacement leaves the old artifact in ``.NAME.old``."""
        trash = _our_trash(self.path)
        if trash and not self.path.exists():
            os.replace(trash.pop(), self.path)
        for old in trash:
            shutil.rmtree(old, ignore_errors=True)

    def _prepare_partial(self) -> None:
        record = self.dir / PARTIAL_SETTINGS
        if (self.dir.exists() or self.dir.is_symlink()) and not is_our_partial(self.dir):
            raise ArtifactError(f"{self.dir.name} beside it is not an interrupted mltk run; move it away", self.path)
        if self.dir.exists() and self.resume and self.overwrite:
            try:
                same = json.loads(record.read_text(encoding="utf-8")) == self._settings()
            except (OSError, ValueError, RecursionError):
                same = False
            if not same:
                print(
                    f"--overwrite: discarding the interrupted run in {self.dir}, started with other settings",
                    file=sys.stderr,
                )
                shutil.rmtree(self.dir)
        if self.dir.exists() and not self.resume:
            shutil.rmtree(self.dir)
        self._started_partial = not self.dir.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(record, self._settings())

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None:
                full = self._disk_full_error(exc) if disk_full(exc) else None
                if not self.resume or (self._started_partial and (isinstance(exc, MltkError) or not self._did_work())):
                    shutil.rmtree(self.dir, ignore_errors=True)
                if full is not None:
                    raise full from None
                return
            try:
                self.commit()
            except OSError as error:
                if not disk_full(error):
                    raise
                full = self._disk_full_error(error)
                if not self.resume:
                    shutil.rmtree(self.dir, ignore_errors=True)
                raise full from None
        finally:
            self._lock.release()

    def _did_work(self) -> bool:
        """Whether the partial holds anything a rerun could continue from: a file besides the records of the
        settings (``bookkeeping``). A run that failed before its first step leaves nothing, so the corrected
        rerun is not taken for "an interrupted run started with other settings"."""
        return (
            any(p.is_file() and p.relative_to(self.dir).as_posix() not in self.bookkeeping for p in self.dir.rglob("*"))
            if self.dir.is_dir()
            else False
        )

    def _disk_full_error(self, exc: OSError) -> ArtifactError:
        """ "no space left on device" naming the file being written (the previous artifact, if any, is intact)."""
        name = exc.filename
        if name is None:
            written = [p for p in self.dir.rglob("*") if p.is_file()] if self.dir.is_dir() else []
            name = max(written, key=lambda p: p.stat().st_mtime_ns) if written else self.path
        shown = self.path / Path(name).relative_to(self.dir) if str(name).startswith(str(self.dir)) else name
        shown = str(shown).removesuffix(".tmp")  # the file being written, not its temporary name
        return ArtifactError(f"no space left on device while writing {shown}; nothing was replaced", self.path)

    def commit(self) -> Path:
        record = self.dir / PARTIAL_SETTINGS  # kept until the manifest is written: the partial stays ours
        files = sorted(
            p.relative_to(self.dir).as_posix()
            for p in self.dir.rglob("*")
            if p.is_file() and p.name != schema.MANIFEST and p != record
        )
        self._pin_dependencies()
        give_normal_modes(self.dir)  # a file a library wrote private (safetensors: 0600) gets the umask's mode
        self.manifest["files"] = files
        self.manifest["checksums"] = integrity.checksums(self.dir, files)
        self.manifest["created_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_json(self.dir / schema.MANIFEST, self.manifest)
        record.unlink(missing_ok=True)
        if self.path.exists():
            trash = _trash_dir(self.path)
            os.replace(self.path, trash)
            os.replace(self.dir, self.path)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(self.dir, self.path)
        clean_leftovers(self.path)  # what a killed prune left beside the artifact it replaced
        return self.path

    def _pin_dependencies(self) -> None:
        """A checkpoint's config names its base model and tokenizer by content as well as by location (absolute,
        and relative to the checkpoint): done here, on commit, so that no stage can write a checkpoint without."""
        config_path = self.dir / schema.CHECKPOINT_CONFIG
        if self.kind != "checkpoint" or not config_path.is_file():
            return
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if isinstance(config, dict) and dependencies.dependency_fields(config):
            write_json(config_path, dependencies.pin(config, self.path))


def reusable(
    out_dir: PathLike, kind: str, *, stage: str | None = None, config: Any = None, inputs: Iterable[PathLike] = ()
) -> Path | None:
    """Ask the existing-artifact policy before expensive work: the path of a complete artifact at ``out_dir`` made
    by the same stage, settings and inputs (the stage should return it and do nothing), or None to build; raises
    when the output is refused (an input, made otherwise without --overwrite, locked by another writer)."""
    return ArtifactWriter(out_dir, kind, stage=stage, config=config, inputs=inputs).reuse()


def _difference(made: dict, now: dict) -> str | None:
    """How an existing artifact's making differs from this run, in a few words; None when it does not."""
    if made["kind"] != now["kind"] or made["created_by"].get("stage") != now["created_by"]["stage"]:
        return f"by {made['created_by'].get('stage')} ({made['kind']})"
    old, new = made["created_by"].get("config"), now["created_by"]["config"]
    if old != new:
        if isinstance(old, dict) and isinstance(new, dict):
            changes = _changed_values(old, new)
            shown = ", ".join(f"{key} {was!r} -> {now!r}" for key, was, now in changes[:3])
            more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
            return f"with other settings ({shown}{more})"
        return "with other settings"
    if made["inputs"] != now["inputs"]:
        return "from other inputs (or inputs that changed since)"
    return None


def _changed_values(old: dict, new: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """``(dotted.key, old, new)`` for each setting that differs, nested settings by their own keys (``loop.steps``),
    so a refusal shows the one number that changed rather than the whole nested dict twice."""
    changes = []
    for key in sorted(set(old) | set(new), key=str):
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            changes += _changed_values(was, now, f"{prefix}{key}.")
        else:
            changes.append((f"{prefix}{key}", was, now))
    return changes


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return text.split(": ", 1)[1] if isinstance(exc, MltkError) and exc.path and ": " in text else text


def check_writable(path: Path, what: str = "the output") -> None:
    """Refuse an output whose nearest existing ancestor cannot be written, before anything is created."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ArtifactError(f"cannot create {what}: {ancestor} is not a directory", path)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ArtifactError(f"cannot create {what}: {ancestor} is not writable", path)


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())
