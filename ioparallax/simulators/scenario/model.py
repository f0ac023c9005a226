"""Scenario files: the typed model and its validation.

Errors name the file and the key (``vms[0].disks[1].streams[0].read_iops``). See
``docs/scenarios.md`` for the format, and ``scenarios/`` beside this file for the library.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid as uuidlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ioparallax.units import parse_bytes, parse_duration
from ioparallax.yamlconf import ConfigError, Section, cut, load_yaml

SCENARIO_DIR = Path(__file__).with_name("scenarios")

PAGE_BUILDS = (2014, 2015, 2016)
# Which manager the simulated cluster has: ESXi clusters get vCenter (the VM view from its 20 s
# samples), AHV clusters Prism (the VM view from its 30 s hypervisor_* samples).
HYPERVISORS = ("esxi", "ahv")
# The container the scenarios' vdisks live in (AHV's vdisk names and the guest serial carry its id).
AHV_CONTAINER = "ctr01"
AHV_CONTAINER_ID = 1
VCENTER_BUSES = ("scsi", "sata", "nvme", "ide")
# AHV's disk buses as Prism writes them in a disk_address (`scsi.0`); PCI disks are virtio-blk.
AHV_BUSES = ("scsi", "sata", "ide", "pci")

#: Guest operating systems the guest simulator models (``guest_os``, case-insensitive in YAML).
GUEST_OSES = ("linux", "windows")
#: Load generators the guest simulator writes results of (``load_generator``), and the guest
#: operating systems each runs on in the simulation (fio on Windows writes no sysfs facts, so its
#: guest-to-VM join is not simulated; DiskSPD is a Windows tool; vdbench runs on both, but its
#: join goes through the Linux guest's device, so only Linux vdbench guests are simulated).
LOAD_GENERATORS: dict[str, tuple[str, ...]] = {
    "fio": ("linux",),
    "diskspd": ("windows",),
    "vdbench": ("linux",),
}
#: DiskSPD write buffer patterns as its XML profile names them (``WriteBufferContent/Pattern``).
DISKSPD_PATTERNS = ("sequential", "zero", "random")


@dataclass(frozen=True)
class BlockSizeMix:
    """I/O sizes as fio's ``bssplit``: (size in bytes, fraction of ops) pairs summing to 1."""

    parts: tuple[tuple[int, float], ...]

    @property
    def mean_bytes(self) -> float:
        return sum(size * frac for size, frac in self.parts)

    @property
    def fio_value(self) -> str:
        if len(self.parts) == 1:
            return _fio_size(self.parts[0][0])
        return ":".join(f"{_fio_size(s)}/{round(f * 100, 3):g}" for s, f in self.parts)

    @classmethod
    def parse(cls, value: Any) -> BlockSizeMix:
        """``4KiB``, ``4096``, or ``4k/70:64k/30`` (percent of ops, as fio's bssplit)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(((parse_bytes(value), 1.0),))
        text = str(value)
        if "/" not in text:
            size = parse_bytes(text)
            if size <= 0:
                raise ValueError(f"I/O size must be positive, got {value!r}")
            return cls(((size, 1.0),))
        parts = []
        for chunk in text.split(":"):
            size_text, sep, pct_text = chunk.partition("/")
            if not sep:
                raise ValueError(f"expected size/percent pairs such as 4k/70:64k/30, got {value!r}")
            try:
                pct = float(pct_text)
            except ValueError:
                raise ValueError(f"percent {pct_text!r} in {value!r} is not a number") from None
            parts.append((parse_bytes(size_text), pct))
        total = sum(p for _, p in parts)
        if total <= 0:
            raise ValueError(f"percentages in {value!r} sum to {total:g}")
        return cls(tuple((s, p / total) for s, p in parts))


def _fio_size(n: int) -> str:
    for unit, mult in (("m", 1024**2), ("k", 1024)):
        if n % mult == 0 and n >= mult:
            return f"{n // mult}{unit}"
    return str(n)


@dataclass(frozen=True)
class Burst:
    """The stream runs ``on`` seconds (``length:`` in YAML) out of every ``every`` seconds,
    starting at ``offset``."""

    every: int
    on: int
    offset: int = 0

    def active(self, t: int) -> bool:
        return (t - self.offset) % self.every < self.on


@dataclass(frozen=True)
class DiskspdOptions:
    """The DiskSPD options of a stream that the trace does not give (``diskspd:`` in YAML): what
    its ``-Rxml`` profile records. Block size, read/write mix, random share and outstanding I/Os
    come from the stream itself."""

    write_buffer: str = "sequential"  # -Z: zero; -Z<size>: random; default: sequential pattern
    disable_os_cache: bool = True  # -Sh (DisableOSCache and WriteThrough in the profile)
    threads: int = 1  # -t
    run_seconds: int = 60  # -d: one run; the simulator writes runs back to back
    warmup_seconds: int = 5  # -W (DiskSPD's default 5)
    file_size_bytes: int = 0  # -c; 0: the stream's working set
    target: str = ""  # the test file; default <volume>\diskspd\testfile.dat


@dataclass(frozen=True)
class VdbenchOptions:
    """The vdbench parameters of a stream the trace does not give (``vdbench:`` in YAML)."""

    openflags: str = "o_direct"  # sd=...,openflags=; "" for none (buffered)
    compratio: float | None = None  # compratio= (data written compresses this much by design)
    dedupratio: float | None = None


@dataclass(frozen=True)
class Stream:
    """One I/O stream on a disk (in the guest: one fio job)."""

    name: str
    read_iops: float
    write_iops: float
    read_size: BlockSizeMix
    write_size: BlockSizeMix
    read_random: float  # categorizer's view: share of read ops that are random
    write_random: float
    zero_reads: float  # share of read bytes that are zeros (or never written)
    zero_writes: float  # share of written bytes that are all-zero blocks
    read_latency_s: float  # mean frontend latency
    write_latency_s: float
    latency_sigma: float  # spread of the log-normal latency distribution
    iodepth: int  # fio iodepth (what the guest was told to keep outstanding)
    working_set_bytes: int
    start: int  # active in [start, end) of the period
    end: int
    burst: Burst | None
    data_tier: str  # where non-cached data lives: "ssd" or "hdd"
    ilm_ramp_s: int  # seconds for ILM to move cold data up (0: none)
    fio_options: dict[str, str]  # extra job options as fio prints them in its JSON
    diskspd: DiskspdOptions | None = None  # how DiskSPD was run (load_generator diskspd)
    vdbench: VdbenchOptions | None = None  # vdbench's parameters (load_generator vdbench)
    job: str = ""  # fio job in the guest; streams of a disk sharing it are one job
    # (phases of one workload, e.g. its latency before and after contention)

    def active(self, t: int) -> bool:
        if not (self.start <= t < self.end):
            return False
        return self.burst is None or self.burst.active(t)

    @property
    def rw(self) -> str:
        rand = max(self.read_random if self.read_iops else 0, self.write_random if self.write_iops else 0) >= 0.5
        if self.read_iops and self.write_iops:
            return "randrw" if rand else "rw"
        if self.write_iops:
            return "randwrite" if rand else "write"
        return "randread" if rand else "read"


@dataclass(frozen=True)
class Disk:
    """A virtual disk and its identity in each layer."""

    vm: str
    index: int  # position in the VM's disk list
    unit: str  # vCenter instance (scsi0:1) on ESXi, Prism's disk_address (scsi.1) on AHV
    capacity_bytes: int
    backing_file: str  # "[datastore] vm/vm_1.vmdk"; on AHV the NFS path /ctr01/.acropolis/vmdisk/<uuid>
    uuid: str  # virtual disk UUID (ESXi: the guest's serial with disk.EnableUUID; AHV: vmdisk_uuid)
    guest_device: str  # sdb
    volume: str  # Windows drive letter of the disk's volume (D:); what guest.disk's diskPath names
    partition_start_bytes: int  # guest partition offset (1536: misaligned)
    vdisk_id: int  # Stargate vdisk id
    vdisk_name: str  # "NFS:<n>" as the Stargate page shows it
    vdisk_uuid: str
    cvm: str  # initial hosting CVM
    moves: tuple[tuple[int, str], ...]  # (period second, CVM) where the vdisk moves
    streams: tuple[Stream, ...]

    @property
    def key(self) -> str:
        return f"{self.vm}/{self.unit}"

    @property
    def aligned(self) -> bool:
        return self.partition_start_bytes % 4096 == 0

    def cvm_at(self, t: int) -> str:
        cvm = self.cvm
        for at, target in self.moves:
            if t >= at:
                cvm = target
        return cvm


#: Applications the guest simulator writes the output of (``application.kind``).
APPLICATIONS = ("pgbench",)


@dataclass(frozen=True)
class Application:
    """The application in a VM (``application:`` in YAML), the control of a density test: its
    transactions follow the I/O the VM's disks do (the trace's ops / ``ios_per_transaction``), a
    share of them fail, and its latency is Little's law over its clients (each client always has
    one transaction in flight: latency = clients / transactions per second). The guest simulator
    writes what the application's benchmark prints (pgbench's progress lines and summary)."""

    kind: str = "pgbench"
    ios_per_transaction: float = 10.0  # disk I/Os (reads + writes, all the VM's disks) per transaction
    clients: int = 16  # pgbench -c
    threads: int = 4  # pgbench -j
    scale: int = 100  # pgbench -i -s: the database size (about 16 MB per unit)
    failure_ratio: float = 0.0  # share of the transactions that fail (counted by pgbench 15+)
    progress_s: int = 5  # pgbench -P
    version: str = "16.4"  # what pgbench prints: 14 and older have no failure counts

    @property
    def counts_failures(self) -> bool:
        return int(self.version.split(".")[0]) >= 15


@dataclass(frozen=True)
class VmCpu:
    """A VM's CPU (``cpu:`` in YAML): its demand follows its I/O, ``idle_mhz`` plus
    ``cycles_per_io`` for every I/O it completes, capped at ``vcpus`` x the host's core clock."""

    vcpus: int = 2
    idle_mhz: float = 20.0  # what the guest uses with no I/O (timers, agents)
    cycles_per_io: float = 50_000.0  # CPU cycles the application spends per I/O it completes

    def demand_mhz(self, ops_per_second: float) -> float:
        return self.idle_mhz + self.cycles_per_io * ops_per_second / 1e6


