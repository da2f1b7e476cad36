"""Whether the files of a base model or tokenizer artifact still hold the bytes its manifest records.

A reader compares sizes only (one ``stat`` per file), and a checkpoint pins its base by the sha256s the base's
manifest records; neither notices a ``model.safetensors`` replaced in place by another model of the same size. A
base or tokenizer that mltk loads is therefore hashed against its manifest. So that the cost (about a second per
100 MB) is paid once and not on every command, each file's sha256 is kept in a small cache file under mltk's cache
root, keyed by the file's path, device, inode, size, modification and change times: any write to the file changes
one of them (the change time cannot be set back by a user), and the entry is then recomputed.

A file modified (by its modification time) within ``RACY_SECONDS`` of being hashed is not cached: the file system's
clock is coarse, so a write in the same tick could leave every key unchanged (the "racily clean" case git's index
also guards against).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

from mltk.artifacts import integrity, schema
from mltk.core.cache import cache_root
from mltk.core.errors import ArtifactError

CACHE_FILE = "sha256-cache.json"
MAX_ENTRIES = 4096  # a few bases and tokenizers of a few files each; the oldest entries go first
RACY_SECONDS = 2.0


def _key(stat: os.stat_result) -> list[int]:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _read_cache(path: Path) -> dict:
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    """Write the cache atomically; a cache that cannot be written is only a slower next run."""
    entries = sorted(cache.items(), key=lambda item: item[1].get("seen", 0) if isinstance(item[1], dict) else 0)
    kept = dict(entries[-MAX_ENTRIES:])
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)


def file_sha256s(paths: list[Path], *, use_cache: bool = True) -> dict[Path, str]:
    """The sha256 (hex) of each file, from the cache where its key is unchanged, else computed."""
    cache_path = cache_root() / CACHE_FILE
    cache = _read_cache(cache_path) if use_cache else {}
    now, changed, digests = time.time(), False, {}
    for path in paths:
        name = str(Path(path).resolve())
        stat = os.stat(name)
        entry = cache.get(name)
        if isinstance(entry, dict) and entry.get("key") == _key(stat) and isinstance(entry.get("sha256"), str):
            digests[path] = entry["sha256"]
            continue
        digests[path] = integrity.sha256_file(Path(name))
        settled = stat.st_mtime_ns / 1e9 < now - RACY_SECONDS
        if use_cache and settled and os.stat(name).st_mtime_ns == stat.st_mtime_ns:
            cache[name] = {"key": _key(stat), "sha256": digests[path], "seen": now}
            changed = True
    if changed:
        _write_cache(cache_path, cache)
    return digests


def check_content(artifact: str | os.PathLike, role: str, *, use_cache: bool = True) -> None:
    """Refuse an artifact (a base model or a tokenizer, named by ``role``) one of whose files no longer holds the
    bytes its manifest records; resume state (``state/``) is left out, as in the content fingerprint."""
    artifact = Path(artifact)
    manifest = json.loads((artifact / schema.MANIFEST).read_text(encoding="utf-8"))
    recorded = manifest.get("checksums") if isinstance(manifest, dict) else None
    if not isinstance(recorded, dict):
        return  # an artifact from an older mltk: its reader compares what it can
    names = sorted(
        name
        for name, entry in recorded.items()
        if isinstance(entry, dict) and name.split("/")[0] != schema.CHECKPOINT_STATE_DIR
    )
    paths = {name: integrity.member(artifact, name) for name in names}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        raise ArtifactError(f"{missing[0]}, recorded in the manifest of this {role}, is missing", artifact)
    digests = file_sha256s(list(paths.values()), use_cache=use_cache)
    for name, path in paths.items():
        if digests[path] != recorded[name].get("sha256"):
            raise ArtifactError(
                f"does not hold the bytes the manifest of this {role} records (sha256 "
                f"{digests[path][:12]}, recorded {str(recorded[name].get('sha256'))[:12]}): it was "
                f"replaced or modified after it was written; rebuild the {role} or restore the "
                f"original",
                artifact / name,
            )
