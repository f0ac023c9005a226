"""Build the hand-made DiskSPD fixtures (tests/exporters/diskspd/fixtures/README.md says which these are).

Each is a run as a Windows VM would record it, written with ioparallax.exporters.diskspd.document
(DiskSPD 2.2's layout, XmlResultParser.cpp) from numbers that hold together: per-thread counts
match the per-interval IOPS buckets, bytes = count x block size, latencies as a storage of the
kind would give. Deterministic (seeded); run again only to change a fixture, and commit the output:
    .venv/bin/python tests/exporters/diskspd/make_fixtures.py
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ioparallax.exporters.diskspd.document import XML_PERCENTILES, write_document
from ioparallax.exporters.diskspd.parse import (
    CpuAverage,
    DiskspdResult,
    IopsBucket,
    IopsSeries,
    LatencyPercentile,
    LatencyStats,
    TargetProfile,
    ThreadTarget,
    TimeSpanProfile,
    TimeSpanResult,
    parse_run_time,
)

HERE = Path(__file__).resolve().parent / "fixtures"


def _thread(
    rng: random.Random,
    tid: int,
    pos: int,
    t: TargetProfile,
    seconds: int,
    bucket_ms: int,
    iops: float,
    file_size: int,
    read_ms: float,
    write_ms: float,
    latency: bool,
) -> ThreadTarget:
    buckets = []
    reads = writes = 0
    n = seconds * 1000 // bucket_ms
    for i in range(n):
        total = max(0, round(iops * bucket_ms / 1000 * rng.uniform(0.85, 1.15)))
        w = round(total * t.write_ratio / 100)
        r = total - w
        reads += r
        writes += w
        per_s = 1000 / bucket_ms
        buckets.append(
            IopsBucket(
                (i + 1) * bucket_ms,
                r * per_s,
                w * per_s,
                (r + w) * per_s,
                read_latency_avg_ms=round(read_ms * rng.uniform(0.9, 1.1), 3) if latency and r else 0.0,
                write_latency_avg_ms=round(write_ms * rng.uniform(0.9, 1.1), 3) if latency and w else 0.0,
            )
        )

    def sd(vals: list[float]) -> float:
        m = sum(vals) / len(vals)
        return (sum((v - m) ** 2 for v in vals) / len(vals)) ** 0.5

    lat = None
    if latency:
        total_avg = (reads * read_ms + writes * write_ms) / max(reads + writes, 1)
        lat = LatencyStats(
            read_ms if reads else None,
            round(read_ms * 0.6, 3) if reads else None,
            write_ms if writes else None,
            round(write_ms * 0.5, 3) if writes else None,
            round(total_avg, 3),
            round(total_avg * 0.7, 3),
        )
    return ThreadTarget(
        thread_id=tid,
        position=pos,
        path=t.path,
        bytes_count=(reads + writes) * t.block_size,
        file_size=file_size,
        io_count=reads + writes,
        read_bytes=reads * t.block_size,
        read_count=reads,
        write_bytes=writes * t.block_size,
        write_count=writes,
        latency=lat,
        iops=IopsSeries(
            round(sd([b.read for b in buckets]), 3) if reads else None,
            round(sd([b.write for b in buckets]), 3) if writes else None,
            round(sd([b.total for b in buckets]), 3),
            tuple(buckets),
        ),
    )


def _percentiles(read_ms: float | None, write_ms: float | None) -> tuple[LatencyPercentile, ...]:
    out = []
    for p in XML_PERCENTILES:
        scale = 0.3 + 1.4 * (p / 100) ** 4 + (3.0 if p > 99.9 else 0.0) + (p == 100.0) * 6.0
        total = [v for v in (read_ms, write_ms) if v is not None]
        out.append(
            LatencyPercentile(
                p,
                round(read_ms * scale, 3) if read_ms is not None else None,
                round(write_ms * scale, 3) if write_ms is not None else None,
                round(max(total) * scale, 3),
            )
        )
    return tuple(out)


# -Sh -Z10M: OS cache and write cache off, writes from a 10 MiB random buffer (the switches of a
# run done right, as Microsoft's and VM Fleet's profiles pass them)
SH_Z10M: dict[str, Any] = {
    "disable_os_cache": True,
    "write_through": True,
    "write_pattern": "random",
    "random_data_size": 10 * 2**20,
}


def oltp_utf16() -> bytes:
    """A SQL-like OLTP run done right: -t4 -o8 -b8K -r -w30 -Sh -L -D5000 -Z10M -W30 -d60 -C5, on a
    pre-written 64 GiB file (no -c); saved by PowerShell `>`: UTF-16 LE with a BOM."""
    rng = random.Random(23)
    t = TargetProfile(
        path=r"D:\diskspd\oltp.dat",
        block_size=8192,
        **SH_Z10M,
        random_alignment=8192,
        request_count=8,
        write_ratio=30,
        threads_per_file=4,
    )
    prof = TimeSpanProfile(60, 30, 5, True, True, 5000, 0, 0, 0, (t,))
    threads = tuple(_thread(rng, i, 0, t, 60, 5000, 2500, 64 * 2**30, 0.92, 1.85, True) for i in range(4))
    span = TimeSpanResult(
        test_time_s=60.0,
        thread_count=4,
        request_count=0,
        proc_count=8,
        cpu=CpuAverage(21.4, 6.1, 15.3, 78.6),
        latency_percentiles=_percentiles(0.92, 1.85),
        latency=LatencyStats(0.92, 0.552, 1.85, 0.925, 1.199, 0.839),
        iops=None,
        threads=threads,
    )
    r = DiskspdResult("SQLVM01", "2.2.0", "2024/6/3", parse_run_time("2026/11/20 09:00:00 UTC"), [prof], [span])
    return "\ufeff".encode("utf-16-le") + write_document(r).replace("\n", "\r\n").encode("utf-16-le")


def seed_default_pattern() -> bytes:
    """The seed story's run: -c20G -t2 -o16 -b64K -r -w30 -W0 -d30 -L on a new file, default write
    buffers, OS cache on (no -Sh): every trap the hygiene rules know. UTF-8 without a BOM."""
    rng = random.Random(36)
    t = TargetProfile(
        path=r"C:\scratch\testfile.dat",
        block_size=65536,
        file_size=20 * 2**30,
        random_alignment=65536,
        request_count=16,
        write_ratio=30,
        threads_per_file=2,
    )
    prof = TimeSpanProfile(30, 0, 0, True, True, 1000, 0, 0, 0, (t,))
    threads = tuple(_thread(rng, i, 0, t, 30, 1000, 1800, 20 * 2**30, 0.21, 0.48, True) for i in range(2))
    span = TimeSpanResult(
        30.0, 2, 0, 4, CpuAverage(12.0, 4.0, 8.0, 88.0), _percentiles(0.21, 0.48), None, None, threads
    )
    r = DiskspdResult("WINVM-07", "2.2.0", "2024/6/3", parse_run_time("2026/11/21 14:30:05 UTC"), [prof], [span])
    return write_document(r).encode("utf-8")


def two_targets_same_disk() -> bytes:
    """VM Fleet's SQL profile on a raw disk: two targets with the same path ``#1`` (-t4 8K random
    70/30 and -t1 32K sequential log writes): threads map to targets by position, not by path.
    UTF-8 with a BOM and an XML declaration."""
    rng = random.Random(7)
    data = TargetProfile(
        path="#1",
        block_size=8192,
        base_file_offset=5 * 2**30,
        **SH_Z10M,
        random_alignment=8192,
        request_count=32,
        write_ratio=30,
        threads_per_file=4,
        throughput=1500,
        throughput_unit="IOPS",
    )
    log = TargetProfile(
        path="#1",
        block_size=32768,
        max_file_size=5 * 2**30,
        **SH_Z10M,
        stride_size=32768,
        request_count=1,
        write_ratio=100,
        threads_per_file=1,
        throughput=300,
        throughput_unit="IOPS",
    )
    prof = TimeSpanProfile(120, 60, 10, True, True, 10000, 0, 0, 0, (data, log))
    disk = 100 * 2**30
    threads = tuple(_thread(rng, i, 0, data, 120, 10000, 1500, disk, 1.1, 2.3, True) for i in range(4)) + (
        _thread(rng, 4, 0, log, 120, 10000, 300, disk, 0.0, 0.6, True),
    )
    span = TimeSpanResult(120.0, 5, 0, 16, CpuAverage(9.5, 2.5, 7.0, 90.5), _percentiles(1.1, 2.3), None, None, threads)
    r = DiskspdResult("S2D-N1-VM03", "2.2.0", "2024/6/3", parse_run_time("2026/11/22 08:15:00 UTC"), [prof], [span])
    return b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\r\n' + write_document(r).encode("utf-8")


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name, data in (
        ("vm-oltp-sh-z10m-utf16.xml", oltp_utf16()),
        ("vm-seed-default-pattern.xml", seed_default_pattern()),
        ("vm-two-targets-same-disk.xml", two_targets_same_disk()),
    ):
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