@dataclass(frozen=True)
class ClusterCpu:
    """The hosts' CPU and the CVM's (``cluster.cpu:`` in YAML). Every host has ``cores`` cores
    at ``core_mhz`` (vCenter's ``summary.hardware.cpuMhz`` and ``numCpuCores``); the CVM of each
    host uses ``cvm_share`` of the host's capacity (Nutanix's published density studies measure
    about 5 %)."""

    core_mhz: int = 2600
    cores: int = 24
    cvm_share: float = 0.05
    cvm_vcpus: int = 8
    block_serial: str = "SIMBLK"  # NTNX-<block serial><block number>-<A-D>-CVM

    @property
    def host_capacity_mhz(self) -> float:
        return float(self.core_mhz * self.cores)


@dataclass(frozen=True)
class Host:
    """A hypervisor host of the cluster and the CVM on it (if any)."""

    name: str  # esx-01 (ahv-01 on AHV)
    cvm: str  # the Stargate CVM on it (cluster.cvms), "" for a host without one
    cvm_vm: str  # the CVM as a VM, as the installer names it: NTNX-<block>-<position>-CVM


@dataclass(frozen=True)
class Vm:
    name: str
    host: str
    guest_os: str  # "linux" or "windows"
    disks: tuple[Disk, ...]
    hypervisor: str = "esxi"  # the cluster's: what the guest sees of its disks depends on it
    load_generator: str = "fio"  # fio, diskspd or vdbench
    hostname: str = ""  # the guest's host name (vCenter guest.hostName, DiskSPD's ComputerName)
    application: Application | None = None  # what runs in the VM on top of its I/O (density tests)
    cpu: VmCpu = field(default_factory=VmCpu)

    @property
    def windows(self) -> bool:
        return self.guest_os == "windows"


