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
the source checkpoint, its fingerprint and what the folder keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.runtime import log
from mltk.export.folder import check_out, staged_folder

FORMAT_OPEN_CLIP, FORMAT_TRANSFORMERS, FORMAT_SENTENCE_TRANSFORMERS, FORMAT_MLA = "open_clip", "transformers", \
    "sentence-transformers", "mla"
FORMATS = (FORMAT_OPEN_CLIP, FORMAT_TRANSFORMERS, FORMAT_SENTENCE_TRANSFORMERS, FORMAT_MLA)


@dataclass(frozen=True)
class ExportConfig:
    """Options of ``mltk export``."""

    checkpoint: Path
    format: str
    out: Path


def export_checkpoint(config: ExportConfig) -> Path:
    """Write the export of ``config.checkpoint`` in ``config.format`` to ``config.out``; returns its absolute path.
    A format that does not apply to the checkpoint is refused (``ConfigError``) before anything is written."""
    if config.format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {config.format!r}")
    path = Path(config.checkpoint)
    check_out(Path(config.out).resolve())
    artifacts.read_manifest(path, "checkpoint")
    checkpoint_config = artifacts.read_checkpoint_config(path)
    info = {"format": config.format, "from": str(path.resolve()), "fingerprint": artifacts.fingerprint(path)}
    if config.format == FORMAT_OPEN_CLIP:
        from mltk.export.open_clip_dir import check_open_clip_source, export_open_clip

        check_open_clip_source(path, checkpoint_config)
        with staged_folder(config.out) as staging:
            export_open_clip(path, staging, info)
    elif config.format == FORMAT_MLA:
        from mltk.export.mla_folder import export_mla

        with staged_folder(config.out) as staging:
            export_mla(path, staging, info)
    else:
        from mltk.export.hf import write_sentence_transformers, write_transformers
        from mltk.export.sources import hf_text_model

        model = hf_text_model(path, checkpoint_config)
        write = write_transformers if config.format == FORMAT_TRANSFORMERS else write_sentence_transformers
        with staged_folder(config.out) as staging:
            write(model, staging, info)
    out = Path(config.out).resolve()
    log(f"exported {path} as {config.format} to {out}")
    return out
