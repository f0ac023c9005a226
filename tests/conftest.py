import time
from collections.abc import Iterator

import pytest

from ioparallax.simulators.process import Process, start
from tests.support import Canary

# The e2e stacks (fixtures, their pool and the test order) as a plugin, so that the pool can start
# with the session and its stacks age while the unit tests run.
pytest_plugins = ["tests.e2e.stacks"]


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
    }
    out["_seconds"] = f"{time.monotonic() - t0:.1f}"
    return out


@pytest.fixture(scope="session")
def exposed_names(expositions) -> dict[str, set[str]]:
    from tests.expositions import _names

    return {k: _names(v) for k, v in expositions.items() if not k.startswith("_")}
