"""esxtop-exporter: esxtop batch CSVs and vscsiStats outputs for Prometheus, read on a collector host.

Subcommands: ``serve`` (default) watches files/directories and follows the CSVs as esxtop appends
to them; ``convert FILE...`` prints the exposition of finished files once; ``backfill FILE...``
writes every sample with the capture's own timestamps (OpenMetrics for ``promtool tsdb
create-blocks-from openmetrics``, or Prometheus text for VictoriaMetrics' import).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.backfill import FORMATS, BackfillWriter
from ioparallax.exporters.common.logsetup import escape_text
from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.startup import serve
from ioparallax.exporters.esxtop.backfill import FAMILIES, Backfill
from ioparallax.exporters.esxtop.collector import EsxtopCollector
from ioparallax.exporters.esxtop.config import DEFAULT_LISTEN, SPEC, Settings
from ioparallax.exporters.esxtop.hygiene import HygieneConfig
from ioparallax.exporters.esxtop.reader import EsxtopFile, VscsiFile, WatchConfig, Watcher
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.yamlconf import ConfigError

log = logging.getLogger("ioparallax.exporters.esxtop")

DESCRIPTION = (
    "Exports esxtop batch CSVs (esxtop -b -d 2 > host.csv, followed as they grow) and vscsiStats "
    "histograms (vscsiStats -p all -c): per virtual disk the 2-second VM view (labelled vm and disk "
    "as vcenter-exporter labels them), per device, path, adapter and NFS volume the latency split "
    "(guest = kernel + driver), per VM its CPU ready and co-stop, per VM disk the I/O length, seek "
    "distance, outstanding I/O and latency histograms; every sample integrated into counters, and "
    "capture hygiene findings. Target data is on /metrics."
)

#: The subcommands, ``serve`` first (the default).
COMMANDS = ("serve", "convert", "backfill")


def build_parser() -> argparse.ArgumentParser:
    parser, sub = SPEC.parser(
        DESCRIPTION,
        COMMANDS,
        DEFAULT_LISTEN,
        serve_help="watch esxtop and vscsiStats files and serve /metrics (the default)",
        serve_description="Watch esxtop batch CSVs and vscsiStats outputs and serve them on /metrics, "
        "read incrementally at each scrape.",
    )
    SPEC.add_convert(
        sub,
        help="print the exposition of esxtop and vscsiStats files once",
        description="Read esxtop batch CSVs and vscsiStats outputs to their end and print their "
        "Prometheus exposition on stdout. Exits 1, naming each bad file and the cause on stderr, if "
        "one cannot be read, is neither, or ends in a cut-off line.",
        dest="files",
        metavar="FILE",
    )
    b = sub.add_parser(
        "backfill",
        help="write every esxtop sample with the capture's own timestamps",
        description="Write every sample of esxtop batch CSVs as the _sample_ gauges a scrape shows, "
        "stamped with the sample's time: OpenMetrics for `promtool tsdb create-blocks-from "
        "openmetrics`, or Prometheus text (millisecond timestamps) for VictoriaMetrics' "
        "/api/v1/import/prometheus. Exits 1 naming each file that cannot be used.",
    )
    b.add_argument("files", nargs="+", metavar="FILE")
    b.add_argument(
        "--format",
        choices=FORMATS,
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
    SPEC.add_args(b, watch=False)
    return parser


def _hygiene(s: Settings) -> HygieneConfig:
    return HygieneConfig(
        max_delay_s=s.max_delay_s, max_clock_skew_s=s.max_clock_skew_s, scrape_interval_s=s.scrape_interval_s
    )


def cmd_serve(s: Settings) -> int:
    if not s.watch:
        log.warning("no --esxtop.watch path given: nothing to export but esxtop_up")
    watcher = Watcher(WatchConfig(paths=s.watch, pattern=s.pattern, retention_s=s.retention_s, idle_s=s.idle_s))
    log.info("watching %s", s.watch or "nothing")
    app = ExporterApp(
        name="esxtop-exporter",
        description=DESCRIPTION,
        probe=None,
        collectors=[EsxtopCollector(watcher, _hygiene(s))],
        config_text=SPEC.describe(s),
    )
    return serve(app, s.web())


def _read_all(s: Settings, paths: list[str], watcher: Watcher) -> list[str]:
    """Every named file read to its end; the bad ones as ``<file>: <reason>: <cause>`` lines."""
    watcher.read_all()
    bad = list(watcher.missing_paths)
    if not watcher.files and not bad:
        bad = [f"{', '.join(paths)}: no file found"]
    for src in watcher.files.values():
        if src.reason is not None:
            bad.append(f"{src.name}: {src.reason.replace('_', ' ')}: {src.detail}")
    return bad


def cmd_convert(s: Settings, paths: list[str]) -> int:
    watcher = Watcher(WatchConfig(paths=paths, pattern="*", retention_s=float("inf"), idle_s=s.idle_s, finished=True))
    bad = _read_all(s, paths, watcher)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EsxtopCollector(watcher, _hygiene(s), poll=False))
    sys.stdout.write(generate_latest(registry).decode())
    for line in bad:
        print(f"esxtop-exporter convert: {escape_text(line)}", file=sys.stderr)  # a name can hold a newline
    return 1 if bad else 0


def cmd_backfill(s: Settings, paths: list[str], fmt: str, output: str | None, tsdb: str | None) -> int:
    if tsdb and (not output or fmt != "openmetrics"):
        raise ConfigError(None, "--tsdb", "needs --output FILE and --format openmetrics (promtool reads a file)")
    with BackfillWriter(FAMILIES, fmt) as writer:
        watcher = Watcher(
            WatchConfig(paths=paths, pattern="*", retention_s=float("inf"), idle_s=s.idle_s, finished=True),
            on_sample=Backfill(writer),
        )
        bad = _read_all(s, paths, watcher)
        for src in watcher.files.values():
            if isinstance(src, VscsiFile):
                bad.append(f"{src.name}: a vscsiStats output has no samples in time (use convert or serve)")
            elif isinstance(src, EsxtopFile) and src.reason is None and src.rows == 0:
                bad.append(f"{src.name}: no sample")
        if output:
            with open(output, "w", encoding="utf-8") as fh:
                writer.write(fh)
        else:
            writer.write(sys.stdout)
        count = writer.samples
    for line in bad:
        print(f"esxtop-exporter backfill: {escape_text(line)}", file=sys.stderr)
    if tsdb and count:
        assert output is not None
        proc = subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", output, tsdb], capture_output=True, text=True
        )
        if proc.returncode != 0:
            print(f"esxtop-exporter backfill: promtool failed: {proc.stderr.strip()}", file=sys.stderr)
            return 1
        log.info("backfilled %d samples into %s", count, tsdb)
    return 1 if bad else 0


def _run(args: argparse.Namespace) -> int:
    s = SPEC.read(args, Settings())
    if args.command == "convert":
        return cmd_convert(s, args.files)
    if args.command == "backfill":
        try:
            return cmd_backfill(s, args.files, args.format, args.output, args.tsdb)
        except FileNotFoundError as exc:  # promtool (--tsdb), or --output's directory
            log.error("cannot run %s: %s", exc.filename, exc.strerror)
            return 1
    return cmd_serve(s)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    return SPEC.main(argv, build_parser, COMMANDS, _run)


if __name__ == "__main__":
    sys.exit(main())
