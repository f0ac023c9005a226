"""Hygiene checks on an esxtop batch capture (pure functions): is it the 2-second VM view it is
meant to be?

- ``long_delay``: samples further apart on average than ``max_delay_s`` (5 s by default) plus
  10 % (esxtop's own collection time stretches its delay: ``-d 3`` read 3.11 s in the real 2012
  capture of the fixtures). The point of esxtop next to vCenter is a view finer than vCenter's
  20 s; at ``-d 10`` a 3 s burst is averaged away again (docs/esxtop.md, How to run esxtop).
- ``too_few_samples``: a finished capture with fewer than 3 samples, or covering less than 3
  Prometheus scrape intervals: ``rate()`` over it says little.
- ``host_clock_skew``: while the file grows, its newest sample's timestamp is further than
  ``max_clock_skew_s`` from the time the line arrived (the file's mtime on the machine that holds
  it, the exporter's and Prometheus' clock): the host's clock is off, and the 2 s view cannot be
  lined up with the others on a dashboard. Cannot tell for a finished file.
"""

from __future__ import annotations

from dataclasses import dataclass

PROBLEMS = ("long_delay", "too_few_samples", "host_clock_skew")


@dataclass(frozen=True)
class HygieneConfig:
    max_delay_s: float = 5.0
    max_clock_skew_s: float = 60.0
    scrape_interval_s: float = 15.0
    min_scrape_intervals: int = 3
    min_samples: int = 3
    #: the share by which the mean interval may exceed max_delay_s (esxtop's collection time)
    delay_tolerance: float = 0.10


@dataclass(frozen=True)
class Capture:
    """What the checks read of one file."""

    samples: int
    first_ts: float | None
    last_ts: float | None
    mean_interval_s: float | None
    finished: bool
    last_growth: float  # the file's mtime when it last grew


def clock_offset(c: Capture) -> float | None:
    """The newest sample's time minus when its line arrived (positive: the host's clock is ahead),
    or None when it cannot be told (a finished file: the mtime is no longer an arrival time)."""
    if c.finished or c.last_ts is None or not c.last_growth:
        return None
    return c.last_ts - c.last_growth


def problems(c: Capture, config: HygieneConfig) -> list[str]:
    found: list[str] = []
    if c.mean_interval_s is not None and c.mean_interval_s > config.max_delay_s * (1 + config.delay_tolerance):
        found.append("long_delay")
    if c.finished:
        span = (c.last_ts - c.first_ts) if c.first_ts is not None and c.last_ts is not None else 0.0
        if c.samples < config.min_samples or span < config.min_scrape_intervals * config.scrape_interval_s:
            found.append("too_few_samples")
    offset = clock_offset(c)
    if offset is not None and abs(offset) > config.max_clock_skew_s:
        found.append("host_clock_skew")
    return found


def cannot_tell(c: Capture) -> list[str]:
    """Checks that cannot decide for this file (said so rather than passed as OK)."""
    out: list[str] = []
    if c.mean_interval_s is None:
        out.append("long_delay")
    if clock_offset(c) is None:
        out.append("host_clock_skew")
    return out
