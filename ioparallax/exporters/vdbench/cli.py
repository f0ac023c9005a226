"""vdbench-exporter: vdbench output directories (flatfile, parmfile, host reports) for Prometheus.

Subcommands: ``serve`` (default) watches directories and follows flatfile.html as vdbench
appends to it; ``convert DIR...`` prints the exposition of finished output directories once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.config import ConfigError, Section, load_yaml, parse_bytes, parse_duration
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.web.app import ExporterApp, StartupError
from ioparallax.exporters.common.web.server import parse_listen_address
from ioparallax.exporters.common.web.startup import WebSettings, add_web_args, serve
from ioparallax.exporters.vdbench.collector import VdbenchCollector
from ioparallax.exporters.vdbench.hygiene import HygieneConfig
from ioparallax.exporters.vdbench.tailer import WatchConfig, Watcher
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.version import add_version_arg

log = logging.getLogger("ioparallax.exporters.vdbench")

DEFAULT_LISTEN = ":9766"
DESCRIPTION = (
    "Exports vdbench output directories (HCIBench/X-Ray workers, or copies on a collector host): "
    "flatfile.html followed live as vdbench appends to it, integrated into per-run counters; the "
    "runs' summary rows; per-host reports of multi-host runs; the parameter file as run; and "
    "benchmark hygiene findings. Target data is on /metrics."
)


@dataclass
class Settings:
    listen: str = DEFAULT_LISTEN
    web_config_file: str | None = None
    watch: list[str] = field(default_factory=list)
    retention_s: float = 900.0
    idle_s: float = 30.0
    cache_size: int | None = None
    scrape_interval_s: float = 15.0
    max_depth: int = 2

    def describe(self) -> str:
        return "\n".join(
            [
                f"listen_address: {self.listen}",
                f"watch: {self.watch}",
                f"retention: {self.retention_s:g}s",
                f"idle_timeout: {self.idle_s:g}s",
                f"cache_size: {self.cache_size if self.cache_size is not None else 'unset (check off)'}",
                f"scrape_interval: {self.scrape_interval_s:g}s",
                f"max_depth: {self.max_depth}",
            ]
        )


def _common_args(p: argparse.ArgumentParser, watch: bool = True) -> None:
    g = p.add_argument_group("vdbench output")
    if watch:
        g.add_argument(
            "--vdbench.watch",
            dest="watch",
            action="append",
            metavar="DIR",
            help="a vdbench output directory (holding flatfile.html or parmfile.html), or a directory "
            "whose subdirectories are (down to --vdbench.max-depth, e.g. HCIBench's results tree); "
            "repeatable",
        )
    g.add_argument(
        "--vdbench.max-depth",
        dest="max_depth",
        metavar="N",
        help="how deep under a watched directory output directories are looked for (default: 2)",
    )
    g.add_argument(
        "--vdbench.retention",
        dest="retention",
        metavar="DURATION",
        help="how long the runs of a finished directory stay visible after it last changed (default: 15m)",
    )
    g.add_argument(
        "--vdbench.idle-timeout",
        dest="idle_timeout",
        metavar="DURATION",
        help="a directory whose files have not grown for this long is a finished run (default: 30s)",
    )
    g.add_argument(
        "--vdbench.cache-size",
        dest="cache_size",
        metavar="SIZE",
        help="storage cache size for the working-set hygiene check, e.g. 20GiB (default: unset, check off)",
    )
    g.add_argument(
        "--vdbench.scrape-interval",
        dest="scrape_interval",
        metavar="DURATION",
        help="Prometheus' scrape interval: runs with elapsed= under 3 of these are flagged (default: 15s)",
    )
    p.add_argument(
        "--config.file",
        dest="config_file",
        metavar="FILE",
        help="YAML file with the same settings (keys: listen_address, watch, max_depth, retention, "
        "idle_timeout, cache_size, scrape_interval); flags given on the command line win",
    )
    add_logging_args(p)
    add_version_arg(p, "vdbench-exporter")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vdbench-exporter", description=DESCRIPTION)
    add_version_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="{serve,convert}")
    srv = sub.add_parser(
        "serve",
        help="watch vdbench output directories and serve /metrics (the default)",
        description="Watch vdbench output directories and serve them on /metrics, read incrementally at each scrape.",
    )
    add_web_args(srv, DEFAULT_LISTEN, probe=False)
    _common_args(srv)
    conv = sub.add_parser(
        "convert",
        help="print the exposition of vdbench output directories once",
        description="Read vdbench output directories to their end and print their Prometheus exposition "
        "on stdout. Exits 1 if a directory or file could not be read, holds no vdbench data, or "
        "ends in a cut-off line.",
    )
    conv.add_argument("dirs", nargs="+", metavar="DIR")
    _common_args(conv, watch=False)
    return parser


def _positive_int(value) -> int:
    n = int(value)
    if n < 0:
        raise ValueError(f"expected a number >= 0, got {n}")
    return n


def settings_from(args: argparse.Namespace) -> Settings:
    """Flags over the YAML file over defaults; errors name the file and key (or the flag)."""
    s = Settings()
    cfg_path = getattr(args, "config_file", None)
    if cfg_path:
        sec = Section(load_yaml(cfg_path), cfg_path)
        s.listen = sec.get("listen_address", str, default=s.listen)
        watch = sec.get("watch", (list, str), default=[])
        s.watch = [watch] if isinstance(watch, str) else [str(w) for w in watch]
        s.max_depth = sec.get("max_depth", _positive_int, default=s.max_depth)
        s.retention_s = sec.get("retention", parse_duration, default=s.retention_s)
        s.idle_s = sec.get("idle_timeout", parse_duration, default=s.idle_s)
        s.cache_size = sec.get("cache_size", parse_bytes, default=None)
        s.scrape_interval_s = sec.get("scrape_interval", parse_duration, default=s.scrape_interval_s)
        sec.reject_unknown()

    def flag(name: str, conv, dest: str, option: str) -> None:
        value = getattr(args, dest, None)
        if value is None:
            return
        try:
            setattr(s, name, conv(value))
        except ValueError as exc:
            raise ConfigError(None, option, str(exc)) from exc

    flag("listen", str, "listen", "--web.listen-address")
    flag("web_config_file", str, "web_config_file", "--web.config.file")
    if getattr(args, "watch", None):
        s.watch = list(args.watch)
    flag("max_depth", _positive_int, "max_depth", "--vdbench.max-depth")
    flag("retention_s", parse_duration, "retention", "--vdbench.retention")
    flag("idle_s", parse_duration, "idle_timeout", "--vdbench.idle-timeout")
    flag("cache_size", parse_bytes, "cache_size", "--vdbench.cache-size")
    flag("scrape_interval_s", parse_duration, "scrape_interval", "--vdbench.scrape-interval")
    if s.scrape_interval_s <= 0:
        raise ConfigError(cfg_path, "scrape_interval", "must be positive")
    try:
        parse_listen_address(s.listen)
    except ValueError as exc:
        raise ConfigError(cfg_path, "listen_address", str(exc)) from exc
    return s


def _collector(s: Settings, watcher: Watcher, poll: bool = True) -> VdbenchCollector:
    return VdbenchCollector(
        watcher, HygieneConfig(cache_size_bytes=s.cache_size, scrape_interval_s=s.scrape_interval_s), poll=poll
    )


def cmd_serve(s: Settings) -> int:
    if not s.watch:
        log.warning("no --vdbench.watch directory given: nothing to export but vdbench_up")
    watcher = Watcher(WatchConfig(paths=s.watch, retention_s=s.retention_s, idle_s=s.idle_s, max_depth=s.max_depth))
    log.info("watching %s", s.watch or "nothing")
    app = ExporterApp(
        name="vdbench-exporter",
        description=DESCRIPTION,
        probe=None,
        collectors=[_collector(s, watcher)],
        config_text=s.describe(),
    )
    return serve(app, WebSettings(listen=s.listen, config_file=s.web_config_file))


def cmd_convert(s: Settings, dirs: list[str]) -> int:
    watcher = Watcher(WatchConfig(paths=dirs, retention_s=float("inf"), idle_s=s.idle_s, max_depth=s.max_depth))
    while True:  # a poll reads at most 64 MiB per file
        watcher.poll()
        pending = [
            fs
            for d in watcher.dirs.values()
            for fs in d.files.values()
            if fs.reason is None and fs.tailer.offset < fs.tailer.size
        ]
        if not pending:
            break
    watcher.finish()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_collector(s, watcher, poll=False))
    sys.stdout.write(generate_latest(registry).decode())
    bad = list(watcher.missing_paths)
    if not watcher.dirs and not bad:
        bad = [f"{', '.join(dirs)}: no vdbench output directory (flatfile.html or parmfile.html) found"]
    for d in watcher.dirs.values():
        for fs in d.files.values():
            if fs.reason is not None:
                bad.append(f"{fs.tailer.path}: {fs.reason.replace('_', ' ')}: {fs.detail}")
        for name, reason, detail in d.small_file_errors:
            bad.append(f"{d.path}/{name}: {reason.replace('_', ' ')}: {detail}")
    for line in bad:
        print(f"vdbench-exporter convert: {line}", file=sys.stderr)
    return 1 if bad else 0


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("serve", "convert", "-h", "--help", "--version"):
        argv.insert(0, "serve")
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        s = settings_from(args)
        if args.command == "convert":
            return cmd_convert(s, args.dirs)
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
