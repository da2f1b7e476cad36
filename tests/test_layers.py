"""The declared layers of mltk, checked on every import (module level, inside functions, type-only, and modules
named in strings for ``importlib``): a package imports only packages on lower layers (or itself); no module lies
loose at the top of ``mltk/`` except the entry points; no module imports another's private name; no
``import *``. README.md's Layout section draws the same order."""

from __future__ import annotations

import ast
from pathlib import Path

from test_import_graph import MLTK, import_graph

# Lowest first. Packages on one line share a layer and must not import each other.
LAYERS: list[tuple[str, ...]] = [
    ("core",),  # errors, runtime, policy, cache, user files, distributed helpers, version
    ("artifacts",),  # the only reader and writer of artifacts (and prune)
    ("data",),  # the embedded world, importers, languages, overlap checks
    ("vocab",),  # BPE and WordPiece vocabularies
    ("models",),  # open_clip and transformers towers, acquirers, non-native embeddings, preflight checks
    ("recipes",),  # hyper-parameters as data, and their checks
    ("losses",),  # one class per loss, and their registry
    ("metrics", "present"),  # ranks and recall (scored as a loss's similarity says); tables and plots
    ("translate", "cll_clip", "ame"),  # seed-specific models and data: MT, CLL-CLIP and its baselines, AME
    ("encode",),  # frozen towers over data: images, videos, texts
    ("settings",),  # the loop's and the stages' configs, resolved from their recipes; torch-free
    ("train",),  # the training loop and every training stage
    ("evaluate",),  # evaluation stages, zero-shot classification, comparisons
    ("export", "index"),  # the field's formats, nearest-neighbour indexes
    ("cli",),  # the command line: parses options and calls one library function
    ("",),  # the entry points: mltk/__init__.py (the public API) and mltk/__main__.py
]
ENTRY_POINTS = {"__init__.py", "__main__.py"}


def layer_of(package: str) -> int:
    for height, packages in enumerate(LAYERS):
        if package in packages:
            return height
    raise AssertionError(f"package mltk.{package} is on no declared layer: add it to LAYERS in {__file__}")


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and module not in ("mltk.__main__",) else ""


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for source, targets in sorted(graph.items()):
        source_package = package_of(source)
        for target in sorted(targets):
            target_package = package_of(target)
            if target_package == source_package:
                continue
            if layer_of(target_package) >= layer_of(source_package):
                found.append(
                    f"{source} (mltk.{source_package or '<entry>'}) imports {target} "
                    f"(mltk.{target_package or '<entry>'}), which is not on a lower layer"
                )
    return found


def test_every_import_goes_down_the_declared_layers():
    graph = import_graph(MLTK)
    assert "mltk.core.errors" in graph["mltk.train.loop"]  # the graph is really built
    violations = layer_violations(graph)
    assert not violations, "\n".join(violations)


def test_every_package_is_on_a_layer_and_no_module_lies_loose():
    for path in MLTK.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            layer_of(path.name)
        elif path.suffix == ".py":
            assert path.name in ENTRY_POINTS, f"{path} lies loose at the top of mltk/: move it into its package"


def test_the_layer_check_sees_an_upward_import_and_one_through_importlib():
    graph = {"mltk.core.errors": {"mltk.train.loop"}, "mltk.cli.app": {"mltk.core.errors"}}
    assert len(layer_violations(graph)) == 1
    assert layer_violations({"mltk.metrics.ranks": {"mltk.present.plots"}})  # same layer, other package


def private_imports(path: Path) -> list[str]:
    """``from mltk.x import _name`` and ``module._name`` on a module imported from mltk."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, module_aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mltk"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path}:{node.lineno}: from {node.module} import {alias.name}")
                module_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            module_aliases.update(
                alias.asname for alias in node.names if alias.name.startswith("mltk") and alias.asname
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_of_another_or_star():
    problems = []
    for path in sorted(MLTK.rglob("*.py")):
        problems += private_imports(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        problems += [
            f"{path}:{node.lineno}: import *"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)
        ]
    assert not problems, "\n".join(problems)


def test_the_public_api_names_resolve_lazily():
    import subprocess
    import sys

    code = (
        "import sys, mltk; assert 'torch' not in sys.modules, 'import mltk pulled in torch'; "
        "missing = [n for n in mltk.__all__ if getattr(mltk, n, None) is None]; print(missing)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def layer_picture(graph: dict[str, set[str]]) -> str:
    """The packages from the top layer down, each with the packages it imports (what docs/layout.md shows)."""
    imports: dict[str, set[str]] = {}
    for source, targets in graph.items():
        imports.setdefault(package_of(source), set()).update(
            package_of(target) for target in targets if package_of(target) != package_of(source)
        )
    lines = []
    for height in range(len(LAYERS) - 1, -1, -1):
        for position, package in enumerate(LAYERS[height]):
            name = f"mltk/{package}/" if package else "mltk/__*__.py"
            below = " ".join(sorted(p or "<entry>" for p in imports.get(package, ()))) or "-"
            lines.append(f"{height if position == 0 else '':>2}  {name:<18} -> {below}")
    return "\n".join(lines)


LAYOUT_DOC = MLTK.parent / "docs" / "layout.md"


def test_the_layout_doc_draws_the_layers_the_code_has():
    picture = layer_picture(import_graph(MLTK))
    assert picture in LAYOUT_DOC.read_text(encoding="utf-8"), (
        f"docs/layout.md is out of date; its picture is now (python tests/test_layers.py):\n{picture}"
    )


if __name__ == "__main__":
    print(layer_picture(import_graph(MLTK)))
