"""Performance counters: look-up by name, batching of QueryPerf requests under
maxQueryMetrics, and the plain sample types that :mod:`.soap` parses answers into."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim

REALTIME_INTERVAL = 20

#: The per-virtual-disk counters collected (group.name.rollup), see docs/vcenter.md.
VIRTUAL_DISK_COUNTERS = (
    "virtualDisk.read.average",  # KBps
    "virtualDisk.write.average",
    "virtualDisk.numberReadAveraged.average",  # IO/s
    "virtualDisk.numberWriteAveraged.average",
    "virtualDisk.totalReadLatency.average",  # ms (integer)
    "virtualDisk.totalWriteLatency.average",
    "virtualDisk.readLatencyUS.latest",  # us
    "virtualDisk.writeLatencyUS.latest",
    "virtualDisk.readOIO.latest",  # outstanding I/Os
    "virtualDisk.writeOIO.latest",
    "virtualDisk.readIOSize.latest",  # bytes
    "virtualDisk.writeIOSize.latest",
    "virtualDisk.smallSeeks.latest",  # seeks in the interval
    "virtualDisk.mediumSeeks.latest",
    "virtualDisk.largeSeeks.latest",
)

DEFAULT_MAX_QUERY_METRICS = 256


def counter_name(info: Any) -> str:
    return f"{info.groupInfo.key}.{info.nameInfo.key}.{info.rollupType}"


def counter_keys(perf_counters: Iterable[Any], wanted: Iterable[str] = VIRTUAL_DISK_COUNTERS) -> dict[str, int]:
    """name -> key for the wanted counters this vCenter has (keys differ between builds)."""
    by_name = {counter_name(c): c.key for c in perf_counters}
    return {name: by_name[name] for name in wanted if name in by_name}


#: Counter groups whose counters the exporter would read if it mapped them: per virtual disk.
MAPPED_GROUPS = ("virtualDisk.",)


def unmapped_counters(perf_counters: Iterable[Any], mapped: Iterable[str] = VIRTUAL_DISK_COUNTERS) -> list[str]:
    """The counters of MAPPED_GROUPS this vCenter offers that the exporter does not read (sorted
    names): another build may offer a counter worth mapping (docs/vcenter.md, Coverage)."""
    known = set(mapped)
    names = {counter_name(c) for c in perf_counters}
    return sorted(n for n in names if n.startswith(MAPPED_GROUPS) and n not in known)


def read_max_query_metrics(si: Any) -> int:
    """config.vpxd.stats.maxQueryMetrics, or 256 when the option is absent or its value unreadable
    (256 is the default since vCenter 6.5; set max_query_metrics for older ones).

    Any other failure (an expired session, a dropped connection) is raised: the caller keeps the
    answer for the target's life, so a default taken on a transient error would make every later
    QueryPerf too large for a vCenter whose limit is lower (a session that expired during a slow
    first probe did that)."""
    try:
        opts = si.content.setting.QueryOptions("config.vpxd.stats.maxQueryMetrics")
    except vim.fault.InvalidName:
        return DEFAULT_MAX_QUERY_METRICS
    try:
        value = int(opts[0].value)
    except (IndexError, TypeError, ValueError, AttributeError):
        return DEFAULT_MAX_QUERY_METRICS
    return value if value > 0 else DEFAULT_MAX_QUERY_METRICS


@dataclass
class EntityRequest:
    """What to ask for one VM: its disk instances (or "*") and the last sample already seen."""

    moref: str
    instances: tuple[str, ...]  # explicit instances; ("*",) to let vCenter expand
    since: float | None  # epoch seconds of the newest sample seen (exclusive)


def batch_requests(requests: list[EntityRequest], n_counters: int, max_metrics: int) -> Iterator[list[EntityRequest]]:
    """Group VM requests so that one QueryPerf asks for at most ``max_metrics`` metric ids."""
    batch: list[EntityRequest] = []
    used = 0
    for req in requests:
        cost = max(1, n_counters * len(req.instances))
        if batch and used + cost > max_metrics:
            yield batch
            batch, used = [], 0
        batch.append(req)
        used += cost
    if batch:
        yield batch


@dataclass
class Sample:
    timestamp: float  # end of the interval, epoch seconds
    interval: int
    values: dict[str, int] = field(default_factory=dict)  # counter name -> raw value


@dataclass
class ParseResult:
    # moref -> instance -> samples (ascending by timestamp)
    samples: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)
    star_echoed: set[str] = field(default_factory=set)  # VMs whose answer had instance "*"
    misaligned: int = 0  # series whose value count differs from the sample count (dropped)
    unread: int = 0  # series of a counter that was not asked for (never read)
    empty: int = 0  # series with no value at all


_TS_CACHE: dict[str, float] = {}


def parse_timestamp(text: str) -> float:
    ts = _TS_CACHE.get(text)
    if ts is None:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        if len(_TS_CACHE) > 10000:
            _TS_CACHE.clear()
        _TS_CACHE[text] = ts
    return ts
