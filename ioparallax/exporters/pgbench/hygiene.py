"""Benchmark hygiene checks on a pgbench run (pure functions), before it (a command line, for
``ioparallax-check``) and after it (the summary's scaling factor, clients and duration, for the
collector).

pgbench's traps for a storage test (docs/hygiene.md#pgbench): a database that fits in
shared_buffers, the guest's RAM or the storage cache measures memory, not storage (a database
density study wants exactly that: CPU-bound, each database in memory; a storage test does not);
a run shorter than a checkpoint interval never shows the checkpoint's write burst; more clients
than ``max_connections`` fail; ``-C`` measures connection set-up; no ``-P`` leaves the live view
empty until the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ioparallax.exporters.common import hygiene as common
from ioparallax.exporters.common.hygiene import CANNOT_TELL, TRAP, Finding

#: What ``pgbench -i -s 1`` creates: 100,000 pgbench_accounts rows with their primary key, plus
#: the small branches and tellers tables: about 16 MB per unit of scale (15-16 MB measured).
DATABASE_BYTES_PER_SCALE = 16 * 10**6

#: PostgreSQL's defaults, used when the check is not told the server's settings.
DEFAULT_CHECKPOINT_TIMEOUT_S = 300.0
DEFAULT_MAX_CONNECTIONS = 100

#: Problem names (the ``problem`` label), in the order they are checked.
PROBLEMS = (
    "database_fits_in_shared_buffers",
    "database_fits_in_memory",
    "working_set_below_cache",
    "shorter_than_checkpoint",
    "short_runtime",
    "clients_above_max_connections",
    "reconnect_per_transaction",
    "no_progress_report",
)

_DENSITY = "(a database density study wants this: CPU-bound, each database in memory; a storage test does not)"


@dataclass(frozen=True)
class HygieneConfig(common.HygieneConfig):
    """The checks every tool shares (the storage cache for working_set_below_cache, the scrape
    interval for short_runtime) and the database server's settings."""

    shared_buffers_bytes: int | None = None  # None: that check is off
    memory_bytes: int | None = None  # the guest's RAM (its page cache); None: off
    checkpoint_timeout_s: float = DEFAULT_CHECKPOINT_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS


@dataclass(frozen=True)
class RunFacts:
    """What a run is (or was) asked to do; None: not known."""

    scale: int | None = None
    clients: int | None = None
    duration_s: float | None = None  # -T; None with -t (a count of transactions, no duration)
    transactions_per_client: int | None = None  # -t
    progress_s: float | None = None  # -P
    reconnect: bool = False  # -C
    progress_known: bool = True  # False for a finished run's summary (it does not say whether -P was given)


def database_bytes(scale: int) -> int:
    return scale * DATABASE_BYTES_PER_SCALE


def _mb(n: float) -> str:
    return f"{n / 10**6:,.0f} MB"


def find_problems(facts: RunFacts, config: HygieneConfig) -> list[Finding]:
    """The findings of a run, in :data:`PROBLEMS` order."""
    out: list[Finding] = []
    sizes = (
        ("database_fits_in_shared_buffers", config.shared_buffers_bytes, "shared_buffers", "PostgreSQL's own cache"),
        ("database_fits_in_memory", config.memory_bytes, "the guest's memory", "the guest's page cache"),
        ("working_set_below_cache", config.cache_size_bytes, "the storage cache", "the storage's cache"),
    )
    for problem, limit, where, answers in sizes:
        if limit is None:
            continue
        if facts.scale is None:
            out.append(
                Finding(
                    problem,
                    CANNOT_TELL,
                    f"no scale factor known (-s on 'pgbench -i', or the summary's 'scaling factor') to compare with {where}",
                )
            )
        elif database_bytes(facts.scale) <= limit:
            out.append(
                Finding(
                    problem,
                    TRAP,
                    f"scale {facts.scale} is about {_mb(database_bytes(facts.scale))}, within {where} "
                    f"({_mb(limit)}): {answers} answers the reads {_DENSITY}; for storage use a scale above "
                    f"{limit // DATABASE_BYTES_PER_SCALE + 1}",
                )
            )
    if facts.duration_s is not None:
        if facts.duration_s < config.checkpoint_timeout_s:
            out.append(
                Finding(
                    "shorter_than_checkpoint",
                    TRAP,
                    f"-T {facts.duration_s:g} s is shorter than checkpoint_timeout ({config.checkpoint_timeout_s:g} s): "
                    "the run may never see a checkpoint's write burst; run longer, better several checkpoint intervals",
                )
            )
        if facts.duration_s < config.min_scrape_intervals * config.scrape_interval_s:
            out.append(
                Finding(
                    "short_runtime",
                    TRAP,
                    f"-T {facts.duration_s:g} s is under {config.min_scrape_intervals} scrape intervals "
                    f"({config.scrape_interval_s:g} s): the other views see a couple of samples at most",
                )
            )
    elif facts.transactions_per_client is not None:
        out.append(
            Finding(
                "shorter_than_checkpoint",
                CANNOT_TELL,
                f"-t {facts.transactions_per_client} runs a count of transactions, not a duration: "
                "use -T to know the run spans checkpoints",
            )
        )
    if facts.clients is not None and facts.clients > config.max_connections:
        out.append(
            Finding(
                "clients_above_max_connections",
                TRAP,
                f"-c {facts.clients} is above max_connections ({config.max_connections}): the clients past "
                "it cannot connect and pgbench aborts",
            )
        )
    if facts.reconnect:
        out.append(
            Finding(
                "reconnect_per_transaction",
                TRAP,
                "-C opens a new connection per transaction: the run measures connection set-up (fork, "
                "authentication), not the storage",
            )
        )
    if facts.progress_known and facts.progress_s is None:
        out.append(
            Finding(
                "no_progress_report",
                TRAP,
                "no -P: pgbench prints nothing until it ends, so the live application view stays "
                "empty for the whole run (add -P 5)",
            )
        )
    return out