@dataclass(frozen=True)
class Cluster:
    name: str
    cvms: tuple[str, ...]
    dram_cache_bytes: int  # per CVM cache a vdisk's working set can live in
    hybrid: bool  # HDD tier present
    page_build: int  # Stargate page variant: 2014, 2015 or 2016
    hypervisor: str = "esxi"  # esxi (vCenter) or ahv (Prism)
    cpu: ClusterCpu = field(default_factory=ClusterCpu)

    @property
    def ahv(self) -> bool:
        return self.hypervisor == "ahv"

    @property
    def vm_view_source(self) -> str:
        """The manager the VM view comes from: ``vcenter`` or ``prism``."""
        return "prism" if self.ahv else "vcenter"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    period_s: int
    cluster: Cluster
    vms: tuple[Vm, ...]
    source: str = ""
    expect: dict[str, Any] = field(default_factory=dict)  # what the views should show (docs/tests)
    # The epoch second at which period second 0 falls (docs/scenarios.md "Time"); 0: the Unix epoch.
    origin: int = 0

    @property
    def disks(self) -> list[Disk]:
        return [d for vm in self.vms for d in vm.disks]

    @property
    def hosts(self) -> list[Host]:
        """The cluster's hosts: one per CVM (``esx-01`` runs ``cluster.cvms[0]``...), then any other
        host a VM names (a host without a CVM), in name order."""
        prefix = "ahv" if self.cluster.ahv else "esx"
        serial = self.cluster.cpu.block_serial
        out = [
            # Nutanix blocks hold up to four nodes, positions A-D.
            Host(f"{prefix}-{i + 1:02d}", cvm, f"NTNX-{serial}{i // 4 + 1:02d}-{'ABCD'[i % 4]}-CVM")
            for i, cvm in enumerate(self.cluster.cvms)
        ]
        known = {h.name for h in out}
        for name in sorted({vm.host for vm in self.vms} - known):
            out.append(Host(name, "", ""))
        return out

    def expected_verdicts(self) -> dict[tuple[str, str], dict[str, str]]:
        """(vm, disk unit) -> trap -> the report's expected verdict (``expect.verdicts``): the
        scenario-wide states, then the per-disk ones; every trap not listed is OK."""
        from ioparallax.report.verdicts import TRAPS

        spec = self.expect.get("verdicts", {}) or {}
        base = dict.fromkeys(TRAPS, "OK")
        base.update({k: v for k, v in spec.items() if k != "disks"})
        out = {}
        for vm in self.vms:
            for d in vm.disks:
                row = dict(base)
                row.update((spec.get("disks") or {}).get(f"{vm.name} {d.unit}", {}))
                out[(vm.name, d.unit)] = row
        return out


