"""The public Python API: the pipeline of docs/api.md (examples/pipeline.py) writes the same artifacts as the
commands it stands for, and every public name is a typed, documented library function or class."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import mltk

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "examples" / "pipeline.py"


def load_pipeline():
    spec = importlib.util.spec_from_file_location("pipeline", PIPELINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli(*args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "mltk", *args], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]


def cli_pipeline(base: Path, sizes: dict) -> None:
    """The same stages through the commands, as examples/quickstart.mk runs them."""
    langs = ",".join(sizes["languages"])
    cli(
        "synth-data",
        "--train",
        str(sizes["train"]),
        "--val",
        str(sizes["val"]),
        "--test",
        str(sizes["test"]),
        "-o",
        str(base / "world"),
    )
    world = base / "world"
    cli(
        "pretrain",
        str(world / "images"),
        "--captions",
        str(world / "captions"),
        "--steps",
        str(sizes["pretrain_steps"]),
        "-o",
        str(base / "native"),
    )
    parent = []
    for lang in sizes["languages"]:
        cli(
            "build-vocab",
            str(world / "captions"),
            "--lang",
            lang,
            "--size",
            str(sizes["vocab_size"]),
            *parent,
            "-o",
            str(base / "vocab" / lang),
        )
        parent = ["--parent", str(base / "vocab" / lang)]
    cli(
        "train-nlt",
        str(world / "captions"),
        "-m",
        str(base / "native"),
        "--tokenizer",
        parent[1],
        "--lang",
        langs,
        "--steps",
        str(sizes["nlt_steps"]),
        "--lr",
        str(sizes["nlt_lr"]),
        "-o",
        str(base / "nlt"),
    )
    cli("encode-images", str(world / "images"), "-m", str(base / "native"), "-o", str(base / "img"))
    cli(
        "train-le",
        str(base / "img"),
        "--captions",
        str(world / "captions"),
        "--init",
        str(base / "nlt"),
        "--steps",
        str(sizes["le_steps"]),
        "--lr",
        str(sizes["le_lr"]),
        "--temperature",
        "clip",
        "-o",
        str(base / "mla"),
    )
    cli("index", "build", str(base / "img"), "-o", str(base / "index"))
    cli(
        "evaluate",
        "--images",
        str(base / "img"),
        "-m",
        str(base / "mla"),
        "--captions",
        str(world / "captions"),
        "--split",
        "test",
        "--lang",
        f"en,{langs}",
        "--metric",
        "recall,mrv",
        "-o",
        str(base / "metrics"),
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_scripted_pipeline_writes_what_the_commands_write(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the commands run with one thread too: float sums in the same order
    try:
        pipeline = load_pipeline()
        pipeline.run_pipeline(tmp_path / "api", **pipeline.SMALL)
    finally:
        torch.set_num_threads(threads)
    cli_pipeline(tmp_path / "cli", pipeline.SMALL)
    for name in ("native/model.safetensors", "nlt/model.safetensors", "mla/model.safetensors"):
        assert sha256(tmp_path / "api" / name) == sha256(tmp_path / "cli" / name), name
    for name in ("world/captions", "vocab/zh", "img", "index", "metrics"):
        api, command = (json.loads((tmp_path / side / name / "manifest.json").read_text()) for side in ("api", "cli"))
        assert api["kind"] == command["kind"] and sorted(api["files"]) == sorted(command["files"]), name
    api_metrics, cli_metrics = (
        json.loads((tmp_path / side / "metrics" / "metrics.json").read_text()) for side in ("api", "cli")
    )
    assert api_metrics["per_language"] == cli_metrics["per_language"]


def test_docs_api_shows_the_pipeline_as_it_is():
    doc = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    body = PIPELINE.read_text(encoding="utf-8")
    start = body.index("def run_pipeline(")
    assert body[start : body.index("\n\nif __name__")] in doc, "docs/api.md must show examples/pipeline.py's function"


def test_every_public_name_is_documented_and_typed():
    for name in mltk.__all__:
        if name == "__version__":
            continue
        value = getattr(mltk, name)
        assert inspect.getdoc(value), f"mltk.{name} has no docstring"
        if inspect.isfunction(value):
            hints = inspect.signature(value)
            untyped = [
                p
                for p in hints.parameters.values()
                if p.annotation is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            ]
            assert not untyped, f"mltk.{name}: untyped parameters {[p.name for p in untyped]}"
