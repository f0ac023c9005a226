"""The run's own per-interval series (``-D`` buckets) with the run's timestamps, for backfilling.

A scrape carries one sample per series, stamped "now"; a DiskSPD result holds a whole series per
target (one ``<Bucket>`` per ``IoBucketDuration``) that ended before the file arrived. So the
buckets are written as a timestamped file instead and loaded once (OpenMetrics for promtool,
Prometheus text for VictoriaMetrics: the shared writer, common/backfill.py; docs/diskspd.md).

Bucket times: a bucket's ``SampleMillisecond`` is the end of its interval counted from the start of
the measurement, which begins ``Warmup`` seconds after ``RunTime`` (plus the earlier time spans'
warm-up, test time and cool-down). ``RunTime`` is when DiskSPD started: a run that first creates a
large file with ``-c`` starts measuring later than this says (docs/diskspd.md, Limits).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

from ioparallax.exporters.common.backfill import BackfillWriter
from ioparallax.exporters.common.exposition import label_block
from ioparallax.exporters.common.watchdir import display_name
from ioparallax.exporters.diskspd.collector import TARGET_LABELS
from ioparallax.exporters.diskspd.parse import DiskspdError, DiskspdResult, targets_of

#: name -> HELP of the backfilled families.
FAMILIES = {
    "diskspd_interval_read_iops": "Read IOPS of one -D interval (Bucket@Read, threads summed), at the interval's end.",
    "diskspd_interval_write_iops": "Write IOPS of one -D interval (Bucket@Write, threads summed), at the interval's end.",
    "diskspd_interval_read_latency_mean_seconds": "Mean read latency of one -D interval (Bucket@ReadAvgLatencyMilliseconds, IOPS-weighted over threads; -L runs of DiskSPD 2.0.20+).",
    "diskspd_interval_write_latency_mean_seconds": "Mean write latency of one -D interval (Bucket@WriteAvgLatencyMilliseconds, IOPS-weighted over threads).",
}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: list[str]  # values of TARGET_LABELS
    timestamp_s: float
    value: float


def interval_samples(result: DiskspdResult, source: str) -> Iterator[Sample]:
    """Every ``-D`` bucket of every target as timestamped samples. Raises DiskspdError when the
    result has buckets but no RunTime to place them in time."""
    if result.run_time is None:
        if any(t.iops is not None and t.iops.buckets for s in result.spans for t in s.threads):
            raise DiskspdError("System/RunTime is empty: the -D intervals cannot be placed in time")
        return
    offset = 0.0
    host = display_name(result.computer_name)
    for i, span in enumerate(result.spans):
        prof = result.profiles[i] if i < len(result.profiles) else None
        warmup = prof.warmup_s if prof else 0.0
        start = result.run_time + offset + warmup
        offset += warmup + span.test_time_s + (prof.cooldown_s if prof else 0.0)
        if span.error is not None:
            continue
        latency = prof.measure_latency if prof else False
        for t in targets_of(prof, span):
            if t.iops is None:
                continue
            labels = [host, source, str(i + 1), str(t.index), display_name(t.path)]
            for b in t.iops.buckets:
                ts = start + b.sample_ms / 1000.0
                yield Sample("diskspd_interval_read_iops", labels, ts, b.read)
                yield Sample("diskspd_interval_write_iops", labels, ts, b.write)
                if latency and b.read_latency_avg_ms is not None and b.read > 0:
                    yield Sample("diskspd_interval_read_latency_mean_seconds", labels, ts, b.read_latency_avg_ms / 1000)
                if latency and b.write_latency_avg_ms is not None and b.write > 0:
                    yield Sample(
                        "diskspd_interval_write_latency_mean_seconds", labels, ts, b.write_latency_avg_ms / 1000
                    )


def render(samples: list[Sample], fmt: str = "openmetrics") -> str:
    """The samples grouped by family (each family's samples together, as both formats require),
    each series in time order. ``fmt``: ``openmetrics`` (timestamps in seconds, ``# EOF``) or
    ``prometheus`` (text 0.0.4, timestamps in milliseconds)."""
    out = io.StringIO()
    with BackfillWriter(FAMILIES, fmt) as writer:
        for s in sorted(samples, key=lambda s: (s.labels, s.timestamp_s)):
            writer.add(s.name, label_block(TARGET_LABELS, s.labels), s.timestamp_s, s.value)
        writer.write(out)
    return out.getvalue()
