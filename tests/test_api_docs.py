"""docs/api.md is true: it names a function for every command and only public names, the functions keep one calling
convention (``fn(config) -> Path``) and their commands' names except where the page says why, and the examples of
``mltk/__init__.py``, docs/api.md and the README run (at tiny sizes)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import typer.main

import mltk
from mltk.cli import app

REPO = Path(__file__).resolve().parents[1]
API_DOC = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
# commands whose function is named otherwise, and the name docs/api.md gives it
NAMED_OTHERWISE = {
    "evaluate": "run_evaluation",
    "export": "export_checkpoint",
    "encode-texts": "write_text_embeddings",
    "index build": "build_index",
    "index query": "query",
    "inspect": "verify_artifact",
    "recipes show": "load_recipe",
}
NO_FUNCTION = {"recipes list", "recipes cp"}


def commands(group, prefix: str = "") -> list[str]:
    """Every visible command of the CLI, groups spelled out (``index build``)."""
    found = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        if hasattr(command, "commands"):  # a group (typer's own class, not always a click.Group)
            found += commands(command, f"{prefix}{name} ")
        else:
            found.append(prefix + name)
    return found


def table_rows() -> dict[str, tuple[str, str]]:
    """docs/api.md's table: command -> (first function named, configuration cell)."""
    rows = {}
    for line in API_DOC.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        function = re.search(r"`mltk\.(\w+)\(", cells[1])
        for command in re.findall(r"`([a-z -]+)`", cells[0]):
            rows[command] = (function.group(1) if function else "", cells[2])
    return rows


def test_every_command_has_a_row_and_every_row_a_command():
    documented = set(table_rows())
    cli = set(commands(typer.main.get_command(app)))
    assert documented == cli, (sorted(cli - documented), sorted(documented - cli))


def test_the_page_names_exactly_the_public_names():
    mentioned = set(re.findall(r"\bmltk\.(\w+)", API_DOC)) - {"evaluate", "export"}  # the packages, named as such
    public = set(mltk.__all__) - {"__version__"}
    assert mentioned - public == set(), "docs/api.md names what mltk does not export"
    assert public - mentioned == set(), "docs/api.md leaves public names out"


def test_functions_are_named_as_their_commands_except_where_the_page_says_why():
    for command, (function, _) in table_rows().items():
        if command in NO_FUNCTION:
            assert function == "", command
            continue
        expected = NAMED_OTHERWISE.get(command, command.replace("-", "_"))
        assert function == expected, f"{command}: docs/api.md names mltk.{function}"
        assert function in mltk.__all__, function
        if command in NAMED_OTHERWISE:
            assert f"`mltk.{function}`" in API_DOC.split("except where that name is taken")[1].split("\n\n")[0], (
                f"docs/api.md does not say why {command} is mltk.{function}"
            )


def test_a_function_with_a_configuration_takes_it_alone_and_returns_a_path():
    checked = 0
    for command, (function, configuration) in table_rows().items():
        configs = re.findall(r"`mltk\.(\w+Config)`", configuration.split("(")[0])
        if not configs:
            continue
        signature = inspect.signature(getattr(mltk, function))
        required = [p for p in signature.parameters.values() if p.default is inspect.Parameter.empty]
        assert len(required) == 1, f"mltk.{function} takes {[p.name for p in required]}, not one config"
        annotation = str(required[0].annotation)
        assert all(config in annotation for config in configs), f"mltk.{function}({annotation})"
        assert signature.return_annotation in ("Path", Path), f"mltk.{function} returns {signature.return_annotation}"
        checked += 1
    assert checked >= 16


# ----------------------------------------------------------------------------------------------------------------
# The examples run
# ----------------------------------------------------------------------------------------------------------------

TINY = ((r"train=\d+, val=\d+, test=\d+", "train=16, val=4, test=4"), (r'"steps": \d+', '"steps": 2'))


def docstring_example() -> str:
    """The indented block after ``::`` in mltk's module docstring."""
    block = mltk.__doc__.split("::\n", 1)[1].split("\n\n")
    code = []
    for paragraph in block:
        if paragraph.strip() and not paragraph.startswith("    "):
            break
        code.append(paragraph)
    return "\n\n".join(code).replace("\n    ", "\n").strip() + "\n"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def at_tiny_sizes(code: str) -> str:
    for pattern, tiny in TINY:
        code = re.sub(pattern, tiny, code)
    return code


EXAMPLES = {
    "mltk/__init__.py": [docstring_example()],
    "docs/api.md": python_blocks(REPO / "docs" / "api.md"),
    "README.md": python_blocks(REPO / "README.md"),
}


@pytest.mark.parametrize("source", sorted(EXAMPLES))
def test_the_examples_run_at_tiny_sizes(source, tmp_path, monkeypatch):
    assert EXAMPLES[source], f"{source} has no Python example"
    monkeypatch.chdir(tmp_path)  # the examples write under runs/
    for number, code in enumerate(EXAMPLES[source]):
        namespace: dict = {}
        exec(compile(at_tiny_sizes(code), f"{source} example {number + 1}", "exec"), namespace)
        if "vectors" in namespace or "texts" in namespace:
            vectors = namespace.get("vectors", namespace.get("texts"))
            assert vectors.dtype.name == "float32" and abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-5


def test_a_config_carrying_its_output_records_what_the_command_records(tmp_path):
    """``out`` in a configuration says where, not what: the manifests of ``synth_data`` and of ``mltk synth-data``
    record the same settings, without it."""
    from typer.testing import CliRunner

    world = mltk.synth_data(mltk.SynthConfig(train=2, val=1, test=1, langs=("en",), out=tmp_path / "api"))
    result = CliRunner().invoke(
        app, ["synth-data", "--train", "2", "--val", "1", "--test", "1", "--lang", "en", "-o", str(tmp_path / "cli")]
    )
    assert result.exit_code == 0, result.stderr
    for name in ("images", "captions"):
        api, command = (mltk.read_manifest(tmp_path / side / name)["created_by"]["config"] for side in ("api", "cli"))
        assert "out" not in api and api == command
    assert world == (tmp_path / "api").resolve()
