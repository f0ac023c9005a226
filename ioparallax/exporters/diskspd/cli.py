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

from prometheus_client import CollectorRegistry, generate_latest

from ioparallax.exporters.common.logsetup import escape_text
from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.startup import serve
from ioparallax.exporters.diskspd.backfill import Sample, interval_samples, render
from ioparallax.exporters.diskspd.collector import Collectors, DiskspdCollector
from ioparallax.exporters.diskspd.config import DEFAULT_LISTEN, SPEC, Settings
from ioparallax.exporters.diskspd.hygiene import HygieneConfig
from ioparallax.exporters.diskspd.parse import DiskspdError
from ioparallax.exporters.diskspd.reader import ResultFiles, WatchConfig
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.yamlconf import ConfigError

log = logging.getLogger("ioparallax.exporters.diskspd")

DESCRIPTION = (
    "Exports DiskSPD -Rxml results (copied off the Windows VMs into watched directories): per "
    "run, time span and target the I/Os, bytes, latency means and percentiles, outstanding I/Os "
    "asked, the profile as run, and benchmark hygiene findings. Target data is on /metrics."
)

#: The subcommands, ``serve`` first (the default).
COMMANDS = ("serve", "convert", "backfill")


def build_parser() -> argparse.ArgumentParser:
    parser, sub = SPEC.parser(
        DESCRIPTION,
        COMMANDS,
        DEFAULT_LISTEN,
        serve_help="watch DiskSPD result files and serve /metrics (the default)",
        serve_description="Watch files or directories of DiskSPD -Rxml results and serve them on "
        "/metrics; a new or changed file is parsed once, at the next scrape.",
    )
    SPEC.add_convert(
        sub,
        help="print the exposition of result files once",
        description="Read DiskSPD -Rxml result files and print their Prometheus exposition on "
        "stdout. Exits 1, naming each bad file and the cause on stderr, if one cannot be read.",
        dest="files",
        metavar="FILE",
    )
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
    SPEC.add_args(b, watch=False)
    return parser


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
        config_text=SPEC.describe(s),
    )
    return serve(app, s.web())


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
