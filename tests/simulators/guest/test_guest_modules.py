"""The guest simulator's modules import each other in one direction: no cycle (none hidden by an
import inside a function) and no private name of another module."""

from __future__ import annotations

import ast
from pathlib import Path

import ioparallax.simulators.guest

PACKAGE = Path(ioparallax.simulators.guest.__file__).parent


def _imports() -> dict[str, list[tuple[str, list[str], bool]]]:
    """Module -> (sibling module imported, names, inside a function?) for every ``from .x import``."""
    out: dict[str, list[tuple[str, list[str], bool]]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        nested = {
            id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(f)
        }
        out[path.stem] = [
            (node.module or "", [a.name for a in node.names], id(node) in nested)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1
        ]
    return out


def test_the_modules_are_found():
    assert {"devices", "diskstats", "fio", "periodic", "sysfs", "writer"} <= set(_imports())


def test_no_import_inside_a_function():
    inside = [(m, target) for m, imps in _imports().items() for target, _, nested in imps if nested]
    assert inside == []


def test_no_private_name_of_another_module():
    private = [
        (m, target, n)
        for m, imps in _imports().items()
        for target, names, _ in imps
        for n in names
        if n.startswith("_")
    ]
    assert private == []


def test_the_import_graph_has_no_cycle():
    graph = {m: {target for target, _, _ in imps} for m, imps in _imports().items()}
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, f"import cycle: {' -> '.join(path + (m,))}"
        if m in done:
            return
        for target in graph.get(m, ()):
            visit(target, path + (m,))
        done.add(m)

    for m in graph:
        visit(m, ())
