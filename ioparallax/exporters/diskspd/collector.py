"""Exposition: DiskSPD results as Prometheus metric families, built fresh on every scrape.

On each scrape the :class:`DiskspdCollector` asks :class:`ResultFiles` to look for new or changed
files (a changed file is parsed once; an unchanged one is not even opened), then yields families
from each file's result. No sample carries a timestamp: the run's own per-interval ``-D`` series
reach Prometheus by backfill (:mod:`ioparallax.exporters.diskspd.backfill`), see docs/diskspd.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from ioparallax.exporters.common.families import MetricFamilies
from ioparallax.exporters.common.hygiene import CANNOT_TELL
from ioparallax.exporters.common.watch.scrape import WatchCollector, source_state
from ioparallax.exporters.common.watchdir import display_name
from ioparallax.exporters.diskspd.hygiene import HygieneConfig, find_problems, spec_from_result
from ioparallax.exporters.diskspd.parse import (
    TEXT_PERCENTILES,
    DiskspdResult,
    TargetResult,
    TimeSpanProfile,
    TimeSpanResult,
    targets_of,
)
from ioparallax.exporters.diskspd.reader import ResultFiles, SourceView

log = logging.getLogger(__name__)

RUN_LABELS = ["host", "source"]
SPAN_LABELS = RUN_LABELS + ["timespan"]
TARGET_LABELS = SPAN_LABELS + ["target_id", "target"]
_MS = 1e-3  # DiskSPD prints milliseconds with 3 decimals: seconds are rounded to 1e-9


@dataclass(frozen=True)
class Collectors:
    """What can be switched: ``all_percentiles`` exports the 108 percentiles DiskSPD's XML holds
    per direction instead of the 15 its text output shows."""

    all_percentiles: bool = False


def percentile_label(p: float) -> str:
    """``99.9``, ``50``, ``100``: the percentile in percent as DiskSPD prints it."""
    return floatToGoString(p).removesuffix(".0")


class DiskspdCollector(WatchCollector):
    prefix = "diskspd"
    output = "DiskSPD result files"
    up_help = (
        "1 if every watched path and DiskSPD result file could be read on this scrape and no "
        "file is down, else 0 (diskspd_source_error_info and the log name the file and the cause)."
    )
    duration_help = "Seconds spent reading DiskSPD result files and building this scrape."

    def __init__(
        self,
        files: ResultFiles,
        hygiene: HygieneConfig | None = None,
        collectors: Collectors = Collectors(),
        poll: bool = True,
    ):
        super().__init__(files, hygiene or HygieneConfig(), poll=poll)
        self.files = files
        self.collectors = collectors
        # per parsed time span, its targets (threads summed, -D buckets merged): computed once per
        # file version, not at every scrape (an hour of 1 s buckets on 16 threads takes ~60 ms)
        self._targets: dict[int, tuple[TimeSpanResult, list[TargetResult]]] = {}
        self._used: set[int] = set()

    def take_snapshot(self) -> list[SourceView]:
        return self.files.views()

    def sources(self, fams: MetricFamilies, views: list[SourceView]) -> bool:
        self._used = set()
        ok = super().sources(fams, views)
        self._targets = {k: v for k, v in self._targets.items() if k in self._used}
        return ok

    def source(self, fams: MetricFamilies, v: SourceView) -> bool:
        self._source(fams, v)
        return v.up

    def failed(self, fams: MetricFamilies, v: SourceView, exc: Exception) -> None:
        log.error("exposing DiskSPD result file %s failed; it is down until it changes", v.name, exc_info=exc)
        self.files.mark_failed(v.path, "internal_error", f"{type(exc).__name__}: {exc}")
        v.reason, v.result = "internal_error", None  # down (up is reason is None)
        self._source(fams, v)

    def _source(self, fams: MetricFamilies, v: SourceView) -> None:
        src = [v.name]
        source_state(
            fams,
            "diskspd",
            "1 if the DiskSPD result file could be read and parsed (or is a copy still under way); "
            "0: see diskspd_source_error_info for why.",
            "Why the file is down (present only while diskspd_source_up is 0): unreadable, "
            "corrupt (not well-formed XML), truncated (ends before </Results> and no longer "
            "changing), not_diskspd, invalid_value (a number DiskSPD cannot write), "
            "forbidden_markup (a DOCTYPE or entity declaration), too_large "
            "(above --diskspd.max-file-size), internal_error. The log names the file and the cause. Value 1.",
            src,
            v.up,
            v.reason,
        )
        if v.incomplete:
            fams.gauge(
                "diskspd_source_incomplete",
                "1 while the file ends early but was modified within --diskspd.settle-time: a "
                "copy under way, not yet an error.",
                ["source"],
                src,
                1.0,
            )
        fams.counter(
            "diskspd_source_read_errors_total", "Failed attempts to read the file.", ["source"], src, v.read_errors
        )
        if v.mtime:
            fams.gauge(
                "diskspd_source_modified_timestamp_seconds",
                "The file's modification time (when it was written or copied), seconds since the epoch.",
                ["source"],
                src,
                v.mtime,
            )
        if v.result is None or not v.visible:
            return
        self._run(fams, v.result, v.name)

    def _run(self, fams: MetricFamilies, r: DiskspdResult, source: str) -> None:
        host = display_name(r.computer_name)
        run = [host, source]
        fams.gauge(
            "diskspd_run_info",
            "A DiskSPD run: host is System/ComputerName (the guest's host name, as vCenter's "
            "guest.hostName), source the result file, version System/Tool/Version. Value 1.",
            RUN_LABELS + ["version"],
            run + [display_name(r.version)],
            1.0,
        )
        if r.run_time is not None:
            fams.gauge(
                "diskspd_run_start_timestamp_seconds",
                "When DiskSPD started (System/RunTime, UTC), seconds since the epoch.",
                RUN_LABELS,
                run,
                r.run_time,
            )
        for i, span in enumerate(r.spans):
            prof = r.profiles[i] if i < len(r.profiles) else None
            self._span(fams, run + [str(i + 1)], span, prof)

    def _span(
        self, fams: MetricFamilies, labels: list[str], span: TimeSpanResult, prof: TimeSpanProfile | None
    ) -> None:
        if span.error is not None:
            fams.gauge(
                "diskspd_timespan_interrupted",
                "1: DiskSPD was interrupted before the time span's measurements began (its <Error>); no results.",
                SPAN_LABELS,
                labels,
                1.0,
            )
            return
        fams.gauge(
            "diskspd_timespan_test_seconds",
            "Measured time of the time span (TestTimeSeconds), warm-up and cool-down excluded.",
            SPAN_LABELS,
            labels,
            span.test_time_s,
        )
        if prof is not None:
            for name, value, what in (
                ("duration", prof.duration_s, "Duration asked (-d)"),
                ("warmup", prof.warmup_s, "Warm-up asked (-W): I/O before measuring"),
                ("cooldown", prof.cooldown_s, "Cool-down asked (-C): I/O after measuring"),
            ):
                fams.gauge(f"diskspd_timespan_{name}_seconds", f"{what}, seconds.", SPAN_LABELS, labels, value)
        fams.gauge(
            "diskspd_timespan_threads",
            "Threads of the time span (ThreadCount).",
            SPAN_LABELS,
            labels,
            span.thread_count,
        )
        if span.proc_count:
            fams.gauge(
                "diskspd_timespan_processors",
                "Processors of the machine DiskSPD ran on (ProcCount).",
                SPAN_LABELS,
                labels,
                span.proc_count,
            )
        if span.cpu is not None:
            for mode, pct in (
                ("user", span.cpu.user_percent),
                ("kernel", span.cpu.kernel_percent),
                ("idle", span.cpu.idle_percent),
            ):
                fams.gauge(
                    "diskspd_timespan_cpu_ratio",
                    "Average share of the machine's CPU time during the time span (CpuUtilization/Average, percent/100).",
                    SPAN_LABELS + ["mode"],
                    labels + [mode],
                    pct / 100.0,
                )
        wanted = None if self.collectors.all_percentiles else set(TEXT_PERCENTILES)
        for p in span.latency_percentiles:
            if wanted is not None and p.percentile not in wanted:
                continue
            plabel = labels + [percentile_label(p.percentile)]
            for d, ms in (("read_", p.read_ms), ("write_", p.write_ms), ("", p.total_ms)):
                if ms is None:
                    continue
                what = {"read_": "read", "write_": "write", "": "read and write"}[d]
                fams.gauge(
                    f"diskspd_{d}latency_percentile_seconds",
                    f"{what.capitalize()} latency percentile over all threads and targets of the time "
                    "span (-L; Latency/Bucket; percentile 0 is the minimum, 100 the maximum).",
                    SPAN_LABELS + ["percentile"],
                    plabel,
                    round(ms * _MS, 9),
                )
        cached = self._targets.get(id(span))
        if cached is None or cached[0] is not span:
            cached = self._targets[id(span)] = (span, targets_of(prof, span))
        self._used.add(id(span))
        for t in cached[1]:
            self._target(fams, labels + [str(t.index), display_name(t.path)], t, span, prof)

    def _target(
        self,
        fams: MetricFamilies,
        labels: list[str],
        t: TargetResult,
        span: TimeSpanResult,
        prof: TimeSpanProfile | None,
    ) -> None:
        tp = t.profile
        if tp is not None:
            fams.gauge(
                "diskspd_target_info",
                "A target as run: access random|sequential|mixed (-r/-s/-rs), write_buffer "
                "sequential (DiskSPD's default repeating pattern, or -Zr: not recorded)|zero (-Z)|random "
                "(-Z<size>), os_cache on (buffered)|off (-Su/-Sh), write_through on|off (-Sw/-Sh). Value 1.",
                TARGET_LABELS + ["access", "write_buffer", "os_cache", "write_through"],
                labels
                + [tp.access, tp.write_pattern, "on" if tp.os_cache else "off", "on" if tp.write_through else "off"],
                1.0,
            )
            fams.gauge("diskspd_target_block_size_bytes", "Block size (-b).", TARGET_LABELS, labels, tp.block_size)
            fams.gauge(
                "diskspd_target_requests_per_thread",
                "Outstanding I/Os per thread asked (RequestCount, -o).",
                TARGET_LABELS,
                labels,
                tp.request_count,
            )
            fams.gauge(
                "diskspd_target_outstanding_ios",
                "Outstanding I/Os asked on the target: RequestCount x the threads that ran it; "
                "compare with throughput x latency of each layer (Little's law).",
                TARGET_LABELS,
                labels,
                tp.request_count * t.threads,
            )
            fams.gauge(
                "diskspd_target_write_ratio",
                "Share of I/Os asked to be writes (WriteRatio/100, -w).",
                TARGET_LABELS,
                labels,
                tp.write_ratio / 100.0,
            )
            fams.gauge(
                "diskspd_target_random_ratio",
                "Share of I/Os asked to be random (1 for -r, the -rs share, 0 for sequential).",
                TARGET_LABELS,
                labels,
                tp.random_fraction,
            )
            spec = spec_from_result(prof, t) if prof is not None else None
            for f in find_problems(spec, self.hygiene) if spec is not None else []:
                name = (
                    "diskspd_target_hygiene_cannot_tell"
                    if f.verdict == CANNOT_TELL
                    else "diskspd_target_hygiene_problem"
                )
                fams.gauge(
                    name,
                    "1 for each benchmark hygiene trap found in the target's profile; see docs/hygiene.md."
                    if f.verdict != CANNOT_TELL
                    else "1 for each hygiene check the result cannot decide (a 'sequential' write "
                    "pattern is DiskSPD's default or -Zr, which it does not record); see docs/hygiene.md.",
                    TARGET_LABELS + ["problem"],
                    labels + [f.problem],
                    1.0,
                )
        fams.gauge(
            "diskspd_target_threads", "Threads that ran the target in the time span.", TARGET_LABELS, labels, t.threads
        )
        fams.gauge(
            "diskspd_target_file_size_bytes",
            "Size of the target (Thread/Target/FileSize: the file, volume or disk).",
            TARGET_LABELS,
            labels,
            t.file_size,
        )
        seconds = span.test_time_s
        for d, count, nbytes in (("read", t.read_count, t.read_bytes), ("write", t.write_count, t.write_bytes)):
            fams.counter(
                f"diskspd_{d}_ios_total",
                f"Completed {d} I/Os of the time span, all threads ({d.capitalize()}Count).",
                TARGET_LABELS,
                labels,
                count,
            )
            fams.counter(
                f"diskspd_{d}_bytes_total",
                f"Bytes {d} in the time span, all threads ({d.capitalize()}Bytes).",
                TARGET_LABELS,
                labels,
                nbytes,
            )
            if seconds > 0:
                fams.gauge(
                    f"diskspd_{d}_iops",
                    f"{d.capitalize()} I/Os per second over the measured time (count / TestTimeSeconds): "
                    "the number DiskSPD's text report shows.",
                    TARGET_LABELS,
                    labels,
                    count / seconds,
                )
                fams.gauge(
                    f"diskspd_{d}_bandwidth_bytes_per_second",
                    f"{d.capitalize()} bytes per second over the measured time.",
                    TARGET_LABELS,
                    labels,
                    nbytes / seconds,
                )
            lat = t.latency
            mean = getattr(lat, f"{d}_avg_ms") if lat is not None else None
            sd = getattr(lat, f"{d}_stdev_ms") if lat is not None else None
            if mean is not None and count > 0:
                fams.gauge(
                    f"diskspd_{d}_latency_mean_seconds",
                    f"Mean {d} latency (-L; Average{d.capitalize()}LatencyMilliseconds, weighted by the threads' I/O counts).",
                    TARGET_LABELS,
                    labels,
                    round(mean * _MS, 9),
                )
                fams.counter(
                    f"diskspd_{d}_latency_seconds_total",
                    f"Sum of the {d} latencies (mean x count), so that latency sums over targets "
                    f"and hosts divide by diskspd_{d}_ios_total as node_exporter's and windows_exporter's do.",
                    TARGET_LABELS,
                    labels,
                    mean * _MS * count,
                )
            if sd is not None and count > 0:
                fams.gauge(
                    f"diskspd_{d}_latency_stddev_seconds",
                    f"Standard deviation of the {d} latency (-L; {d.capitalize()}LatencyStdev, pooled over threads).",
                    TARGET_LABELS,
                    labels,
                    round(sd * _MS, 9),
                )
            iops = t.iops
            if iops is not None:
                stddev = iops.read_stddev if d == "read" else iops.write_stddev
                if stddev is not None:
                    fams.gauge(
                        f"diskspd_{d}_iops_stddev",
                        f"Standard deviation of the {d} IOPS over the -D intervals ({d.capitalize()}IopsStdDev).",
                        TARGET_LABELS,
                        labels,
                        stddev,
                    )
                values = [b.read if d == "read" else b.write for b in iops.buckets]
                if values and stddev is not None:
                    fams.gauge(
                        f"diskspd_{d}_interval_iops_max",
                        f"Highest {d} IOPS of one -D interval (the run's peak; the whole series is backfilled, docs/diskspd.md).",
                        TARGET_LABELS,
                        labels,
                        max(values),
                    )
        if t.iops is not None and prof is not None:
            fams.gauge(
                "diskspd_target_interval_seconds",
                "Length of the -D intervals (IoBucketDuration).",
                TARGET_LABELS,
                labels,
                prof.io_bucket_duration_ms * _MS,
            )
