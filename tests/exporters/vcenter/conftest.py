"""Fixtures for the vCenter area: the scenario simulator and stock vcsim started as real
processes on free loopback ports, and the exporter served in-process on a free port."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests
from pyVim.connect import Disconnect, SmartConnect

from ioparallax.exporters.vcenter.cli import make_app
from ioparallax.exporters.vcenter.config import load_config
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from tests.support import BUILD, Exporter, ManagedProcess, free_port, require_built

SIM = BUILD / "vcsim-scenario"
STOCK = BUILD / "vcsim"
USER, PASSWORD = "monitor", "s3cret-Pa55"


def _need(binary: Path) -> None:
    require_built(binary)


def wait_for_line(proc: ManagedProcess, pattern: str, timeout: float = 60.0) -> re.Match:
    return proc.wait_for_output(pattern, timeout)


def compiled_trace(name: str, tmp_path_factory):
    """A library scenario compiled, as the JSON file the simulator reads and the Trace object."""
    trace = compile_scenario(load_scenario(name))
    path = tmp_path_factory.mktemp("trace") / f"{name}.json"
    path.write_text(trace.to_json())
    return path, trace


@pytest.fixture(scope="session")
def bursty_trace(tmp_path_factory):
    return compiled_trace("bursty-1m", tmp_path_factory)


@pytest.fixture(scope="session")
def postgres_trace(tmp_path_factory):
    return compiled_trace("postgres", tmp_path_factory)


class SimControl:
    """The scenario simulator's control interface (``-control-listen``, see control.go): what a test
    makes happen at the moment it chooses instead of waiting for a timer. Each call returns once
    the simulator is in the new state."""

    def __init__(self, url: str):
        self.url = url

    def _post(self, path: str, **params) -> str:
        r = requests.post(self.url + path, params=params, timeout=30)
        r.raise_for_status()
        return r.text

    def expire_sessions(self) -> int:
        """End every session in use, as vCenter's idle timeout does; how many were ended."""
        return int(self._post("/sessions/expire").split()[1])

    def hold_query_perf(self) -> None:
        """QueryPerf calls from now on wait until release_query_perf (a vCenter that does not answer)."""
        self._post("/queryperf/hold")

    def release_query_perf(self) -> None:
        self._post("/queryperf/release")

    def query_perf_held(self) -> int:
        """How many QueryPerf calls are waiting now."""
        r = requests.get(self.url + "/queryperf/held", timeout=30)
        r.raise_for_status()
        return int(r.text)

    def advance_clock(self, seconds: float) -> None:
        """Move the simulator's clock forward (new 20 s samples appear)."""
        self._post("/clock/advance", seconds=seconds)


@pytest.fixture
def scenario_sim(processes):
    """start(trace_path, *flags, control=False) -> (address 'host:port', process); with
    ``control=True`` the process's ``control`` attribute is its :class:`SimControl`."""
    _need(SIM)

    def start(trace_path, *flags, user=USER, password=PASSWORD, port=None, control=False):
        port = port or free_port()
        argv = [
            SIM,
            "-trace",
            trace_path,
            "-listen",
            f"127.0.0.1:{port}",
            "-username",
            user,
            "-password",
            password,
            *(["-control-listen", "127.0.0.1:0"] if control else []),
            *flags,
        ]
        proc = processes.start(f"vcsim-scenario-{port}", argv)
        m = wait_for_line(proc, r"listening https://(127\.0\.0\.1:\d+)/sdk")
        if control:
            proc.control = SimControl(wait_for_line(proc, r"control (http://127\.0\.0\.1:\d+)").group(1))
        return m.group(1), proc

    return start


@pytest.fixture
def connect():
    """connect(address) -> a pyVmomi session to a simulator (certificate not checked), logged out
    after the test."""
    sessions = []

    def open_(address: str):
        host, port = address.split(":")
        si = SmartConnect(host=host, port=int(port), user=USER, pwd=PASSWORD, disableSslCertValidation=True)
        sessions.append(si)
        return si

    yield open_
    for si in sessions:
        Disconnect(si)


@pytest.fixture
def stock_vcsim(processes):
    """Stock vcsim v0.46.3 with a small inventory (one cluster host, one pool, 2 VMs)."""
    _need(STOCK)

    def start(*flags):
        port = free_port()
        argv = [
            STOCK,
            "-l",
            f"127.0.0.1:{port}",
            "-username",
            USER,
            "-password",
            PASSWORD,
            "-dc",
            "1",
            "-cluster",
            "1",
            "-host",
            "1",
            "-standalone-host",
            "0",
            "-vm",
            "2",
            "-pg",
            "0",
            *flags,
        ]
        proc = processes.start(f"vcsim-stock-{port}", argv)
        wait_for_line(proc, r"export GOVC_URL=")
        return f"127.0.0.1:{port}", proc

    return start


@pytest.fixture
def exporter(tmp_path, monkeypatch):
    """start(yaml_text) -> Exporter serving on a free loopback port, stopped after the test."""
    started: list[Exporter] = []

    def start(yaml_text: str, env: dict[str, str] | None = None) -> Exporter:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        path = tmp_path / f"vcenter-{len(started)}.yml"
        path.write_text(yaml_text)
        exp = Exporter.serve(*make_app(load_config(str(path))))
        started.append(exp)
        return exp

    yield start
    for exp in started:
        exp.stop()


def insecure_config(
    user: str = USER, password_env: str = "VC_TEST_PASSWORD", allow_unlisted: bool = True, **extra
) -> str:
    """Defaults for the simulators (self-signed certificates). The simulators' ports are only
    known once they run, so these tests opt in to unlisted targets; the allow-list itself is
    tested in test_vcenter_security.py."""
    lines = ["defaults:", f"  username: {user}", f"  password_env: {password_env}", "  insecure_skip_verify: true"]
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    lines.append(f"allow_unlisted_targets: {'true' if allow_unlisted else 'false'}")
    return "\n".join(lines) + "\n"
