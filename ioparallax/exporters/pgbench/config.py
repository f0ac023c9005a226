"""pgbench-exporter's settings: the watch exporters' shared ones (common/watchconfig.py) and
pgbench's own (file pattern, idle timeout, the server facts the hygiene checks compare with)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ioparallax.exporters.common import watchconfig
from ioparallax.exporters.common.watchconfig import Option, WatchSettings, WatchSpec
from ioparallax.exporters.pgbench.hygiene import DEFAULT_CHECKPOINT_TIMEOUT_S, DEFAULT_MAX_CONNECTIONS, HygieneConfig
from ioparallax.units import parse_bytes, parse_duration


@dataclass
class Settings(WatchSettings):
    pattern: str = "*pgbench*"
    idle_s: float = 30.0
    shared_buffers: int | None = None
    memory_size: int | None = None
    checkpoint_timeout_s: float = DEFAULT_CHECKPOINT_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def hygiene(self) -> HygieneConfig:
        """The shared checks' settings (:meth:`WatchSettings.hygiene`) and the database server's."""
        return HygieneConfig(
            **asdict(super().hygiene()),
            shared_buffers_bytes=self.shared_buffers,
            memory_bytes=self.memory_size,
            checkpoint_timeout_s=self.checkpoint_timeout_s,
            max_connections=self.max_connections,
        )


def _positive_int(value) -> int:
    n = int(value)
    if n < 1:
        raise ValueError(f"expected a number >= 1, got {n}")
    return n


HYGIENE = "the server, for the hygiene checks (docs/hygiene.md#pgbench)"

SPEC = WatchSpec(
    program="pgbench-exporter",
    prefix="pgbench",
    group="pgbench output",
    watch_metavar="PATH",
    watch_help="a file of pgbench output (its console output with -P progress lines and the summary, "
    "an --aggregate-interval log or a per-transaction --log), or a directory whose files matching "
    "--pgbench.pattern are; repeatable. Files still being written are followed.",
    options=(
        Option(
            "pattern",
            "pattern",
            str,
            "--pgbench.pattern",
            "GLOB",
            "file name pattern inside watched directories (default: *pgbench*, which takes pgbench's "
            "own pgbench_log.* files and outputs saved as e.g. pgbench-db01.out)",
            watch_only=True,
        ),
        watchconfig.retention_option(
            "pgbench", "how long the runs of a finished file stay visible after it last grew (default: 15m)"
        ),
        watchconfig.idle_timeout_option(
            "pgbench",
            "a file that has not grown for this long (and 3 progress intervals) is a finished run (default: 30s)",
        ),
        watchconfig.cache_size_option("pgbench"),
        watchconfig.scrape_interval_option("pgbench"),
        Option(
            "shared_buffers",
            "shared_buffers",
            parse_bytes,
            "--pgbench.shared-buffers",
            "SIZE",
            "the server's shared_buffers, e.g. 4GiB: a database that fits is flagged (default: unset, check off)",
            group=HYGIENE,
            show=watchconfig.show_size,
        ),
        Option(
            "memory_size",
            "memory_size",
            parse_bytes,
            "--pgbench.memory-size",
            "SIZE",
            "the database VM's RAM, e.g. 16GiB: a database that fits in its page cache is flagged "
            "(default: unset, check off)",
            group=HYGIENE,
            show=watchconfig.show_size,
        ),
        Option(
            "checkpoint_timeout",
            "checkpoint_timeout_s",
            parse_duration,
            "--pgbench.checkpoint-timeout",
            "DURATION",
            "the server's checkpoint_timeout: shorter runs are flagged (default: 5m, PostgreSQL's)",
            group=HYGIENE,
            check=watchconfig.positive,
            show=watchconfig.show_seconds,
        ),
        Option(
            "max_connections",
            "max_connections",
            _positive_int,
            "--pgbench.max-connections",
            "N",
            "the server's max_connections: more clients are flagged (default: 100, PostgreSQL's)",
            group=HYGIENE,
        ),
    ),
    default_listen=":9767",
)
