"""diskspd-exporter: DiskSPD ``-Rxml`` results for Prometheus, read on a Linux collector host.

Subcommands: ``serve`` (default) watches files/directories of result documents copied off the
Windows VMs; ``convert FILE...`` prints the exposition once; ``backfill FILE...`` writes the runs'
per-interval ``-D`` series with their own timestamps (OpenMetrics for ``promtool tsdb
create-blocks-from openmetrics``, or Prometheus text for VictoriaMetrics' import).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.config import ConfigError, Section, load_yaml, parse_bytes, parse_duration
from ioparallax.exporters.common.logsetup import add_logging_args, escape_text, setup_logging
from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.server import ServerLimits, parse_listen_address
from ioparallax.exporters.common.web.startup import WebSettings, add_web_args, serve, server_limits
from ioparallax.exporters.diskspd.backfill import Sample, interval_samples, render
from ioparallax.exporters.diskspd.collector import Collectors, DiskspdCollector
from ioparallax.exporters.diskspd.files import ResultFiles, WatchConfig
from ioparallax.exporters.diskspd.hygiene import HygieneConfig
from ioparallax.exporters.diskspd.reader import DEFAULT_MAX_DOCUMENT_BYTES, DiskspdError
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.version import add_version_arg

log = logging.getLogger("ioparallax.exporters.diskspd")

DEFAULT_LISTEN = ":9765"
DESCRIPTION = (
    "Exports DiskSPD -Rxml results (copied off the Windows VMs into watched directories): per "
    "run, time span and target the I/Os, bytes, latency means and percentiles, outstanding I/Os "
    "asked, the profile as run, and benchmark hygiene findings. Target data is on /metrics."
)


@dataclass
class Settings:
    listen: str = DEFAULT_LISTEN
    web_config_file: str | None = None
    watch: list[str] = field(default_factory=list)
    pattern: str = "*.xml"
    retention_s: float = 3600.0
    settle_s: float = 5.0
    cache_size: int | None = None
    scrape_interval_s: float = 15.0
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    all_percentiles: bool = False
    web_limits: ServerLimits = field(default_factory=ServerLimits)

    def describe(self) -> str:
        return "\n".join(
            [
                f"listen_address: {self.listen}",
                f"watch: {self.watch}",
                f"pattern: {self.pattern}",
                f"retention: {self.retention_s:g}s",
                f"settle_time: {self.settle_s:g}s",
                f"cache_size: {self.cache_size if self.cache_size is not None else 'unset (check off)'}",
                f"scrape_interval: {self.scrape_interval_s:g}s",
                f"max_file_size: {self.max_document_bytes}",
                f"percentiles: {'all' if self.all_percentiles else 'text'}",
            ]
        )


def _percentiles(value: str) -> bool:
    if value not in ("text", "all"):
        raise ValueError(f"expected text or all, got {value!r}")
    return value == "all"


def _common_args(p: argparse.ArgumentParser, watch: bool = True) -> None:
    g = p.add_argument_group("DiskSPD results")
    if watch:
        g.add_argument(
            "--diskspd.watch",
            dest="watch",
            action="append",
            metavar="PATH",
            help="a DiskSPD -Rxml result file, or a directory whose files matching --diskspd.pattern are; repeatable",
        )
        g.add_argument(
            "--diskspd.pattern",
            dest="pattern",
            metavar="GLOB",
            help="file name pattern inside watched directories (default: *.xml)",
        )
        g.add_argument(
            "--diskspd.retention",
            dest="retention",
            metavar="DURATION",
            help="how long a run stays visible after it ended or its file arrived, whichever is later; "
            "0 keeps it while the file exists (default: 1h)",
        )
        g.add_argument(
            "--diskspd.settle-time",
            dest="settle_time",
            metavar="DURATION",
            help="a file that ends early and was modified within this time is a copy under way, "
            "not an error (default: 5s)",
        )
    g.add_argument(
        "--diskspd.cache-size",
        dest="cache_size",
        metavar="SIZE",
        help="storage cache size for the working-set hygiene check, e.g. 20GiB (default: unset, check off)",
    )
    g.add_argument(
        "--diskspd.scrape-interval",
        dest="scrape_interval",
        metavar="DURATION",
        help="Prometheus' scrape interval: runs shorter than 3 of these are flagged (default: 15s)",
    )
    g.add_argument(
        "--diskspd.max-file-size",
        dest="max_file_size",
        metavar="SIZE",
        help="largest result file read; a larger one is refused unread and shown down (too_large) "
        f"(default: {DEFAULT_MAX_DOCUMENT_BYTES // 2**20}MiB; -D stores ~400 bytes per interval, "
        "thread and target)",
    )
    g.add_argument(
        "--diskspd.percentiles",
        dest="percentiles",
        metavar="text|all",
        help="latency percentiles exported: the 15 DiskSPD's text report shows (min, 25 ... 99, "
        "3 to 9 nines, max) or all 108 of the XML (default: text)",
    )
    p.add_argument(
        "--config.file",
        dest="config_file",
        metavar="FILE",
        help="YAML file with the same settings (keys: listen_address, watch, pattern, retention, "
        "settle_time, cache_size, scrape_interval, max_file_size, percentiles); flags given on the "
        "command line win",
    )
    add_logging_args(p)
    add_version_arg(p, "diskspd-exporter")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diskspd-exporter", description=DESCRIPTION)
    add_version_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="{serve,convert,backfill}")
    s = sub.add_parser(
        "serve",
        help="watch DiskSPD result files and serve /metrics (the default)",
        description="Watch files or directories of DiskSPD -Rxml results and serve them on "
        "/metrics; a new or changed file is parsed once, at the next scrape.",
    )
    add_web_args(s, DEFAULT_LISTEN, probe=False)
    _common_args(s)
    c = sub.add_parser(
        "convert",
        help="print the exposition of result files once",
        description="Read DiskSPD -Rxml result files and print their Prometheus exposition on "
        "stdout. Exits 1, naming each bad file and the cause on stderr, if one cannot be read.",
    )
    c.add_argument("files", nargs="+", metavar="FILE")
    _common_args(c, watch=False)
    b = sub.add_parser(
        "backfill",
        help="write the runs' -D interval series with their own timestamps",
        description="Write the per-interval IOPS (and latency, with -L) of DiskSPD -Rxml results "
        "with the run's own timestamps: OpenMetrics for `promtool tsdb create-blocks-from "
        "openmetrics`, or Prometheus text (millisecond timestamps) for VictoriaMetrics' "
        "/api/v1/import/prometheus. Exits 1 naming each file that cannot be used.",
    )
    b.add_argument("files", nargs="+", metavar="FILE")
    b.add_argument(
        "--format",
        choices=("openmetrics", "prometheus"),
        default="openmetrics",
        help="openmetrics (promtool) or prometheus (VictoriaMetrics import) (default: %(default)s)",
    )
    b.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    b.add_argument(
        "--tsdb",
        metavar="DIR",
        help="also run `promtool tsdb create-blocks-from openmetrics` into DIR (Prometheus' data "
        "directory, or a directory to copy from); needs --output and --format openmetrics",
    )
    _common_args(b, watch=False)
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
        s.settle_s = sec.get("settle_time", parse_duration, default=s.settle_s)
        s.cache_size = sec.get("cache_size", parse_bytes, default=None)
        s.scrape_interval_s = sec.get("scrape_interval", parse_duration, default=s.scrape_interval_s)
        s.max_document_bytes = sec.get("max_file_size", parse_bytes, default=s.max_document_bytes)
        s.all_percentiles = sec.get("percentiles", _percentiles, default=False)
        sec.reject_unknown()

    def flag(name: str, conv, dest: str, shown: str) -> None:
        value = getattr(args, dest, None)
        if value is None:
            return
        try:
            setattr(s, name, conv(value))
        except ValueError as exc:
            raise ConfigError(None, shown, str(exc)) from exc

    flag("listen", str, "listen", "--web.listen-address")
    flag("web_config_file", str, "web_config_file", "--web.config.file")
    s.web_limits = server_limits(args)
    if getattr(args, "watch", None):
        s.watch = list(args.watch)
    flag("pattern", str, "pattern", "--diskspd.pattern")
    flag("retention_s", parse_duration, "retention", "--diskspd.retention")
    flag("settle_s", parse_duration, "settle_time", "--diskspd.settle-time")
    flag("cache_size", parse_bytes, "cache_size", "--diskspd.cache-size")
    flag("scrape_interval_s", parse_duration, "scrape_interval", "--diskspd.scrape-interval")
    flag("max_document_bytes", parse_bytes, "max_file_size", "--diskspd.max-file-size")
    flag("all_percentiles", _percentiles, "percentiles", "--diskspd.percentiles")
    if s.max_document_bytes < 1024:
        raise ConfigError(cfg_path, "max_file_size", "must be at least 1KiB (DiskSPD's smallest results are a few KB)")
    if s.scrape_interval_s <= 0:
        raise ConfigError(cfg_path, "scrape_interval", "must be positive")
    try:
        parse_listen_address(s.listen)
    except ValueError as exc:
        raise ConfigError(cfg_path, "listen_address", str(exc)) from exc
    return s


def _files(s: Settings, paths: list[str], pattern: str | None = None, settle_s: float | None = None) -> ResultFiles:
    return ResultFiles(
        WatchConfig(
            paths=paths,
            pattern=pattern or s.pattern,
            max_document_bytes=s.max_document_bytes,
            settle_s=s.settle_s if settle_s is None else settle_s,
            retention_s=s.retention_s,
        )
    )


def _collector(s: Settings, files: ResultFiles, poll: bool = True) -> DiskspdCollector:
    return DiskspdCollector(
        files,
        HygieneConfig(cache_size_bytes=s.cache_size, scrape_interval_s=s.scrape_interval_s),
        Collectors(all_percentiles=s.all_percentiles),
        poll=poll,
    )


def cmd_serve(s: Settings) -> int:
    if not s.watch:
        log.warning("no --diskspd.watch path given: nothing to serve but diskspd_up")
    files = _files(s, s.watch)
    log.info("watching %s", s.watch or "nothing")
    app = ExporterApp(
        name="diskspd-exporter",
        description=DESCRIPTION,
        probe=None,
        collectors=[_collector(s, files)],
        config_text=s.describe(),
    )
    return serve(app, WebSettings(listen=s.listen, config_file=s.web_config_file, limits=s.web_limits))


def _read_all(s: Settings, paths: list[str]) -> tuple[ResultFiles, list[str]]:
    """Every named file read once (no settling: a cut-off file is truncated); the bad ones as
    ``<file>: <reason>: <cause>`` lines."""
    s.retention_s = 0.0
    files = _files(s, paths, pattern="*", settle_s=0.0)
    files.poll()
    bad = [
        f"{v.name}: {v.reason.replace('_', ' ')}: {v.detail}" for v in files.views() if v.reason is not None
    ] + files.missing_paths
    return files, bad


def cmd_convert(s: Settings, paths: list[str]) -> int:
    files, bad = _read_all(s, paths)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_collector(s, files, poll=False))
    sys.stdout.write(generate_latest(registry).decode())
    for line in bad:
        print(f"diskspd-exporter convert: {escape_text(line)}", file=sys.stderr)  # a name can hold a newline
    return 1 if bad else 0


def cmd_backfill(s: Settings, paths: list[str], fmt: str, output: str | None, tsdb: str | None) -> int:
    if tsdb and (not output or fmt != "openmetrics"):
        raise ConfigError(None, "--tsdb", "needs --output FILE and --format openmetrics (promtool reads a file)")
    files, bad = _read_all(s, paths)
    samples: list[Sample] = []
    for v in files.views():
        if v.result is None:
            continue
        try:
            samples.extend(interval_samples(v.result, v.name))
        except DiskspdError as exc:
            bad.append(f"{v.name}: {exc}")
    text = render(samples, fmt)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    for line in bad:
        print(f"diskspd-exporter backfill: {escape_text(line)}", file=sys.stderr)
    if tsdb and samples:
        assert output is not None
        proc = subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", output, tsdb], capture_output=True, text=True
        )
        if proc.returncode != 0:
            print(f"diskspd-exporter backfill: promtool failed: {proc.stderr.strip()}", file=sys.stderr)
            return 1
        log.info("backfilled %d samples into %s", len(samples), tsdb)
    return 1 if bad else 0


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in ("serve", "convert", "backfill", "-h", "--help", "--version")):
        argv.insert(0, "serve")
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        s = settings_from(args)
        if args.command == "convert":
            return cmd_convert(s, args.files)
        if args.command == "backfill":
            return cmd_backfill(s, args.files, args.format, args.output, args.tsdb)
        return cmd_serve(s)
    except ConfigError as exc:
        log.error("configuration error: %s", exc)
        return 2
    except FileNotFoundError as exc:
        log.error("cannot run %s: %s", exc.filename, exc.strerror)
        return 1
    except BrokenPipeError:
        raise  # stdout closed by its reader (| head): quiet_on_closed_stdout ends quietly
    except OSError as exc:
        log.error("cannot start: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