def _uuid(*parts: object) -> str:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return str(uuidlib.UUID(bytes=digest[:16], version=4))


def _vmware_uuid(*parts: object) -> str:
    # vCenter virtual disk UUIDs are 6000C29x-... when exposed to the guest with disk.EnableUUID.
    u = _uuid("vmdk", *parts).replace("-", "")
    u = "6000c29" + u[7:]
    return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:32]}"


def _ahv_uuid(*parts: object) -> str:
    # A Prism vmdisk_uuid: a plain random (version 4) UUID, here derived deterministically.
    return _uuid("vmdisk", *parts)


def _parse_unit(dsec: Section, di: int, hypervisor: str) -> str:
    """A disk's address: vCenter's ``scsi0:1`` on ESXi, Prism's ``scsi.1`` on AHV (same number by default)."""
    if hypervisor == "ahv":
        unit = dsec.get("unit", str, default=f"scsi.{di + 1}")
        bus, dot, num = unit.partition(".")
        if not dot or not num.isdigit() or bus not in AHV_BUSES:
            raise dsec.error(
                "unit",
                f"on AHV a disk's unit is Prism's disk_address ({'.N, '.join(AHV_BUSES)}.N, e.g. scsi.1), got {unit!r}",
            )
        return unit
    unit = dsec.get("unit", str, default=f"scsi0:{di + 1}")
    bus, _, num = unit.partition(":")
    if not num.isdigit() or bus.rstrip("0123456789") not in VCENTER_BUSES:
        raise dsec.error("unit", f"expected an instance such as scsi0:1, got {unit!r}")
    return unit


def _seconds(sec: Section, name: str, default: Any = Section._MISSING) -> int:
    value = sec.get(name, parse_duration, default=default)
    if value is None:
        return None  # type: ignore[return-value]
    if value < 0:
        raise sec.error(name, f"must not be negative, got {value:g}")
    return int(round(value))


def _ratio(sec: Section, name: str, default: float) -> float:
    value = sec.get(name, float, default=default)
    if not 0.0 <= value <= 1.0:
        raise sec.error(name, f"must be a ratio between 0 and 1, got {value:g}")
    return value


def _positive(sec: Section, name: str, default: float) -> float:
    value = sec.get(name, float, default=default)
    if value < 0:
        raise sec.error(name, f"must not be negative, got {value:g}")
    return value


def _parse_stream(sec: Section, period: int, defaults: dict[str, Any], name: str) -> Stream:
    # Values given on the disk's or VM's `defaults:` apply unless the stream sets them.
    merged = Section({**defaults, **sec.data}, sec.path, sec.key)
    s = merged
    read_iops = _positive(s, "read_iops", 0.0)
    write_iops = _positive(s, "write_iops", 0.0)
    if read_iops == 0 and write_iops == 0:
        raise s.error(None, "a stream needs read_iops or write_iops above 0")
    size = s.get("size", BlockSizeMix.parse, default=None)
    read_size = s.get("read_size", BlockSizeMix.parse, default=size or BlockSizeMix(((4096, 1.0),)))
    write_size = s.get("write_size", BlockSizeMix.parse, default=size or BlockSizeMix(((4096, 1.0),)))
    random = _ratio(s, "random", 1.0)
    latency = s.get("latency", parse_duration, default=None)
    read_lat = s.get("read_latency", parse_duration, default=latency if latency is not None else 0.0005)
    write_lat = s.get("write_latency", parse_duration, default=latency if latency is not None else 0.001)
    for key, val in (("read_latency", read_lat), ("write_latency", write_lat)):
        if val <= 0:
            raise s.error(key, f"must be above 0, got {val:g}")
    start = _seconds(s, "from", 0)
    end = _seconds(s, "to", period)
    if not 0 <= start < end <= period:
        raise s.error("to", f"active window [{start}, {end}) must lie within the period of {period} s")
    burst = None
    bsec = s.section("burst")
    if bsec.data:
        every = _seconds(bsec, "every")
        # not `on`: YAML 1.1 reads a bare `on` key as the boolean true
        on = _seconds(bsec, "length")
        offset = _seconds(bsec, "offset", 0)
        if every <= 0 or not 0 < on <= every:
            raise bsec.error("length", f"need 0 < length <= every, got length={on} every={every}")
        bsec.reject_unknown()
        burst = Burst(every, on, offset)
    tier = s.get("data_tier", str, default="ssd")
    if tier not in ("ssd", "hdd"):
        raise s.error("data_tier", f"must be ssd or hdd, got {cut(tier)}")
    fio_opts = s.get("fio_options", dict, default={})
    diskspd = _parse_diskspd(s.section("diskspd")) if "diskspd" in s.data else None
    vdbench = _parse_vdbench(s.section("vdbench")) if "vdbench" in s.data else None
    iops_total = read_iops + write_iops
    mean_lat = (read_iops * read_lat + write_iops * write_lat) / iops_total
    default_depth = max(1, round(iops_total * mean_lat))
    stream = Stream(
        name=s.get("name", str, default=name),
        read_iops=read_iops,
        write_iops=write_iops,
        read_size=read_size,
        write_size=write_size,
        read_random=_ratio(s, "read_random", random),
        write_random=_ratio(s, "write_random", random),
        zero_reads=_ratio(s, "zero_reads", 0.0),
        zero_writes=_ratio(s, "zero_writes", 0.0),
        read_latency_s=read_lat,
        write_latency_s=write_lat,
        latency_sigma=_positive(s, "latency_sigma", 0.35),
        iodepth=int(s.get("iodepth", int, default=default_depth)),
        working_set_bytes=s.get("working_set", parse_bytes, default=16 * 1024**3),
        start=start,
        end=end,
        burst=burst,
        data_tier=tier,
        ilm_ramp_s=_seconds(s, "ilm_ramp", 0),
        fio_options=_fio_options(s, fio_opts),
        diskspd=diskspd,
        vdbench=vdbench,
    )
    stream = replace(stream, job=s.get("job", str, default=stream.name))
    s.reject_unknown()
    return stream


