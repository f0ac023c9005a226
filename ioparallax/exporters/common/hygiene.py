"""What the benchmark hygiene checks of the exporters and ``ioparallax-check`` share: the
verdicts and findings (DiskSPD's and pgbench's rules) and the settings of the fio, DiskSPD and
vdbench checks (docs/hygiene.md explains each problem).

A finding is a ``trap`` (the result will say more about the test than about the storage) or
``cannot_tell`` (the input does not say whether the trap is there).
"""

from __future__ import annotations

from dataclasses import dataclass

TRAP = "trap"
CANNOT_TELL = "cannot_tell"


@dataclass(frozen=True)
class Finding:
    problem: str  # one of the tool's PROBLEMS (the ``problem`` label)
    verdict: str  # TRAP or CANNOT_TELL
    detail: str


@dataclass(frozen=True)
class HygieneConfig:
    """The fio, DiskSPD and vdbench checks' settings (pgbench's extend them with the database
    server's; esxtop has its own)."""

    cache_size_bytes: int | None = None  # None: the working-set check is off
    scrape_interval_s: float = 15.0  # a run must last at least min_scrape_intervals of these
    min_scrape_intervals: int = 3
