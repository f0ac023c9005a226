"""vdbench-exporter: vdbench output directories (flatfile, parmfile, host reports) for Prometheus.

Subcommands: ``serve`` (default) watches directories and follows flatfile.html as vdbench
appends to it; ``convert DIR...`` prints the exposition of finished output directories once.
"""

from __future__ import annotations

import argparse
import logging
import sys

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.startup import serve
from ioparallax.exporters.vdbench.collector import VdbenchCollector
from ioparallax.exporters.vdbench.config import DEFAULT_LISTEN, SPEC, Settings
from ioparallax.exporters.vdbench.hygiene import HygieneConfig
from ioparallax.exporters.vdbench.reader import WatchConfig, Watcher
from ioparallax.pipes import quiet_on_closed_stdout

log = logging.getLogger("ioparallax.exporters.vdbench")

DESCRIPTION = (
    "Exports vdbench output directories (HCIBench/X-Ray workers, or copies on a collector host): "
    "flatfile.html followed live as vdbench appends to it, integrated into per-run counters; the "
    "runs' summary rows; per-host reports of multi-host runs; the parameter file as run; and "
    "benchmark hygiene findings. Target data is on /metrics."
)

#: The subcommands, ``serve`` first (the default).
COMMANDS = ("serve", "convert")


def build_parser() -> argparse.ArgumentParser:
    parser, sub = SPEC.parser(
        DESCRIPTION,
        COMMANDS,
        DEFAULT_LISTEN,
        serve_help="watch vdbench output directories and serve /metrics (the default)",
        serve_description="Watch vdbench output directories and serve them on /metrics, read incrementally at "
        "each scrape.",
    )
    SPEC.add_convert(
        sub,
        help="print the exposition of vdbench output directories once",
        description="Read vdbench output directories to their end and print their Prometheus exposition "
        "on stdout. Exits 1 if a directory or file could not be read, holds no vdbench data, or "
        "ends in a cut-off line.",
        dest="dirs",
        metavar="DIR",
    )
    return parser


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
        config_text=SPEC.describe(s),
    )
    return serve(app, s.web())


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


def _run(args: argparse.Namespace) -> int:
    s = SPEC.read(args, Settings())
    if args.command == "convert":
        return cmd_convert(s, args.dirs)
    return cmd_serve(s)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return SPEC.main(argv, build_parser, COMMANDS, _run)


if __name__ == "__main__":
    sys.exit(main())
