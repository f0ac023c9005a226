"""Performance counters: look-up by name, batched QueryPerf specs, and the parsing of what
vCenter returns (normal or CSV format) into plain samples.

Everything here except :func:`query` is pure and tested on recorded answers; the quirks of
stock vcsim (zeros dropped from a series, newest-first unaligned timestamps, ``*`` echoed back
instead of expanded) are handled here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from pyVmomi import vim

REALTIME_INTERVAL = 20

#: The per-virtual-disk counters collected (group.name.rollup), see docs/vcenter.md.
VIRTUAL_DISK_COUNTERS = (
    "virtualDisk.read.average",                 # KBps
    "virtualDisk.write.average",
    "virtualDisk.numberReadAveraged.average",   # IO/s
    "virtualDisk.numberWriteAveraged.average",
    "virtualDisk.totalReadLatency.average",     # ms (integer)
    "virtualDisk.totalWriteLatency.average",
    "virtualDisk.readLatencyUS.latest",         # us
    "virtualDisk.writeLatencyUS.latest",
    "virtualDisk.readOIO.latest",               # outstanding I/Os
    "virtualDisk.writeOIO.latest",
    "virtualDisk.readIOSize.latest",            # bytes
    "virtualDisk.writeIOSize.latest",
    "virtualDisk.smallSeeks.latest",            # seeks in the interval
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


def read_max_query_metrics(si: Any) -> int:
    """config.vpxd.stats.maxQueryMetrics, or 256 when the option is absent or unreadable
    (256 is the default since vCenter 6.5; set max_query_metrics for older ones)."""
    try:
        opts = si.content.setting.QueryOptions("config.vpxd.stats.maxQueryMetrics")
        value = int(opts[0].value)
        return value if value > 0 else DEFAULT_MAX_QUERY_METRICS
    except Exception:
        return DEFAULT_MAX_QUERY_METRICS


@dataclass
class EntityRequest:
    """What to ask for one VM: its disk instances (or "*") and the last sample already seen."""

    moref: str
    instances: tuple[str, ...]      # explicit instances; ("*",) to let vCenter expand
    since: float | None             # epoch seconds of the newest sample seen (exclusive)


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


def build_spec(req: EntityRequest, keys: Iterable[int], fmt: str) -> Any:
    """A realtime query spec: every sample after ``since``; only the latest without history."""
    ids = [vim.PerformanceManager.MetricId(counterId=k, instance=inst) for k in keys for inst in req.instances]
    spec = vim.PerformanceManager.QuerySpec(
        entity=vim.VirtualMachine(req.moref), metricId=ids, intervalId=REALTIME_INTERVAL, format=fmt)
    if req.since is None:
        spec.maxSample = 1
    else:
        spec.startTime = dt.datetime.fromtimestamp(req.since, dt.timezone.utc)
    return spec


@dataclass
class Sample:
    timestamp: float                         # end of the interval, epoch seconds
    interval: int
    values: dict[str, int] = field(default_factory=dict)  # counter name -> raw value


@dataclass
class ParseResult:
    # moref -> instance -> samples (ascending by timestamp)
    samples: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)
    star_echoed: set[str] = field(default_factory=set)  # VMs whose answer had instance "*"
    misaligned: int = 0      # series whose value count differs from the sample count (dropped)
    empty: int = 0           # series with no value at all


_TS_CACHE: dict[str, float] = {}


def parse_timestamp(text: str) -> float:
    ts = _TS_CACHE.get(text)
    if ts is None:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        if len(_TS_CACHE) > 10000:
            _TS_CACHE.clear()
        _TS_CACHE[text] = ts
    return ts


def _sample_infos(metric: Any) -> list[tuple[float, int]]:
    if isinstance(metric, vim.PerformanceManager.EntityMetricCSV):
        parts = (metric.sampleInfoCSV or "").split(",") if metric.sampleInfoCSV else []
        return [(parse_timestamp(parts[i + 1]), int(parts[i])) for i in range(0, len(parts) - 1, 2)]
    return [(s.timestamp.timestamp(), int(s.interval)) for s in metric.sampleInfo or []]


def _series_values(series: Any) -> list[int]:
    if isinstance(series, vim.PerformanceManager.MetricSeriesCSV):
        return [int(v) for v in series.value.split(",")] if series.value else []
    return list(getattr(series, "value", None) or [])


def parse_query_result(metrics: Iterable[Any], key_names: dict[int, str]) -> ParseResult:
    """QueryPerf's answer -> samples per VM and instance, ascending, newest-first answers
    reordered; values below 0 (vCenter's "no data") are left out, never turned into zeros."""
    out = ParseResult()
    for metric in metrics or []:
        moref = metric.entity._moId
        infos = _sample_infos(metric)
        order = sorted(range(len(infos)), key=lambda i: infos[i][0])
        per_instance = out.samples.setdefault(moref, {})
        for series in metric.value or []:
            name = key_names.get(series.id.counterId)
            if name is None:
                continue
            instance = series.id.instance
            if instance == "*":
                out.star_echoed.add(moref)
                continue
            values = _series_values(series)
            if not values:
                out.empty += 1
                continue
            if len(values) != len(infos):
                # Zeros dropped on the wire (stock vcsim): positions are unknowable. Reporting
                # shifted values would be wrong, so the series is left out and counted.
                out.misaligned += 1
                continue
            samples = per_instance.get(instance)
            if samples is None:
                samples = per_instance[instance] = [Sample(infos[i][0], infos[i][1]) for i in order]
            for pos, i in enumerate(order):
                v = values[i]
                if v >= 0:
                    samples[pos].values[name] = v
    return out


def query(si: Any, specs: list[Any]) -> list[Any]:
    return si.content.perfManager.QueryPerf(querySpec=specs) or []
