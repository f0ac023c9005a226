"""esxtop-exporter: esxtop batch CSVs and vscsiStats outputs for Prometheus, read on a collector host.

Commands (on :mod:`ioparallax.exporters.common.watch.cli`): ``serve`` (default) follows the CSVs
as esxtop appends to them, ``convert FILE...`` prints the exposition of finished files once,
``backfill FILE...`` writes every sample with the capture's own timestamps.
"""

from __future__ import annotations

import argparse
import sys

from ioparallax.exporters.common.backfill import BackfillWriter
from ioparallax.exporters.common.watch.cli import Texts, WatchProgram, output
from ioparallax.exporters.esxtop.backfill import FAMILIES, Backfill
from ioparallax.exporters.esxtop.collector import EsxtopCollector
from ioparallax.exporters.esxtop.config import SPEC, Settings
from ioparallax.exporters.esxtop.hygiene import HygieneConfig
from ioparallax.exporters.esxtop.reader import EsxtopFile, VscsiFile, WatchConfig, Watcher
from ioparallax.pipes import quiet_on_closed_stdout

PROGRAM = WatchProgram(
    SPEC,
    description="Exports esxtop batch CSVs (esxtop -b -d 2 > host.csv, followed as they grow) and vscsiStats "
    "histograms (vscsiStats -p all -c): per virtual disk the 2-second VM view (labelled vm and disk "
    "as vcenter-exporter labels them), per device, path, adapter and NFS volume the latency split "
    "(guest = kernel + driver), per VM its CPU ready and co-stop, per VM disk the I/O length, seek "
    "distance, outstanding I/O and latency histograms; every sample integrated into counters, and "
    "capture hygiene findings. Target data is on /metrics.",
    serve_texts=Texts(
        "watch esxtop and vscsiStats files and serve /metrics (the default)",
        "Watch esxtop batch CSVs and vscsiStats outputs and serve them on /metrics, read incrementally at each scrape.",
    ),
    convert_texts=Texts(
        "print the exposition of esxtop and vscsiStats files once",
        "Read esxtop batch CSVs and vscsiStats outputs to their end and print their "
        "Prometheus exposition on stdout. Exits 1, naming each bad file and the cause on stderr, if "
        "one cannot be read, is neither, or ends in a cut-off line.",
    ),
    backfill_texts=Texts(
        "write every esxtop sample with the capture's own timestamps",
        "Write every sample of esxtop batch CSVs as the _sample_ gauges a scrape shows, "
        "stamped with the sample's time: OpenMetrics for `promtool tsdb create-blocks-from "
        "openmetrics`, or Prometheus text (millisecond timestamps) for VictoriaMetrics' "
        "/api/v1/import/prometheus. Exits 1 naming each file that cannot be used.",
    ),
    escape_names=True,  # a name can hold a newline
)
build_parser = PROGRAM.build_parser


def _hygiene(s: Settings) -> HygieneConfig:
    return HygieneConfig(
        max_delay_s=s.max_delay_s, max_clock_skew_s=s.max_clock_skew_s, scrape_interval_s=s.scrape_interval_s
    )


def _finished(s: Settings, paths: list[str], on_sample: Backfill | None = None) -> Watcher:
    """A watcher of finished files (convert, backfill): every file named, kept whatever its age."""
    config = WatchConfig(paths=paths, pattern="*", retention_s=float("inf"), idle_s=s.idle_s, finished=True)
    return Watcher(config, on_sample=on_sample)


def _read_all(paths: list[str], watcher: Watcher) -> list[str]:
    """Every named file read to its end; the bad ones as ``<file>: <reason>: <cause>`` lines."""
    watcher.read_all()
    bad = list(watcher.missing_paths)
    if not watcher.files and not bad:
        bad = [f"{', '.join(paths)}: no file found"]
    for src in watcher.files.values():
        if src.reason is not None:
            bad.append(f"{src.name}: {src.reason.replace('_', ' ')}: {src.detail}")
    return bad


def cmd_serve(s: Settings, args: argparse.Namespace) -> int:
    watcher = Watcher(WatchConfig(paths=s.watch, pattern=s.pattern, retention_s=s.retention_s, idle_s=s.idle_s))
    collectors = [EsxtopCollector(watcher, _hygiene(s))]
    return PROGRAM.serve(s, collectors, "no --esxtop.watch path given: nothing to export but esxtop_up")


def cmd_convert(s: Settings, paths: list[str]) -> int:
    watcher = _finished(s, paths)
    bad = _read_all(paths, watcher)
    PROGRAM.exposition(EsxtopCollector(watcher, _hygiene(s), poll=False))
    return PROGRAM.report("convert", bad)


def write_backfill(s: Settings, args: argparse.Namespace) -> tuple[int, list[str]]:
    """Every esxtop sample written to ``--output``; how many, and the bad files."""
    with BackfillWriter(FAMILIES, args.format) as writer:
        watcher = _finished(s, args.files, on_sample=Backfill(writer))
        bad = _read_all(args.files, watcher)
        for src in watcher.files.values():
            if isinstance(src, VscsiFile):
                bad.append(f"{src.name}: a vscsiStats output has no samples in time (use convert or serve)")
            elif isinstance(src, EsxtopFile) and src.reason is None and src.rows == 0:
                bad.append(f"{src.name}: no sample")
        with output(args.output) as fh:
            writer.write(fh)
        return writer.samples, bad


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return PROGRAM.main(argv, Settings, cmd_serve, cmd_convert, backfill=write_backfill)


if __name__ == "__main__":
    sys.exit(main())
