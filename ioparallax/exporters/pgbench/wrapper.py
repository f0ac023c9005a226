"""Wrapper mode: run pgbench, follow its output while it runs.

pgbench prints its progress lines on stderr and its summary on stdout; both are written, in the
order pgbench writes them, to one file that the exporter follows like any watched file. ``-P 5``
is added unless the command asks for a progress interval (without one pgbench prints nothing
until it ends and the live view stays empty).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

DEFAULT_PROGRESS_S = "5"


def has_progress(argv: list[str]) -> bool:
    """Whether a pgbench command line sets a progress interval (-P N, -PN, --progress[=N])."""
    return any(
        a == "-P" or (a.startswith("-P") and a[2:].isdigit()) or a.startswith("--progress=") or a == "--progress"
        for a in argv[1:]
    )


def prepare_command(argv: list[str], progress_s: str = DEFAULT_PROGRESS_S) -> list[str]:
    """The pgbench command with ``-P`` added when it has none."""
    args = list(argv)
    if not args:
        raise ValueError("no pgbench command given (expected: run -- pgbench [options] [dbname])")
    if not has_progress(args):
        args = [args[0], "-P", progress_s, *args[1:]]
    return args


class PgbenchRun:
    """One pgbench process, its stdout and stderr written to ``output_path``; stopped by PID."""

    def __init__(self, argv: list[str], output_path: str):
        self.argv = argv
        self.output_path = output_path
        self._out = open(output_path, "wb")
        self.popen = subprocess.Popen(
            argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.info("started pgbench pid=%d output=%s: %s", self.popen.pid, output_path, " ".join(argv))

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        code = self.popen.wait(timeout)
        self._out.close()
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


class PgbenchRunCollector(Collector):
    """Whether the wrapped pgbench still runs, and how it exited."""

    def __init__(self, run: PgbenchRun):
        self.run = run

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        running = GaugeMetricFamily(
            "pgbench_command_running", "1 while the pgbench started by 'pgbench-exporter run' runs."
        )
        running.add_metric([], 1.0 if self.run.running else 0.0)
        yield running
        code = self.run.exit_code
        if code is not None:
            g = GaugeMetricFamily(
                "pgbench_command_exit_code",
                "Exit code of the pgbench started by 'pgbench-exporter run' (2: some clients aborted; "
                "negative: killed by that signal).",
            )
            g.add_metric([], float(code))
            yield g
