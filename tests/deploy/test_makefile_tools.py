"""Every external command the code, the tests and the benches run is installed by the Makefile.

A fresh machine has only what `make deps` installs; a machine a developer set up by hand may have
more, and there a forgotten package goes unseen until CI on a new machine fails (chromium and
pdftoppm did exactly that). So: every command looked up or run by name in ioparallax/, tests/ and
bench/ must be in the Makefile's DEB_COMMANDS (which `make deps-system` checks before it installs),
and every one of DEB_COMMANDS must come from a package in DEB_PACKAGES, as dpkg says.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support import REPO

# Commands every machine this project runs on has: the toolchains the Makefile itself runs with
# (python3, go and its gofmt, git), and what Debian's Essential/required packages bring.
BASE = {
    "python3",
    "python",
    "go",
    "gofmt",
    "git",
    "sh",
    "bash",
    "env",
    "sleep",
    "head",
    "tar",
    "dpkg",
    "dpkg-query",
    "getent",
    "kill",
    "make",
    "true",
}

LOOKUPS = [
    re.compile(r"""\bwhich\(\s*["']([A-Za-z0-9_.+-]+)["']"""),
    re.compile(r"""\brequire_tool\(\s*["']([A-Za-z0-9_.+-]+)["']"""),
    # subprocess argv written as a list literal: ["promtool", "check", ...]
    re.compile(r"""\bsubprocess\.(?:run|Popen|check_output|check_call|call)\(\s*\[\s*["']([A-Za-z0-9_.+-]+)["']"""),
]


def _makefile_list(name: str) -> list[str]:
    text = (REPO / "Makefile").read_text()
    m = re.search(rf"^{name}\s*:=\s*(.*)$", text, re.M)
    assert m, f"Makefile: no {name} :="
    return m.group(1).split()


def _commands_used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for top in ("ioparallax", "tests", "bench"):
        for path in (REPO / top).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for pattern in LOOKUPS:
                for m in pattern.finditer(text):
                    used.setdefault(m.group(1), set()).add(str(path.relative_to(REPO)))
    return used


def test_the_scan_finds_the_commands_we_know_are_used():
    """The scan is not vacuous: it sees the tools the report, the rules tests and fio tests run."""
    used = _commands_used()
    assert {"chromium", "pdftoppm", "promtool", "fio", "prometheus"} <= set(used), sorted(used)


def test_every_command_the_code_and_tests_run_is_installed_by_the_makefile():
    commands = set(_makefile_list("DEB_COMMANDS"))
    missing = {cmd: sorted(where) for cmd, where in _commands_used().items() if cmd not in commands | BASE}
    assert not missing, f"run by name but not in the Makefile's DEB_COMMANDS (a fresh machine lacks them): {missing}"


@pytest.mark.parametrize("command", _makefile_list("DEB_COMMANDS"))
def test_each_makefile_command_comes_from_a_package_the_makefile_installs(command):
    packages = set(_makefile_list("DEB_PACKAGES"))
    found = subprocess.run(["dpkg", "-S", f"bin/{command}"], capture_output=True, text=True)
    owners = {
        owner.strip()
        for line in found.stdout.splitlines()
        if re.search(rf"/s?bin/{re.escape(command)}$", line)
        for owner in line.split(":", 1)[0].split(",")
    }
    assert owners, f"{command}: no Debian package installs a bin/{command} (dpkg -S): run `make deps`"
    assert owners & packages, f"{command} comes from {sorted(owners)}, none of which is in the Makefile's DEB_PACKAGES"
