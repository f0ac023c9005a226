"""The Windows guest OS view: windows_exporter's disk collectors, computed from the trace.

What ``windows_exporter`` (prometheus-community, collectors ``physical_disk``, ``logical_disk``
and ``os``) shows inside each Windows VM of a scenario, in its metric names, label names and
types (checked against its ``docs/collector.physical_disk.md``, ``docs/collector.logical_disk.md``
and collector sources):

- ``windows_physical_disk_*{disk}``: ``disk`` is the disk number (``0`` the system disk, ``1`` the
  scenario's first data disk...); releases before 0.30 printed ``1 D:``, the rules accept both.
- ``windows_logical_disk_*{volume}`` (``C:``, ``D:``...), ``windows_logical_disk_info{disk, type,
  volume, volume_name, filesystem, serial_number}`` (``disk``: the disk number(s) the volume lies
  on, what joins a volume to its physical disk), ``free_bytes``, ``size_bytes``.
- ``windows_os_hostname{domain, fqdn, hostname}``: the guest's DNS host name, which VMware Tools
  reports to vCenter as ``guest.hostName``: the key of the guest-to-VM join.

How the trace becomes these counters (the Linux ``/proc/diskstats`` model, with Windows'
differences):

- **ops**: PhysicalDisk and LogicalDisk count requests as the file system and partition manager
  issue them, above the class driver that cuts a request at the adapter's maximum transfer size;
  so a 1 MiB DiskSPD I/O counts once (Linux's block layer counts two 512 KiB requests). Bytes are
  the trace's.
- **time**: ``read_latency_seconds_total`` (the raw numerator of ``Avg. Disk sec/Read``) is the
  sum of the reads' latencies, the trace's latency sum, so its rate over ``reads_total``'s is the
  op-weighted mean latency; ``read_seconds_total`` (``% Disk Read Time``, which Windows computes
  as the average read queue length) is the same integral; ``idle_seconds_total`` counts, per
  second, the share with nothing in flight (1 - the busy share, the busy share capped at 1).
- ``requests_queued`` (``Current Disk Queue Length``) is the previous second's Little's-law
  concurrency, rounded.
- ``split_ios_total`` (``Split IO/Sec``): on a disk whose partition is not on the 4 KiB grid
  (``partition_start`` 1536, or Windows 2003's 63-sector 32,256 bytes) every request is counted as
  split; on an aligned one none. Windows also splits for fragmentation, which a raw test file on a
  fresh volume does not have. A hint, as the runbook says, not the partition offset itself.
- The system disk ``0``/``C:`` is listed with no I/O (it is not in the scenario and vCenter's
  ``guest.disk`` of the simulated VMs does not list it, so the rules' join leaves it out, as it
  would leave out any volume Tools does not report).

Counters are cumulative since the guest's "boot", the anchor of the fio model (the beginning of
the period the simulator started in), and are the trace's sums, so a difference of two snapshots
is within rounding of the trace.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ioparallax.simulators.scenario import Disk, Trace, Vm

from .fio import GuestFio
from .periodic import IoSums, io_seconds, prefix_sums

SYSTEM_DISK_BYTES = 60 * 1024**3
FILESYSTEM = "NTFS"


@dataclass(frozen=True)
class _Series:
    """One disk's Windows counters over the period: ops, bytes and seconds (``io``) and idle seconds
    (prefix sums)."""

    io: IoSums
    idle: tuple[float, ...]


#: (metric suffix, HELP text as windows_exporter words it, TYPE) of the per-disk families.
_FAMILIES = (
    ("requests_queued", "The number of requests queued to the disk ({obj}.CurrentDiskQueueLength)", "gauge"),
    ("read_bytes_total", "The number of bytes transferred from the disk during read operations ({obj}.DiskReadBytesPerSec)", "counter"),
    ("reads_total", "The number of read operations on the disk ({obj}.DiskReadsPerSec)", "counter"),
    ("write_bytes_total", "The number of bytes transferred to the disk during write operations ({obj}.DiskWriteBytesPerSec)", "counter"),
    ("writes_total", "The number of write operations on the disk ({obj}.DiskWritesPerSec)", "counter"),
    ("read_seconds_total", "Seconds that the disk was busy servicing read requests ({obj}.PercentDiskReadTime)", "counter"),
    ("write_seconds_total", "Seconds that the disk was busy servicing write requests ({obj}.PercentDiskWriteTime)", "counter"),
    ("idle_seconds_total", "Seconds that the disk was idle ({obj}.PercentIdleTime)", "counter"),
    ("split_ios_total", "The number of I/Os to the disk were split into multiple I/Os ({obj}.SplitIOPerSec)", "counter"),
    ("read_latency_seconds_total", "Shows the average time, in seconds, of a read operation from the disk ({obj}.AvgDiskSecPerRead)", "counter"),
    ("write_latency_seconds_total", "Shows the average time, in seconds, of a write operation to the disk ({obj}.AvgDiskSecPerWrite)", "counter"),
    ("read_write_latency_seconds_total", "Shows the time, in seconds, of the average disk transfer ({obj}.AvgDiskSecPerTransfer)", "counter"),
)  # fmt: skip


def disk_number(disk: Disk) -> int:
    """The Windows disk number of a scenario disk: 0 is the system disk, data disks follow."""
    return disk.index + 1


def volume_serial(disk: Disk) -> str:
    """The NTFS volume serial number windows_logical_disk_info shows (8 hex digits), stable per disk."""
    return hashlib.sha256(f"volume/{disk.uuid}".encode()).hexdigest()[:8].upper()


class GuestWindows:
    """windows_exporter's disk and host name metrics of every Windows VM of a scenario."""

    def __init__(self, trace: Trace, anchor: float | None = None, fio: GuestFio | None = None):
        self.trace = trace
        self.period = trace.period
        self.anchor = (fio or GuestFio(trace, anchor=anchor)).anchor
        self.vms: dict[str, Vm] = {vm.name: vm for vm in trace.scenario.vms if vm.windows}
        self._series = {d.key: self._disk_series(d) for vm in self.vms.values() for d in vm.disks}

    def _disk_series(self, disk: Disk) -> _Series:
        seconds = io_seconds(self.trace, disk)
        rl, wl = seconds[4], seconds[5]
        return _Series(io=IoSums.of(seconds), idle=prefix_sums(max(0.0, 1.0 - (r + w)) for r, w in zip(rl, wl)))

    def counters(self, disk: Disk, T: int) -> dict[str, float]:
        """One disk's counters (the families' suffixes) in a snapshot at wall-clock second ``T``."""
        s = self._series[disk.key]
        start = min(int(self.anchor), T)

        def cum(prefix: tuple[float, ...]) -> float:
            return self.trace.periodic_sum(prefix, start, T)

        io = s.io
        reads, writes = cum(io.read_ops), cum(io.write_ops)
        read_lat, write_lat = cum(io.read_latency), cum(io.write_latency)
        return {
            "requests_queued": float(round(io.inflight[self.trace.period_second(T - 1)])) if T > start else 0.0,
            "read_bytes_total": float(int(cum(io.read_bytes) + 1e-6)),
            "reads_total": float(int(reads + 1e-6)),
            "write_bytes_total": float(int(cum(io.write_bytes) + 1e-6)),
            "writes_total": float(int(writes + 1e-6)),
            "read_seconds_total": read_lat,
            "write_seconds_total": write_lat,
            "idle_seconds_total": cum(s.idle),
            "split_ios_total": 0.0 if disk.aligned else float(int(reads + writes + 1e-6)),
            "read_latency_seconds_total": read_lat,
            "write_latency_seconds_total": write_lat,
            "read_write_latency_seconds_total": read_lat + write_lat,
        }

    def text(self, vm_name: str, T: int) -> str:
        """windows_exporter's exposition (the disk and host name families) of ``vm_name`` at ``T``."""
        vm = self.vms[vm_name]
        start = min(int(self.anchor), T)
        idle_system = float(T - start)
        system = dict.fromkeys((name for name, _, _ in _FAMILIES), 0.0)
        system["idle_seconds_total"] = idle_system
        rows = [("0", "C:", system)] + [(str(disk_number(d)), d.volume, self.counters(d, T)) for d in vm.disks]
        out: list[str] = []
        for kind, obj, label in (("physical_disk", "PhysicalDisk", "disk"), ("logical_disk", "LogicalDisk", "volume")):
            for suffix, help_text, mtype in _FAMILIES:
                name = f"windows_{kind}_{suffix}"
                out.append(f"# HELP {name} {help_text.format(obj=obj)}\n# TYPE {name} {mtype}\n")
                for number, volume, values in rows:
                    out.append(f'{name}{{{label}="{number if label == "disk" else volume}"}} {_num(values[suffix])}\n')
        name = "windows_logical_disk_info"
        out.append(
            f"# HELP {name} A metric with a constant '1' value labeled with logical disk information\n"
            f"# TYPE {name} gauge\n"
        )
        out.append(
            f'{name}{{disk="0",filesystem="{FILESYSTEM}",serial_number="",type="fixed",volume="C:",volume_name=""}} 1\n'
        )
        for d in vm.disks:
            out.append(
                f'{name}{{disk="{disk_number(d)}",filesystem="{FILESYSTEM}",serial_number="{volume_serial(d)}",'
                f'type="fixed",volume="{d.volume}",volume_name="data{disk_number(d)}"}} 1\n'
            )
        for suffix, help_text in (
            ("free_bytes", "Free space in bytes, updates every 10-15 min (LogicalDisk.PercentFreeSpace)"),
            ("size_bytes", "Total space in bytes, updates every 10-15 min (LogicalDisk.PercentFreeSpace_Base)"),
        ):
            name = f"windows_logical_disk_{suffix}"
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            out.append(f'{name}{{volume="C:"}} {_num(SYSTEM_DISK_BYTES // (3 if suffix == "free_bytes" else 1))}\n')
            for d in vm.disks:
                size = d.capacity_bytes - d.partition_start_bytes
                used = max((s.working_set_bytes for s in d.streams), default=0)
                out.append(
                    f'{name}{{volume="{d.volume}"}} {_num(size if suffix == "size_bytes" else max(0, size - used))}\n'
                )
        name = "windows_os_hostname"
        out.append(
            f"# HELP {name} Labelled system hostname information as provided by ComputerSystem.DNSHostName "
            f"and ComputerSystem.Domain\n# TYPE {name} gauge\n"
            f'{name}{{domain="",fqdn="{vm.hostname}",hostname="{vm.hostname}"}} 1\n'
        )
        return "".join(out)


def _num(x: float) -> str:
    return repr(float(x)) if x != int(x) else str(int(x))
