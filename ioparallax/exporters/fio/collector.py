"""Exposition: fio's latest state as Prometheus metric families, built fresh on every scrape.

On each scrape the :class:`FioCollector` asks the watcher to read what the files gained since the
last scrape (O(new bytes)), then yields families from the latest record of each file. Nothing is
updated in the background and no sample carries a timestamp. See docs/fio.md for every metric.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from ioparallax.exporters.common.exposition import printable
from ioparallax.exporters.common.families import MetricFamilies, finite
from ioparallax.exporters.common.watch.scrape import WatchCollector, source_state
from ioparallax.exporters.fio.histogram import LATENCY_EDGES_SECONDS, cumulative_buckets
from ioparallax.exporters.fio.hygiene import HygieneConfig, find_problems, is_direct
from ioparallax.exporters.fio.parse import DirectionStats, JobRecord, Latency
from ioparallax.exporters.fio.reader import REJECT_REASONS, SourceView, Watcher

log = logging.getLogger(__name__)

JOB_LABELS = ["jobname", "jobid", "host", "source"]
INFO_OPTIONS = ["file", "rw", "bs", "iodepth", "numjobs", "direct", "ioengine"]
_NS = 1e-9


#: A job's own figures, each exposed when fio wrote it: (family, type, help, JobRecord attribute,
#: divisor to base units or None).
_JOB_SERIES: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("fio_job_runtime_seconds_total", "counter", "Time the job has run (job_runtime).", "job_runtime_ms", 1000.0),
    ("fio_job_elapsed_seconds", "gauge", "Seconds since the job started (elapsed).", "elapsed_s", None),
    (
        "fio_job_eta_seconds",
        "gauge",
        "fio's estimate of the seconds left (eta); absent while fio has no estimate.",
        "eta_s",
        None,
    ),
    ("fio_job_cpu_user_ratio", "gauge", "User CPU time of the job over its runtime (usr_cpu/100).", "usr_cpu", 100.0),
    (
        "fio_job_cpu_system_ratio",
        "gauge",
        "System CPU time of the job over its runtime (sys_cpu/100).",
        "sys_cpu",
        100.0,
    ),
    ("fio_job_context_switches_total", "counter", "Context switches of the job (ctx).", "ctx", None),
    ("fio_job_major_page_faults_total", "counter", "Major page faults of the job (majf).", "majf", None),
    ("fio_job_minor_page_faults_total", "counter", "Minor page faults of the job (minf).", "minf", None),
)


@dataclass(frozen=True)
class Collectors:
    """The expensive per-job families that can be switched off (``--no-collector.percentiles``,
    ``--no-collector.histograms``, ``--no-collector.trim``); the series each saves are in
    docs/fio.md, Series budget."""

    percentiles: bool = True  # fio's own clat percentiles: 17 series per timed direction
    histograms: bool = True  # the 19 finite clat buckets per timed direction (+Inf, _count, _sum stay)
    trim: bool = True  # the trim direction, for jobs that trim (see trims())


def trims(job: JobRecord, stats: DirectionStats) -> bool:
    """Whether a job's trim direction is exported: it did trim I/O, or its options ask for trims
    (``rw`` naming trim: trim, randtrim, trimwrite, randtrimwrite; or ``trim_percentage``, verify
    trims). fio prints a trim block for every job, all zeros when it never trims: 6 series per job
    that say nothing are left out."""
    if stats.total_ios or stats.io_bytes or stats.clat is not None:
        return True
    o = job.options
    return "trim" in o.get("rw", o.get("readwrite", "")) or o.get("trim_percentage", "0") not in ("", "0")


def _iodepth(value: str) -> float | None:
    """fio's iodepth option (a raw string such as "32"); None when it is not a plain number fio
    could take (fio's iodepth is a 32-bit count)."""
    if value == "":
        return 1.0
    try:
        depth = int(value, 0)
    except ValueError:
        return None
    return float(depth) if 0 < depth < 2**32 else None


def _le(edge: float) -> str:
    """HistogramMetricFamily takes ``le`` as the caller's string: written as prometheus_client
    writes it for its own histograms (``0.001``, ``1.0``; from 1e6 up ``1e+06``): the same
    label value, so the same series, as a prometheus_client Histogram with these bounds."""
    return floatToGoString(edge)


class FioCollector(WatchCollector):
    prefix = "fio"
    output = "fio output"
    up_help = (
        "1 if every watched path and fio output file could be read "
        "on this scrape and no file is down, else 0 (fio_source_error_info and the "
        "log name the file and the cause)."
    )
    duration_help = "Seconds spent reading fio output and building this scrape."

    def __init__(
        self,
        watcher: Watcher,
        hygiene: HygieneConfig | None = None,
        local_host: str | None = None,
        clock: Callable[[], float] = time.time,
        poll: bool = True,
        collectors: Collectors = Collectors(),
    ):
        super().__init__(watcher, hygiene or HygieneConfig(), clock, poll)
        self.collectors = collectors
        self.local_host = local_host or socket.gethostname()
        self._hist_cache: dict[int, tuple[Latency, list[int], int]] = {}
        self._collided: set[str] = set()  # paths left out because their label was taken (logged once)
        self._used: set[int] = set()

    def take_snapshot(self) -> list[SourceView]:
        return self.watcher.views()

    def sources(self, fams: MetricFamilies, views: list[SourceView]) -> bool:
        ok = True
        self._used = set()
        shown: dict[str, str] = {}  # source label -> the path shown under it
        for view in views:
            label = printable(view.path)
            if shown.setdefault(label, view.path) != view.path:
                # Two names written alike once escaped (a byte 0xff and the four characters "\xff"):
                # the second would duplicate the first's series; it is left out, with a log line.
                if view.path not in self._collided:
                    log.warning(
                        "fio output file %r is not exported: its source label would be %s, as for %r",
                        os.fsencode(view.path),
                        label,
                        os.fsencode(shown[label]),
                    )
                    self._collided.add(view.path)
                ok = False
                continue
            ok = self.isolated(fams, view) and ok
        self._hist_cache = {k: v for k, v in self._hist_cache.items() if k in self._used}
        return ok

    # ---------------------------------------------------------------------------------------
    def source(self, fams: MetricFamilies, v: SourceView) -> bool:
        self._source(fams, v, self._used)
        return v.up

    def failed(self, fams: MetricFamilies, v: SourceView, exc: Exception) -> None:
        """Shown down with reason ``internal_error`` until a new record comes."""
        log.error("exposing fio output file %s failed; it is down until a new record comes", v.path, exc_info=exc)
        self.watcher.mark_failed(v.path, "internal_error", f"{type(exc).__name__}: {exc}")
        v.reason, v.latest = "internal_error", None  # down (up is reason is None)
        self._source(fams, v, self._used)

    def _source(self, fams: MetricFamilies, v: SourceView, used: set[int]) -> None:
        src = [v.path]
        source_state(
            fams,
            "fio",
            "1 if the fio output file could be read on this scrape and its "
            "latest document was accepted; 0: see fio_source_error_info for why.",
            "Why the file is down (present only while "
            "fio_source_up is 0): unreadable, corrupt (the latest document is not JSON), "
            "invalid_value (a number fio cannot write: "
            "NaN, infinity, negative, beyond 2^64), too_large (a document above "
            "--fio.max-document-size), truncated (convert: the last document is cut off), "
            "internal_error. The log names the file and the cause. Value 1.",
            src,
            v.up,
            v.reason,
        )
        for reason in REJECT_REASONS:
            fams.counter(
                "fio_source_rejected_documents_total",
                "fio documents rejected as garbage "
                "and not exported: invalid_value (a number fio cannot write), too_large "
                "(above --fio.max-document-size, skipped unread).",
                ["source", "reason"],
                src + [reason],
                v.rejected.get(reason, 0),
            )
        fams.counter(
            "fio_source_records_total",
            "fio JSON documents (results or status records) read from the file.",
            ["source"],
            src,
            v.records,
        )
        fams.counter(
            "fio_source_read_errors_total", "Failed attempts to read the file.", ["source"], src, v.read_errors
        )
        fams.counter(
            "fio_source_non_json_lines_total",
            "Lines skipped because they are not JSON (fio's 'note:' and 'fio: io_u error' lines).",
            ["source"],
            src,
            v.counts.non_json_lines,
        )
        fams.counter(
            "fio_source_corrupt_documents_total",
            "Documents dropped because they could not be decoded (cut off or garbled).",
            ["source"],
            src,
            v.counts.corrupt_documents,
        )
        fams.counter(
            "fio_source_not_fio_documents_total",
            "Valid JSON documents that are not fio output.",
            ["source"],
            src,
            v.counts.not_fio_documents,
        )
        fams.counter(
            "fio_source_skipped_bytes_total",
            "Bytes of backlog skipped unread: with more "
            "than 64 MiB unread the exporter jumps to the latest records (they are cumulative); "
            "documents in the skipped part are not counted.",
            ["source"],
            src,
            v.skipped_bytes,
        )
        fams.counter(
            "fio_source_resets_total",
            "Times the file was truncated or replaced and read again from the start.",
            ["source"],
            src,
            v.resets,
        )
        rec = v.latest
        if rec is not None and rec.timestamp is not None:
            fams.gauge(
                "fio_source_last_record_timestamp_seconds",
                "Time fio wrote the latest record (timestamp_ms, else timestamp), seconds since the epoch.",
                ["source"],
                src,
                rec.timestamp,
            )
        if not v.up or rec is None or not v.visible:
            return  # never show the last values of an unreadable file as if they were fresh
        prev_jobs = {}
        if v.previous is not None:
            prev_jobs = {(j.host, j.jobid, j.name): j for j in v.previous.jobs}
        for job in rec.jobs:
            host = job.host or self.local_host
            labels = [job.name, str(job.jobid), host, v.path]
            self._job(fams, job, labels, v, rec.version)
            prev = prev_jobs.get((job.host, job.jobid, job.name))
            for d, stats in job.directions.items():
                if d == "trim" and not (self.collectors.trim and trims(job, stats)):
                    continue
                pstats = prev.directions.get(d) if prev is not None else None
                self._direction(fams, d, stats, labels, job, prev, pstats, used)

    def _job(self, fams: MetricFamilies, job: JobRecord, labels: list[str], v: SourceView, version: str | None) -> None:
        o = job.options
        info = {
            "file": o.get("filename", o.get("directory", "")),
            "rw": o.get("rw", ""),
            "bs": o.get("bs", ""),
            "iodepth": o.get("iodepth", ""),
            "numjobs": o.get("numjobs", ""),
            "direct": "1" if is_direct(o) else "0",
            "ioengine": o.get("ioengine", ""),
        }
        fams.gauge(
            "fio_job_info",
            "Options of a fio job (global options merged in; empty when fio "
            "did not print the option, i.e. its default applies; direct is 1 for direct=1 or "
            "buffered=0). Value 1.",
            JOB_LABELS + INFO_OPTIONS + ["groupid", "version"],
            labels + [info[k] for k in INFO_OPTIONS] + ["" if job.groupid is None else str(job.groupid), version or ""],
            1.0,
        )
        depth = _iodepth(o.get("iodepth", ""))
        if depth is not None:
            fams.gauge(
                "fio_job_iodepth",
                "The job's iodepth option as a number (1, fio's default, when "
                "not printed): the concurrency the job asks for, to compare with the concurrency "
                "a layer's throughput x latency implies (Little's law).",
                JOB_LABELS,
                labels,
                depth,
            )
        fams.gauge(
            "fio_job_finished",
            "1 once the fio run that wrote this job has ended (its file stopped growing or the wrapped fio exited).",
            JOB_LABELS,
            labels,
            1.0 if v.finished else 0.0,
        )
        if v.finished and v.end_time is not None:
            fams.gauge(
                "fio_job_end_timestamp_seconds",
                "When the run ended: the time of its last record, seconds since the epoch.",
                JOB_LABELS,
                labels,
                v.end_time,
            )
        fams.gauge("fio_job_error", "fio's error code for the job (0: no error).", JOB_LABELS, labels, job.error)
        for name, kind, doc, attr, per in _JOB_SERIES:
            value = getattr(job, attr)
            if value is not None:
                add = fams.counter if kind == "counter" else fams.gauge
                add(name, doc, JOB_LABELS, labels, value / per if per else value)
        for level, pct in job.iodepth_level.items():
            fams.gauge(
                "fio_job_iodepth_level_ratio",
                "Share of the job's time with this many I/Os in "
                "flight (iodepth_level/100; fio floors tiny non-zero shares to 0.001).",
                JOB_LABELS + ["depth"],
                labels + [level],
                pct / 100.0,
            )
        for problem in find_problems(job, self.hygiene, finished=v.finished):
            fams.gauge(
                "fio_job_hygiene_problem",
                "1 for each benchmark hygiene trap found in the job's options; see docs/hygiene.md for each problem.",
                JOB_LABELS + ["problem"],
                labels + [problem],
                1.0,
            )

    def _direction(
        self,
        fams: MetricFamilies,
        d: str,
        s: DirectionStats,
        labels: list[str],
        job: JobRecord,
        prev: JobRecord | None,
        ps: DirectionStats | None,
        used: set[int],
    ) -> None:
        what = "unified (read+write+trim, unified_rw_reporting)" if d == "mixed" else d
        p = f"fio_{d}"
        fams.counter(f"{p}_ios_total", f"Completed {what} I/Os (total_ios).", JOB_LABELS, labels, s.total_ios)
        fams.counter(f"{p}_bytes_total", f"Bytes of {what} I/O (io_bytes).", JOB_LABELS, labels, s.io_bytes)
        fams.counter(f"{p}_short_ios_total", f"Short {what} I/Os (short_ios).", JOB_LABELS, labels, s.short_ios)
        fams.counter(f"{p}_dropped_ios_total", f"Dropped {what} I/Os (drop_ios).", JOB_LABELS, labels, s.drop_ios)
        fams.gauge(
            f"{p}_iops", f"fio's own {what} IOPS, averaged since the job started (iops).", JOB_LABELS, labels, s.iops
        )
        fams.gauge(
            f"{p}_bandwidth_bytes_per_second",
            f"fio's own {what} bandwidth, averaged since the job started (bw_bytes).",
            JOB_LABELS,
            labels,
            s.bw_bytes,
        )
        # per-interval numbers from the last two cumulative records: what fio saw in its own
        # status interval, not diluted by Prometheus' rate window
        if (
            ps is not None
            and prev is not None
            and job.job_runtime_ms is not None
            and prev.job_runtime_ms is not None
            and job.job_runtime_ms > prev.job_runtime_ms
            and s.total_ios >= ps.total_ios
        ):
            dt = (job.job_runtime_ms - prev.job_runtime_ms) / 1000.0
            fams.gauge(
                f"{p}_interval_iops",
                f"{what} IOPS over fio's last status interval (difference "
                "of the last two records over their job_runtime difference).",
                JOB_LABELS,
                labels,
                (s.total_ios - ps.total_ios) / dt,
            )
            fams.gauge(
                f"{p}_interval_bandwidth_bytes_per_second",
                f"{what} bandwidth over fio's last status interval.",
                JOB_LABELS,
                labels,
                (s.io_bytes - ps.io_bytes) / dt,
            )
            if s.clat is not None and ps.clat is not None and s.clat.count > ps.clat.count:
                mean = (s.clat.sum_ns - ps.clat.sum_ns) / (s.clat.count - ps.clat.count) * _NS
                fams.gauge(
                    f"{p}_interval_clat_mean_seconds",
                    f"Mean {what} completion latency over fio's last status interval.",
                    JOB_LABELS,
                    labels,
                    mean,
                )
        for kind, lat in (("slat", s.slat), ("lat", s.lat)):
            if lat is not None:
                fams.gauge(
                    f"{p}_{kind}_mean_seconds",
                    f"Mean {what} "
                    f"{'submission' if kind == 'slat' else 'total (submission+completion)'} "
                    f"latency since the job started ({kind}_ns.mean).",
                    JOB_LABELS,
                    labels,
                    lat.mean_ns * _NS,
                )
        c = s.clat
        if c is None:
            return  # absent (gtod_reduce, nothing completed): never exported as zero
        buckets: list[tuple[str, float]] = []
        if c.bins is not None and self.collectors.histograms:
            cached = self._hist_cache.get(id(c))
            if cached is None or cached[0] is not c:
                cum, total = cumulative_buckets(c.bins)
                cached = (c, cum, total)
            self._hist_cache[id(c)] = cached
            used.add(id(c))
            _, cum, total = cached
            buckets = [(_le(e), float(n)) for e, n in zip(LATENCY_EDGES_SECONDS, cum)]
            buckets.append(("+Inf", float(total)))
        else:
            buckets = [("+Inf", float(c.count))]
        fams.add(
            HistogramMetricFamily,
            f"{p}_clat_seconds",
            f"{what} completion latency (clat_ns): buckets from json+ bins (only +Inf "
            "without json+ or with --no-collector.histograms), _sum = mean x N.",
            JOB_LABELS,
            labels,
            buckets,
            finite(f"{p}_clat_seconds_sum", c.sum_ns * _NS),
        )
        shown: set[str] = set()
        for q, ns in c.percentiles if self.collectors.percentiles else ():
            label = f"{q * 100:g}"
            if label in shown:
                continue  # "99.000000" and "99.0000001" print alike: one series, never two
            shown.add(label)
            fams.gauge(
                f"{p}_clat_percentile_seconds",
                f"fio's own {what} completion latency "
                "percentiles (clat_ns.percentile; label in percent, e.g. 99.9), exact rather than bucketed.",
                JOB_LABELS + ["percentile"],
                labels + [label],
                ns * _NS,
            )
        fams.gauge(
            f"{p}_clat_min_seconds",
            f"Smallest {what} completion latency (clat_ns.min).",
            JOB_LABELS,
            labels,
            c.min_ns * _NS,
        )
        fams.gauge(
            f"{p}_clat_max_seconds",
            f"Largest {what} completion latency (clat_ns.max).",
            JOB_LABELS,
            labels,
            c.max_ns * _NS,
        )
