"""Wrapper mode (``<tool>-exporter run -- <tool> ...``), shared by fio-exporter and pgbench-exporter.

The exporter starts the load generator itself, in a session of its own (stopped by its process
group: SIGTERM, then SIGKILL after a grace time), writes its output to a file that its watcher
follows like any watched file, serves ``/metrics`` while it runs and for ``--run.linger`` after it
exits, and exits with the tool's exit code. What differs per tool stays in the tool's
``wrapper.py``: how its command line is completed (fio's ``--output-format=json+``, pgbench's
``-P``), where its output goes, and the names of the two run families.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ioparallax.exporters.common.web.app import ExporterApp, StartupError
from ioparallax.exporters.common.web.startup import WebSettings, add_web_args, start_server
from ioparallax.units import parse_duration
from ioparallax.version import version_line
from ioparallax.yamlconf import ConfigError


class WrappedRun:
    """One wrapped process; stopped by PID. ``output_path`` is the file the exporter follows.

    ``stdout_to_file``: the tool's stdout is written to ``output_path`` (else discarded: the tool
    writes the file itself). ``merge_stderr``: its stderr goes to the same file, in the order it
    writes them; else each stderr line is logged as a warning."""

    def __init__(
        self,
        tool: str,
        argv: list[str],
        output_path: str,
        log: logging.Logger,
        stdout_to_file: bool = True,
        merge_stderr: bool = False,
    ):
        self.tool = tool
        self.argv = argv
        self.output_path = output_path
        self.log = log
        self._out: IO[bytes] | None = open(output_path, "wb") if stdout_to_file else None
        self.popen = subprocess.Popen(
            argv,
            stdout=self._out if self._out is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.info("started %s pid=%d output=%s: %s", tool, self.popen.pid, output_path, " ".join(argv))
        self._stderr: threading.Thread | None = None
        if not merge_stderr:
            self._stderr = threading.Thread(target=self._log_stderr, name=f"{tool}-stderr", daemon=True)
            self._stderr.start()

    def _log_stderr(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line:
                self.log.warning("%s pid=%d stderr: %s", self.tool, self.popen.pid, line)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        code = self.popen.wait(timeout)
        if self._stderr is not None:
            self._stderr.join(5)
        if self._out is not None:
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


@dataclass(frozen=True)
class RunFamilies:
    """The names and HELP texts of a wrapper's two families (running, exit code)."""

    running: str
    running_help: str
    exit_code: str
    exit_code_help: str


class RunCollector(Collector):
    """Whether the wrapped process still runs, and how it exited."""

    def __init__(self, run: WrappedRun, families: RunFamilies):
        self.run = run
        self.families = families

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        f = self.families
        running = GaugeMetricFamily(f.running, f.running_help)
        running.add_metric([], 1.0 if self.run.running else 0.0)
        yield running
        code = self.run.exit_code
        if code is not None:
            g = GaugeMetricFamily(f.exit_code, f.exit_code_help)
            g.add_metric([], float(code))
            yield g


@dataclass(frozen=True)
class RunTexts:
    """The ``run`` command's texts: ``tool`` (the command's first word), ``help``, ``description``,
    ``usage``, and the help of ``--run.output`` and ``--run.linger``."""

    tool: str
    help: str
    description: str
    usage: str
    output_help: str
    linger_help: str


def add_run_parser(sub: Any, spec: Any, texts: RunTexts) -> None:
    """The ``run`` command: the web flags, ``--run.output``, ``--run.linger``, the tool's command
    (after ``--``, as ``args.<tool>_command``) and the exporter's own flags (``spec``, a
    :class:`~ioparallax.exporters.common.watchconfig.WatchSpec`)."""
    run = sub.add_parser("run", help=texts.help, description=texts.description, usage=texts.usage)
    add_web_args(run, spec.default_listen, probe=False)
    run.add_argument("--run.output", dest="run_output", metavar="FILE", help=texts.output_help)
    run.add_argument("--run.linger", dest="linger", default="60s", metavar="DURATION", help=texts.linger_help)
    run.add_argument(f"{texts.tool}_command", nargs=argparse.REMAINDER, help=f"-- {texts.tool} [options]")
    spec.add_args(run)


def output_file(run_output: str | None, program: str, suffix: str) -> str:
    """The absolute path of the file the wrapped tool's output goes to: ``--run.output``, or a new
    file in the temp directory (``<program>-run-*<suffix>``)."""
    if not run_output:
        fd, run_output = tempfile.mkstemp(prefix=f"{program}-run-", suffix=suffix)
        os.close(fd)
    return os.path.abspath(run_output)


def command_of(args: argparse.Namespace, tool: str) -> tuple[list[str], float]:
    """The wrapped command (without the leading ``--``) and ``--run.linger`` in seconds."""
    try:
        linger = parse_duration(args.linger)
    except ValueError as exc:
        raise ConfigError(None, "--run.linger", str(exc)) from exc
    command = list(getattr(args, f"{tool}_command"))
    if command and command[0] == "--":
        command = command[1:]
    return command, linger


def serve_while_running(app: ExporterApp, web: WebSettings, run: WrappedRun, linger_s: float) -> int:
    """Serve ``app`` while ``run`` runs and ``linger_s`` after it exits (or until SIGTERM or ^C,
    which stop it); the process's exit code (1 if it was killed by a signal or never ended)."""
    try:
        server = start_server(app, web)
    except StartupError:
        run.stop()  # the tool must not run on with nobody serving its records
        raise
    run.log.info("listening on %s; %s", server.describe(), version_line(app.name))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    code = None
    try:
        while not stop.is_set():
            if not run.running:
                code = run.wait()
                run.log.info("%s pid=%d exited with %d; serving for %gs more", run.tool, run.popen.pid, code, linger_s)
                stop.wait(linger_s)
                break
            stop.wait(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if run.running:
            run.log.info("stopping %s pid=%d", run.tool, run.popen.pid)
            run.stop()
        server.stop()
    if code is None:
        code = run.exit_code if run.exit_code is not None else 1
    return 0 if code == 0 else (code if code > 0 else 1)
