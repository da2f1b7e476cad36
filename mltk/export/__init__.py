"""``mltk export``: what mltk trained, as folders the field's own tools load with no mltk code.

- ``open_clip``: a whole CLIP (``mltk pretrain``; the base of ``mltk import-mla``) -> an open_clip ``local-dir:``
  folder (``mltk.export.open_clip_dir``);
- ``transformers`` / ``sentence-transformers``: a ``train-nlt --train full`` student or a CLL-CLIP grown table on a
  text-only Hugging Face tower -> the tower with its word embeddings replaced (``mltk.export.hf``,
  ``mltk.export.sources``).

- ``mla``: an MLA acquirer checkpoint, which folds into no tower -> a self-contained folder (base, acquirers,
  tokenizer) with a standalone loader, ``mla_loader.py`` (``mltk.export.mla_folder``).

A format that does not apply to the checkpoint is refused in one line saying why. The exported folder is not an
mltk artifact (no manifest: the other tools read it as their own); ``mltk_export.json`` beside the weights records
that ``mltk export`` made it, the source checkpoint, its fingerprint and what the folder keeps. Where it is written
and what it may replace: ``mltk.export.folder``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mltk import artifacts
from mltk.artifacts.dependencies import local_dependencies
from mltk.core import policy
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.core.version import __version__
from mltk.export.folder import EXPORT_INFO, MADE_BY, check_out, is_export, staged_folder, tidy

FORMAT_OPEN_CLIP, FORMAT_TRANSFORMERS, FORMAT_SENTENCE_TRANSFORMERS, FORMAT_MLA = (
    "open_clip",
    "transformers",
    "sentence-transformers",
    "mla",
)
FORMATS = (FORMAT_OPEN_CLIP, FORMAT_TRANSFORMERS, FORMAT_SENTENCE_TRANSFORMERS, FORMAT_MLA)


@dataclass(frozen=True)
class ExportConfig:
    """Options of ``mltk export``."""

    checkpoint: Path
    format: str
    out: Path


def export_checkpoint(config: ExportConfig) -> Path:
    """Write the export of ``config.checkpoint`` in ``config.format`` to ``config.out``; returns its absolute path.
    A format that does not apply to the checkpoint, or an ``out`` that may not be replaced (``check_out``), is
    refused (``MltkError``) before anything is written."""
    if config.format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {config.format!r}")
    path = Path(config.checkpoint)
    tidy(Path(config.out))
    if not policy.OVERWRITE.get() and same_export(Path(config.out), config.format, path):
        log(
            f"{Path(config.out).resolve()} is up to date (the same checkpoint exported as {config.format}); reusing "
            f"it (remove it to export again)"
        )
        return Path(config.out).resolve()
    check_out(Path(config.out), [(path, "input checkpoint")])  # before its dependencies are hashed
    artifacts.read_manifest(path, "checkpoint")
    recorded = artifacts.read_checkpoint_config(path, resolve=False)
    checkpoint_config = artifacts.read_checkpoint_config(path)
    protected = [(path, "input checkpoint"), *local_dependencies(recorded), *local_dependencies(checkpoint_config)]
    info = {
        "made_by": MADE_BY,
        "mltk_version": __version__,
        "format": config.format,
        "from": str(path.resolve()),
        "fingerprint": artifacts.fingerprint(path),
    }
    if config.format == FORMAT_OPEN_CLIP:
        from mltk.export.open_clip_dir import check_open_clip_source, export_open_clip

        check_open_clip_source(path, checkpoint_config)
        with staged_folder(config.out, protected) as staging:
            export_open_clip(path, staging, info)
    elif config.format == FORMAT_MLA:
        from mltk.export.mla_folder import export_mla

        with staged_folder(config.out, protected) as staging:
            export_mla(path, staging, info)
    else:
        from mltk.export.hf import write_sentence_transformers, write_transformers
        from mltk.export.sources import hf_text_model

        model = hf_text_model(path, checkpoint_config)
        write = write_transformers if config.format == FORMAT_TRANSFORMERS else write_sentence_transformers
        with staged_folder(config.out, protected) as staging:
            write(model, staging, info)
    out = Path(config.out).resolve()
    log(f"exported {path} as {config.format} to {out}")
    return out


def same_export(out: Path, fmt: str, checkpoint: Path) -> bool:
    """Whether ``out`` is an export of ``checkpoint``, as it is now (its fingerprint), in ``fmt``: reused as every
    output made with the same settings and inputs is. An export holds no checksums to show it is intact, so
    ``--overwrite`` exports it again."""
    if not is_export(out) or not artifacts.is_artifact(checkpoint):
        return False
    try:
        record = json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return (
        record.get("made_by") == MADE_BY
        and record.get("format") == fmt
        and record.get("from") == str(checkpoint.resolve())
        and record.get("fingerprint") == artifacts.fingerprint(checkpoint)
    )
