"""pgbench-exporter: pgbench's throughput, failures and latency for Prometheus (the application view).

Commands (on :mod:`ioparallax.exporters.common.watch`): ``serve`` (default) follows pgbench
output as it grows; ``run -- pgbench ...`` runs pgbench itself and serves its progress while it
runs; ``convert FILE...`` prints the exposition of files once.
"""

from __future__ import annotations

import argparse
import sys

from ioparallax.exporters.common.watch.cli import Texts, WatchProgram
from ioparallax.exporters.common.watch.wrapper import RunTexts, output_file, serve_while_running
from ioparallax.exporters.pgbench.collector import PgbenchCollector
from ioparallax.exporters.pgbench.config import SPEC, Settings
from ioparallax.exporters.pgbench.reader import WatchConfig, Watcher
from ioparallax.exporters.pgbench.wrapper import PgbenchRun, PgbenchRunCollector, prepare_command
from ioparallax.pipes import quiet_on_closed_stdout

PROGRAM = WatchProgram(
    SPEC,
    description="Exports pgbench runs as the application view of a PoC: transactions, failures, latency and "
    "schedule lag per run, from pgbench's console output (-P progress lines followed live, the end "
    "summary; PostgreSQL 9.x to 17+), its --aggregate-interval logs and per-transaction --log files; "
    "plus benchmark hygiene findings. Target data is on /metrics.",
    serve_texts=Texts(
        "watch pgbench output files and serve /metrics (the default)",
        "Watch files or directories of pgbench output (finished and still being written) "
        "and serve them on /metrics, read incrementally at each scrape.",
    ),
    run_texts=RunTexts(
        "pgbench",
        help="run pgbench and serve its progress while it runs",
        description="Run a pgbench command (after '--'), adding -P 5 unless it has a progress interval, "
        "write its stdout and stderr to one file, and serve its progress on /metrics while it runs "
        "and for --run.linger after it exits; exits with pgbench's exit code. Extra --pgbench.watch "
        "paths are served too.",
        usage="pgbench-exporter run [options] -- pgbench [pgbench options] [dbname]",
        output_help="file to write pgbench's output to (default: a new file in the temp directory)",
        linger_help="keep serving this long after pgbench exits, so the summary is scraped (default: %(default)s)",
    ),
    convert_texts=Texts(
        "print the exposition of pgbench files once",
        "Read pgbench files (console output, aggregate or per-transaction logs) to their end and "
        "print their Prometheus exposition on stdout, for ad-hoc use. Exits 1 if a file could not be "
        "read, holds no pgbench data, or ends in a cut-off line.",
    ),
)
build_parser = PROGRAM.build_parser


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


def _collectors(s: Settings, watcher: Watcher) -> list:
    return [PgbenchCollector(watcher, s.hygiene())]


def cmd_run(s: Settings, command: list[str], run_output: str | None, linger_s: float) -> int:
    argv = prepare_command(command)
    output = output_file(run_output, PROGRAM.name, ".out")
    watcher = _watcher(s, [output, *s.watch])
    run = PgbenchRun(argv, output)
    watcher.process_running[output] = lambda: run.running
    app = PROGRAM.app(s, [*_collectors(s, watcher), PgbenchRunCollector(run)])
    return serve_while_running(app, s.web(), run, linger_s)


def cmd_convert(s: Settings, files: list[str]) -> int:
    """Print the exposition of whole files; exit 1, naming each file and the cause on stderr, if a
    file is missing, unreadable, holds no pgbench data, or ends in a cut-off line."""
    watcher = _watcher(s, files, convert=True)
    while True:  # a poll reads at most 64 MiB per file
        watcher.poll()
        if all(fs.reason is not None or fs.tailer.offset >= fs.tailer.size for fs in watcher.files.values()):
            break
    watcher.finish()
    PROGRAM.exposition(PgbenchCollector(watcher, s.hygiene(), poll=False))
    bad = list(watcher.missing_paths)
    for fs in watcher.files.values():
        if fs.reason is not None:
            bad.append(f"{fs.path}: {fs.reason.replace('_', ' ')}: {fs.detail}")
        elif fs.data_lines == 0:
            bad.append(f"{fs.path}: no pgbench data (no progress, summary or log line)")
    return PROGRAM.report("convert", bad)


def cmd_serve(s: Settings, args: argparse.Namespace) -> int:
    unwatched = "no --pgbench.watch path given: nothing to export but pgbench_up"
    return PROGRAM.serve(s, _collectors(s, _watcher(s, s.watch)), unwatched)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return PROGRAM.main(argv, Settings, cmd_serve, cmd_convert, run=cmd_run)


if __name__ == "__main__":
    sys.exit(main())
