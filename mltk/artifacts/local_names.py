"""What a checkpoint's configuration (``schema.CHECKPOINT_CONFIG``) may name outside itself: never something to
download.

A checkpoint names its frozen base model and its tokenizer. Given by a user on the command line, a hub name is the
user's choice; read from a checkpoint, it is the choice of whoever wrote the file, and a crafted checkpoint naming
``hf-hub:attacker/evil-clip`` would make mltk fetch and run a stranger's model. So a name read from a checkpoint
may be local files (found beside the checkpoint, at its recorded place or with ``--base``), a ``local-dir:``
folder, an open_clip architecture or pretrained tag (open_clip's own registry), or a Hugging Face name already in
the local cache (the one the checkpoint was trained with), which is then loaded from its snapshot folder; an
``hf-hub:`` repository, or a hub name that would have to be downloaded, is refused before any loader (and so any
network request) sees it.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

from mltk.artifacts import schema
from mltk.artifacts.dependencies import LOCAL_SCHEME, dependency_fields, field_value, set_field
from mltk.core.download import looks_local
from mltk.core.errors import ArtifactError

HUB_SCHEME = "hf-hub:"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")  # Hugging Face's repo id rules


def check_names_stay_local(config: dict, checkpoint: str | os.PathLike) -> dict:
    """``config`` when every base model and tokenizer it names can be loaded without a download."""
    where = Path(checkpoint) / schema.CHECKPOINT_CONFIG
    for field in dependency_fields(config):
        value = field_value(config, field)
        if value.startswith(HUB_SCHEME):
            raise ArtifactError(
                f"'{field}' names the hub repository {value[:100]!r}; a checkpoint's base model and "
                f"tokenizer are local files (beside it, or given with --base) or open_clip names, "
                f"never a repository to download",
                where,
            )
        if value.startswith(LOCAL_SCHEME) or looks_local(value) or os.path.exists(value):
            continue  # local files: the loaders refuse a missing one, and code or pickles they may carry
        if _open_clip_name(config, field, value):
            continue
        snapshot = cached_snapshot(value)
        if snapshot is not None:  # loaded from the folder, so no loader asks the hub for a newer revision
            config = set_field(copy.deepcopy(config), field, str(snapshot))
            continue
        raise ArtifactError(
            f"'{field}' names {value[:100]!r}: no local files, no open_clip name and not in the local "
            f"Hugging Face cache; mltk never downloads what a checkpoint names (download it "
            f"yourself if you trust it)",
            where,
        )
    return config


def _open_clip_name(config: dict, field: str, value: str) -> bool:
    import open_clip

    if field == "base.model":
        return value in open_clip.list_models()
    if field == "base.pretrained":
        model = field_value(config, "base.model")
        return isinstance(model, str) and value in open_clip.list_pretrained_tags_by_model(model)
    return False


def cached_snapshot(name: str) -> Path | None:
    """The local folder of the Hugging Face cache's snapshot of ``name`` (read on disk; the hub is never asked),
    None when the cache holds none."""
    if not HUB_ID.match(name) or ".." in name:
        return None
    from huggingface_hub import constants, snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True, cache_dir=constants.HF_HUB_CACHE))
    except Exception:  # each hub library version reports "not cached" with its own error types
        return None
