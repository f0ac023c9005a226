import pytest

from tests.support import ManagedProcess


@pytest.fixture
def processes(tmp_path):
    """Start processes with ``processes.start(name, argv)``; all are stopped by PID after the test."""

    class Processes:
        def __init__(self):
            self.started: list[ManagedProcess] = []

        def start(self, name, argv, **kw) -> ManagedProcess:
            p = ManagedProcess(name, [str(a) for a in argv], tmp_path, **kw)
            self.started.append(p)
            return p

    procs = Processes()
    yield procs
    for p in reversed(procs.started):
        p.stop()
