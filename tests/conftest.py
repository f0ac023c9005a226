import logging
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import settings

from ioparallax.simulators.process import Process, start
from tests.support import Canary

# Property tests in the gate (make test, CI) are deterministic: the same examples on every run
# (derandomize), no example database carried between runs, and no per-example deadline (a loaded
# machine makes any wall-clock deadline fail at random). A failure is then a failure of the code,
# reproducible by running the test again. New examples are searched for with
# `make test-explore` (IOPARALLAX_HYPOTHESIS=explore: random, many more examples); what it finds
# is pinned with @example in the test.
settings.register_profile("gate", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("IOPARALLAX_HYPOTHESIS", "gate"))

# The e2e stacks (fixtures, their pool and the test order) as a plugin, so that the pool can start
# with the session and its stacks age while the unit tests run.
pytest_plugins = ["tests.e2e.stacks"]


@pytest.fixture(autouse=True)
def _restore_logging():
    """A command run in-process sets up logging as a program does (root handlers, level): every
    test gets the root logger back as it found it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def processes(tmp_path):
    """Start processes with ``processes.start(name, argv, env=..., cwd=...)``, output in
    ``<tmp_path>/<name>.log``; all are stopped by PID after the test (ioparallax/simulators/process.py)."""

    class Processes:
        def __init__(self):
            self.started: list[Process] = []

        def start(self, name, argv, **kw) -> Process:
            p = start(name, argv, tmp_path / f"{name}.log", **kw)
            self.started.append(p)
            return p

    procs = Processes()
    yield procs
    for p in reversed(procs.started):
        p.stop()


@pytest.fixture
def canary() -> Iterator[Canary]:
    """A loopback TCP server recording every connection (tests/support.py's Canary), closed after the test."""
    c = Canary()
    yield c
    c.close()


@pytest.fixture(scope="session")
def expositions(tmp_path_factory) -> dict[str, str]:
    """Real expositions of the exporters and the guest's node_exporter (see tests/expositions.py)."""
    from tests import expositions as ex

    tmp = tmp_path_factory.mktemp("expositions")
    t0 = time.monotonic()
    out = {
        "stargate": ex._stargate_exposition(),
        "stargate_unknown_fields": ex._stargate_unknown_fields_exposition(),
        "vcenter": ex._vcenter_exposition(tmp),
        "prism": ex._prism_exposition(tmp) + ex._prism_unknown_fields_exposition(),
        "fio": ex._fio_exposition(tmp) + ex._fio_guest_exposition(tmp),
        "node": ex._node_exposition(tmp),
        "windows": ex._windows_exposition(tmp),
        "diskspd": ex._diskspd_exposition(tmp),
        "vdbench": ex._vdbench_exposition(tmp),
        "pgbench": ex._pgbench_exposition(tmp),
        "app": ex._app_exposition(tmp),
        "esxtop": ex._esxtop_exposition(tmp),
    }
    out["_seconds"] = f"{time.monotonic() - t0:.1f}"
    return out


@pytest.fixture(scope="session")
def exposed_names(expositions) -> dict[str, set[str]]:
    from tests.expositions import _names

    return {k: _names(v) for k, v in expositions.items() if not k.startswith("_")}
