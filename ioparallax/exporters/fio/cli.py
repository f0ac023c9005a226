from __future__ import annotations

import argparse
import logging
import os
import sys

from ioparallax.exporters.common.watch.cli import Texts, WatchProgram
from ioparallax.exporters.common.watch.wrapper import RunTexts, output_file, serve_while_running
from ioparallax.exporters.fio.collector import FioCollector
from ioparallax.exporters.fio.config import SPEC, Settings, settings_from
from ioparallax.exporters.fio.guestdisk import GuestDiskCollector
from ioparallax.exporters.fio.reader import WatchConfig, Watcher
from ioparallax.exporters.fio.wrapper import FioRun, FioRunCollector, prepare_command
from ioparallax.pipes import quiet_on_closed_stdout

log = logging.getLogger("ioparallax.exporters.fio")

PROGRAM = WatchProgram(
    SPEC,
    description="Exports fio results and live --status-interval records (json/json+, client/server, "
    "unified_rw_reporting) with per-job latency histograms and benchmark hygiene "
    "findings, plus the guest's disk facts (partition alignment, block sizes, request "
    "size limit, disk identity) from sysfs. Target data is on /metrics.",
    serve_texts=Texts(
        "watch fio output files and serve /metrics (the default)",
        "Watch files or directories of fio JSON output (finished results "
        "and status streams still being written) and serve them on "
        "/metrics, read incrementally at each scrape.",
    ),
    run_texts=RunTexts(
        "fio",
        help="run fio and serve its status records while it runs",
        description="Run a fio command (after '--'), adding --output-format=json+ and "
        "--status-interval=1 unless given, and serve its records on /metrics "
        "while it runs and for --run.linger after it exits; exits with fio's "
        "exit code. Extra --fio.watch paths are served too.",
        usage="fio-exporter run [options] -- fio [fio options] [jobfile]",
        output_help="file to write fio's stdout to, when the command has no --output "
        "(default: a new file in the temp directory)",
        linger_help="keep serving this long after fio exits, so the final record is scraped (default: %(default)s)",
    ),
    convert_texts=Texts(
        "print the exposition of fio output files once",
        "Read fio output files (any form) and print their Prometheus "
        "exposition on stdout, for ad-hoc use. Exits 1 if a file could not "
        "be read.",
    ),
)
build_parser = PROGRAM.build_parser


def build_collectors(s: Settings, watcher: Watcher) -> list:
    collectors: list = [FioCollector(watcher, s.hygiene(), local_host=s.host, collectors=s.collectors)]
    if s.guest_disks:
        collectors.append(GuestDiskCollector(s.sysfs, s.guest_disk_exclude))
    return collectors


def _watcher(s: Settings, paths: list[str]) -> Watcher:
    return Watcher(
        WatchConfig(
            paths=paths,
            pattern=s.pattern,
            retention_s=s.retention_s,
            idle_s=s.idle_s,
            max_document_bytes=s.max_document_bytes,
        )
    )


def cmd_serve(s: Settings, args: argparse.Namespace) -> int:
    _log_switched_off(s)
    unwatched = "no --fio.watch path given: only guest disk facts will be served"
    return PROGRAM.serve(s, build_collectors(s, _watcher(s, s.watch)), unwatched)


def cmd_run(s: Settings, fio_command: list[str], run_output: str | None, linger_s: float) -> int:
    argv, output = prepare_command(fio_command)
    stdout_to_file = output is None
    output = output_file(run_output, PROGRAM.name, ".json") if output is None else os.path.abspath(output)
    watcher = _watcher(s, [output, *s.watch])
    _log_switched_off(s)
    run = FioRun(argv, output, stdout_to_file)
    watcher.process_running[output] = lambda: run.running
    app = PROGRAM.app(s, [*build_collectors(s, watcher), FioRunCollector(run)])
    return serve_while_running(app, s.web(), run, linger_s)


def cmd_convert(s: Settings, files: list[str]) -> int:
    """Print the exposition of whole files (any size: read to the end in bounded chunks); exit 1,
    naming each file and the cause on stderr, if a file is missing, unreadable, garbage, or ends
    in a cut-off document (truncated). The guest's disk facts are not shown: they are this
    machine's, not the files'."""
    watcher = Watcher(
        WatchConfig(
            paths=files,
            pattern="*",
            retention_s=float("inf"),
            idle_s=s.idle_s,
            max_document_bytes=s.max_document_bytes,
            skip_backlog=False,
        )
    )
    while True:  # a poll reads at most MAX_READ_BYTES per file
        watcher.poll()
        if all(st.reason is not None or st.tailer.offset >= st.tailer.size for st in watcher.sources.values()):
            break
    watcher.finish()
    s.guest_disks = False
    for c in build_collectors(s, watcher):
        if isinstance(c, FioCollector):
            c.poll = False
            PROGRAM.exposition(c)
    bad = [
        f"{st.path}: {st.reason.replace('_', ' ')}: {st.detail}"
        for st in watcher.sources.values()
        if st.reason is not None
    ] + watcher.missing_paths
    return PROGRAM.report("convert", bad)


def _log_switched_off(s: Settings) -> None:
    if s.switched_off():
        log.info("collectors switched off: %s", ", ".join(s.switched_off()))


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return PROGRAM.main(argv, settings_from, cmd_serve, cmd_convert, run=cmd_run)


if __name__ == "__main__":
    sys.exit(main())