def _parse_diskspd(sec: Section) -> DiskspdOptions:
    """A stream's ``diskspd:`` options (what DiskSPD's XML profile records beyond the trace)."""
    pattern = sec.get("write_buffer", str, default="sequential")
    if pattern not in DISKSPD_PATTERNS:
        raise sec.error("write_buffer", f"must be one of {', '.join(DISKSPD_PATTERNS)}, got {pattern!r}")
    threads = sec.get("threads", int, default=1)
    if threads < 1:
        raise sec.error("threads", f"must be at least 1, got {threads}")
    run = _seconds(sec, "run", 60)
    if run < 5:
        raise sec.error("run", f"must be at least 5 s (one DiskSPD result per run), got {run}")
    opts = DiskspdOptions(
        write_buffer=pattern,
        disable_os_cache=sec.get("disable_os_cache", bool, default=True),
        threads=threads,
        run_seconds=run,
        warmup_seconds=_seconds(sec, "warmup", 5),
        file_size_bytes=sec.get("file_size", parse_bytes, default=0),
        target=sec.get("target", str, default=""),
    )
    sec.reject_unknown()
    return opts


_DRIVE_LETTERS = "DEFGHIJKLMNOPQRSTUVWXYZ"


def _volume(dsec: Section, index: int) -> str:
    # Windows guests: the data disk's volume; C: is the system disk, not in the scenario.
    default = f"{_DRIVE_LETTERS[index]}:" if index < len(_DRIVE_LETTERS) else ""
    value = dsec.get("volume", str, default=default).upper()
    if len(value) != 2 or value[1] != ":" or not "A" <= value[0] <= "Z":
        raise dsec.error("volume", f"expected a drive letter such as D:, got {value!r}")
    return value


_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _hostname(vsec: Section, default: str) -> str:
    # One DNS label, as Windows' DNSHostName and Tools' guest.hostName give it (default: the VM name).
    if "hostname" not in vsec.data:
        vsec.get("hostname", str, default=default)
        return default
    value = vsec.get("hostname", str)
    if not _HOSTNAME.fullmatch(value):
        raise vsec.error("hostname", f"expected a host name (letters, digits, inner dashes), got {value!r}")
    return value


def _parse_cluster_cpu(sec: Section) -> ClusterCpu:
    """``cluster.cpu:``: the hosts' capacity and the CVM's share of it."""
    base = ClusterCpu()
    core_mhz = sec.get("core_mhz", int, default=base.core_mhz)
    if core_mhz < 1:
        raise sec.error("core_mhz", f"must be at least 1 MHz, got {core_mhz}")
    cores = sec.get("cores", int, default=base.cores)
    if cores < 1:
        raise sec.error("cores", f"must be at least 1, got {cores}")
    share = _ratio(sec, "cvm_share", base.cvm_share)
    if share >= 1:
        raise sec.error("cvm_share", f"must be below 1 (the CVM cannot take the whole host), got {share:g}")
    vcpus = sec.get("cvm_vcpus", int, default=base.cvm_vcpus)
    if vcpus < 1:
        raise sec.error("cvm_vcpus", f"must be at least 1, got {vcpus}")
    serial = sec.get("block_serial", str, default=base.block_serial)
    if not re.fullmatch(r"[A-Za-z0-9]{1,20}", serial):
        raise sec.error("block_serial", f"expected letters and digits (a block serial), got {serial!r}")
    sec.reject_unknown()
    return ClusterCpu(core_mhz=core_mhz, cores=cores, cvm_share=share, cvm_vcpus=vcpus, block_serial=serial)


def _parse_vm_cpu(sec: Section) -> VmCpu:
    """A VM's ``cpu:``: its vCPUs and how its CPU follows its I/O."""
    base = VmCpu()
    vcpus = sec.get("vcpus", int, default=base.vcpus)
    if vcpus < 1:
        raise sec.error("vcpus", f"must be at least 1, got {vcpus}")
    cpu = VmCpu(
        vcpus=vcpus,
        idle_mhz=_positive(sec, "idle_mhz", base.idle_mhz),
        cycles_per_io=_positive(sec, "cycles_per_io", base.cycles_per_io),
    )
    sec.reject_unknown()
    return cpu


