"""import-data lines and merge-captions stream their rows (a block of lines, a batch of rows, a row group written at
a time) and check their keys on 64-bit hashes: the same artifacts as the whole-table code, whatever the block and
row group sizes, and the same refusals, also when every hash collides."""

from __future__ import annotations

import gzip
import random
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_scale import write_corpus

from mltk import artifacts
from mltk.artifacts import key_hashes, table_stream
from mltk.core.errors import ConfigError, SchemaError
from mltk.data.importers import common, import_dataset, merge_captions, parent_join
from mltk.data.importers import merge as merge_module
from mltk.data.importers.common import iter_line_blocks, read_lines_array
from mltk.data.importers.merge import merge_in_memory


def _colliding(column):
    """Every string hashes to the same number: each hashed check must then confirm on the strings."""
    return np.zeros(len(column), np.uint64)


def test_string_hashes_follow_the_strings_not_the_chunks():
    values = ["", "a", "b", "ab", "ba", "é", "train-1-en-0", "train-1-en-0", "x" * 300_000, "a"]
    hashes = key_hashes.string_hashes(pa.array(values))
    assert hashes[1] == hashes[9] and hashes[6] == hashes[7]
    assert len(set(hashes.tolist())) == len(set(values))
    chunked = pa.chunked_array([pa.array(values[:3]), pa.array(["zz"] + values[3:]).slice(1)])
    assert (key_hashes.string_hashes(chunked) == hashes).all()
    assert (key_hashes.string_hashes(pa.array(values, pa.large_string())) == hashes).all()
    many = pa.array([f"train-{i}-de-0" for i in range(200_000)])
    assert len(np.unique(key_hashes.string_hashes(many))) == 200_000


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_line_blocks_are_the_lines_of_the_whole_file(tmp_path, block):
    rng = random.Random(block)
    cases = [b"", b"\n", b"a", b"a\n\n", b"\xef\xbb\xbfab\r\ncd\n", b"x\r\n\ry\r", b"\n\n\nq", b"\xef\xbb\xbf"]
    cases += [
        b"".join(rng.choice([b"a", b"\xc3\xa9", b"\n", b"\r\n", b" ", b"\xe2\x80\xa8"]) for _ in range(50))
        for _ in range(20)
    ]
    for number, data in enumerate(cases):
        for suffix in (".txt", ".gz"):
            path = tmp_path / f"c{number}{suffix}"
            path.write_bytes(gzip.compress(data) if suffix == ".gz" else data)
            blocks = [line for lines in iter_line_blocks(path, block) for line in lines.to_pylist()]
            assert blocks == read_lines_array(path).to_pylist()


