"""The compiled trace: per disk, per second of the period, what each stream did.

The trace is the contract every simulated view reads:

- :meth:`Trace.second` gives a disk's totals for one second (ops, bytes, zero bytes, op-weighted
  latency sums, random ops, outstanding I/Os by Little's law);
- :meth:`Trace.window` sums seconds, for views that average over a window (vCenter's 20 s,
  Stargate's recent window, fio's status interval);
- :meth:`Trace.stream_window` gives the same per stream, for views that need the distributions
  (latency and size histograms, fio's per-job numbers);
- :meth:`Trace.to_json` writes the per-second series and identity map for the Go vCenter simulator.

Time: the period second of wall-clock second ``x`` is ``(x - origin) mod period``, where the
scenario's ``origin`` (default 0, the Unix epoch) is the epoch second at which period second 0
falls. Every simulator that reads the same scenario agrees on what is happening now without talking
to the others. A view never computes that itself: it asks the trace (:meth:`Trace.period_second`,
:meth:`Trace.period_start`, :meth:`Trace.period_index`, :meth:`Trace.periodic_sum`), so the origin
reaches every view; the times a view prints (sample times, record times) stay wall-clock times.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

from .model import Disk, Host, Scenario, Stream

#: Ready time per vCPU while its host is below this share of its capacity (a busy host's
#: scheduler keeps a little: 0.2 % of each second, ~40 ms of vCenter's 20 s sample)...
READY_IDLE = 0.002
#: ...and how fast it grows above READY_KNEE of the host's capacity (per vCPU, per unit of load):
#: 4.2 % of each second at a full host, where vCenter's rule of thumb (5 % per vCPU) starts to hurt.
READY_KNEE = 0.8
READY_SLOPE = 0.2


@dataclass
class CpuSeries:
    """One VM's, CVM's or host's CPU, per second of the period: what it used (MHz, the mean over
    the second, vCenter's ``cpu.usagemhz``) and its ready time (seconds the vCPUs waited for a
    core, summed over the vCPUs, vCenter's ``cpu.ready.summation`` / 1000)."""

    usage_mhz: list[float]
    ready_s: list[float]
    vcpus: int = 0  # 0 for a host

    def window(self, end: int, seconds: int) -> tuple[float, float]:
        """(MHz x seconds, ready seconds) of the ``seconds`` period seconds before ``end``."""
        n = len(self.usage_mhz)
        used = ready = 0.0
        for i in range(seconds):
            t = (end - seconds + i) % n
            used += self.usage_mhz[t]
            ready += self.ready_s[t]
        return used, ready


def _ready(vcpus: int, load: float) -> float:
    return vcpus * (READY_IDLE + READY_SLOPE * max(0.0, load - READY_KNEE))


@dataclass
class DiskSecond:
    """Totals over one second or a window of seconds (sums, not rates)."""

    seconds: int = 0
    read_ops: float = 0.0
    write_ops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    read_zero_bytes: float = 0.0
    write_zero_bytes: float = 0.0
    read_latency_sum_s: float = 0.0  # sum over ops of their latency (ops x mean latency)
    write_latency_sum_s: float = 0.0
    read_random_ops: float = 0.0
    write_random_ops: float = 0.0
    read_outstanding_s: float = 0.0  # integral of outstanding I/Os over time (Little: ops x latency)
    write_outstanding_s: float = 0.0

    def add(self, other: DiskSecond) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    # Rates and op-weighted means over the window.
    def rate(self, name: str) -> float:
        return getattr(self, name) / self.seconds if self.seconds else 0.0

    @property
    def read_latency_s(self) -> float:
        return self.read_latency_sum_s / self.read_ops if self.read_ops else 0.0

    @property
    def write_latency_s(self) -> float:
        return self.write_latency_sum_s / self.write_ops if self.write_ops else 0.0

    @property
    def read_zero_ratio(self) -> float:
        return self.read_zero_bytes / self.read_bytes if self.read_bytes else 0.0

    @property
    def write_zero_ratio(self) -> float:
        return self.write_zero_bytes / self.write_bytes if self.write_bytes else 0.0


