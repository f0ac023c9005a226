"""Stack's readiness wait (ioparallax/simulators/stack/core.py) against a stand-in server: a 503 from /-/ready
(Prometheus opening its TSDB) is not ready. Starts no real component (no ``e2e`` marker)."""

from __future__ import annotations

import subprocess

import pytest

from ioparallax.simulators.process import Process
from ioparallax.simulators.stack import Stack
from tests.support import NotReadyYet


@pytest.fixture
def sleeper(tmp_path):
    popen = subprocess.Popen(["sleep", "60"])
    yield lambda url: Process("prometheus", ["sleep", "60"], popen, tmp_path / "p.log", url)
    popen.kill()
    popen.wait()


def test_a_503_is_waited_out(sleeper, tmp_path):
    server = NotReadyYet(busy=3)
    try:
        Stack(workdir=tmp_path).wait_http(sleeper(server.url), "/-/ready", timeout=10)
        assert server.requests == 4  # three 503s, then the 200 it waited for
    finally:
        server.close()


def test_never_ready_names_the_component_and_the_last_answer(sleeper, tmp_path):
    server = NotReadyYet(busy=10**6)
    try:
        with pytest.raises(
            TimeoutError,
            match=r"prometheus was not ready on http://127\.0\.0\.1:\d+/-/ready "
            r"within 1 s \(HTTP 503\)",
        ):
            Stack(workdir=tmp_path).wait_http(sleeper(server.url), "/-/ready", timeout=1)
    finally:
        server.close()
