"""Writing DiskSPD ``-Rxml`` documents from the reader's records, laid out as DiskSPD 2.2 does.

The element order, the two-space indentation and the number formats (``%.3f`` milliseconds,
``%.2f`` seconds and percentages, ``%.0f`` bucket IOPS) follow microsoft/diskspd
``XmlResultParser/XmlResultParser.cpp`` (``ParseResults``) and ``Common/Common.cpp``
(``Target::GetXml``, ``TimeSpan::GetXml``, ``Profile::GetXml``, ``SystemInformation::GetXml``).
Used to build test fixtures and by simulators that stand in for a Windows VM running DiskSPD;
``parse_bytes(write_document(r).encode())`` gives ``r`` back (numbers to the printed precision).
"""

from __future__ import annotations

import time
from xml.sax.saxutils import escape

from ioparallax.exporters.diskspd.parse import (
    SPAN_LATENCY,
    TARGET_LATENCY,
    DiskspdResult,
    IopsSeries,
    LatencyStats,
    TargetProfile,
    ThreadTarget,
    TimeSpanProfile,
    TimeSpanResult,
)

#: The percentiles DiskSPD prints in ``<Latency>``: 0 (min), 1..99, 3 to 9 nines, 100 (max).
XML_PERCENTILES: tuple[float, ...] = (
    (0.0,)
    + tuple(float(p) for p in range(1, 100))
    + (99.9, 99.99, 99.999, 99.9999, 99.99999, 99.999999, 99.9999999, 100.0)
)


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 0

    def line(self, text: str) -> None:
        self.lines.append(" " * self.indent + text)

    def open(self, tag: str, attrs: str = "") -> None:
        self.line(f"<{tag}{attrs}>")
        self.indent += 2

    def close(self, tag: str) -> None:
        self.indent -= 2
        self.line(f"</{tag}>")

    def el(self, tag: str, value: object) -> None:
        self.line(f"<{tag}>{value}</{tag}>")


def _b(v: bool) -> str:
    return "true" if v else "false"


def _percentile_text(p: float) -> str:
    """``%.*f`` with the precision DiskSPD uses: 0 decimals for 0..100 integers, n for n nines."""
    if p == int(p):
        return str(int(p))
    return f"{p:.{len(repr(p).split('.')[1])}f}"


def _target_profile(o: _Out, t: TargetProfile) -> None:
    o.open("Target")
    o.el("Path", escape(t.path))
    o.el("BlockSize", t.block_size)
    o.el("BaseFileOffset", t.base_file_offset)
    o.el("SequentialScan", _b(t.sequential_scan_hint))
    o.el("RandomAccess", _b(t.random_access_hint))
    o.el("TemporaryFile", _b(t.temporary_file_hint))
    o.el("UseLargePages", "false")
    if t.disable_local_cache:
        o.el("DisableLocalCache", "true")
    elif t.disable_os_cache:
        o.el("DisableOSCache", "true")
    if t.write_through:
        o.el("WriteThrough", "true")
    if t.memory_mapped_io:
        o.el("MemoryMappedIo", "true")
    o.open("WriteBufferContent")
    o.el("Pattern", t.write_pattern)
    if t.write_pattern == "random":
        o.open("RandomDataSource")
        o.el("SizeInBytes", t.random_data_size or 0)
        if t.random_data_file:
            o.el("FilePath", escape(t.random_data_file))
        o.close("RandomDataSource")
    o.close("WriteBufferContent")
    o.el("ParallelAsyncIO", "false")
    if t.file_size is not None:
        o.el("FileSize", t.file_size)
    if t.random_alignment is not None:
        o.el("Random", t.random_alignment)
        if t.random_ratio is not None and t.random_ratio != 100:
            o.el("RandomRatio", t.random_ratio)
    else:
        o.el("StrideSize", t.stride_size if t.stride_size is not None else t.block_size)
        o.el("InterlockedSequential", _b(t.interlocked_sequential))
    o.el("ThreadStride", t.thread_stride)
    o.el("MaxFileSize", t.max_file_size)
    o.el("RequestCount", t.request_count)
    o.el("WriteRatio", t.write_ratio)
    if t.throughput_unit == "IOPS" and t.throughput:
        o.line(f'<Throughput unit="IOPS">{t.throughput}</Throughput>')
    else:
        o.el("Throughput", t.throughput)
    o.el("ThreadsPerFile", t.threads_per_file)
    o.el("IOPriority", 3)
    o.el("Weight", 1)
    o.close("Target")


def _timespan_profile(o: _Out, s: TimeSpanProfile) -> None:
    o.open("TimeSpan")
    o.el("CompletionRoutines", "false")
    o.el("MeasureLatency", _b(s.measure_latency))
    o.el("CalculateIopsStdDev", _b(s.calculate_iops_stddev))
    o.el("DisableAffinity", "false")
    o.el("Duration", int(s.duration_s))
    o.el("Warmup", int(s.warmup_s))
    o.el("Cooldown", int(s.cooldown_s))
    o.el("ThreadCount", s.thread_count)
    o.el("RequestCount", s.request_count)
    o.el("IoBucketDuration", s.io_bucket_duration_ms)
    o.el("RandSeed", s.rand_seed)
    o.open("Targets")
    for t in s.targets:
        _target_profile(o, t)
    o.close("Targets")
    o.close("TimeSpan")


