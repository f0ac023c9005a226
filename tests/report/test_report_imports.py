"""The report is a one-way pipeline (issue 21): fetch -> analysis -> render, without an import cycle.

The import graph is read from the source with ``ast``: every ``import`` and ``from ... import`` of
a module of ioparallax/report, at module level and inside functions alike (an import moved into a
function to dodge a cycle is still an edge of it), plus those under ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ioparallax.report

PACKAGE = "ioparallax.report"
ROOT = Path(ioparallax.report.__file__).parent

# Each module's stage; a module imports only from its own stage or an earlier one (context.py says
# what each stage is). A new module must be placed here.
STAGES = ("transport", "fetch", "analysis", "render", "program")
STAGE = {
    "promapi": "transport",
    "context": "fetch",
    "data": "fetch",
    "pairing": "fetch",
    "verdicts": "analysis",
    "ramps": "analysis",
    "usl": "analysis",
    "scaling": "analysis",
    "analysis": "analysis",
    "sections": "render",
    "figures": "render",
    "svgcache": "render",
    "summary": "render",
    "scaling_section": "render",
    "compare": "render",
    "disks": "render",
    "page": "render",
    "builders": "render",
    "report": "program",
    "cli": "program",
    "usl_cli": "program",
    "chromium": "program",
    "__init__": "program",
}


def module_name(path: Path, root: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([package, *parts])


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` (rooted at ``root``) it imports, anywhere in its source."""
    modules = {module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ..x import y
                    anchor = here.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import mod` imports the submodule mod; `from mod import name` imports mod.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # import a.b.c of a module a.b: a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None if it is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_report_package_has_no_import_cycle():
    graph = import_graph(ROOT, PACKAGE)
    assert f"{PACKAGE}.data" in graph and f"{PACKAGE}.data" in graph[f"{PACKAGE}.summary"]  # the graph is read
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_each_stage_imports_only_from_itself_and_the_stages_before():
    graph = import_graph(ROOT, PACKAGE)
    short = {name: name.removeprefix(PACKAGE).lstrip(".") or "__init__" for name in graph}
    unplaced = sorted(s for s in short.values() if s not in STAGE)
    assert not unplaced, f"modules without a stage in {__file__}'s STAGE: {unplaced}"
    backwards = sorted(
        f"{short[m]} ({STAGE[short[m]]}) imports {short[t]} ({STAGE[short[t]]})"
        for m, targets in graph.items()
        for t in targets
        if STAGES.index(STAGE[short[t]]) > STAGES.index(STAGE[short[m]])
    )
    assert not backwards, "an import against the pipeline's direction:\n" + "\n".join(backwards)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    "files",
    [
        # The cycle issue 21 removed: data -> scaling -> summary -> data, held by imports in functions.
        {
            "__init__.py": "",
            "data.py": "def fetch():\n    from pkg.scaling import settle\n",
            "scaling.py": "def scaling():\n    from pkg.summary import dataset\n",
            "summary.py": "from pkg.data import fetch\n",
        },
        {"__init__.py": "", "a.py": "from . import b\n", "b.py": "import pkg.a\n"},  # relative, module-level
        {"__init__.py": "", "a.py": "from pkg.b import x\n", "b.py": "def f():\n    from .a import y\n"},
    ],
    ids=["functions", "relative", "from-names"],
)
def test_a_cycle_is_found_however_it_is_imported(tmp_path, files):
    graph = import_graph(_package(tmp_path, files), "pkg")
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) >= 3, graph


def test_an_acyclic_package_with_imports_in_functions_passes(tmp_path):
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b, c\n",
        "b.py": "def f():\n    from pkg.c import x\n    import os\n",
        "c.py": "import json\n",
    }
    graph = import_graph(_package(tmp_path, files), "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b", "pkg.c"}, "pkg.b": {"pkg.c"}, "pkg.c": set()}
    assert find_cycle(graph) is None
