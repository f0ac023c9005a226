"""pgbench-exporter: pgbench's throughput, failures and latency for Prometheus (the application view).

Subcommands: ``serve`` (default) watches files and directories and follows pgbench output as it
grows; ``run -- pgbench ...`` runs pgbench itself and serves its progress while it runs;
``convert FILE...`` prints the exposition of files once.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import threading

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.web.app import ExporterApp, StartupError
from ioparallax.exporters.common.web.startup import add_web_args, serve, start_server
from ioparallax.exporters.pgbench.collector import PgbenchCollector
from ioparallax.exporters.pgbench.config import DEFAULT_LISTEN, SPEC, Settings
from ioparallax.exporters.pgbench.reader import WatchConfig, Watcher
from ioparallax.exporters.pgbench.wrapper import PgbenchRun, PgbenchRunCollector, prepare_command
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.units import parse_duration
from ioparallax.version import version_line
from ioparallax.yamlconf import ConfigError

log = logging.getLogger("ioparallax.exporters.pgbench")

DESCRIPTION = (
    "Exports pgbench runs as the application view of a PoC: transactions, failures, latency and "
    "schedule lag per run, from pgbench's console output (-P progress lines followed live, the end "
    "summary; PostgreSQL 9.x to 17+), its --aggregate-interval logs and per-transaction --log files; "
    "plus benchmark hygiene findings. Target data is on /metrics."
)

#: The subcommands, ``serve`` first (the default).
COMMANDS = ("serve", "run", "convert")


def build_parser() -> argparse.ArgumentParser:
    parser, sub = SPEC.parser(
        DESCRIPTION,
        COMMANDS,
        DEFAULT_LISTEN,
        serve_help="watch pgbench output files and serve /metrics (the default)",
        serve_description="Watch files or directories of pgbench output (finished and still being written) "
        "and serve them on /metrics, read incrementally at each scrape.",
    )
    run = sub.add_parser(
        "run",
        help="run pgbench and serve its progress while it runs",
        description="Run a pgbench command (after '--'), adding -P 5 unless it has a progress interval, "
        "write its stdout and stderr to one file, and serve its progress on /metrics while it runs "
        "and for --run.linger after it exits; exits with pgbench's exit code. Extra --pgbench.watch "
        "paths are served too.",
        usage="pgbench-exporter run [options] -- pgbench [pgbench options] [dbname]",
    )
    add_web_args(run, DEFAULT_LISTEN, probe=False)
    run.add_argument(
        "--run.output",
        dest="run_output",
        metavar="FILE",
        help="file to write pgbench's output to (default: a new file in the temp directory)",
    )
    run.add_argument(
        "--run.linger",
        dest="linger",
        default="60s",
        metavar="DURATION",
        help="keep serving this long after pgbench exits, so the summary is scraped (default: %(default)s)",
    )
    run.add_argument("pgbench_command", nargs=argparse.REMAINDER, help="-- pgbench [options]")
    SPEC.add_args(run)
    SPEC.add_convert(
        sub,
        help="print the exposition of pgbench files once",
        description="Read pgbench files (console output, aggregate or per-transaction logs) to their end and "
        "print their Prometheus exposition on stdout, for ad-hoc use. Exits 1 if a file could not be "
        "read, holds no pgbench data, or ends in a cut-off line.",
        dest="files",
        metavar="FILE",
    )
    return parser


def _watcher(s: Settings, paths: list[str], convert: bool = False) -> Watcher:
    return Watcher(
        WatchConfig(
            paths=paths,
            pattern="*" if convert else s.pattern,  # convert reads the files it is given, whatever their names
            retention_s=float("inf") if convert else s.retention_s,
            idle_s=s.idle_s,
            complete=convert,
        )
    )


def _app(s: Settings, watcher: Watcher, extra: list | None = None) -> ExporterApp:
    return ExporterApp(
        name="pgbench-exporter",
        description=DESCRIPTION,
        probe=None,
        collectors=[PgbenchCollector(watcher, s.hygiene()), *(extra or [])],
        config_text=SPEC.describe(s),
    )


def cmd_serve(s: Settings) -> int:
    if not s.watch:
        log.warning("no --pgbench.watch path given: nothing to export but pgbench_up")
    watcher = _watcher(s, s.watch)
    log.info("watching %s", s.watch or "nothing")
    return serve(_app(s, watcher), s.web())


def cmd_run(s: Settings, command: list[str], run_output: str | None, linger_s: float) -> int:
    if command and command[0] == "--":
        command = command[1:]
    argv = prepare_command(command)
    if run_output:
        output = run_output
    else:
        fd, output = tempfile.mkstemp(prefix="pgbench-exporter-run-", suffix=".out")
        os.close(fd)
    output = os.path.abspath(output)
    watcher = _watcher(s, [output, *s.watch])
    run = PgbenchRun(argv, output)
    watcher.process_running[output] = lambda: run.running
    try:
        server = start_server(_app(s, watcher, [PgbenchRunCollector(run)]), s.web())
    except StartupError:
        run.stop()  # pgbench must not run on with nobody serving its progress
        raise
    log.info("listening on %s; %s", server.describe(), version_line("pgbench-exporter"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    code = None
    try:
        while not stop.is_set():
            if not run.running:
                code = run.wait()
                log.info("pgbench pid=%d exited with %d; serving for %gs more", run.popen.pid, code, linger_s)
                stop.wait(linger_s)
                break
            stop.wait(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if run.running:
            log.info("stopping pgbench pid=%d", run.popen.pid)
            run.stop()
        server.stop()
    if code is None:
        code = run.exit_code if run.exit_code is not None else 1
    return 0 if code == 0 else (code if code > 0 else 1)


def cmd_convert(s: Settings, files: list[str]) -> int:
    """Print the exposition of whole files; exit 1, naming each file and the cause on stderr, if a
    file is missing, unreadable, holds no pgbench data, or ends in a cut-off line."""
    watcher = _watcher(s, files, convert=True)
    while True:  # a poll reads at most 64 MiB per file
        watcher.poll()
        if all(fs.reason is not None or fs.tailer.offset >= fs.tailer.size for fs in watcher.files.values()):
            break
    watcher.finish()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PgbenchCollector(watcher, s.hygiene(), poll=False))
    sys.stdout.write(generate_latest(registry).decode())
    bad = list(watcher.missing_paths)
    for fs in watcher.files.values():
        if fs.reason is not None:
            bad.append(f"{fs.path}: {fs.reason.replace('_', ' ')}: {fs.detail}")
        elif fs.data_lines == 0:
            bad.append(f"{fs.path}: no pgbench data (no progress, summary or log line)")
    for line in bad:
        print(f"pgbench-exporter convert: {line}", file=sys.stderr)
    return 1 if bad else 0


def _run(args: argparse.Namespace) -> int:
    s = SPEC.read(args, Settings())
    if args.command == "convert":
        return cmd_convert(s, args.files)
    if args.command == "run":
        try:
            linger = parse_duration(args.linger)
        except ValueError as exc:
            raise ConfigError(None, "--run.linger", str(exc)) from exc
        return cmd_run(s, args.pgbench_command, args.run_output, linger)
    return cmd_serve(s)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return SPEC.main(argv, build_parser, COMMANDS, _run)


if __name__ == "__main__":
    sys.exit(main())
