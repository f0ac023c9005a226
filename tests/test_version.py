"""--version on every console script and <exporter>_build_info on each exporter's /metrics, from
the real installed programs; the revision lookup against real git repositories."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from ioparallax import version as v
from tests.support import REPO, free_port, venv_tool, wait_for_http

SCRIPTS = sorted(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env, timeout=30
    ).stdout.strip()


def _expected_revision() -> str:
    """What the running checkout's revision is, asked of git here (the programs ask on their own)."""
    if not (REPO / ".git").exists():
        return "unknown"
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    installed = metadata.version("ioparallax")
    assert installed == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    return {"version": installed, "revision": _expected_revision(), "pythonversion": platform.python_version()}


def test_every_console_script_is_covered():
    assert len(SCRIPTS) >= 9 and {"stargate-exporter", "vcenter-exporter", "fio-exporter"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_version_flag_prints_version_revision_and_python(script, expected):
    out = subprocess.run([venv_tool(script), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        f"{script} {expected['version']} (revision {expected['revision']}, python {expected['pythonversion']})\n"
    )
    assert out.stderr == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--version"],
        ["run", "--version"],
        ["convert", "--version"],
        ["--web.listen-address", "127.0.0.1:0", "--version"],
    ],
)
def test_fio_exporter_version_after_a_subcommand_or_serve_flags(argv, expected):
    out = subprocess.run([venv_tool("fio-exporter"), *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"fio-exporter {expected['version']} (revision {expected['revision']},")


# ---- the revision lookup ----


def test_revision_of_a_git_checkout_is_its_head(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("x")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert len(head) == 40 and v.revision.__wrapped__(tmp_path) == head


def test_revision_is_unknown_outside_a_checkout_and_inside_someone_elses(tmp_path):
    assert v.revision.__wrapped__(tmp_path) == "unknown"
    # An installed package in a venv that sits inside another checkout: not that checkout's commit.
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("x")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-q", "-m", "one")
    site = tmp_path / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert v.revision.__wrapped__(site) == "unknown"


def test_revision_outside_a_checkout_is_the_stamped_commit_if_it_is_one(tmp_path):
    stamp = tmp_path / "REVISION"
    assert v.revision.__wrapped__(tmp_path, stamp) == "unknown"  # no stamp
    sha = "0123456789abcdef0123456789abcdef01234567"
    stamp.write_text(sha + "\n")
    assert v.revision.__wrapped__(tmp_path, stamp) == sha
    for junk in ("unknown", "", "not-a-commit", sha[:12], sha + "0"):
        stamp.write_text(junk)
        assert v.revision.__wrapped__(tmp_path, stamp) == "unknown", junk


def test_revision_is_unknown_without_commits_without_git_or_when_git_hangs(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")  # a checkout with no commit: HEAD does not resolve
    assert v.revision.__wrapped__(tmp_path) == "unknown"
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert v.revision.__wrapped__(tmp_path) == "unknown"
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nexec sleep 30\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:/usr/bin:/bin")
    monkeypatch.setattr(v, "GIT_TIMEOUT", 0.3)
    assert v.revision.__wrapped__(tmp_path) == "unknown"


def test_build_info_name_follows_the_exporter_name():
    assert v.build_info_name("stargate-exporter") == "stargate_exporter_build_info"
    assert v.build_info_name("fio-exporter") == "fio_exporter_build_info"


# ---- <exporter>_build_info on the real exporters ----


def _build_info(text: str, name: str) -> list:
    return [s for f in text_string_to_metric_families(text) if f.name == name for s in f.samples]


EXPORTERS = {
    # exporter: (arguments besides the listen address, environment, a target that fails fast)
    "stargate-exporter": (["--stargate.target=127.0.0.1"], {}, "127.0.0.1:1"),
    "vcenter-exporter": (
        ["--vcenter.target=127.0.0.1:1"],
        {"VCENTER_USERNAME": "monitoring", "VCENTER_PASSWORD": "unused", "VCENTER_TARGETS": ""},
        "127.0.0.1:1",
    ),
    "prism-exporter": (
        ["--prism.target=127.0.0.1:1"],
        {"PRISM_USERNAME": "monitoring", "PRISM_PASSWORD": "unused", "PRISM_TARGETS": ""},
        "127.0.0.1:1",
    ),
    "fio-exporter": (["serve", "--no-collector.guest-disk"], {}, None),
}


@pytest.mark.parametrize("exporter", sorted(EXPORTERS))
def test_build_info_on_metrics_only(exporter, expected, processes):
    args, env, failing_target = EXPORTERS[exporter]
    port = free_port()
    argv = [venv_tool(exporter), *args[:1], f"--web.listen-address=127.0.0.1:{port}", *args[1:]]
    proc = processes.start(exporter, argv, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_for_http(f"{url}/-/healthy", proc=proc)
    name = exporter.replace("-", "_") + "_build_info"

    for accept in ("text/plain", "application/openmetrics-text; version=1.0.0"):
        r = requests.get(f"{url}/metrics", headers={"Accept": accept}, timeout=10)
        assert r.status_code == 200
        assert f"# TYPE {name} gauge" in r.text, accept
    found = _build_info(requests.get(f"{url}/metrics", timeout=10).text, name)
    assert len(found) == 1 and found[0].value == 1
    assert found[0].labels == expected
    # The start-up line says which build is listening.
    line = f"{exporter} {expected['version']} (revision {expected['revision']}, python {expected['pythonversion']})"
    proc.wait_for_output(rf"listening on 127\.0\.0\.1:{port}\b.*; {re.escape(line)}", timeout=10)

    if failing_target is not None:
        # A probe is the target's data: no build_info there (as blackbox_exporter).
        r = requests.get(
            f"{url}/probe",
            params={"target": failing_target},
            headers={"X-Prometheus-Scrape-Timeout-Seconds": "5"},
            timeout=30,
        )
        assert r.status_code == 200 and exporter.split("-")[0] + "_up 0" in r.text
        assert "build_info" not in r.text
