"""Integration of vCenter's 20 s samples into counters, so that no sample is lost whatever the
scrape interval and ``rate()`` over any window is the true average.

Each sample is a rate (or a mean) over its interval; multiplied by the interval it becomes an
amount: operations, bytes, latency x operations (seconds), outstanding I/Os x time
(outstanding-seconds, like node_exporter's ``io_time_weighted_seconds``), seeks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ioparallax.exporters.vcenter.parse import Sample


@dataclass
class DiskCounters:
    """Counters of one virtual disk, and the newest sample (what vCenter's chart shows)."""

    read_ops: float = 0.0
    write_ops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    read_latency_seconds: float = 0.0  # sum over ops of their latency
    write_latency_seconds: float = 0.0
    read_outstanding_seconds: float = 0.0  # integral of outstanding I/Os over time
    write_outstanding_seconds: float = 0.0
    seeks: dict[str, float] = field(default_factory=lambda: {"small": 0.0, "medium": 0.0, "large": 0.0})
    samples: int = 0
    last_timestamp: float | None = None
    latest: Sample | None = None


# Counter names per direction, built once (integrate() runs for every new sample of every disk).
_READ = (
    "virtualDisk.numberReadAveraged.average",
    "virtualDisk.read.average",
    "virtualDisk.readLatencyUS.latest",
    "virtualDisk.totalReadLatency.average",
    "virtualDisk.readOIO.latest",
)
_WRITE = (
    "virtualDisk.numberWriteAveraged.average",
    "virtualDisk.write.average",
    "virtualDisk.writeLatencyUS.latest",
    "virtualDisk.totalWriteLatency.average",
    "virtualDisk.writeOIO.latest",
)
_SEEKS = (
    ("small", "virtualDisk.smallSeeks.latest"),
    ("medium", "virtualDisk.mediumSeeks.latest"),
    ("large", "virtualDisk.largeSeeks.latest"),
)


def _amounts(v: dict[str, int], names: tuple[str, ...], width: int) -> tuple[float, float, float, float]:
    """(ops, bytes, latency x ops in seconds, outstanding-seconds) of one direction of a sample.
    An absent counter adds nothing. Latency comes from the microsecond counter when present
    (sub-ms flash), else from the integer-millisecond one."""
    ops_name, kbps_name, us_name, ms_name, oio_name = names
    get = v.get
    rate = get(ops_name)
    ops = rate * width if rate is not None else None
    kbps = get(kbps_name)
    us = get(us_name)
    lat = us / 1e6 if us is not None else (ms / 1e3 if (ms := get(ms_name)) is not None else None)
    oio = get(oio_name)
    return (
        ops or 0,
        kbps * 1024.0 * width if kbps is not None else 0,
        lat * ops if lat is not None and ops is not None else 0,
        oio * width if oio is not None else 0,
    )


def integrate(state: DiskCounters, samples: list[Sample]) -> int:
    """Add the samples newer than the last one seen (ascending input); returns how many."""
    added = 0
    for s in samples:
        if state.last_timestamp is not None and s.timestamp <= state.last_timestamp:
            continue
        v = s.values
        width = s.interval
        ops, nbytes, lat, oio = _amounts(v, _READ, width)
        state.read_ops += ops
        state.read_bytes += nbytes
        state.read_latency_seconds += lat
        state.read_outstanding_seconds += oio
        ops, nbytes, lat, oio = _amounts(v, _WRITE, width)
        state.write_ops += ops
        state.write_bytes += nbytes
        state.write_latency_seconds += lat
        state.write_outstanding_seconds += oio
        seeks = state.seeks
        for cls, name in _SEEKS:
            n = v.get(name)
            if n is not None:
                seeks[cls] += n
        state.samples += 1
        state.last_timestamp = s.timestamp
        state.latest = s
        added += 1
    return added


@dataclass
class CpuCounters:
    """CPU counters of one VM or host, integrated from its 20 s samples."""

    usage_cycles: float = 0.0  # cpu.usagemhz.average x 10^6 x interval
    ready_seconds: float = 0.0  # cpu.ready.summation / 1000 (already a sum over the interval)
    samples: int = 0
    last_timestamp: float | None = None


def integrate_cpu(state: CpuCounters, samples: list[Sample]) -> int:
    """Add the CPU samples newer than the last one seen (ascending input); returns how many. A
    sample without a counter adds nothing for it (no made-up 0)."""
    added = 0
    for s in samples:
        if state.last_timestamp is not None and s.timestamp <= state.last_timestamp:
            continue
        mhz = s.values.get("cpu.usagemhz.average")
        if mhz is not None:
            state.usage_cycles += mhz * 1e6 * s.interval
        ready = s.values.get("cpu.ready.summation")
        if ready is not None:
            state.ready_seconds += ready / 1000.0
        state.samples += 1
        state.last_timestamp = s.timestamp
        added += 1
    return added
