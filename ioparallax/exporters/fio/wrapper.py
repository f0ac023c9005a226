"""Wrapper mode: run fio, follow its status records while it runs.

fio is started with ``--output-format=json+`` and ``--status-interval=1`` added unless the command
already chooses them. Its JSON goes to the ``--output`` file the command names or, if none, its
stdout is written to a file the exporter then tails like any watched file (so ``note:`` lines on
stdout are skipped exactly as in a watched file). fio's stderr is logged, one line per event.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


def prepare_command(argv: list[str], status_interval: str = "1") -> tuple[list[str], str | None]:
    """Add json+ and a status interval if the fio command lacks them; return (argv, --output path)."""
    args = list(argv)
    if not args:
        raise ValueError("no fio command given (expected: run -- fio [options] jobfile)")
    has_format = any(a.startswith("--output-format") for a in args)
    has_interval = any(a.startswith("--status-interval") for a in args)
    output = None
    for i, a in enumerate(args):
        if a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a == "--output" and i + 1 < len(args):
            output = args[i + 1]
    extra = []
    if not has_format:
        extra.append("--output-format=json+")
    if not has_interval:
        extra.append(f"--status-interval={status_interval}")
    return [args[0], *extra, *args[1:]], output


class FioRun:
    """One fio process; stopped by PID. ``output_path`` is the file holding its JSON."""

    def __init__(self, argv: list[str], output_path: str, stdout_to_file: bool):
        self.argv = argv
        self.output_path = output_path
        self._stdout = open(output_path, "wb") if stdout_to_file else subprocess.DEVNULL
        self.popen = subprocess.Popen(
            argv, stdout=self._stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.info("started fio pid=%d output=%s: %s", self.popen.pid, output_path, " ".join(argv))
        self._stderr = threading.Thread(target=self._log_stderr, name="fio-stderr", daemon=True)
        self._stderr.start()

    def _log_stderr(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line:
                log.warning("fio pid=%d stderr: %s", self.popen.pid, line)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        code = self.popen.wait(timeout)
        self._stderr.join(5)
        if not isinstance(self._stdout, int):  # an open file, not subprocess.DEVNULL
            self._stdout.close()
        return code

    def stop(self, timeout: float = 10.0) -> None:
        if self.running:
            try:
                os.killpg(self.popen.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, 9)
        self.wait(timeout)


class FioRunCollector(Collector):
    """Whether the wrapped fio still runs, and how it exited."""

    def __init__(self, run: FioRun):
        self.run = run

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        running = GaugeMetricFamily("fio_run_running", "1 while the fio started by 'fio-exporter run' runs.")
        running.add_metric([], 1.0 if self.run.running else 0.0)
        yield running
        code = self.run.exit_code
        if code is not None:
            g = GaugeMetricFamily(
                "fio_run_exit_code",
                "Exit code of the fio started by 'fio-exporter run' (negative: killed by that signal).",
            )
            g.add_metric([], float(code))
            yield g
