"""diskspd-exporter: DiskSPD ``-Rxml`` results for Prometheus, read on a Linux collector host.

Commands (on :mod:`ioparallax.exporters.common.watch.cli`): ``serve`` (default) watches the
result documents copied off the Windows VMs, ``convert FILE...`` prints their exposition once,
``backfill FILE...`` writes the runs' per-interval ``-D`` series with their own timestamps.
"""

from __future__ import annotations

import argparse
import sys

from ioparallax.exporters.common.watch.cli import Texts, WatchProgram, output
from ioparallax.exporters.diskspd.backfill import Sample, interval_samples, render
from ioparallax.exporters.diskspd.collector import Collectors, DiskspdCollector
from ioparallax.exporters.diskspd.config import SPEC, Settings
from ioparallax.exporters.diskspd.parse import DiskspdError
from ioparallax.exporters.diskspd.reader import ResultFiles, WatchConfig
from ioparallax.pipes import quiet_on_closed_stdout

PROGRAM = WatchProgram(
    SPEC,
    description="Exports DiskSPD -Rxml results (copied off the Windows VMs into watched directories): per "
    "run, time span and target the I/Os, bytes, latency means and percentiles, outstanding I/Os "
    "asked, the profile as run, and benchmark hygiene findings. Target data is on /metrics.",
    serve_texts=Texts(
        "watch DiskSPD result files and serve /metrics (the default)",
        "Watch files or directories of DiskSPD -Rxml results and serve them on "
        "/metrics; a new or changed file is parsed once, at the next scrape.",
    ),
    convert_texts=Texts(
        "print the exposition of result files once",
        "Read DiskSPD -Rxml result files and print their Prometheus exposition on "
        "stdout. Exits 1, naming each bad file and the cause on stderr, if one cannot be read.",
    ),
    backfill_texts=Texts(
        "write the runs' -D interval series with their own timestamps",
        "Write the per-interval IOPS (and latency, with -L) of DiskSPD -Rxml results "
        "with the run's own timestamps: OpenMetrics for `promtool tsdb create-blocks-from "
        "openmetrics`, or Prometheus text (millisecond timestamps) for VictoriaMetrics' "
        "/api/v1/import/prometheus. Exits 1 naming each file that cannot be used.",
    ),
    escape_names=True,  # a name can hold a newline
)
build_parser = PROGRAM.build_parser


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
        s.hygiene(),
        Collectors(all_percentiles=s.all_percentiles),
        poll=poll,
    )


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


def cmd_serve(s: Settings, args: argparse.Namespace) -> int:
    collectors = [_collector(s, _files(s, s.watch))]
    return PROGRAM.serve(s, collectors, "no --diskspd.watch path given: nothing to serve but diskspd_up")


def cmd_convert(s: Settings, paths: list[str]) -> int:
    files, bad = _read_all(s, paths)
    PROGRAM.exposition(_collector(s, files, poll=False))
    return PROGRAM.report("convert", bad)


def write_backfill(s: Settings, args: argparse.Namespace) -> tuple[int, list[str]]:
    """The runs' interval samples written to ``--output``; how many, and the bad files."""
    files, bad = _read_all(s, args.files)
    samples: list[Sample] = []
    for v in files.views():
        if v.result is None:
            continue
        try:
            samples.extend(interval_samples(v.result, v.name))
        except DiskspdError as exc:
            bad.append(f"{v.name}: {exc}")
    text = render(samples, args.format)
    with output(args.output) as fh:
        fh.write(text)
    return len(samples), bad


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return PROGRAM.main(argv, Settings, cmd_serve, cmd_convert, backfill=write_backfill)


if __name__ == "__main__":
    sys.exit(main())
