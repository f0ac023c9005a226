"""fio-exporter's settings: the watch exporters' shared ones (common/watchconfig.py) and fio's
own (file pattern, idle timeout, largest document, host label, guest disk facts, collectors)."""

from __future__ import annotations

import argparse
import socket
from dataclasses import dataclass

from ioparallax.exporters.common import watchconfig
from ioparallax.exporters.common.watchconfig import Option, WatchSettings, WatchSpec
from ioparallax.exporters.fio.collector import Collectors
from ioparallax.exporters.fio.guestdisk import DEFAULT_EXCLUDE
from ioparallax.exporters.fio.reader import DEFAULT_MAX_DOCUMENT_BYTES
from ioparallax.units import parse_bytes


@dataclass
class Settings(WatchSettings):
    pattern: str = "*.json"
    idle_s: float = 10.0
    host: str = ""
    sysfs: str = "/sys"
    guest_disks: bool = True
    guest_disk_exclude: str = DEFAULT_EXCLUDE
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    percentiles: bool = True
    histograms: bool = True
    trim: bool = True

    @property
    def collectors(self) -> Collectors:
        """The per-job collectors the three switches above leave on."""
        return Collectors(percentiles=self.percentiles, histograms=self.histograms, trim=self.trim)

    def switched_off(self) -> list[str]:
        """Names of the per-job collectors switched off, for the start-up log."""
        c = self.collectors
        return [
            n for n, on in (("percentiles", c.percentiles), ("histograms", c.histograms), ("trim", c.trim)) if not on
        ]


GUEST = "guest disk facts"
COLLECTORS = "collectors (series per job: docs/fio.md, Series budget)"

SPEC = WatchSpec(
    program="fio-exporter",
    prefix="fio",
    group="fio output",
    watch_metavar="PATH",
    watch_help="a fio output file, or a directory whose files matching --fio.pattern are "
    "fio output; repeatable. Files still being written are followed.",
    options=(
        Option(
            "pattern",
            "pattern",
            str,
            "--fio.pattern",
            "GLOB",
            "file name pattern inside watched directories (default: *.json)",
            watch_only=True,
        ),
        watchconfig.retention_option(
            "fio", "how long jobs of a finished run stay visible after it ended (default: 15m)"
        ),
        watchconfig.idle_timeout_option(
            "fio",
            "a file that has not grown for this long (and for 3 status intervals) is a finished run (default: 10s)",
        ),
        watchconfig.cache_size_option("fio"),
        watchconfig.scrape_interval_option("fio"),
        Option(
            "max_document_size",
            "max_document_bytes",
            parse_bytes,
            "--fio.max-document-size",
            "SIZE",
            "largest fio JSON document read; a larger one is skipped unread and its file "
            "shown down (reason too_large), which bounds the exporter's memory "
            f"(default: {DEFAULT_MAX_DOCUMENT_BYTES // 2**20}MiB; a json+ result takes about "
            "16KB per job)",
            check=watchconfig.at_least_1kib("fio's smallest documents are a few KB"),
        ),
        Option(
            "host",
            "host",
            str,
            "--fio.host",
            "NAME",
            "'host' label of local (non client/server) jobs (default: this host's name)",
        ),
        Option(
            "sysfs",
            "sysfs",
            str,
            "--collector.sysfs",
            "PATH",
            "sysfs mount point to read disk facts from (default: /sys)",
            group=GUEST,
        ),
        Option(
            "guest_disks",
            "guest_disks",
            bool,
            "--collector.guest-disk",
            help="export guest disk and partition facts (default: on)",
            boolean=True,
            group=GUEST,
        ),
        Option(
            "guest_disk_exclude",
            "guest_disk_exclude",
            str,
            "--collector.guest-disk.exclude",
            "REGEX",
            f"disks to leave out (default: {DEFAULT_EXCLUDE})",
            group=GUEST,
        ),
        Option(
            "percentiles",
            "percentiles",
            bool,
            "--collector.percentiles",
            help="fio's own clat percentiles, 17 series per timed direction; off empties "
            "the fio dashboard's percentile lines (default: on)",
            boolean=True,
            group=COLLECTORS,
        ),
        Option(
            "histograms",
            "histograms",
            bool,
            "--collector.histograms",
            help="the 19 finite clat buckets per timed direction (+Inf, _count and _sum "
            "stay, so mean latency does); off empties the fio dashboard's latency "
            "heatmaps and the report's guest latency distribution (default: on)",
            boolean=True,
            group=COLLECTORS,
        ),
        Option(
            "trim",
            "trim",
            bool,
            "--collector.trim",
            help="the trim direction of jobs that trim (jobs that never trim have none either way) (default: on)",
            boolean=True,
            group=COLLECTORS,
        ),
    ),
    default_listen=":9763",
)


def settings_from(args: argparse.Namespace) -> Settings:
    """Flags over the YAML file over defaults; errors name the file and key (or the flag)."""
    s = SPEC.read(args, Settings())
    s.host = s.host or socket.gethostname()
    return s