def _parse_vdbench(sec: Section) -> VdbenchOptions:
    """A stream's ``vdbench:`` parameters."""

    def ratio(name: str) -> float | None:
        value = sec.get(name, float, default=None)
        if value is not None and value < 1:
            raise sec.error(name, f"must be at least 1 (vdbench's data reduction ratio), got {value:g}")
        return value

    opts = VdbenchOptions(
        openflags=sec.get("openflags", str, default="o_direct"),
        compratio=ratio("compratio"),
        dedupratio=ratio("dedupratio"),
    )
    sec.reject_unknown()
    return opts


def _parse_application(sec: Section, guest_os: str) -> Application:
    """A VM's ``application:`` (see :class:`Application`)."""
    d = Application()
    kind = sec.get("kind", str, default=d.kind)
    if kind not in APPLICATIONS:
        raise sec.error("kind", f"expected one of {', '.join(APPLICATIONS)}, got {kind!r}")
    if guest_os != "linux":
        raise sec.error("kind", f"{kind} is simulated on Linux guests only")
    ios = sec.get("ios_per_transaction", (int, float), default=d.ios_per_transaction)
    if not ios > 0:
        raise sec.error("ios_per_transaction", f"must be positive, got {ios}")
    failure_ratio = sec.get("failure_ratio", (int, float), default=d.failure_ratio)
    if not 0 <= failure_ratio < 1:
        raise sec.error("failure_ratio", f"must be in [0, 1), got {failure_ratio}")
    ints = {}
    for name in ("clients", "threads", "scale", "progress_s"):
        value = sec.get(name, int, default=getattr(d, name))
        if value < 1:
            raise sec.error(name, f"must be at least 1, got {value}")
        ints[name] = value
    version = str(sec.get("version", (str, int, float), default=d.version))
    if not re.fullmatch(r"\d+(\.\d+)?", version):
        raise sec.error("version", f"expected a PostgreSQL version such as 16.4, got {version!r}")
    sec.reject_unknown()
    return Application(
        kind=kind,
        ios_per_transaction=float(ios),
        failure_ratio=float(failure_ratio),
        version=version,
        **ints,
    )


def _guest_os(vsec: Section) -> str:
    # Once free text (default "Linux"): now the two values the simulator models, in any case.
    value = vsec.get("guest_os", str, default="linux")
    norm = value.strip().lower()
    if norm not in GUEST_OSES:
        raise vsec.error("guest_os", f"expected windows or linux, got {value!r}")
    return norm


VERDICT_STATES = ("OK", "Distorted", "Not measurable")


#: Longest fio option value taken from a scenario (fio's own options are short words and numbers).
MAX_FIO_OPTION_CHARS = 256


def _fio_options(sec: Section, options: dict[Any, Any]) -> dict[str, str]:
    """``fio_options``: option name -> a scalar (a string, a number or a boolean), as fio prints
    them in its JSON; a list or a mapping is refused rather than written out as its repr."""
    out = {}
    for name, value in options.items():
        key = f"fio_options.{cut(name) if not isinstance(name, str) else name}"
        if not isinstance(name, str) or not name:
            raise sec.error(key, "an option name must be a non-empty string")
        if not isinstance(value, (str, int, float)):
            raise sec.error(key, f"expected a string or a number, got {type(value).__name__} {cut(value)}")
        text = str(value)
        if len(text) > MAX_FIO_OPTION_CHARS or "\n" in text:
            raise sec.error(key, f"expected one line of at most {MAX_FIO_OPTION_CHARS} characters, got {cut(text)}")
        out[name] = text
    return out


def _expect(root: Section, vms: list[Vm]) -> dict[str, Any]:
    """``expect:``: free-form for the docs and tests, except ``verdicts`` (the report's expected
    verdicts, checked here so that a typo in a trap or a state fails when the scenario loads)."""
    expect = root.get("expect", dict, default={})
    if "verdicts" not in expect:
        return expect
    from ioparallax.report.verdicts import TRAPS

    vsec = root.section("expect").section("verdicts")
    disks = {f"{vm.name} {d.unit}" for vm in vms for d in vm.disks}

    def check(sec: Section, where: dict[str, Any]) -> None:
        for trap, state in where.items():
            if trap not in TRAPS:
                raise sec.error(trap, f"unknown trap (known: {', '.join(TRAPS)})")
            if state not in VERDICT_STATES:
                raise sec.error(trap, f"expected one of {', '.join(VERDICT_STATES)}, got {state!r}")

    data = vsec.data if isinstance(vsec.data, dict) else {}
    check(vsec, {k: v for k, v in data.items() if k != "disks"})
    per_disk = data.get("disks") or {}
    if not isinstance(per_disk, dict):
        raise vsec.error("disks", "expected a mapping of 'vm unit' (e.g. 'pg-01 scsi0:1') to verdicts")
    dsec = vsec.section("disks")
    for name, verdicts in per_disk.items():
        if name not in disks:
            raise dsec.error(name, f"no such VM disk in the scenario (known: {', '.join(sorted(disks))})")
        if not isinstance(verdicts, dict):
            raise dsec.error(name, "expected a mapping of trap to verdict")
        check(dsec.section(name), verdicts)
    return expect


