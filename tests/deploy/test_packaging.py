"""What `pip install .` brings: the runtime dependencies are exactly what the installed packages
import (a test-only library such as beautifulsoup4 stays in the `test` extra), and the licence
file pyproject.toml names is the Apache License 2.0 it declares."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata

from tests.support import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _dist(requirement: str) -> str:
    """``pyvmomi>=8.0.3,<10`` -> ``pyvmomi`` (normalised as PEP 503 does)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group()
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_packages() -> list[str]:
    patterns = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*") for p in patterns})


def _third_party_imports() -> dict[str, set[str]]:
    """Distribution -> the installed files importing it (absolute imports only; stdlib and our
    own packages left out)."""
    ours = set(_installed_packages())
    modules_to_dists = metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for package in ours:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if top in sys.stdlib_module_names or top in ours:
                        continue
                    dists = modules_to_dists.get(top)
                    assert dists, f"{path.relative_to(REPO)} imports {top}, which no installed distribution provides"
                    for dist in dists:
                        found.setdefault(_dist(dist), set()).add(str(path.relative_to(REPO)))
    return found


def test_runtime_dependencies_are_what_the_installed_code_imports():
    runtime = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    optional = {_dist(r) for r in extras["dashboards"]}  # mixin/dashboards.py: `make dashboards` only
    imported = _third_party_imports()
    undeclared = {d: sorted(files) for d, files in imported.items() if d not in runtime | optional}
    assert not undeclared, f"imported at run time but not in [project] dependencies: {undeclared}"
    unused = runtime - imported.keys()
    assert not unused, f"runtime dependencies no installed module imports (move them to an extra): {unused}"
    assert "beautifulsoup4" in {_dist(r) for r in extras["test"]}


def test_pyvmomi_has_an_upper_bound():
    # exporters/vcenter/soap.py uses pyvmomi's private si._stub: a major release may break it.
    (spec,) = [r for r in PYPROJECT["project"]["dependencies"] if _dist(r) == "pyvmomi"]
    assert "<" in spec, spec


def test_license_file_is_the_apache_license_pyproject_declares():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 202
