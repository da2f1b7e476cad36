"""The Arrow import, merge and check-overlap write the same artifacts, byte for byte, as the row-by-row Python they
replaced. The digests below were taken from that implementation (on this pyarrow; another pyarrow version may write
other Parquet bytes, so the comparison is skipped there) on a generated corpus and on Multi30K's training pairs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow
import pyarrow as pa
import pyarrow.parquet  # pa.parquet
import pytest
from helpers_scale import write_corpus

from mltk.data.importers import import_dataset, merge_captions
from mltk.data.overlap import run_check_overlap

RECORDED_WITH = "26.0.1"  # the pyarrow version that wrote the recorded bytes
EXPECTED = {
    "generated": {
        "en_captions": "37914e0cea905d18da9a353a8cac821b2d5df22c16f5d1984107a4953db916c8",
        "en_images": "7f0527d4fe3965b6c81ae5d7b2e2540399e417115948a46011194e7802db4a1b",
        "de_captions": "04f3fc9a9f5af67f3906956eb71899cb068c526f693fef9bc99a9510deac850f",
        "de2_captions": "2513b5e2588793f6a555ced2c479160c5b385f311d88e8ee393c8c66bb39177d",
        "merged": "60a2f62f1355b852861ce9f9b0c0a44b6c7f1b6c91b40ee7681aa52d81c3bc31",
        "en_manifest": "c48b9f520d358ece16f196879d6f0953e07123b82945c805e24cd793da723285",
        "de_manifest": "0e8e2c9f4e918ccf26a6cd60ddf42b6db9aa99ce4212d130062e080de22ee7a1",
        "merged_manifest": "8af1e1fbfaee8c5e03697030d9c7d0e4a9d772df928cec667b630bd135ce7080",
        "overlap": "fc427a63bbf1bed94a3deac859a255fd01842c7ec9b7e65035fac7f24907fdcd",
    },
    "files": {
        "en_captions": "178f9ddd7dbfdbbbe7c7a3d070e65074c8780b9c24fa57b6dd44f64ed1e26192",
        "en_images": "9a82700e5497e5b781bc9855f9c7c4f356ff84540030de1cb0649c7c21ba46df",
        "de_captions": "c50c6bcf898094d96728ec35b8a45cf2564b53da3c03bc53724ba86589271845",
        "de2_captions": "a8c64215bf5a7bba937e2c7986dd35aee739a158ee52851a489871153d6cb27d",
        "merged": "b17778da60dbe0bad890a1fb496c4ddc2c68b25f8f862f415e8a42a5dea5f342",
        "en_manifest": "73c7977f33e0d0ddb5b72abaa8bbea914b6027a62b1e126a32e4118ee99a8535",
        "de_manifest": "8b04b603dca64e15501ec9c51a69bd5cb1f4452fb564ad4d5cdfc092fd51428f",
        "merged_manifest": "12d1e2cac5c6626a10ed83e6cf0172f8aaf436c0bf5d1cf0706d3956c39eeb05",
        "overlap": "d79847dcd0bb0e0711b4a8249332317d9a48235380e710a39e3df4e2f082fe45",
    },
    "multi30k": {
        "en_captions": "b01f0006d5d847986c4872c704b0065fe8cf361c79c6ca2aa9770c126c05d0e1",
        "en_images": "cc71d4e01181df3ed2085276c528882041e918f5905030cce732bc96c01376bb",
        "de_captions": "ae0e3709d1d3bd301b9b6e64c7c4e277a36a6668daa89df38085eb24872884ca",
        "de2_captions": "dea7e7664b4e85a75624702afc8e07b9b073431600d57fb915f41fc993c7748d",
        "merged": "c3ca35f3a7a100b1f6723ea59e4a87b6ec1b23e40935951cb2ce01e8d2690338",
        "en_manifest": "86bcfc22b0657b8e1cbbe6fc8871e290d36a46ef97a47397293e7ef26c472c16",
        "de_manifest": "15c8f9715dab9b464d00715a1ef4f9514ef384fa5fd5abfe113769f4c0e3dd70",
        "merged_manifest": "0a028471376573d504cdc6fdde0dc412eb359007317e4c4ef923062098824fd4",
        "overlap": "c1dc4985d78d8092d2aa7ffdc697ca83c41dd5ae3592bfac27d5ca1e223850ff",
    },
}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_fields(path: Path) -> str:
    manifest = json.loads((path / "manifest.json").read_text())
    fields = {
        k: manifest.get(k)
        for k in ("rows", "languages", "dropped_empty", "dropped_empty_by_lang", "splits", "skipped_files")
    }
    return _digest(json.dumps(fields).encode())


def _run_stages(root: Path, en_files: list, de_files: list, image_list: Path, split: str) -> dict[str, str]:
    """Digests of what import (independent and translation), merge and check-overlap write."""
    common = {"image_list": image_list, "splits": [split], "images_root": "/images"}
    en = import_dataset("lines", en_files, root / "en", lang="en", **common)
    de = import_dataset(
        "lines", de_files, root / "de", lang="de", translation_of="en", parent=en / "captions", **common
    )
    de2 = import_dataset("lines", de_files, root / "de2", lang="de", **common)
    merged = merge_captions([en / "captions", de / "captions", de2 / "captions"], root / "merged")
    _, metrics = run_check_overlap(merged, de / "images", root / "overlap")
    files = {
        "en_captions": en / "captions/captions.parquet",
        "en_images": en / "images/images.parquet",
        "de_captions": de / "captions/captions.parquet",
        "de2_captions": de2 / "captions/captions.parquet",
        "merged": merged / "captions.parquet",
    }
    out = {name: _digest(path.read_bytes()) for name, path in files.items()}
    out.update(
        en_manifest=_manifest_fields(en / "captions"),
        de_manifest=_manifest_fields(de / "captions"),
        merged_manifest=_manifest_fields(merged),
    )
    overlap = json.loads((metrics / "metrics.json").read_text())["overlap"]
    out["overlap"] = _digest(
        json.dumps({k: v for k, v in overlap.items() if k not in ("train", "test")}, sort_keys=True).encode()
    )
    return out


@pytest.fixture(autouse=True)
def _same_pyarrow():
    if pyarrow.__version__ != RECORDED_WITH:
        pytest.skip(
            f"the recorded Parquet bytes were written by pyarrow {RECORDED_WITH}, this is {pyarrow.__version__}"
        )


@pytest.mark.parametrize(
    "name, images, seed, flickr, split", [("generated", 500, 3, True, "train"), ("files", 300, 4, False, "val")]
)
def test_generated_corpus_same_bytes(tmp_path, name, images, seed, flickr, split):
    corpus = write_corpus(tmp_path / "corpus", images, seed=seed, flickr_names=flickr)
    assert _run_stages(tmp_path / "run", corpus["en"], corpus["de"], corpus["images"], split) == EXPECTED[name]


def test_multi30k_same_bytes(tmp_path, shared_data):
    task1 = shared_data / "multi30k" / "task1"
    if not (task1 / "raw" / "train.de").is_file():
        pytest.skip(f"Multi30K task 1 not found under {task1}")
    result = _run_stages(
        tmp_path, [task1 / "raw/train.en"], [task1 / "raw/train.de"], task1 / "image_splits/train.txt", "train"
    )
    assert result == EXPECTED["multi30k"]


def test_plain_names_never_go_through_python_one_by_one(tmp_path, monkeypatch):
    """The import of plain names works on whole columns: the per-name functions are never called (before, each
    line cost a canonical_image_id and an ImageRoots.path call)."""
    import mltk.data.importers.common as common
    import mltk.data.importers.image_ids as image_ids

    calls = []
    monkeypatch.setattr(image_ids, "canonical_image_id", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(common.ImageRoots, "path", lambda self, name: calls.append(name))
    corpus = write_corpus(tmp_path / "corpus", 50, seed=1)
    out = import_dataset(
        "lines",
        corpus["en"],
        tmp_path / "en",
        lang="en",
        image_list=corpus["images"],
        splits=["train"],
        images_root="/images",
    )
    assert calls == []
    assert (out / "captions" / "captions.parquet").is_file()


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("c2", "a", "i2", "train"), ("c2", "a", "i2", "train"), ("c3", "b", "i1", "test")], "'c2' in a is twice"),
        ([("c1", "b", "i2", "train"), ("c2", "a", "i2", "test")], "'c1' names image 'i2' here but 'i1'"),
        ([("c3", "a", "i1", "test"), ("c1", "a", "i1", "train")], "image 'i1' is in split 'test'"),
        ([("c1", "a", "i1", "train"), ("c3", "a", "i1", "test")], "'c1' in a is also in"),
    ],
)
def test_merge_names_the_first_conflicting_row(tmp_path, rows, message):
    """Of several conflicts, the one on the earliest row (in input order) is named, as the row loop did."""
    from mltk import artifacts
    from mltk.core.errors import SchemaError

    first = artifacts.write_captions(
        tmp_path / "a",
        pa.table({"image_id": ["i1"], "lang": ["a"], "caption": ["x"], "caption_id": ["c1"], "split": ["train"]}),
    )
    table = pa.table(
        {
            "caption_id": [r[0] for r in rows],
            "lang": [r[1] for r in rows],
            "caption": ["x"] * len(rows),
            "image_id": [r[2] for r in rows],
            "split": [r[3] for r in rows],
        }
    )
    second = tmp_path / "b.parquet"
    pa.parquet.write_table(table, second)
    with pytest.raises(SchemaError, match=message):
        merge_captions([first, second], tmp_path / "out")
