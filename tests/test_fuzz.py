"""Property-based fuzzing: damaged importer sources and damaged artifacts of every kind.

Each case ends in exit 0 with a valid artifact, or exit 2 with one line on stderr; never exit 1 or a traceback,
and nothing is left behind (no ``.partial`` directory, no lock, no half output). The default profile runs a few
examples per target (derandomized, so CI is deterministic); ``-m slow`` runs the long profile.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import schema
from mltk.cli.application import app
from mltk.core.errors import MltkError

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
PROFILES = {"default": 8, "long": 200}  # examples per target
PROFILE_PARAMS = ["default", pytest.param("long", marks=pytest.mark.slow)]
ODD_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\u202e", "\x00", "é\u0301", "𝔘𝔫𝔦", "\ufeff", "..", "/etc/passwd", "a\nb", "\u2028", "日本語"]
)
runner = CliRunner()


def run_fuzz(profile: str, strategy, check) -> None:
    settings(
        max_examples=PROFILES[profile],
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )(given(strategy)(check))()


def assert_clean_outcome(result, out: Path | None = None) -> None:
    """exit 0 with a readable artifact, or exit 2 with one line; nothing half-written beside ``out``."""
    assert result.exit_code in (0, 2), (result.exit_code, result.stderr, result.exception)
    if result.exit_code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("mltk"), result.stderr
        assert "Traceback" not in result.stderr
    if out is not None:
        leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
        assert leftovers == [], leftovers
        if result.exit_code == 0:
            assert artifacts.is_artifact(out) or any(artifacts.is_artifact(p) for p in out.iterdir())
        else:
            assert not out.exists() or not any(artifacts.is_artifact(p) for p in [out, *out.iterdir()])


# -- mutations -----------------------------------------------------------------------------------------------------

mutations = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("unicode"), st.floats(0, 1), ODD_TEXT),
)


def mutate_bytes(data: bytes, mutation) -> bytes:
    kind, where = mutation[0], mutation[1]
    position = int(where * len(data))
    if kind == "truncate":
        return data[:position]
    if kind == "flip":
        if not data:
            return data
        position = min(position, len(data) - 1)
        return data[:position] + bytes([data[position] ^ mutation[2]]) + data[position + 1 :]
    return data[:position] + mutation[2].encode("utf-8", "surrogatepass") + data[position:]


# -- importers -------------------------------------------------------------------------------------------------------

IMPORT_SOURCES = [
    ("coco-karpathy", "coco-karpathy/dataset_coco.json", "dataset_coco.json"),
    ("cc", "cc/Validation_GCC-1.1.0-Validation.tsv", "Validation_GCC-1.1.0-Validation.tsv"),
    ("xflickrco", "xflickrco/annotations/ja/test.jsonl", "test.jsonl"),
    ("crossmodal3600", "crossmodal3600/captions.jsonl", None),
]


@pytest.mark.parametrize("profile", PROFILE_PARAMS)
@pytest.mark.parametrize("fmt,fixture,name", IMPORT_SOURCES, ids=[s[0] for s in IMPORT_SOURCES])
def test_import_data_on_damaged_sources(profile, fmt, fixture, name):
    original = (FIXTURES / fixture).read_bytes()

    def check(mutation):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            source_dir = tmp / "src"
            source_dir.mkdir()
            (source_dir / (name or Path(fixture).name)).write_bytes(mutate_bytes(original, mutation))
            source = source_dir / name if name else source_dir
            out = tmp / "out"
            result = runner.invoke(app, ["import-data", fmt, str(source), "--out", str(out)])
            assert_clean_outcome(result, out)

    run_fuzz(profile, mutations, check)


# -- artifact readers ------------------------------------------------------------------------------------------------


def _captions(directory: Path) -> Path:
    return artifacts.write_captions(
        directory / "art",
        pa.table(
            {
                "image_id": ["i0", "i0", "i1", "i1"],
                "lang": ["en", "de", "en", "de"],
                "caption": ["a red circle", "ein roter Kreis", "two blue squares", "zwei blaue Quadrate"],
                "caption_id": ["c0", "c0", "c1", "c1"],
                "split": ["train"] * 4,
            }
        ),
    )


def _embeddings(directory: Path) -> Path:
    vectors = np.eye(4, dtype=np.float32)[:3]
    return artifacts.write_embeddings(
        directory / "art", ["a", "b", "c"], vectors, dtype="float16", split=["test"] * 3, shard_size=2
    )


def _images(directory: Path) -> Path:
    from mltk.data.synth import encode_png

    png = encode_png(np.zeros((4, 4, 3), dtype=np.uint8))
    return artifacts.write_images(
        directory / "art",
        pa.table({"image_id": ["a", "b"], "split": ["test"] * 2, "image": pa.array([png, png], pa.binary())}),
    )


def _checkpoint(directory: Path) -> Path:
    import torch

    return artifacts.write_checkpoint(directory / "art", {"w": torch.arange(6.0).reshape(2, 3)}, {"format": "x"})


def _metrics(directory: Path) -> Path:
    return artifacts.write_metrics(directory / "art", {"per_language": {"de": {"AR": 1.0}}})


def _index(directory: Path) -> Path:
    from mltk.index.faiss_index import IndexConfig, build_index

    source = _embeddings(directory / "source")
    return build_index(IndexConfig(embeddings=source, out=directory / "art"))


def _load_index(path):
    from mltk.index.faiss_index import open_index

    return open_index(path)


def _load_vocab(path):
    from mltk.vocab import load_vocabulary

    return load_vocabulary(path)


def _vocab(directory: Path) -> Path:
    from mltk.settings.vocab import build_vocab

    return build_vocab(artifacts.load_captions(_captions(directory / "source")), "de", directory / "art", size=600)


READERS = {
    "captions": (_captions, artifacts.load_captions),
    "embeddings": (_embeddings, artifacts.load_embeddings),
    "images": (_images, artifacts.load_images),
    "checkpoint": (_checkpoint, artifacts.load_checkpoint),
    "metrics": (_metrics, artifacts.load_metrics),
    "index": (_index, _load_index),
    "vocab": (_vocab, _load_vocab),
}

artifact_damage = st.one_of(
    st.tuples(st.just("bytes"), st.integers(0, 1000), mutations),
    st.tuples(
        st.just("npy"),
        st.integers(0, 1000),
        st.sampled_from(["<i8", "<f8", "|u1", "<c8", "|O", "<U3"]),
        st.lists(st.integers(0, 5), min_size=0, max_size=3),
    ),
    st.tuples(
        st.just("manifest"),
        st.sampled_from(
            ["files", "kind", "shards", "dim", "schema_version", "inputs", "created_by", "checksums", "count"]
        ),
        st.one_of(
            ODD_TEXT,
            st.integers(-3, 3),
            st.none(),
            st.lists(ODD_TEXT, max_size=2),
            st.just(["../outside.npy"]),
            st.just({"x": 1}),
        ),
    ),
)


def damage(path: Path, how) -> None:
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if how[0] == "bytes":
        victim = files[how[1] % len(files)]
        victim.write_bytes(mutate_bytes(victim.read_bytes(), how[2]))
    elif how[0] == "npy":
        targets = [p for p in files if p.suffix == ".npy"] or files
        victim = targets[how[1] % len(targets)]
        shape = tuple(how[3])
        if how[2] == "|O":
            array = np.empty(shape, dtype=object)
            with open(victim, "wb") as handle:
                np.save(handle, array, allow_pickle=True)
        else:
            np.save(victim, np.zeros(shape, dtype=how[2]), allow_pickle=False)
            if victim.suffix != ".npy":
                victim.with_name(victim.name + ".npy").replace(victim)
    else:
        manifest_path = path / schema.MANIFEST
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        key, value = how[1], how[2]
        if key == "shards" and isinstance(manifest.get("shards"), list) and isinstance(value, str):
            manifest["shards"][0]["vectors"] = value
        else:
            manifest[key] = value
        manifest_path.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")


@pytest.mark.parametrize("profile", PROFILE_PARAMS)
@pytest.mark.parametrize("kind", sorted(READERS))
def test_readers_and_inspect_on_damaged_artifacts(profile, kind, tmp_path):
    make, read = READERS[kind]
    pristine = make(tmp_path / "pristine")

    def check(how):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "art"
            shutil.copytree(pristine, path, symlinks=True)
            damage(path, how)
            try:
                read(path)
            except MltkError as exc:
                assert "\n" not in str(exc), str(exc)
            inspected = runner.invoke(app, ["inspect", str(path)])
            assert_clean_outcome(inspected)
            quick = runner.invoke(app, ["inspect", "--quick", str(path)])
            assert_clean_outcome(quick)

    run_fuzz(profile, artifact_damage, check)


@pytest.mark.parametrize("profile", PROFILE_PARAMS)
def test_index_build_on_damaged_embeddings_leaves_nothing_behind(profile, tmp_path):
    pristine = _embeddings(tmp_path / "pristine")

    def check(how):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "emb"
            shutil.copytree(pristine, path)
            damage(path, how)
            out = Path(tmp) / "index"
            result = runner.invoke(app, ["index", "build", str(path), "--out", str(out)])
            assert_clean_outcome(result, out)
            if result.exit_code == 0:
                _load_index(out)

    run_fuzz(profile, artifact_damage, check)


def test_found_by_fuzzing_a_damaged_vocab_manifest_is_exit_2(tmp_path):
    """The long profile found ``MergeSizes(**manifest["sizes"])`` raising TypeError on a flipped key."""
    from mltk.core.errors import ArtifactError

    path = _vocab(tmp_path)
    manifest = json.loads((path / schema.MANIFEST).read_text(encoding="utf-8"))
    manifest["sizes"]["merges_duplibate"] = manifest["sizes"].pop(next(iter(manifest["sizes"])))
    (path / schema.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ArtifactError, match="malformed sizes"):
        _load_vocab(path)
