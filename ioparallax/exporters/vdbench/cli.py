"""vdbench-exporter: vdbench output directories (flatfile, parmfile, host reports) for Prometheus.

Commands (on :mod:`ioparallax.exporters.common.watch.cli`): ``serve`` (default) watches
directories and follows flatfile.html as vdbench appends to it; ``convert DIR...`` prints the
exposition of finished output directories once.
"""

from __future__ import annotations

import argparse
import sys

from ioparallax.exporters.common.watch.cli import Texts, WatchProgram
from ioparallax.exporters.vdbench.collector import VdbenchCollector
from ioparallax.exporters.vdbench.config import SPEC, Settings
from ioparallax.exporters.vdbench.reader import WatchConfig, Watcher
from ioparallax.pipes import quiet_on_closed_stdout

PROGRAM = WatchProgram(
    SPEC,
    description="Exports vdbench output directories (HCIBench/X-Ray workers, or copies on a collector host): "
    "flatfile.html followed live as vdbench appends to it, integrated into per-run counters; the "
    "runs' summary rows; per-host reports of multi-host runs; the parameter file as run; and "
    "benchmark hygiene findings. Target data is on /metrics.",
    serve_texts=Texts(
        "watch vdbench output directories and serve /metrics (the default)",
        "Watch vdbench output directories and serve them on /metrics, read incrementally at each scrape.",
    ),
    convert_texts=Texts(
        "print the exposition of vdbench output directories once",
        "Read vdbench output directories to their end and print their Prometheus exposition "
        "on stdout. Exits 1 if a directory or file could not be read, holds no vdbench data, or "
        "ends in a cut-off line.",
    ),
    convert_metavar="DIR",
)
build_parser = PROGRAM.build_parser


def _collector(s: Settings, watcher: Watcher, poll: bool = True) -> VdbenchCollector:
    return VdbenchCollector(watcher, s.hygiene(), poll=poll)


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
    PROGRAM.exposition(_collector(s, watcher, poll=False))
    bad = list(watcher.missing_paths)
    if not watcher.dirs and not bad:
        bad = [f"{', '.join(dirs)}: no vdbench output directory (flatfile.html or parmfile.html) found"]
    for d in watcher.dirs.values():
        for fs in d.files.values():
            if fs.reason is not None:
                bad.append(f"{fs.tailer.path}: {fs.reason.replace('_', ' ')}: {fs.detail}")
        for name, reason, detail in d.small_file_errors:
            bad.append(f"{d.path}/{name}: {reason.replace('_', ' ')}: {detail}")
    return PROGRAM.report("convert", bad)


def cmd_serve(s: Settings, args: argparse.Namespace) -> int:
    watcher = Watcher(WatchConfig(paths=s.watch, retention_s=s.retention_s, idle_s=s.idle_s, max_depth=s.max_depth))
    unwatched = "no --vdbench.watch directory given: nothing to export but vdbench_up"
    return PROGRAM.serve(s, [_collector(s, watcher)], unwatched)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return PROGRAM.main(argv, Settings, cmd_serve, cmd_convert)


if __name__ == "__main__":
    sys.exit(main())
