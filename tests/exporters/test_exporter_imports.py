"""The exporters' floor plan (docs/architecture.md): no exporter imports a sibling, only
``ioparallax.exporters.common``; ``common`` imports no exporter; no runtime import cycle anywhere
in ``ioparallax/exporters`` (imports inside functions count: a cycle held together by an import
moved into a function or to the bottom of a module is still one); and each network exporter has
the same rooms, each for one job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ioparallax.exporters
from tests.report.test_report_imports import _package, find_cycle, import_graph

PACKAGE = "ioparallax.exporters"
ROOT = Path(ioparallax.exporters.__file__).parent
#: The rooms every multi-target (network) exporter has, each doing one job.
NETWORK_ROOMS = ("cli", "config", "address", "client", "parse", "target", "collector", "capture")


def sibling_imports(graph: dict[str, set[str]], package: str = PACKAGE) -> list[str]:
    def exporter(module: str) -> str:  # pkg.prism.client -> prism; the package itself -> ""
        return module.removeprefix(package).lstrip(".").partition(".")[0]

    return sorted(
        f"{m} imports {t}"
        for m, targets in graph.items()
        for t in targets
        if exporter(m)
        and exporter(t)
        and exporter(t) not in (exporter(m), "common")
        or exporter(m) == "common"
        and exporter(t) not in ("common", "")
    )


def runtime_graph(root: Path, package: str) -> dict[str, set[str]]:
    """The import graph less the edges only an ``if TYPE_CHECKING:`` block makes (annotations:
    no import at run time, so no cycle)."""
    graph = import_graph(root, package)
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            node.module
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
            for node in ast.walk(block)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        rel = path.relative_to(root).with_suffix("")
        graph[".".join([package, *(p for p in rel.parts if p != "__init__")])] -= typing_only
    return graph


def test_no_exporter_imports_a_sibling_and_common_imports_none():
    graph = import_graph(ROOT, PACKAGE)
    assert f"{PACKAGE}.common.prismclient" in graph[f"{PACKAGE}.stargate.prism"]  # the graph is read
    assert sibling_imports(graph) == []


def test_the_exporters_have_no_runtime_import_cycle():
    graph = runtime_graph(ROOT, PACKAGE)
    assert f"{PACKAGE}.stargate.strict" in graph[f"{PACKAGE}.stargate.parse"]  # the graph is read
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("exporter", ["stargate", "vcenter", "prism"])
def test_each_network_exporter_has_the_same_rooms(exporter):
    missing = [room for room in NETWORK_ROOMS if not (ROOT / exporter / f"{room}.py").is_file()]
    assert missing == [], f"{exporter} lacks {missing}"


def test_a_sibling_import_and_a_common_import_of_an_exporter_are_found(tmp_path):
    """The check itself: a prism module importing vcenter's (inside a function), and common fio's."""
    root = _package(tmp_path, {"__init__.py": ""})
    for pkg, files in {
        "common": {"__init__.py": "", "util.py": "from pkg.fio import parse\n"},
        "fio": {"__init__.py": "", "parse.py": ""},
        "vcenter": {"__init__.py": "", "address.py": ""},
        "prism": {"__init__.py": "", "address.py": "def f():\n    from pkg.vcenter.address import x\n"},
    }.items():
        (root / pkg).mkdir()
        for name, text in files.items():
            (root / pkg / name).write_text(text)
    assert sibling_imports(import_graph(root, "pkg"), "pkg") == [
        "pkg.common.util imports pkg.fio.parse",
        "pkg.prism.address imports pkg.vcenter.address",
    ]


def test_a_cycle_through_a_function_level_import_is_found_and_type_checking_is_not(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "def f():\n    from pkg import a\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import D\n",
            "d.py": "from pkg import c\n",
        },
    )
    graph = runtime_graph(root, "pkg")
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert "pkg.d" not in graph["pkg.c"] and "pkg.d" in import_graph(root, "pkg")["pkg.c"]