def parse_scenario(data: Any, path: str | os.PathLike[str] | None = None) -> Scenario:
    root = Section(data, path)
    name = root.get("name", str)
    period = _seconds(root, "period", 600)
    if period < 20:
        raise root.error("period", f"must be at least 20 s (one vCenter sample), got {period}")
    origin = root.get("origin", object, default=0)
    if isinstance(origin, bool) or not isinstance(origin, int) or origin < 0:
        raise root.error("origin", f"expected a Unix time in whole seconds (0 or later), got {origin!r}")
    csec = root.section("cluster", required=True)
    cvms = csec.get("cvms", list)
    if not cvms or not all(isinstance(c, str) for c in cvms):
        raise csec.error("cvms", "expected a non-empty list of CVM names")
    if len(set(cvms)) != len(cvms):
        raise csec.error("cvms", "CVM names must be unique")
    build = csec.get("page_build", int, default=2016)
    if build not in PAGE_BUILDS:
        raise csec.error("page_build", f"must be one of {', '.join(map(str, PAGE_BUILDS))}, got {build}")
    hypervisor = csec.get("hypervisor", str, default="esxi")
    if hypervisor not in HYPERVISORS:
        raise csec.error("hypervisor", f"must be one of {', '.join(HYPERVISORS)}, got {hypervisor!r}")
    cluster = Cluster(
        name=csec.get("name", str, default="poc"),
        cvms=tuple(cvms),
        dram_cache_bytes=csec.get("dram_cache", parse_bytes, default=20 * 1024**3),
        hybrid=csec.get("hybrid", bool, default=False),
        page_build=build,
        hypervisor=hypervisor,
        cpu=_parse_cluster_cpu(csec.section("cpu")),
    )
    ahv = cluster.ahv
    if ahv and period < 30:
        raise root.error("period", f"must be at least 30 s on AHV (one Prism sample), got {period}")
    csec.reject_unknown()

    vms: list[Vm] = []
    next_vdisk = root.get("first_vdisk_id", int, default=1000)
    seen_vdisks: set[int] = set()
    rr = 0
    for vsec in root.sections("vms", required=True):
        vm_name = vsec.get("name", str)
        vm_defaults = vsec.get("defaults", dict, default={})
        disks: list[Disk] = []
        for di, dsec in enumerate(vsec.sections("disks", required=True)):
            unit = _parse_unit(dsec, di, hypervisor)
            vdisk_id = dsec.get("vdisk_id", int, default=next_vdisk)
            if vdisk_id in seen_vdisks:
                raise dsec.error("vdisk_id", f"vdisk id {vdisk_id} is used twice")
            seen_vdisks.add(vdisk_id)
            next_vdisk = max(next_vdisk, vdisk_id) + 1
            cvm = dsec.get("cvm", str, default=cluster.cvms[rr % len(cluster.cvms)])
            rr += 1
            if cvm not in cluster.cvms:
                raise dsec.error("cvm", f"unknown CVM {cvm!r} (cluster.cvms: {', '.join(cluster.cvms)})")
            moves = []
            for msec in dsec.sections("moves"):
                at = _seconds(msec, "at")
                to = msec.get("to", str)
                if to not in cluster.cvms:
                    raise msec.error("to", f"unknown CVM {to!r}")
                if not 0 < at < period:
                    raise msec.error("at", f"must lie inside the period (0, {period}), got {at}")
                msec.reject_unknown()
                moves.append((at, to))
            defaults = {**vm_defaults, **dsec.get("defaults", dict, default={})}
            streams = tuple(
                _parse_stream(ssec, period, defaults, f"{vm_name}-{di}-{si}")
                for si, ssec in enumerate(dsec.sections("streams", required=True))
            )
            names = [s.name for s in streams]
            if len(set(names)) != len(names):
                raise dsec.error("streams", f"stream names must be unique on a disk: {names}")
            if ahv:
                disk_uuid = dsec.get("uuid", str, default=_ahv_uuid(name, vm_name, unit))
                # AHV keeps a VM's disks as files named after their vmdisk UUID in a hidden folder
                # of the container (Prism's nutanix_nfs_file_path); the vdisk is named after it:
                # NFS:<container id>:0:<inode>, the name the guest's disk serial carries too.
                default_backing = f"/{AHV_CONTAINER}/.acropolis/vmdisk/{disk_uuid}"
                default_vdisk_name = f"NFS:{AHV_CONTAINER_ID}:0:{vdisk_id + 30000000}"
            else:
                disk_uuid = dsec.get("uuid", str, default=_vmware_uuid(name, vm_name, unit))
                default_backing = f"[{AHV_CONTAINER}] {vm_name}/{vm_name}{'' if di == 0 else f'_{di}'}.vmdk"
                default_vdisk_name = f"NFS:{vdisk_id + 30000000}"
            disks.append(
                Disk(
                    vm=vm_name,
                    index=di,
                    unit=unit,
                    capacity_bytes=dsec.get("capacity", parse_bytes, default=100 * 1024**3),
                    backing_file=dsec.get("backing_file", str, default=default_backing),
                    uuid=disk_uuid,
                    guest_device=dsec.get("guest_device", str, default=f"sd{chr(ord('a') + di)}"),
                    volume=_volume(dsec, di),
                    partition_start_bytes=dsec.get("partition_start", parse_bytes, default=1024**2),
                    vdisk_id=vdisk_id,
                    vdisk_name=dsec.get("vdisk_name", str, default=default_vdisk_name),
                    # On AHV the vmdisk UUID Prism shows is the vdisk's UUID on Stargate's page too.
                    vdisk_uuid=disk_uuid if ahv else _uuid("vdisk", name, vdisk_id),
                    cvm=cvm,
                    moves=tuple(sorted(moves)),
                    streams=streams,
                )
            )
            dsec.reject_unknown()
        guest_os = _guest_os(vsec)
        generator = vsec.get("load_generator", str, default="fio")
        if generator not in LOAD_GENERATORS:
            raise vsec.error("load_generator", f"expected one of {', '.join(LOAD_GENERATORS)}, got {generator!r}")
        if guest_os not in LOAD_GENERATORS[generator]:
            hint = "diskspd or vdbench" if guest_os == "windows" else "fio or vdbench"
            raise vsec.error(
                "load_generator",
                f"{generator} on a {guest_os} guest is not simulated (use {hint}, or guest_os: "
                f"{' or '.join(LOAD_GENERATORS[generator])})",
            )
        for disk in disks:
            for si, stream in enumerate(disk.streams):
                for tool, opts in (("diskspd", stream.diskspd), ("vdbench", stream.vdbench)):
                    if opts is not None and generator != tool:
                        raise ConfigError(
                            path,
                            f"{vsec.key}.disks[{disk.index}].streams[{si}].{tool}",
                            f"{'DiskSPD' if tool == 'diskspd' else 'vdbench'} options on a VM whose "
                            f"load_generator is {generator}",
                        )
        volumes = [d.volume for d in disks]
        if guest_os == "windows" and len(set(volumes)) != len(volumes):
            raise vsec.error("disks", f"two disks share a volume: {volumes}")
        vms.append(
            Vm(
                name=vm_name,
                host=vsec.get(
                    "host", str, default=f"{'ahv' if ahv else 'esx'}-{(len(vms) % len(cluster.cvms)) + 1:02d}"
                ),
                guest_os=guest_os,
                disks=tuple(disks),
                load_generator=generator,
                hostname=_hostname(vsec, vm_name),
                hypervisor=hypervisor,
                application=_parse_application(vsec.section("application"), guest_os)
                if "application" in vsec.data
                else None,
                cpu=_parse_vm_cpu(vsec.section("cpu")),
            )
        )
        vsec.reject_unknown()
    if len({v.name for v in vms}) != len(vms):
        raise root.error("vms", "VM names must be unique")
    scenario = Scenario(
        name=name,
        summary=root.get("summary", str, default=""),
        period_s=period,
        cluster=cluster,
        vms=tuple(vms),
        source=str(path or ""),
        expect=_expect(root, vms),
        origin=origin,
    )
    root.get("description", str, default="")
    root.reject_unknown()
    return scenario


def list_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def scenario_path(name_or_path: str | os.PathLike[str]) -> Path:
    """A scenario from the library by name (``zero-heavy``) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not candidate.exists():
        raise ConfigError(None, None, f"no scenario named {name_or_path!r} (library: {', '.join(list_scenarios())})")
    return candidate


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    path = scenario_path(name_or_path)
    return parse_scenario(load_yaml(path), path)


def write_with_origin(name_or_path: str | os.PathLike[str], origin: int, out: str | os.PathLike[str]) -> Path:
    """Write to ``out`` a copy of a scenario whose period second 0 falls at Unix time ``origin``
    (its ``origin`` key set, replacing any); returns ``out``. Every simulator of a cluster reads the
    same copy, so they agree on the origin (``ioparallax-demo --from-start``)."""
    src = scenario_path(name_or_path)
    data = load_yaml(src)
    if not isinstance(data, dict):
        raise ConfigError(src, None, "expected a mapping at the top of a scenario")
    text = yaml.safe_dump({**data, "origin": int(origin)}, sort_keys=False, allow_unicode=True)
    dest = Path(out)
    dest.write_text(f"# {src.resolve()}, its period second 0 at Unix time {int(origin)}\n{text}", encoding="utf-8")
    return dest
