"""fio-exporter: fio's results and live status records, and the guest's disk facts, for Prometheus.

Subcommands: ``serve`` (default) watches files/directories; ``run -- fio ...`` runs fio itself
and serves its status records while it runs; ``convert FILE...`` prints the exposition once.
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
from ioparallax.exporters.fio.collector import FioCollector
from ioparallax.exporters.fio.config import DEFAULT_LISTEN, SPEC, Settings, settings_from
from ioparallax.exporters.fio.guestdisk import GuestDiskCollector
from ioparallax.exporters.fio.hygiene import HygieneConfig
from ioparallax.exporters.fio.reader import WatchConfig, Watcher
from ioparallax.exporters.fio.wrapper import FioRun, FioRunCollector, prepare_command
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.units import parse_duration
from ioparallax.version import version_line
from ioparallax.yamlconf import ConfigError

log = logging.getLogger("ioparallax.exporters.fio")

DESCRIPTION = (
    "Exports fio results and live --status-interval records (json/json+, client/server, "
    "unified_rw_reporting) with per-job latency histograms and benchmark hygiene "
    "findings, plus the guest's disk facts (partition alignment, block sizes, request "
    "size limit, disk identity) from sysfs. Target data is on /metrics."
)

#: The subcommands, ``serve`` first (the default).
COMMANDS = ("serve", "run", "convert")


def build_parser() -> argparse.ArgumentParser:
    parser, sub = SPEC.parser(
        DESCRIPTION,
        COMMANDS,
        DEFAULT_LISTEN,
        serve_help="watch fio output files and serve /metrics (the default)",
        serve_description="Watch files or directories of fio JSON output (finished results "
        "and status streams still being written) and serve them on "
        "/metrics, read incrementally at each scrape.",
    )
    run = sub.add_parser(
        "run",
        help="run fio and serve its status records while it runs",
        description="Run a fio command (after '--'), adding --output-format=json+ and "
        "--status-interval=1 unless given, and serve its records on /metrics "
        "while it runs and for --run.linger after it exits; exits with fio's "
        "exit code. Extra --fio.watch paths are served too.",
        usage="fio-exporter run [options] -- fio [fio options] [jobfile]",
    )
    add_web_args(run, DEFAULT_LISTEN, probe=False)
    run.add_argument(
        "--run.output",
        dest="run_output",
        metavar="FILE",
        help="file to write fio's stdout to, when the command has no --output "
        "(default: a new file in the temp directory)",
    )
    run.add_argument(
        "--run.linger",
        dest="linger",
        default="60s",
        metavar="DURATION",
        help="keep serving this long after fio exits, so the final record is scraped (default: %(default)s)",
    )
    run.add_argument("fio_command", nargs=argparse.REMAINDER, help="-- fio [options]")
    SPEC.add_args(run)
    SPEC.add_convert(
        sub,
        help="print the exposition of fio output files once",
        description="Read fio output files (any form) and print their Prometheus "
        "exposition on stdout, for ad-hoc use. Exits 1 if a file could not "
        "be read.",
        dest="files",
        metavar="FILE",
    )
    return parser


def build_collectors(s: Settings, watcher: Watcher) -> list:
    collectors: list = [
        FioCollector(
            watcher,
            HygieneConfig(cache_size_bytes=s.cache_size, scrape_interval_s=s.scrape_interval_s),
            local_host=s.host,
            collectors=s.collectors,
        )
    ]
    if s.guest_disks:
        collectors.append(GuestDiskCollector(s.sysfs, s.guest_disk_exclude))
    return collectors


def _app(s: Settings, watcher: Watcher, extra: list | None = None) -> ExporterApp:
    return ExporterApp(
        name="fio-exporter",
        description=DESCRIPTION,
        probe=None,
        collectors=build_collectors(s, watcher) + (extra or []),
        config_text=SPEC.describe(s),
    )


def cmd_serve(s: Settings) -> int:
    if not s.watch:
        log.warning("no --fio.watch path given: only guest disk facts will be served")
    watcher = Watcher(
        WatchConfig(
            paths=s.watch,
            pattern=s.pattern,
            retention_s=s.retention_s,
            idle_s=s.idle_s,
            max_document_bytes=s.max_document_bytes,
        )
    )
    log.info("watching %s", s.watch or "nothing")
    if s.switched_off():
        log.info("collectors switched off: %s", ", ".join(s.switched_off()))
    return serve(_app(s, watcher), s.web())


def cmd_run(s: Settings, fio_command: list[str], run_output: str | None, linger_s: float) -> int:
    if fio_command and fio_command[0] == "--":
        fio_command = fio_command[1:]
    argv, output = prepare_command(fio_command)
    stdout_to_file = output is None
    if output is None:
        if run_output:
            output = run_output
        else:
            fd, output = tempfile.mkstemp(prefix="fio-exporter-run-", suffix=".json")
            os.close(fd)
    output = os.path.abspath(output)
    watcher = Watcher(
        WatchConfig(
            paths=[output, *s.watch],
            pattern=s.pattern,
            retention_s=s.retention_s,
            idle_s=s.idle_s,
            max_document_bytes=s.max_document_bytes,
        )
    )
    run = FioRun(argv, output, stdout_to_file)
    watcher.process_running[output] = lambda: run.running
    if s.switched_off():
        log.info("collectors switched off: %s", ", ".join(s.switched_off()))
    try:
        server = start_server(_app(s, watcher, [FioRunCollector(run)]), s.web())
    except StartupError:
        run.stop()  # fio must not run on with nobody serving its records
        raise
    log.info("listening on %s; %s", server.describe(), version_line("fio-exporter"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    code = None
    try:
        while not stop.is_set():
            if not run.running:
                code = run.wait()
                log.info("fio pid=%d exited with %d; serving for %gs more", run.popen.pid, code, linger_s)
                stop.wait(linger_s)
                break
            stop.wait(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if run.running:
            log.info("stopping fio pid=%d", run.popen.pid)
            run.stop()
        server.stop()
    if code is None:
        code = run.exit_code if run.exit_code is not None else 1
    return 0 if code == 0 else (code if code > 0 else 1)


def cmd_convert(s: Settings, files: list[str]) -> int:
    """Print the exposition of whole files (any size: read to the end in bounded chunks); exit 1,
    naming each file and the cause on stderr, if a file is missing, unreadable, garbage, or ends
    in a cut-off document (truncated)."""
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
    registry = CollectorRegistry(auto_describe=False)
    for c in build_collectors(s, watcher):
        if isinstance(c, FioCollector):
            c.poll = False
            registry.register(c)
    sys.stdout.write(generate_latest(registry).decode())
    bad = [
        f"{st.path}: {st.reason.replace('_', ' ')}: {st.detail}"
        for st in watcher.sources.values()
        if st.reason is not None
    ] + watcher.missing_paths
    for line in bad:
        print(f"fio-exporter convert: {line}", file=sys.stderr)
    return 1 if bad else 0


def _run(args: argparse.Namespace) -> int:
    s = settings_from(args)
    if args.command == "convert":
        s.guest_disks = False  # convert shows the files, not this machine
        return cmd_convert(s, args.files)
    if args.command == "run":
        try:
            linger = parse_duration(args.linger)
        except ValueError as exc:
            raise ConfigError(None, "--run.linger", str(exc)) from exc
        return cmd_run(s, args.fio_command, args.run_output, linger)
    return cmd_serve(s)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return SPEC.main(argv, build_parser, COMMANDS, _run)


if __name__ == "__main__":
    sys.exit(main())
