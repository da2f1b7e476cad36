"""The data contract, enforced on the source: ``mltk.artifacts.schema`` describes every artifact, ``mltk.artifacts``
alone opens and writes artifact files, the library never reads stdin, and modules stay small.

These tests read the source files of ``mltk/``; they fail when a module outside ``mltk.artifacts`` and
``mltk.artifacts.schema`` names a checkpoint's ``config.json`` or calls ``np.save``/``np.load`` itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mltk.artifacts import schema

PACKAGE = Path(__file__).resolve().parents[1] / "mltk"
CONTRACT_MODULES = {
    "mltk/artifacts/__init__.py",
    "mltk/artifacts/manifest.py",
    "mltk/artifacts/writer.py",
    "mltk/artifacts/tables.py",
    "mltk/artifacts/files.py",
    "mltk/artifacts/integrity.py",
    "mltk/artifacts/schema.py",
    "mltk/artifacts/checkpoint_fields.py",
}
MAX_LINES = 450

# Files that may say "config.json" for a reason other than an mltk artifact.
READS_FOREIGN_CONFIG = {
    # detect_family reads a *transformers model folder's* config.json (its model_type), a model on disk that mltk
    # did not write, never a checkpoint artifact's.
    "mltk/translate/languages.py",
    # Hugging Face / sentence-transformers model folders and open_clip's open_clip_config.json: models on disk that
    # mltk did not write (is_hf_model_folder, the tower's Pooling/Dense configs).
    "mltk/models/clip.py",
    "mltk/models/hf_text.py",
    "mltk/models/st_modules.py",
    "mltk/models/hub.py",  # a hub snapshot's transformers config.json tells a text model from an open_clip one
    # mltk export writes (and its standalone loader reads) open_clip / transformers / sentence-transformers model
    # folders for other tools: their config.json is theirs, and the folders are no mltk artifacts.
    "mltk/cli/export.py",
    "mltk/export/sources.py",
    "mltk/export/mla_loader.py",
    "mltk/export/hf.py",
    "mltk/export/open_clip_dir.py",
    "mltk/export/mla_folder.py",
    # refuses a transformers folder whose config.json maps a class to code shipped in the folder (auto_map)
    "mltk/core/no_remote_code.py",
}
# Files that still read or name the artifact files themselves while they are being rewritten in parallel.
PENDING_CONTRACT: set[str] = set()
# Modules over MAX_LINES today, each split by the engineer who owns it.
PENDING_SPLIT: set[str] = set()

ARTIFACT_FILE_CALL = re.compile(r"\b(np|numpy)\.(save|savez|savez_compressed|load)\b")


def _sources() -> dict[str, str]:
    root = PACKAGE.parent
    return {str(path.relative_to(root)): path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def _offenders(predicate) -> set[str]:
    return {name for name, text in _sources().items() if name not in CONTRACT_MODULES and predicate(text)}


def test_only_artifacts_and_schema_name_config_json():
    offenders = _offenders(lambda text: "config.json" in text)
    assert offenders - READS_FOREIGN_CONFIG - PENDING_CONTRACT == set()


def test_only_artifacts_calls_numpy_save_and_load():
    offenders = _offenders(lambda text: ARTIFACT_FILE_CALL.search(text) is not None)
    assert offenders - PENDING_CONTRACT == set()


def test_the_library_never_reads_stdin():
    """Only the CLI resolves ``-`` and pipes (``mltk.cli.common.resolve_input``); the library receives paths."""
    offenders = {
        name
        for name, text in _sources().items()
        if not name.startswith("mltk/cli/") and re.search(r"\bsys\.stdin\b|\binput\(", text)
    }
    assert offenders == set()


def test_no_module_is_over_the_line_limit():
    sizes = {name: text.count("\n") for name, text in _sources().items()}
    over = {name for name, lines in sizes.items() if lines > MAX_LINES}
    assert over - PENDING_SPLIT == set(), {name: sizes[name] for name in over - PENDING_SPLIT}


@pytest.mark.parametrize("allow_list", [READS_FOREIGN_CONFIG, PENDING_CONTRACT, PENDING_SPLIT])
def test_allow_lists_name_existing_files(allow_list):
    """An entry for a file that was renamed or removed would silently allow nothing; keep the lists true."""
    assert allow_list <= set(_sources())


def test_pending_entries_still_offend():
    """When a pending file is fixed, its entry must go, so the lists shrink to nothing."""
    sources = _sources()
    fixed_contract = {
        name
        for name in PENDING_CONTRACT
        if "config.json" not in sources[name] and not ARTIFACT_FILE_CALL.search(sources[name])
    }
    fixed_split = {name for name in PENDING_SPLIT if sources[name].count("\n") <= MAX_LINES}
    assert fixed_contract == set() and fixed_split == set()


def test_the_library_does_not_import_test_tools():
    """pytest and hypothesis are a test extra, not runtime dependencies; fixtures live under tests/."""
    offenders = {
        name for name, text in _sources().items() if re.search(r"^\s*(import|from)\s+(pytest|hypothesis)\b", text, re.M)
    }
    assert offenders == set()


# ----------------------------------------------------------------------------------------------------------------
# schema.py lists every kind and every checkpoint format
# ----------------------------------------------------------------------------------------------------------------


def test_schema_lists_the_files_of_every_kind():
    assert set(schema.ARTIFACT_FILES) == set(schema.KINDS)
    assert all(files for files in schema.ARTIFACT_FILES.values())


def test_schema_lists_every_checkpoint_format_written_in_the_package():
    """Every ``"format": "NAME"`` literal and ``CHECKPOINT_FORMAT = "NAME"`` in the package is a listed format."""
    written = set()
    for text in _sources().values():
        written.update(re.findall(r"CHECKPOINT_FORMAT\s*=\s*\"([^\"]+)\"", text))
        written.update(re.findall(r"\{\"format\":\s*\"([^\"]+)\"", text))
    assert written <= set(schema.CHECKPOINT_FORMATS)
    for name, spec in schema.CHECKPOINT_FORMATS.items():
        assert spec.name == name and spec.written_by
        assert {schema.CHECKPOINT_WEIGHTS, schema.CHECKPOINT_CONFIG} <= set(spec.files)
