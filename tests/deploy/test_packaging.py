"""What `pip install .` brings: one ``ioparallax`` package whose programs run from a fresh venv, the runtime dependencies are exactly what the installed packages
import (a test-only library such as beautifulsoup4 stays in the `test` extra), and the licence
file pyproject.toml names is the Apache License 2.0 it declares."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from ioparallax.simulators.process import loopback_get
from tests.support import REPO, free_port, require_tool, wait_for_http

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
    optional = {_dist(r) for r in extras["dashboards"]}  # ioparallax/mixin/dashboards/: `make dashboards` only
    imported = _third_party_imports()
    undeclared = {d: sorted(files) for d, files in imported.items() if d not in runtime | optional}
    assert not undeclared, f"imported at run time but not in [project] dependencies: {undeclared}"
    unused = runtime - imported.keys()
    assert not unused, f"runtime dependencies no installed module imports (move them to an extra): {unused}"
    assert "beautifulsoup4" in {_dist(r) for r in extras["test"]}


def test_pyvmomi_has_an_upper_bound():
    # ioparallax/exporters/vcenter/client.py (post) uses pyvmomi's private si._stub: a major release may break it.
    (spec,) = [r for r in PYPROJECT["project"]["dependencies"] if _dist(r) == "pyvmomi"]
    assert "<" in spec, spec


def test_license_file_is_the_apache_license_pyproject_declares():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 202


def test_the_wheel_installs_one_ioparallax_namespace_and_its_programs_run(tmp_path, processes):
    """`pip install .` as a user does it: the wheel holds only the ``ioparallax`` package (no generic
    top-level ``exporters``, ``simulators``, ``mixin``), with the data files the programs read, and
    its console scripts run from a fresh venv outside the source tree."""
    # Built from a copy of what the wheel is made of: setuptools writes build/ into the tree it builds.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    # As in a checkout: ioparallax/shipped/ links to alerts/ and dashboards/ beside the package.
    shutil.copytree(
        REPO / "ioparallax", src / "ioparallax", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("alerts", "dashboards"):
        shutil.copytree(REPO / name, src / name)
    assert (src / "ioparallax" / "shipped" / "alerts").is_symlink()
    stamped = "0123456789abcdef0123456789abcdef01234567"
    (src / "ioparallax" / "REVISION").write_text(stamped + "\n")  # as the Docker build stamps it
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("ioparallax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"ioparallax", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    assert "ioparallax/mixin/config.yml" in names
    assert "ioparallax/simulators/scenario/scenarios/zero-heavy.yaml" in names
    assert not [n for n in names if n.endswith(".go")], "the Go simulator is built by make, not shipped"
    # The generated rules (and their promtool tests) and dashboards, copied through the links.
    shipped = {n.removeprefix("ioparallax/shipped/") for n in names if n.startswith("ioparallax/shipped/")}
    expected = {str(p.relative_to(REPO)) for p in (REPO / "alerts").rglob("*.yml")} | {
        str(p.relative_to(REPO)) for p in (REPO / "dashboards").glob("*.json")
    }
    assert shipped == expected, sorted(shipped ^ expected)

    # A fresh venv; the third-party dependencies come from the test venv's site-packages (a path
    # line in a .pth, which does not run the test venv's own .pth files: our editable install stays
    # out), so the only ioparallax it can import is the wheel's.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site) / "test-deps.pth").write_text("\n".join(deps) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import ioparallax.exporters.stargate.cli as m; print(m.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(site), where
    programs = sorted(PYPROJECT["project"]["scripts"])  # every console script, new ones included
    assert {"stargate-exporter", "vcenter-exporter", "fio-exporter", "ioparallax-report"} <= set(programs)
    # Prometheus (for the report) starts while the programs run; the programs run side by side: each
    # is a Python start that mostly imports (one after the other they took about 13 s of the test).
    prom_port = free_port()
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 1s\n")
    prom = processes.start(
        "prometheus",
        [
            require_tool("prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
    )

    def run(args: list, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(args, check=True, capture_output=True, text=True, cwd=tmp_path, timeout=timeout)

    with ThreadPoolExecutor(max_workers=len(programs) + 3) as pool:
        versions = {prog: pool.submit(run, [venv / "bin" / prog, "--version"]) for prog in programs}
        # The packaged data: the scenarios and the mixin's config, read from site-packages.
        listed = pool.submit(run, [venv / "bin" / "ioparallax-scenario", "list"])
        rules = pool.submit(run, [venv / "bin" / "ioparallax-mixin", "rules", "--out", str(tmp_path / "alerts")], 120)
        # The installed package finds the rules and dashboards in itself, not in a source tree: the
        # demo's dashboard coverage reads every dashboard, and the report runs against a real Prometheus.
        found = pool.submit(
            run,
            [
                venv / "bin" / "python",
                "-c",
                "from ioparallax.mixin.queries import load_dashboards, expressions\n"
                "from ioparallax import paths\n"
                "print(paths.SOURCE_TREE, len(load_dashboards()), len(expressions(load_dashboards())),"
                " (paths.ALERTS_DIR / 'ioparallax.rules.yml').is_file(), paths.ALERTS_DIR.resolve().is_relative_to(paths.PACKAGE))",
            ],
        )
    for prog, done in versions.items():
        out = done.result().stdout
        assert out.startswith(f"{prog} 0.1.0 (revision {stamped}, python "), (prog, out)
    assert "zero-heavy" in listed.result().stdout
    assert (tmp_path / "alerts" / "ioparallax.rules.yml").read_text() == (
        REPO / "alerts" / "ioparallax.rules.yml"
    ).read_text(), rules.result().stderr
    found = found.result().stdout.split()
    n_dash = len(list((REPO / "dashboards").glob("*.json")))
    assert found[0] == "None" and found[1] == str(n_dash) and int(found[2]) > 50 and found[3:] == ["True", "True"], (
        found
    )
    wait_for_http(f"http://127.0.0.1:{prom_port}/-/ready", proc=prom)
    report = subprocess.run(
        [
            venv / "bin" / "ioparallax-report",
            "--prometheus",
            f"http://127.0.0.1:{prom_port}",
            "--start",
            "-1m",
            "-o",
            str(tmp_path / "report.html"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "No VM disk had data in any view in this range" in (tmp_path / "report.html").read_text()
    # An exporter serves its metrics.
    port = free_port()
    exporter = processes.start(
        "fio-exporter", [venv / "bin" / "fio-exporter", f"--web.listen-address=127.0.0.1:{port}"]
    )
    wait_for_http(f"http://127.0.0.1:{port}/metrics", proc=exporter)
    body = loopback_get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert "fio_exporter_build_info{" in body and 'version="0.1.0"' in body and f'revision="{stamped}"' in body
