"""fio-exporter: fio's results and live status records, and the guest's disk facts, for Prometheus.

Subcommands: ``serve`` (default) watches files/directories; ``run -- fio ...`` runs fio itself
and serves its status records while it runs; ``convert FILE...`` prints the exposition once.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.config import ConfigError, Section, load_yaml, parse_bytes, parse_duration
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.web.app import ExporterApp, StartupError
from ioparallax.exporters.common.web.server import ServerLimits, parse_listen_address
from ioparallax.exporters.common.web.startup import WebSettings, add_web_args, serve, server_limits, start_server
from ioparallax.exporters.fio.collector import Collectors, FioCollector
from ioparallax.exporters.fio.guestdisk import DEFAULT_EXCLUDE, GuestDiskCollector
from ioparallax.exporters.fio.hygiene import HygieneConfig
from ioparallax.exporters.fio.reader import DEFAULT_MAX_DOCUMENT_BYTES
from ioparallax.exporters.fio.tailer import WatchConfig, Watcher
from ioparallax.exporters.fio.wrapper import FioRun, FioRunCollector, prepare_command
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.version import add_version_arg, version_line

log = logging.getLogger("ioparallax.exporters.fio")

DEFAULT_LISTEN = ":9763"
DESCRIPTION = (
    "Exports fio results and live --status-interval records (json/json+, client/server, "
    "unified_rw_reporting) with per-job latency histograms and benchmark hygiene "
    "findings, plus the guest's disk facts (partition alignment, block sizes, request "
    "size limit, disk identity) from sysfs. Target data is on /metrics."
)


@dataclass
class Settings:
    listen: str = DEFAULT_LISTEN
    web_config_file: str | None = None
    watch: list[str] = field(default_factory=list)
    pattern: str = "*.json"
    retention_s: float = 900.0
    idle_s: float = 10.0
    cache_size: int | None = None
    scrape_interval_s: float = 15.0
    host: str = ""
    sysfs: str = "/sys"
    guest_disks: bool = True
    guest_disk_exclude: str = DEFAULT_EXCLUDE
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    collectors: Collectors = field(default_factory=Collectors)
    web_limits: ServerLimits = field(default_factory=ServerLimits)

    def describe(self) -> str:
        return "\n".join(
            [
                f"listen_address: {self.listen}",
                f"watch: {self.watch}",
                f"pattern: {self.pattern}",
                f"retention: {self.retention_s:g}s",
                f"idle_timeout: {self.idle_s:g}s",
                f"cache_size: {self.cache_size if self.cache_size is not None else 'unset (check off)'}",
                f"scrape_interval: {self.scrape_interval_s:g}s",
                f"host: {self.host}",
                f"sysfs: {self.sysfs}",
                f"guest_disks: {self.guest_disks}",
                f"percentiles: {self.collectors.percentiles}",
                f"histograms: {self.collectors.histograms}",
                f"trim: {self.collectors.trim}",
            ]
        )

    def switched_off(self) -> list[str]:
        """Names of the per-job collectors switched off, for the start-up log."""
        c = self.collectors
        return [
            n for n, on in (("percentiles", c.percentiles), ("histograms", c.histograms), ("trim", c.trim)) if not on
        ]


def _common_args(p: argparse.ArgumentParser, watch: bool = True) -> None:
    g = p.add_argument_group("fio output")
    if watch:
        g.add_argument(
            "--fio.watch",
            dest="watch",
            action="append",
            metavar="PATH",
            help="a fio output file, or a directory whose files matching --fio.pattern are "
            "fio output; repeatable. Files still being written are followed.",
        )
        g.add_argument(
            "--fio.pattern",
            dest="pattern",
            metavar="GLOB",
            help="file name pattern inside watched directories (default: *.json)",
        )
    g.add_argument(
        "--fio.retention",
        dest="retention",
        metavar="DURATION",
        help="how long jobs of a finished run stay visible after it ended (default: 15m)",
    )
    g.add_argument(
        "--fio.idle-timeout",
        dest="idle_timeout",
        metavar="DURATION",
        help="a file that has not grown for this long (and for 3 status intervals) is a finished run (default: 10s)",
    )
    g.add_argument(
        "--fio.cache-size",
        dest="cache_size",
        metavar="SIZE",
        help="storage cache size for the working-set hygiene check, e.g. 20GiB (default: unset, check off)",
    )
    g.add_argument(
        "--fio.scrape-interval",
        dest="scrape_interval",
        metavar="DURATION",
        help="Prometheus' scrape interval: runs shorter than 3 of these are flagged (default: 15s)",
    )
    g.add_argument(
        "--fio.max-document-size",
        dest="max_document_size",
        metavar="SIZE",
        help="largest fio JSON document read; a larger one is skipped unread and its file "
        "shown down (reason too_large), which bounds the exporter's memory "
        f"(default: {DEFAULT_MAX_DOCUMENT_BYTES // 2**20}MiB; a json+ result takes about "
        "16KB per job)",
    )
    g.add_argument(
        "--fio.host",
        dest="host",
        metavar="NAME",
        help="'host' label of local (non client/server) jobs (default: this host's name)",
    )
    c = p.add_argument_group("guest disk facts")
    c.add_argument(
        "--collector.sysfs",
        dest="sysfs",
        metavar="PATH",
        help="sysfs mount point to read disk facts from (default: /sys)",
    )
    c.add_argument(
        "--collector.guest-disk",
        dest="guest_disks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="export guest disk and partition facts (default: on)",
    )
    c.add_argument(
        "--collector.guest-disk.exclude",
        dest="guest_disk_exclude",
        metavar="REGEX",
        help=f"disks to leave out (default: {DEFAULT_EXCLUDE})",
    )
    j = p.add_argument_group("collectors (series per job: docs/fio.md, Series budget)")
    j.add_argument(
        "--collector.percentiles",
        dest="percentiles",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fio's own clat percentiles, 17 series per timed direction; off empties "
        "the fio dashboard's percentile lines (default: on)",
    )
    j.add_argument(
        "--collector.histograms",
        dest="histograms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 19 finite clat buckets per timed direction (+Inf, _count and _sum "
        "stay, so mean latency does); off empties the fio dashboard's latency "
        "heatmaps and the report's guest latency distribution (default: on)",
    )
    j.add_argument(
        "--collector.trim",
        dest="trim",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the trim direction of jobs that trim (jobs that never trim have none either way) (default: on)",
    )
    p.add_argument(
        "--config.file",
        dest="config_file",
        metavar="FILE",
        help="YAML file with the same settings (keys: listen_address, watch, pattern, "
        "retention, idle_timeout, cache_size, scrape_interval, host, sysfs, guest_disks, "
        "guest_disk_exclude, max_document_size, percentiles, histograms, trim); flags given "
        "on the command line win",
    )
    add_logging_args(p)
    add_version_arg(p, "fio-exporter")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fio-exporter", description=DESCRIPTION)
    add_version_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="{serve,run,convert}")
    serve = sub.add_parser(
        "serve",
        help="watch fio output files and serve /metrics (the default)",
        description="Watch files or directories of fio JSON output (finished results "
        "and status streams still being written) and serve them on "
        "/metrics, read incrementally at each scrape.",
    )
    add_web_args(serve, DEFAULT_LISTEN, probe=False)
    _common_args(serve)
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
    _common_args(run)
    conv = sub.add_parser(
        "convert",
        help="print the exposition of fio output files once",
        description="Read fio output files (any form) and print their Prometheus "
        "exposition on stdout, for ad-hoc use. Exits 1 if a file could not "
        "be read.",
    )
    conv.add_argument("files", nargs="+", metavar="FILE")
    _common_args(conv, watch=False)
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """Flags over the YAML file over defaults; errors name the file and key (or the flag)."""
    s = Settings()
    cfg_path = getattr(args, "config_file", None)
    if cfg_path:
        sec = Section(load_yaml(cfg_path), cfg_path)
        s.listen = sec.get("listen_address", str, default=s.listen)
        watch = sec.get("watch", (list, str), default=[])
        s.watch = [watch] if isinstance(watch, str) else [str(w) for w in watch]
        s.pattern = sec.get("pattern", str, default=s.pattern)
        s.retention_s = sec.get("retention", parse_duration, default=s.retention_s)
        s.idle_s = sec.get("idle_timeout", parse_duration, default=s.idle_s)
        s.cache_size = sec.get("cache_size", parse_bytes, default=None)
        s.scrape_interval_s = sec.get("scrape_interval", parse_duration, default=s.scrape_interval_s)
        s.host = sec.get("host", str, default="")
        s.sysfs = sec.get("sysfs", str, default=s.sysfs)
        s.guest_disks = sec.get("guest_disks", bool, default=True)
        s.guest_disk_exclude = sec.get("guest_disk_exclude", str, default=s.guest_disk_exclude)
        s.max_document_bytes = sec.get("max_document_size", parse_bytes, default=s.max_document_bytes)
        s.collectors = Collectors(
            percentiles=sec.get("percentiles", bool, default=True),
            histograms=sec.get("histograms", bool, default=True),
            trim=sec.get("trim", bool, default=True),
        )
        sec.reject_unknown()

    def flag(name: str, conv, dest: str) -> None:
        value = getattr(args, dest, None)
        if value is None:
            return
        try:
            setattr(s, name, conv(value))
        except ValueError as exc:
            raise ConfigError(None, f"--{dest}", str(exc)) from exc

    flag("listen", str, "listen")
    flag("web_config_file", str, "web_config_file")
    s.web_limits = server_limits(args)
    if getattr(args, "watch", None):
        s.watch = list(args.watch)
    flag("pattern", str, "pattern")
    flag("retention_s", parse_duration, "retention")
    flag("idle_s", parse_duration, "idle_timeout")
    flag("cache_size", parse_bytes, "cache_size")
    flag("scrape_interval_s", parse_duration, "scrape_interval")
    flag("host", str, "host")
    flag("sysfs", str, "sysfs")
    flag("guest_disks", bool, "guest_disks")
    flag("guest_disk_exclude", str, "guest_disk_exclude")
    flag("max_document_bytes", parse_bytes, "max_document_size")
    given = {k: getattr(args, k) for k in ("percentiles", "histograms", "trim") if getattr(args, k, None) is not None}
    if given:
        s.collectors = dataclasses.replace(s.collectors, **given)
    if s.max_document_bytes < 1024:
        from_flag = getattr(args, "max_document_size", None) is not None
        raise ConfigError(
            None if from_flag else cfg_path,
            "--fio.max-document-size" if from_flag else "max_document_size",
            "must be at least 1KiB (fio's smallest documents are a few KB)",
        )
    if s.scrape_interval_s <= 0:
        raise ConfigError(cfg_path, "scrape_interval", "must be positive")
    try:
        parse_listen_address(s.listen)
    except ValueError as exc:
        raise ConfigError(cfg_path, "listen_address", str(exc)) from exc
    s.host = s.host or socket.gethostname()
    return s


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
        config_text=s.describe(),
    )


def _web(s: Settings) -> WebSettings:
    return WebSettings(listen=s.listen, config_file=s.web_config_file, limits=s.web_limits)


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
    return serve(_app(s, watcher), _web(s))


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
        server = start_server(_app(s, watcher, [FioRunCollector(run)]), _web(s))
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


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in ("serve", "run", "convert", "-h", "--help", "--version")):
        argv.insert(0, "serve")
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
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
    except ConfigError as exc:
        log.error("configuration error: %s", exc)
        return 2
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        return exc.exit_code
    except BrokenPipeError:
        raise  # stdout closed by its reader (| head): quiet_on_closed_stdout ends quietly
    except (OSError, ValueError) as exc:
        log.error("cannot start: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
