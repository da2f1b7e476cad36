"""The size limits of the team's charter: no module in mltk/ over 450 lines, no function over 60 (from its first
decorator to its last line, docstring included). Offenders are printed, then the test fails."""

from __future__ import annotations

import ast
from pathlib import Path

MLTK = Path(__file__).resolve().parents[1] / "mltk"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
EXCLUDED: tuple[str, ...] = ()  # every package of mltk, the CLI's command functions included


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length in lines) of every function and method in ``source``."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    found.append((name, child.lineno, child.end_lineno - first + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def offenders(package: Path, excluded: tuple[str, ...] = ()) -> list[str]:
    lines = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        if relative.parts[1] in excluded:
            continue
        source = path.read_text(encoding="utf-8")
        count = len(source.splitlines())
        if count > MAX_MODULE_LINES:
            lines.append(f"{relative}: module of {count} lines (limit {MAX_MODULE_LINES})")
        lines += [f"{relative}:{line}: {name} is {length} lines (limit {MAX_FUNCTION_LINES})"
                  for name, line, length in function_lengths(source) if length > MAX_FUNCTION_LINES]
    return lines


def test_no_module_or_function_over_the_limits():
    found = offenders(MLTK, EXCLUDED)
    print("\n".join(found) or "every module and function within the limits")
    assert not found, "over the size limits:\n" + "\n".join(found)


def test_lengths_count_decorators_docstrings_and_nested_functions(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(57))
    source = f"@decorator\ndef long():\n    '''doc'''\n{body}\n\n\nclass C:\n    def short(self):\n" \
             f"        def inner():\n            pass\n"
    assert function_lengths(source) == [("long", 2, 60), ("C.short", 64, 3), ("C.short.inner", 65, 2)]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(source)
    assert offenders(package) == []
    (package / "m.py").write_text(source.replace("x0 = 0", "x0 = 0\n    y = 1") + "\n" * (450 - 66))
    assert offenders(package) == ["pkg/m.py: module of 451 lines (limit 450)",
                                  "pkg/m.py:2: long is 61 lines (limit 60)"]
