"""Hugging Face hub ids of text towers (``sentence-transformers/all-MiniLM-L6-v2``, ``hf-hub:ORG/NAME``) as the
local folder they name, so that a transformers / sentence-transformers model is given the way its users type it.

The folder is the snapshot in the local Hugging Face cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
``~/.cache/huggingface/hub``; layout ``models--ORG--NAME/snapshots/REVISION/``, the revision ``refs/main`` names),
downloaded once when the machine is online. Offline (``HF_HUB_OFFLINE``) a model that is not in the cache fails at
once, in one line that says how to make a local folder, instead of a minute of the hub client's retries and
warnings. An ``hf-hub:`` name whose repository is an open_clip model (``open_clip_config.json``) stays open_clip's.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from mltk.core.download import looks_local, model_download, offline_by_setting
from mltk.core.errors import ModelDownloadError
from mltk.core.no_remote_code import forbid_prompt, refusal_of, refuse_custom_code

HUB_SCHEMA = "hf-hub:"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TEXT_MODEL_FILES = ("modules.json", "config.json")  # sentence-transformers, transformers
_OPEN_CLIP_FILE = "open_clip_config.json"


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment at each call (tests and users may change it)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def repo_id_of(name: str | os.PathLike | None) -> str | None:
    """``ORG/NAME`` when ``name`` is spelled as a hub id (``ORG/NAME`` that is not a local path, or
    ``hf-hub:ORG/NAME``), else None."""
    if name is None:
        return None
    text = os.fspath(name)
    candidate = text[len(HUB_SCHEMA) :] if text.startswith(HUB_SCHEMA) else text
    if not _REPO_ID.match(candidate) or (candidate == text and (looks_local(text) or os.path.exists(text))):
        return None
    return candidate


def cached_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot folder of ``repo_id`` (the revision ``refs/main`` names, else the newest), or None."""
    repo = hub_cache_dir() / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text().strip()
        if snapshot.is_dir():
            return snapshot
    snapshots = sorted((p for p in (repo / "snapshots").glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def _offline_message(name: str, repo_id: str) -> str:
    return (
        f"could not load model {name!r}: it is not a local folder, and HF_HUB_OFFLINE is set while {repo_id} is "
        f"not in the local Hugging Face cache ({hub_cache_dir()}); download it once online "
        f"(`huggingface-cli download {repo_id}`), or make a local folder on a machine that has it "
        f"(`SentenceTransformer('{repo_id}').save('FOLDER')`, or save_pretrained) and pass that folder"
    )


def _download(name: str, repo_id: str, patterns: list[str] | None = None) -> Path:
    """The snapshot downloaded from the hub (only ``patterns`` when given); a failure is one line."""
    from huggingface_hub import snapshot_download

    from mltk.core.download import quiet_hub

    with model_download(name), quiet_hub():
        return Path(snapshot_download(repo_id, allow_patterns=patterns))


@functools.lru_cache(maxsize=32)
def _resolve(name: str, cache: str, offline: bool) -> Path | None:
    repo_id = repo_id_of(name)
    if repo_id is None:
        return None
    snapshot = cached_snapshot(repo_id)
    if snapshot is None and offline:
        raise ModelDownloadError(_offline_message(name, repo_id))
    if snapshot is None:  # online: the small JSON files first, to tell an open_clip repository from a text model
        snapshot = _download(name, repo_id, ["*.json"])
    if (snapshot / _OPEN_CLIP_FILE).is_file() or not any((snapshot / f).is_file() for f in _TEXT_MODEL_FILES):
        return None  # an open_clip model (or not a text model): open_clip reads hf-hub: names itself
    if not offline and not any(snapshot.glob("*.safetensors")) and not any(snapshot.glob("*.bin")):
        snapshot = _download(name, repo_id)
    return snapshot


def hub_text_folder(name: str | os.PathLike | None) -> Path | None:
    """The local folder of the transformers / sentence-transformers model a hub id names (downloaded when online),
    None when ``name`` is not a hub id or names an open_clip model; ``ModelDownloadError`` (one line) when it cannot
    be had."""
    if name is None or repo_id_of(name) is None:
        return None
    return _resolve(os.fspath(name), str(hub_cache_dir()), offline_by_setting())


def from_pretrained(auto_class, source: str | Path, **kwargs):
    """``auto_class.from_pretrained(source, trust_remote_code=False, **kwargs)``, refusing custom code with one
    line (a hub repository that needs it is refused by transformers; that refusal is turned into a
    ``ConfigError``). Every model and tokenizer a user names goes through here, and a hub id is had the way
    ``--model`` has it: its cached snapshot, or one line (``ModelDownloadError``) at the first failed connection
    rather than after the hub client's retries."""
    forbid_prompt()
    source = hub_text_folder(source) or source  # a hub id: its cached snapshot, fetched the way --model is
    refuse_custom_code(source)
    try:
        with model_download(str(source)):  # a hub id that cannot be had: one line at the first failed connection
            return auto_class.from_pretrained(source, trust_remote_code=False, **kwargs)
    except ValueError as exc:
        refused = refusal_of(exc, source)
        if refused is not None:
            raise refused from None
        raise
