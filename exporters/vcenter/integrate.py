"""Integration of vCenter's 20 s samples into counters, so that no sample is lost whatever the
scrape interval and ``rate()`` over any window is the true average.

Each sample is a rate (or a mean) over its interval; multiplied by the interval it becomes an
amount: operations, bytes, latency x operations (seconds), outstanding I/Os x time
(outstanding-seconds, like node_exporter's ``io_time_weighted_seconds``), seeks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .perf import Sample


@dataclass
class DiskCounters:
    """Counters of one virtual disk, and the newest sample (what vCenter's chart shows)."""

    read_ops: float = 0.0
    write_ops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    read_latency_seconds: float = 0.0       # sum over ops of their latency
    write_latency_seconds: float = 0.0
    read_outstanding_seconds: float = 0.0   # integral of outstanding I/Os over time
    write_outstanding_seconds: float = 0.0
    seeks: dict[str, float] = field(default_factory=lambda: {"small": 0.0, "medium": 0.0, "large": 0.0})
    samples: int = 0
    last_timestamp: float | None = None
    latest: Sample | None = None


def latency_seconds(values: dict[str, int], direction: str) -> float | None:
    """The sample's mean latency: from the microsecond counter when present (sub-ms flash),
    else from the integer-millisecond one."""
    us = values.get(f"virtualDisk.{direction}LatencyUS.latest")
    if us is not None:
        return us / 1e6
    ms = values.get(f"virtualDisk.total{direction.capitalize()}Latency.average")
    return ms / 1e3 if ms is not None else None


def integrate(state: DiskCounters, samples: list[Sample]) -> int:
    """Add the samples newer than the last one seen (ascending input); returns how many."""
    added = 0
    for s in samples:
        if state.last_timestamp is not None and s.timestamp <= state.last_timestamp:
            continue
        v = s.values
        width = s.interval
        for d in ("read", "write"):
            ops_rate = v.get(f"virtualDisk.number{d.capitalize()}Averaged.average")
            ops = ops_rate * width if ops_rate is not None else None
            if ops is not None:
                setattr(state, f"{d}_ops", getattr(state, f"{d}_ops") + ops)
            kbps = v.get(f"virtualDisk.{d}.average")
            if kbps is not None:
                setattr(state, f"{d}_bytes", getattr(state, f"{d}_bytes") + kbps * 1024.0 * width)
            lat = latency_seconds(v, d)
            if lat is not None and ops is not None:
                setattr(state, f"{d}_latency_seconds", getattr(state, f"{d}_latency_seconds") + lat * ops)
            oio = v.get(f"virtualDisk.{d}OIO.latest")
            if oio is not None:
                setattr(state, f"{d}_outstanding_seconds", getattr(state, f"{d}_outstanding_seconds") + oio * width)
        for cls in ("small", "medium", "large"):
            n = v.get(f"virtualDisk.{cls}Seeks.latest")
            if n is not None:
                state.seeks[cls] += n
        state.samples += 1
        state.last_timestamp = s.timestamp
        state.latest = s
        added += 1
    return added
