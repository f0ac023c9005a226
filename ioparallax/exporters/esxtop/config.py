"""esxtop-exporter's settings: the watch exporters' shared ones (common/watchconfig.py) and
esxtop's own (file pattern, idle timeout, the capture hygiene thresholds)."""

from __future__ import annotations

from dataclasses import dataclass

from ioparallax.exporters.common import watchconfig
from ioparallax.exporters.common.watchconfig import Option, WatchSettings, WatchSpec
from ioparallax.units import parse_duration


@dataclass
class Settings(WatchSettings):
    pattern: str = "*.csv"
    idle_s: float = 30.0
    max_delay_s: float = 5.0
    max_clock_skew_s: float = 60.0


SPEC = WatchSpec(
    program="esxtop-exporter",
    prefix="esxtop",
    group="esxtop and vscsiStats files",
    watch_metavar="PATH",
    watch_help="an esxtop batch CSV or vscsiStats output, or a directory whose files matching "
    "--esxtop.pattern are (each file's first bytes say which it is); repeatable",
    options=(
        Option(
            "pattern",
            "pattern",
            str,
            "--esxtop.pattern",
            "GLOB",
            "file name pattern inside watched directories (default: *.csv)",
            watch_only=True,
        ),
        watchconfig.retention_option(
            "esxtop",
            "how long a finished file's series stay visible after it last changed (default: 15m)",
            watch_only=True,
        ),
        watchconfig.idle_timeout_option(
            "esxtop",
            "a file that has not grown for this long is a finished capture (default: 30s)",
            watchconfig.positive,
        ),
        Option(
            "max_delay",
            "max_delay_s",
            parse_duration,
            "--esxtop.max-delay",
            "DURATION",
            "captures whose samples are further apart on average (plus 10%% for esxtop's own collection "
            "time) are flagged long_delay (default: 5s)",
            check=watchconfig.positive,
            show=watchconfig.show_seconds,
        ),
        Option(
            "max_clock_skew",
            "max_clock_skew_s",
            parse_duration,
            "--esxtop.max-clock-skew",
            "DURATION",
            "a growing capture whose newest sample is further from the time it arrived is flagged "
            "host_clock_skew (default: 1m)",
            check=watchconfig.positive,
            show=watchconfig.show_seconds,
        ),
        watchconfig.scrape_interval_option("esxtop", "captures shorter than 3 of these are flagged"),
    ),
    default_listen=":9768",
)