def test_line_blocks_refuse_what_the_whole_file_reader_refuses(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n" * 10 + b"bad \xff here\n")
    with pytest.raises(Exception) as whole:
        read_lines_array(path)
    for block in (4, 1 << 20):
        with pytest.raises(type(whole.value)) as blocks:
            list(iter_line_blocks(path, block))
        assert str(blocks.value) == str(whole.value)


def _imports(root: Path, corpus: dict) -> dict[str, Path]:
    common_options = {"image_list": corpus["images"], "splits": ["train"], "images_root": "/images"}
    en = import_dataset("lines", corpus["en"], root / "en", lang="en", **common_options)
    de = import_dataset(
        "lines", corpus["de"], root / "de", lang="de", translation_of="en", parent=en / "captions", **common_options
    )
    return {"en": en / "captions", "de": de / "captions", "en_images": en / "images"}


def _bytes(paths: dict[str, Path]) -> dict[str, bytes]:
    return {name: next(path.glob("*.parquet")).read_bytes() for name, path in paths.items()}


def test_import_in_small_blocks_and_row_groups_writes_the_same_rows(tmp_path, monkeypatch):
    """Blocks of 64 bytes (every caption file read in hundreds of blocks) give the same bytes as one block; row
    groups of 100 rows give the same rows."""
    corpus = write_corpus(tmp_path / "corpus", 400, seed=5)
    whole = _bytes(_imports(tmp_path / "whole", corpus))
    monkeypatch.setattr(common, "LINE_BLOCK_BYTES", 64)
    assert _bytes(_imports(tmp_path / "blocks", corpus)) == whole
    monkeypatch.setattr(table_stream, "ROW_GROUP_ROWS", 100)
    grouped = _imports(tmp_path / "groups", corpus)
    assert pq.ParquetFile(grouped["en"] / "captions.parquet").metadata.num_row_groups > 5
    for name in ("en", "de"):
        assert artifacts.load_captions(grouped[name]).equals(
            artifacts.load_captions(tmp_path / "whole" / name / "captions")
        )


def test_import_refuses_repeated_ids_also_when_every_hash_collides(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus", 60, seed=2)
    expected = _bytes(_imports(tmp_path / "plain", corpus))
    monkeypatch.setattr(key_hashes, "string_hashes", _colliding)
    assert _bytes(_imports(tmp_path / "colliding", corpus)) == expected  # collisions confirmed false on the strings
    parent = artifacts.write_captions(
        tmp_path / "parent",
        pa.table(
            {  # one caption_id on two rows of one image
                "image_id": ["flickr30k:1000"] * 2,
                "lang": ["en"] * 2,
                "caption": ["one", "two"],
                "caption_id": ["c1"] * 2,
                "split": ["test"] * 2,
            }
        ),
    )
    images = tmp_path / "images.txt"
    images.write_text("1000.jpg\n1000.jpg\n")
    text = tmp_path / "x.de"
    text.write_text("eins\nzwei\n")
    with pytest.raises(SchemaError, match="1 caption_id/lang pair\\(s\\) occur more than once \\(e.g. 'c1' in de\\)"):
        import_dataset(
            "lines", [text], tmp_path / "twice", lang="de", image_list=images, translation_of="en", parent=parent
        )
    assert not (tmp_path / "twice").exists()


def test_import_names_a_short_file_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "LINE_BLOCK_BYTES", 8)
    images = tmp_path / "images.txt"
    images.write_text("".join(f"{1000 + i}.jpg\n" for i in range(20)))
    for lines in (5, 25):
        text = tmp_path / f"short{lines}.en"
        text.write_text("".join(f"caption number {i}\n" for i in range(lines)))
        with pytest.raises(SchemaError, match=f"has {lines} lines but images.txt has 20"):
            import_dataset("lines", [text], tmp_path / f"out{lines}", lang="en", image_list=images)


def test_streamed_merge_is_the_whole_table_merge(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus", 300, seed=7)
    inputs = _imports(tmp_path / "in", corpus)
    sources = [inputs["en"], inputs["de"]]
    expected = (merge_in_memory(sources, tmp_path / "whole") / "captions.parquet").read_bytes()
    monkeypatch.setattr(merge_module.artifacts, "load_captions", None)  # the streamed merge reads no whole table
    assert (merge_captions(sources, tmp_path / "streamed") / "captions.parquet").read_bytes() == expected


def test_merge_with_colliding_hashes_still_merges_and_refuses_exactly(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus", 80, seed=8)
    inputs = _imports(tmp_path / "in", corpus)
    sources = [inputs["en"], inputs["de"]]
    expected = (merge_captions(sources, tmp_path / "plain") / "captions.parquet").read_bytes()
    monkeypatch.setattr(key_hashes, "string_hashes", _colliding)
    assert (merge_captions(sources, tmp_path / "colliding") / "captions.parquet").read_bytes() == expected
    with pytest.raises(SchemaError, match="is twice in it \\(duplicate row\\)"):
        merge_captions([inputs["en"], inputs["en"]], tmp_path / "twice")


def _translations_by_hand(parent: pa.Table, files: list[list[str]], names: list[str], split: str) -> list[str]:
    """The caption_id each line takes, one line at a time: the parent's ``occurrence``-th English caption of its
    image (those of ``split`` when it has some there)."""
    rows = [r for r in parent.to_pylist() if r["lang"] == "en"]
    rows = [r for r in rows if r["split"] == split] or rows
    seen: dict[str, int] = {}
    out = []
    for lines in files:
        for name, line in zip(names, lines):
            image = f"flickr30k:{name.split('.')[0]}"
            occurrence = seen.get(image, 0)
            seen[image] = occurrence + 1
            if line.strip():
                out.append([r for r in rows if r["image_id"] == image][occurrence]["caption_id"])
    return out


@pytest.mark.parametrize("repeat", [False, True])
def test_translated_import_in_small_partitions_takes_the_parent_caption_ids(tmp_path, monkeypatch, repeat):
    """Partitions of a few rows (hundreds of files, many ranges of lines) give the bytes of one partition, and
    the caption_ids a line-by-line match gives: a parent with other languages and splits, images out of order."""
    rng = random.Random(9)
    names = [f"{1000 + rng.randrange(40 if repeat else 10**6)}.jpg" for _ in range(120)]
    images = tmp_path / "images.txt"
    images.write_text("\n".join(names) + "\n")
    needed = {f"flickr30k:{n.split('.')[0]}": 2 * names.count(n) for n in names}
    rows = [
        (image, lang, f"{lang} {image} {i}", f"{split}-{image}-{lang}-{i}", split)
        for split in ("val", "test")
        for image, count in needed.items()
        for i in range(count + 1)
        for lang in ("en", "fr")
    ]
    rng.shuffle(rows)
    parent = artifacts.write_captions(
        tmp_path / "parent", pa.table(list(zip(*rows)), names=["image_id", "lang", "caption", "caption_id", "split"])
    )
    files = [[rng.choice(["eins", "zwei drei", "", " vier "]) for _ in names] for _ in range(2)]
    for k, lines in enumerate(files):
        (tmp_path / f"test.{k}.de").write_text("\n".join(lines) + "\n")
    sources = [tmp_path / "test.0.de", tmp_path / "test.1.de"]
    options = {"lang": "de", "image_list": images, "translation_of": "en", "parent": parent, "splits": ["test"]}
    whole = import_dataset("lines", sources, tmp_path / "whole", **options) / "captions"
    assert artifacts.load_captions(whole).column("caption_id").to_pylist() == _translations_by_hand(
        artifacts.load_captions(parent), files, names, "test"
    )
    monkeypatch.setattr(parent_join, "PARTITION_ROWS", 7)
    monkeypatch.setattr(common, "LINE_BLOCK_BYTES", 16)
    small = import_dataset("lines", sources, tmp_path / "small", **options) / "captions"
    assert (small / "captions.parquet").read_bytes() == (whole / "captions.parquet").read_bytes()


def test_translated_import_refuses_as_the_line_by_line_match_did(tmp_path, monkeypatch):
    """The first line past its image's captions is named, whichever partition holds it; a file refused for its
    line count is refused for that, unless an earlier file has such a line; no scratch file is left behind."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(parent_join, "PARTITION_ROWS", 2)
    names = [f"{1000 + i}.jpg" for i in range(12)]
    images = tmp_path / "images.txt"
    images.write_text("\n".join(names) + "\n")
    counts = [2] * 12
    counts[7] = counts[3] = 1  # the second file's lines 4 and 8 translate a second caption these images lack
    table = pa.table(
        {
            "image_id": [f"flickr30k:{1000 + i}" for i in range(12) for _ in range(counts[i])],
            "lang": ["en"] * sum(counts),
            "caption": ["a caption"] * sum(counts),
            "caption_id": [f"c{i}-{j}" for i in range(12) for j in range(counts[i])],
            "split": ["test"] * sum(counts),
        }
    )
    parent = artifacts.write_captions(tmp_path / "parent", table)
    good, short = tmp_path / "a.de", tmp_path / "short.de"
    good.write_text("eine Zeile\n" * 12)
    short.write_text("eine Zeile\n" * 11)
    options = {"lang": "de", "image_list": images, "translation_of": "en", "parent": parent}
    beyond = "line 4 \\(image flickr30k:1003\\) translates caption 2 of that image in en, but .* has 1 for it"
    cases = [
        ([good, good], beyond, 1),
        ([good, good, short], beyond, 1),  # the earlier file first
        ([good, short], "has 11 lines but images.txt has 12", 1),  # the same file: its line count first
        ([short, good], "has 11 lines but images.txt has 12", 0),
    ]
    for number, (sources, message, named) in enumerate(cases):
        with pytest.raises(SchemaError, match=message) as refused:
            import_dataset("lines", sources, tmp_path / f"out{number}", **options)
        assert refused.value.path == str(sources[named])
    with pytest.raises(ConfigError, match="has no captions in fr \\(--translation-of\\)"):
        import_dataset("lines", [good], tmp_path / "fr", **{**options, "translation_of": "fr"})
    import_dataset("lines", [good], tmp_path / "ok", **options)
    assert list(scratch.iterdir()) == []
