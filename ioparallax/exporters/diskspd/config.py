"""diskspd-exporter's settings: the watch exporters' shared ones (common/watchconfig.py) and
DiskSPD's own (file pattern, settle time, largest file, which latency percentiles)."""

from __future__ import annotations

from dataclasses import dataclass

from ioparallax.exporters.common import watchconfig
from ioparallax.exporters.common.watchconfig import Option, WatchSettings, WatchSpec
from ioparallax.exporters.diskspd.parse import DEFAULT_MAX_DOCUMENT_BYTES
from ioparallax.units import parse_bytes, parse_duration


@dataclass
class Settings(WatchSettings):
    pattern: str = "*.xml"
    retention_s: float = 3600.0
    settle_s: float = 5.0
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    all_percentiles: bool = False


def _percentiles(value: str) -> bool:
    if value not in ("text", "all"):
        raise ValueError(f"expected text or all, got {value!r}")
    return value == "all"


SPEC = WatchSpec(
    program="diskspd-exporter",
    prefix="diskspd",
    group="DiskSPD results",
    watch_metavar="PATH",
    watch_help="a DiskSPD -Rxml result file, or a directory whose files matching --diskspd.pattern are; repeatable",
    options=(
        Option(
            "pattern",
            "pattern",
            str,
            "--diskspd.pattern",
            "GLOB",
            "file name pattern inside watched directories (default: *.xml)",
            watch_only=True,
        ),
        watchconfig.retention_option(
            "diskspd",
            "how long a run stays visible after it ended or its file arrived, whichever is later; "
            "0 keeps it while the file exists (default: 1h)",
            watch_only=True,
        ),
        Option(
            "settle_time",
            "settle_s",
            parse_duration,
            "--diskspd.settle-time",
            "DURATION",
            "a file that ends early and was modified within this time is a copy under way, not an error (default: 5s)",
            watch_only=True,
            show=watchconfig.show_seconds,
        ),
        watchconfig.cache_size_option("diskspd"),
        watchconfig.scrape_interval_option("diskspd"),
        Option(
            "max_file_size",
            "max_document_bytes",
            parse_bytes,
            "--diskspd.max-file-size",
            "SIZE",
            "largest result file read; a larger one is refused unread and shown down (too_large) "
            f"(default: {DEFAULT_MAX_DOCUMENT_BYTES // 2**20}MiB; -D stores ~400 bytes per interval, "
            "thread and target)",
            check=watchconfig.at_least_1kib("DiskSPD's smallest results are a few KB"),
        ),
        Option(
            "percentiles",
            "all_percentiles",
            _percentiles,
            "--diskspd.percentiles",
            "text|all",
            "latency percentiles exported: the 15 DiskSPD's text report shows (min, 25 ... 99, "
            "3 to 9 nines, max) or all 108 of the XML (default: text)",
            show=lambda all_: "all" if all_ else "text",
        ),
    ),
    default_listen=":9765",
)