def stream_second(stream: Stream, activity: float) -> DiskSecond:
    """What one stream contributes in a second in which it is ``activity`` (0-1) active."""
    if activity <= 0:
        return DiskSecond(seconds=1)
    r = stream.read_iops * activity
    w = stream.write_iops * activity
    rb = r * stream.read_size.mean_bytes
    wb = w * stream.write_size.mean_bytes
    return DiskSecond(
        seconds=1,
        read_ops=r,
        write_ops=w,
        read_bytes=rb,
        write_bytes=wb,
        read_zero_bytes=rb * stream.zero_reads,
        write_zero_bytes=wb * stream.zero_writes,
        read_latency_sum_s=r * stream.read_latency_s,
        write_latency_sum_s=w * stream.write_latency_s,
        read_random_ops=r * stream.read_random,
        write_random_ops=w * stream.write_random,
        read_outstanding_s=r * stream.read_latency_s,
        write_outstanding_s=w * stream.write_latency_s,
    )


class Trace:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.period = scenario.period_s
        self.origin = scenario.origin  # the epoch second at which period second 0 falls
        self.disks: list[Disk] = scenario.disks
        self._by_key = {d.key: d for d in self.disks}
        self._by_vdisk = {d.vdisk_id: d for d in self.disks}
        # activity[disk key][stream index][second] in 0..1
        self.activity: dict[str, list[list[float]]] = {
            d.key: [[1.0 if s.active(t) else 0.0 for t in range(self.period)] for s in d.streams] for d in self.disks
        }
        # Per-second totals, precomputed: windows are sums over these.
        self._seconds: dict[str, list[DiskSecond]] = {}
        for d in self.disks:
            series = []
            for t in range(self.period):
                total = DiskSecond(seconds=1)
                for si, s in enumerate(d.streams):
                    part = stream_second(s, self.activity[d.key][si][t])
                    part.seconds = 0
                    total.add(part)
                series.append(total)
            self._seconds[d.key] = series
        self._cpu()

    # -- CPU ------------------------------------------------------------------------------
    def _cpu(self) -> None:
        """Per second: each VM's demand follows its I/O (VmCpu.demand_mhz), capped at its vCPUs;
        each host runs its VMs and its CVM (cvm_share of the host, steady). A host asked for more
        than its capacity gives its VMs their share of what the CVM leaves (the CVM first: it is
        reserved); ready time grows with the host's load (READY_*)."""
        sc = self.scenario
        cc = sc.cluster.cpu
        capacity = cc.host_capacity_mhz
        cvm_mhz = cc.cvm_share * capacity
        self.hosts: list[Host] = sc.hosts
        self.vm_cpu: dict[str, CpuSeries] = {}
        self.cvm_cpu: dict[str, CpuSeries] = {}  # host name -> its CVM
        self.host_cpu: dict[str, CpuSeries] = {}
        demand: dict[str, list[float]] = {}
        for vm in sc.vms:
            cap = vm.cpu.vcpus * cc.core_mhz
            ops = [0.0] * self.period
            for d in vm.disks:
                for t, sec in enumerate(self._seconds[d.key]):
                    ops[t] += sec.read_ops + sec.write_ops
            demand[vm.name] = [min(cap, vm.cpu.demand_mhz(o)) for o in ops]
        for h in self.hosts:
            vms = [vm for vm in sc.vms if vm.host == h.name]
            cvm = cvm_mhz if h.cvm else 0.0
            used = [[0.0] * self.period for _ in vms]
            ready = [[0.0] * self.period for _ in vms]
            host_used = [0.0] * self.period
            host_ready = [0.0] * self.period
            cvm_ready = [0.0] * self.period
            for t in range(self.period):
                asked = sum(demand[vm.name][t] for vm in vms)
                room = capacity - cvm
                scale = min(1.0, room / asked) if asked > 0 else 1.0
                load = (cvm + asked) / capacity
                for i, vm in enumerate(vms):
                    used[i][t] = demand[vm.name][t] * scale
                    ready[i][t] = _ready(vm.cpu.vcpus, load)
                cvm_ready[t] = _ready(cc.cvm_vcpus, load) if h.cvm else 0.0
                host_used[t] = cvm + asked * scale
                host_ready[t] = cvm_ready[t] + sum(r[t] for r in ready)
            for i, vm in enumerate(vms):
                self.vm_cpu[vm.name] = CpuSeries(used[i], ready[i], vm.cpu.vcpus)
            if h.cvm:
                self.cvm_cpu[h.name] = CpuSeries([cvm] * self.period, cvm_ready, cc.cvm_vcpus)
            self.host_cpu[h.name] = CpuSeries(host_used, host_ready)

    # -- time ---------------------------------------------------------------------------
    # Wall-clock arguments are Unix times in seconds (a float is floored to its whole second).
    def since_origin(self, wall: float) -> int:
        """Whole seconds from the origin to wall-clock time ``wall``: the trace's absolute second."""
        return math.floor(wall) - self.origin

    def period_second(self, wall: float | None = None) -> int:
        """The period second of wall-clock time ``wall`` (default: now): ``(wall - origin) mod period``."""
        return self.since_origin(time.time() if wall is None else wall) % self.period

    def now(self, wall: float | None = None) -> int:
        """The period second of a wall-clock time (default: now); the same as :meth:`period_second`."""
        return self.period_second(wall)

    def period_index(self, wall: float) -> int:
        """Which period (counted from the origin, negative before it) wall-clock time ``wall`` is in."""
        return self.since_origin(wall) // self.period

    def period_start(self, wall: float) -> int:
        """The wall-clock second at which the period holding ``wall`` began (its period second 0)."""
        return math.floor(wall) - self.period_second(wall)

    def periodic_sum(self, prefix: Sequence[float], a: int, b: int) -> float:
        """Sum over wall-clock seconds [a, b) of a per-second series that repeats every period,
        given by its prefix sums over one period (``prefix[t]`` = sum of period seconds [0, t),
        ``period + 1`` entries). The sum of a range of seconds of any length costs two look-ups."""
        p = self.period

        def upto(x: int) -> float:
            q, r = divmod(x - self.origin, p)
            return q * prefix[p] + prefix[r]

        return upto(b) - upto(a)

    # -- look-ups -----------------------------------------------------------------------
    def disk(self, key: str) -> Disk:
        return self._by_key[key]

    def disk_by_vdisk(self, vdisk_id: int) -> Disk:
        return self._by_vdisk[vdisk_id]

    def second(self, disk: Disk | str, t: int) -> DiskSecond:
        key = disk if isinstance(disk, str) else disk.key
        return self._seconds[key][t % self.period]

    def _window_seconds(self, end: int, seconds: int) -> Iterator[int]:
        """The ``seconds`` period seconds that end just before ``end`` (exclusive)."""
        for i in range(seconds):
            yield (end - seconds + i) % self.period

    def window(self, disk: Disk | str, end: int, seconds: int) -> DiskSecond:
        """Totals of the ``seconds`` seconds before period second ``end`` (exclusive)."""
        key = disk if isinstance(disk, str) else disk.key
        total = DiskSecond()
        for t in self._window_seconds(end, seconds):
            total.add(self._seconds[key][t])
        return total

    def stream_window(self, disk: Disk | str, end: int, seconds: int) -> list[tuple[Stream, DiskSecond]]:
        """Per stream totals over the window: what the histograms and fio jobs are built from."""
        d = self._by_key[disk] if isinstance(disk, str) else disk
        out = []
        for si, s in enumerate(d.streams):
            total = DiskSecond()
            for t in self._window_seconds(end, seconds):
                total.add(stream_second(s, self.activity[d.key][si][t]))
            out.append((s, total))
        return out

    def stream_active_seconds(self, disk: Disk, stream_index: int, end: int) -> int:
        """How many seconds of [0, end) the stream was active (fio's runtime so far)."""
        return int(sum(self.activity[disk.key][stream_index][:end]))

    # -- export -------------------------------------------------------------------------
    def identity_map(self) -> list[dict]:
        """One row per disk: the names it has in each layer (what dashboards join on)."""
        return [
            {
                "vm": d.vm,
                "unit": d.unit,
                "backing_file": d.backing_file,
                "disk_uuid": d.uuid,
                "guest_device": d.guest_device,
                "volume": d.volume,
                "partition_start_bytes": d.partition_start_bytes,
                "vdisk_id": d.vdisk_id,
                "vdisk_name": d.vdisk_name,
                "vdisk_uuid": d.vdisk_uuid,
                "cvm": d.cvm,
            }
            for d in self.disks
        ]

    def to_json(self) -> str:
        """Per-second series and identities, for simulators outside Python (the Go vCenter one).

        Rates are per second; latency is the op-weighted mean in seconds (0 when no ops);
        outstanding is the time-average number of I/Os in flight.
        """
        sc = self.scenario
        vms = []
        for vm in sc.vms:
            disks = []
            for d in vm.disks:
                series = self._seconds[d.key]
                disks.append(
                    {
                        "unit": d.unit,
                        "capacity_bytes": d.capacity_bytes,
                        "backing_file": d.backing_file,
                        "uuid": d.uuid,
                        "vdisk_id": d.vdisk_id,
                        # what VMware Tools reports in guest.disk (diskPath); Windows volumes only:
                        # the simulated Linux guests use raw devices (no file system to report)
                        "guest_disk_path": f"{d.volume}\\" if vm.windows else "",
                        "read_ops": [s.read_ops for s in series],
                        "write_ops": [s.write_ops for s in series],
                        "read_bytes": [s.read_bytes for s in series],
                        "write_bytes": [s.write_bytes for s in series],
                        "read_latency_s": [s.read_latency_s for s in series],
                        "write_latency_s": [s.write_latency_s for s in series],
                        "read_outstanding": [s.read_outstanding_s for s in series],
                        "write_outstanding": [s.write_outstanding_s for s in series],
                        "read_random_ratio": [s.read_random_ops / s.read_ops if s.read_ops else 0.0 for s in series],
                        "write_random_ratio": [
                            s.write_random_ops / s.write_ops if s.write_ops else 0.0 for s in series
                        ],
                    }
                )
            vms.append(
                {
                    "name": vm.name,
                    "host": vm.host,
                    "guest_os": vm.guest_os,
                    "hostname": vm.hostname,
                    "load_generator": vm.load_generator,
                    "disks": disks,
                    "cpu": self._cpu_json(self.vm_cpu[vm.name]),
                }
            )
        cc = sc.cluster.cpu
        hosts = []
        for h in self.hosts:
            row = {
                "name": h.name,
                "cpu_mhz": cc.core_mhz,  # per core: summary.hardware.cpuMhz
                "cores": cc.cores,  # summary.hardware.numCpuCores
                "cpu": self._cpu_json(self.host_cpu[h.name]),
            }
            if h.cvm:
                row["cvm"] = {"name": h.cvm_vm, "stargate": h.cvm, "cpu": self._cpu_json(self.cvm_cpu[h.name])}
            hosts.append(row)
        return json.dumps(
            {
                "scenario": sc.name,
                "period_seconds": self.period,
                "origin_seconds": self.origin,
                "cluster": sc.cluster.name,
                "vms": vms,
                "hosts": hosts,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def _cpu_json(c: CpuSeries) -> dict:
        return {"vcpus": c.vcpus, "usage_mhz": c.usage_mhz, "ready_s": c.ready_s}


def compile_scenario(scenario: Scenario) -> Trace:
    return Trace(scenario)