def _iops(o: _Out, s: IopsSeries | None) -> None:
    if s is None:
        return
    o.open("Iops")
    if s.read_stddev is not None:
        o.el("ReadIopsStdDev", f"{s.read_stddev:.3f}")
    if s.write_stddev is not None:
        o.el("WriteIopsStdDev", f"{s.write_stddev:.3f}")
    if s.total_stddev is not None:
        o.el("IopsStdDev", f"{s.total_stddev:.3f}")
    for b in s.buckets:
        r_avg = b.read_latency_avg_ms or 0.0
        w_avg = b.write_latency_avg_ms or 0.0
        o.line(
            f'<Bucket SampleMillisecond="{b.sample_ms}" Read="{b.read:.0f}" Write="{b.write:.0f}" '
            f'Total="{b.total:.0f}" ReadMinLatencyMilliseconds="{r_avg:.3f}" '
            f'ReadMaxLatencyMilliseconds="{r_avg:.3f}" ReadAvgLatencyMilliseconds="{r_avg:.3f}" '
            f'ReadLatencyStdDev="0.000" WriteMinLatencyMilliseconds="{w_avg:.3f}" '
            f'WriteMaxLatencyMilliseconds="{w_avg:.3f}" WriteAvgLatencyMilliseconds="{w_avg:.3f}" '
            'WriteLatencyStdDev="0.000"/>'
        )
    o.close("Iops")


def _latency(o: _Out, lat: LatencyStats | None, names: tuple[str, ...]) -> None:
    if lat is None:
        return
    values = (
        lat.read_avg_ms,
        lat.read_stdev_ms,
        lat.write_avg_ms,
        lat.write_stdev_ms,
        lat.total_avg_ms,
        lat.total_stdev_ms,
    )
    for name, v in zip(names, values):
        if v is not None:
            o.el(name, f"{v:.3f}")


def _thread_target(o: _Out, t: ThreadTarget, measure_latency: bool) -> None:
    o.open("Target")
    o.el("Path", escape(t.path))
    o.el("BytesCount", t.bytes_count)
    o.el("FileSize", t.file_size)
    o.el("IOCount", t.io_count)
    o.el("ReadBytes", t.read_bytes)
    o.el("ReadCount", t.read_count)
    o.el("WriteBytes", t.write_bytes)
    o.el("WriteCount", t.write_count)
    if measure_latency:
        _latency(o, t.latency, TARGET_LATENCY)
    _iops(o, t.iops)
    o.close("Target")


def _percentiles(o: _Out, span: TimeSpanResult) -> None:
    o.open("Latency")
    _latency(o, span.latency, SPAN_LATENCY)
    for p in span.latency_percentiles:
        o.open("Bucket")
        o.el("Percentile", _percentile_text(p.percentile))
        for tag, v in (
            ("ReadMilliseconds", p.read_ms),
            ("WriteMilliseconds", p.write_ms),
            ("TotalMilliseconds", p.total_ms),
        ):
            if v is not None:
                o.el(tag, f"{v:.3f}")
        o.close("Bucket")
    o.close("Latency")


def _span(o: _Out, span: TimeSpanResult, prof: TimeSpanProfile | None) -> None:
    o.open("TimeSpan")
    if span.error is not None:
        o.el("Error", escape(span.error))
        o.close("TimeSpan")
        return
    o.el("TestTimeSeconds", f"{span.test_time_s:.2f}")
    o.el("ThreadCount", span.thread_count)
    o.el("RequestCount", span.request_count)
    o.el("ProcCount", span.proc_count)
    if span.cpu is not None:
        c = span.cpu
        o.open("CpuUtilization")
        o.open("Average")
        o.el("UsagePercent", f"{c.usage_percent:.2f}")
        o.el("UserPercent", f"{c.user_percent:.2f}")
        o.el("KernelPercent", f"{c.kernel_percent:.2f}")
        o.el("IdlePercent", f"{c.idle_percent:.2f}")
        o.close("Average")
        o.close("CpuUtilization")
    measure_latency = prof.measure_latency if prof is not None else bool(span.latency_percentiles)
    if measure_latency:
        _percentiles(o, span)
    _iops(o, span.iops)
    threads: dict[int, list[ThreadTarget]] = {}
    for t in span.threads:
        threads.setdefault(t.thread_id, []).append(t)
    for tid, targets in threads.items():
        o.open("Thread")
        o.el("Id", tid)
        for t in sorted(targets, key=lambda t: t.position):
            _thread_target(o, t, measure_latency)
        o.close("Thread")
    o.close("TimeSpan")


def run_time_text(epoch_s: float | None) -> str:
    """``RunTime`` as DiskSPD prints it (``2026/11/26 10:00:00 UTC``); empty for None."""
    if epoch_s is None:
        return ""
    return time.strftime("%Y/%m/%d %H:%M:%S UTC", time.gmtime(epoch_s))


def write_document(r: DiskspdResult) -> str:
    """The ``-Rxml`` document of ``r`` (no XML declaration and no final newline, as DiskSPD)."""
    o = _Out()
    o.open("Results")
    o.open("System")
    o.el("ComputerName", escape(r.computer_name))
    o.open("Tool")
    o.el("Version", escape(r.version))
    o.el("VersionDate", escape(r.version_date))
    o.close("Tool")
    o.el("RunTime", run_time_text(r.run_time))
    o.close("System")
    o.open("Profile")
    o.el("Progress", 0)
    o.el("ResultFormat", "xml")
    o.el("Verbose", "false")
    o.open("TimeSpans")
    for s in r.profiles:
        _timespan_profile(o, s)
    o.close("TimeSpans")
    o.close("Profile")
    for i, span in enumerate(r.spans):
        _span(o, span, r.profiles[i] if i < len(r.profiles) else None)
    o.close("Results")
    return "\n".join(o.lines)
