"""vdbench-exporter's settings: the watch exporters' shared ones (common/watchconfig.py) and
vdbench's own (how deep output directories are looked for, idle timeout)."""

from __future__ import annotations

from dataclasses import dataclass

from ioparallax.exporters.common import watchconfig
from ioparallax.exporters.common.watchconfig import Option, WatchSettings, WatchSpec


@dataclass
class Settings(WatchSettings):
    idle_s: float = 30.0
    max_depth: int = 2


def _positive_int(value) -> int:
    n = int(value)
    if n < 0:
        raise ValueError(f"expected a number >= 0, got {n}")
    return n


SPEC = WatchSpec(
    program="vdbench-exporter",
    prefix="vdbench",
    group="vdbench output",
    watch_metavar="DIR",
    watch_help="a vdbench output directory (holding flatfile.html or parmfile.html), or a directory "
    "whose subdirectories are (down to --vdbench.max-depth, e.g. HCIBench's results tree); repeatable",
    options=(
        Option(
            "max_depth",
            "max_depth",
            _positive_int,
            "--vdbench.max-depth",
            "N",
            "how deep under a watched directory output directories are looked for (default: 2)",
        ),
        watchconfig.retention_option(
            "vdbench", "how long the runs of a finished directory stay visible after it last changed (default: 15m)"
        ),
        watchconfig.idle_timeout_option(
            "vdbench", "a directory whose files have not grown for this long is a finished run (default: 30s)"
        ),
        watchconfig.cache_size_option("vdbench"),
        watchconfig.scrape_interval_option("vdbench", "runs with elapsed= under 3 of these are flagged"),
    ),
    default_listen=":9766",
)
