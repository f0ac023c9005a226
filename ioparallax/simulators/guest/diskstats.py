"""The guest kernel's block-layer counters: ``/proc/diskstats``, computed from the trace.

What node_exporter's diskstats collector reads inside each VM. One line per guest device of the
scenario (``sdb``...) and one per its data partition (``sdb1``, all zero: fio writes to the raw
device, and a kernel counts I/O to the whole disk on the disk's line only), in the format of
Linux 5.5 and later (Documentation/admin-guide/iostats.rst): major, minor, name, then 17 fields

    1 reads completed   2 reads merged   3 sectors read      4 ms reading
    5 writes completed  6 writes merged  7 sectors written   8 ms writing
    9 I/Os in progress 10 ms doing I/O  11 weighted ms doing I/O
   12 discards completed 13 discards merged 14 sectors discarded 15 ms discarding
   16 flush requests completed 17 ms flushing

How the trace becomes the block layer's view:

- **request splitting**: the block layer splits a request larger than the device's maximum
  request size (``queue/max_sectors_kb`` in the sysfs tree, 512 KiB) into
  ``ceil(io size / max request)`` requests, so an fio op of size ``s`` is that many device
  requests (a ``bssplit`` mix: the op-weighted sum over its sizes). A 1 MiB fio write is two
  512 KiB device writes; bytes (sectors x 512) are the same as fio's.
- **time**: each device request of an fio op is in flight as long as the op (the split halves go
  out together), so ms reading/writing is the sum of the device requests' latencies: the trace's
  latency sum x the split factor, and ms reading / reads completed is fio's mean latency. The
  weighted time (field 11) is the sum of both; ms doing I/O (field 10) is, per second, the
  weighted time capped at 1000 ms; I/Os in progress is the average concurrency of the second
  before (Little's law: latency sum per second), rounded.
- merges, discards and flushes are 0 (O_DIRECT libaio I/O of the scenarios' sizes).

The counters are cumulative since the guest's "boot": the beginning of the period in which the
simulator started (the fio model's ``anchor``), and are the trace's sums rounded down, so any
difference of two snapshots is within one of the trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ioparallax.simulators.scenario import BlockSizeMix, Disk, Trace

from .devices import MAX_SECTORS_KB, SD_MAJOR, SECTOR, minor_of
from .fio import GuestFio
from .periodic import IoSums, io_seconds, prefix_sums

FIELDS = (
    "reads_completed",
    "reads_merged",
    "sectors_read",
    "ms_reading",
    "writes_completed",
    "writes_merged",
    "sectors_written",
    "ms_writing",
    "ios_in_progress",
    "ms_doing_io",
    "weighted_ms",
    "discards_completed",
    "discards_merged",
    "sectors_discarded",
    "ms_discarding",
    "flushes_completed",
    "ms_flushing",
)


def split_factor(sizes: BlockSizeMix, max_request_bytes: int = MAX_SECTORS_KB * 1024) -> float:
    """Device requests per fio op: the op-weighted mean of ``ceil(size / max request)``."""
    return sum(frac * math.ceil(size / max_request_bytes) for size, frac in sizes.parts)


@dataclass(frozen=True)
class _DiskSeries:
    """One disk's block-layer numbers over the period: device requests, bytes and ms (``io``, its
    latency in ms) and ms doing I/O (prefix sums)."""

    io: IoSums
    busy_ms: tuple[float, ...]


class GuestDiskstats:
    """``/proc/diskstats`` of every VM of a scenario."""

    def __init__(
        self,
        trace: Trace,
        anchor: float | None = None,
        fio: GuestFio | None = None,
        max_request_bytes: int = MAX_SECTORS_KB * 1024,
    ):
        self.trace = trace
        self.period = trace.period
        self.fio = fio or GuestFio(trace, anchor=anchor)
        self.anchor = self.fio.anchor  # the guest's "boot": counters start here
        self.max_request_bytes = max_request_bytes
        self.disks: dict[str, list[Disk]] = {vm.name: list(vm.disks) for vm in trace.scenario.vms}
        self._series: dict[str, _DiskSeries] = {d.key: self._disk_series(d) for d in trace.scenario.disks}

    def _disk_series(self, disk: Disk) -> _DiskSeries:
        seconds = io_seconds(
            self.trace, disk, requests=lambda size: split_factor(size, self.max_request_bytes), latency_unit=1000.0
        )
        rms, wms = seconds[4], seconds[5]
        return _DiskSeries(
            io=IoSums.of(seconds, latency_unit=1000.0),
            busy_ms=prefix_sums(min(1000.0, r + w) for r, w in zip(rms, wms)),
        )

    def fields(self, disk: Disk, T: int) -> dict[str, int]:
        """The 17 counters of ``disk`` in a snapshot at wall-clock second ``T``."""
        s = self._series[disk.key]
        start = min(self.anchor, T)

        def cum(prefix: tuple[float, ...]) -> float:
            return self.trace.periodic_sum(prefix, start, T)

        def down(x: float) -> int:
            return int(math.floor(x + 1e-6))

        io = s.io
        read_ms, write_ms = cum(io.read_latency), cum(io.write_latency)
        out = dict.fromkeys(FIELDS, 0)
        out.update(
            reads_completed=down(cum(io.read_ops)),
            sectors_read=down(cum(io.read_bytes) / SECTOR),
            ms_reading=down(read_ms),
            writes_completed=down(cum(io.write_ops)),
            sectors_written=down(cum(io.write_bytes) / SECTOR),
            ms_writing=down(write_ms),
            ios_in_progress=int(round(io.inflight[self.trace.period_second(T - 1)])) if T > start else 0,
            ms_doing_io=down(cum(s.busy_ms)),
            weighted_ms=down(read_ms + write_ms),
        )
        return out

    def text(self, vm: str, T: int) -> str:
        """The whole ``/proc/diskstats`` of ``vm`` at wall-clock second ``T``."""
        lines = []
        for disk in sorted(self.disks[vm], key=lambda d: minor_of(d.guest_device)):
            minor = minor_of(disk.guest_device)
            lines.append(_line(SD_MAJOR, minor, disk.guest_device, self.fields(disk, T)))
            lines.append(_line(SD_MAJOR, minor + 1, f"{disk.guest_device}1", dict.fromkeys(FIELDS, 0)))
        return "".join(lines)


def _line(major: int, minor: int, name: str, f: dict[str, int]) -> str:
    # The kernel's diskstats_show(): "%4d %7d %pg " then the 17 fields separated by spaces.
    return f"{major:4d} {minor:7d} {name} " + " ".join(str(f[k]) for k in FIELDS) + "\n"


def parse(text: str) -> dict[str, dict[str, int]]:
    """``/proc/diskstats`` as {device: {field: value}} (14-, 18- and 20-column lines)."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        cols = line.split()
        if not cols:
            continue
        if len(cols) not in (14, 18, 20):
            raise ValueError(f"diskstats line with {len(cols)} columns: {line!r}")
        out[cols[2]] = {k: int(v) for k, v in zip(FIELDS, cols[3:])}
    return out
