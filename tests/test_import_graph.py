"""No import cycle between mltk modules: the graph of every ``import`` statement in mltk/**.py (at module level,
inside functions, and under ``if TYPE_CHECKING``) must be acyclic. A function-level import delays a cycle, it does
not remove it, and a type-only import is still a dependency; so all three count. Importing ``a.b.c`` is an edge
to ``a.b.c`` only (not to the packages ``a`` and ``a.b`` that Python also runs): a package ``__init__`` that
re-exports its modules is not a cycle. A string that is exactly a module's dotted name counts as an import of it:
that is how ``importlib.import_module`` (the command registry, the lazy public API) names what it loads."""

from __future__ import annotations

import ast
from pathlib import Path

MLTK = Path(__file__).resolve().parents[1] / "mltk"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under ``package`` (a package is its ``__init__.py``)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module that defines ``name`` (``pkg.mod.Class`` -> ``pkg.mod``), None outside the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    root = next(iter(modules)).split(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(_owner(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != root:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else _owner(base, modules))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "." in node.value
            and node.value in modules
        ):
            found.add(node.value)  # a module named in a string: importlib.import_module("mltk.cli.index")
    found.discard(None)
    found.discard(module)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_files(package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; every cycle of the
    graph lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def describe(cycles: list[list[str]], graph: dict[str, set[str]]) -> str:
    lines = []
    for component in cycles:
        lines.append("cycle: " + ", ".join(component))
        lines += [f"    {a} -> {b}" for a in component for b in sorted(graph[a] & set(component))]
    return "\n".join(lines)


def test_mltk_has_no_import_cycle():
    graph = import_graph(MLTK)
    assert len(graph) > 100 and "mltk.train.loop" in graph["mltk.train.stage"]  # the graph is really built
    cycles = import_cycles(graph)
    print(describe(cycles, graph) or "no import cycle")
    assert not cycles, "import cycles between mltk modules:\n" + describe(cycles, graph)


def test_the_cycle_finder_sees_cycles_through_function_level_and_type_only_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\nA = 1\n"
    )
    (package / "b.py").write_text("def f():\n    from .sub import c\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\nimport os\n")
    graph = import_graph(package)
    assert graph["pkg.d"] == {"pkg.a"} and graph["pkg"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    (package / "a.py").write_text("A = 1\n")
    assert import_cycles(import_graph(package)) == []
