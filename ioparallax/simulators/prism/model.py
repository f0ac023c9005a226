"""What Prism answers, computed from a scenario trace (no HTTP here).

Identity (the same for the Stargate simulator's Prism path, which imports it from here):

- a VM's ``uuid`` is derived from the scenario and VM name; its ``vm_disk_info[].vmdisk_uuid``
  and the ``virtual_disks`` entity ``uuid`` are the disk's vdisk UUID, the one Stargate's page
  prints after the vdisk name; ``virtual_disk_id`` is ``<cluster id>::<Stargate vdisk id>``;
  ``disk_address`` is ``scsi.1`` for the scenario's ``scsi0:1``; ``device_uuid`` is the disk's
  UUID (the serial the guest sees, see docs/prism.md on that assumption).

Statistics: Prism keeps one sample per 30 s per entity. The sample ending at ``E`` (a multiple of
30 s of the wall clock) averages ``[E - 30, E)`` (the trace's seconds before period second
``trace.period_second(E)``: the scenario's origin applies) and is served from ``E + publish_delay`` until
the next one replaces it. Values are strings; ``"-1"`` means "not available":

- ``hypervisor_*`` is the VM view of the trace (what the vCenter simulator shows for the same
  disk: the trace's own ops, bytes and op-weighted latency, summed over the sample);
- ``controller_*`` is the storage view: the frontend ops, bytes and latency Stargate saw for the
  vdisk (the same trace numbers Stargate's page shows, averaged over 30 s instead of its 3 s).

A powered-off VM has no hypervisor statistics (every ``hypervisor_*`` is ``"-1"``) and no
controller I/O (zeros); a deleted VM has neither entity nor disks.
"""

from __future__ import annotations

import hashlib
import math
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ioparallax.simulators.scenario.model import Disk, Scenario
from ioparallax.simulators.scenario.trace import CpuSeries, DiskSecond, Trace

#: Prism's statistics period.
SAMPLE_SECONDS = 30
#: Default seconds after a sample's end before Prism serves it.
DEFAULT_PUBLISH_DELAY = 5.0
#: v2 paging: the count used when a client asks for a page without ``count``.
DEFAULT_PAGE_COUNT = 20
#: v4: most samples one stats answer holds (a real cluster keeps about a day of 30 s samples).
V4_MAX_SAMPLES = 2880


def uuid_of(*parts: object) -> str:
    """A stable UUID (v4 layout) from the parts: the same scenario gives the same identities."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return str(uuidlib.UUID(bytes=digest[:16], version=4))


def nfs_file_path(disk: Disk) -> str:
    """``[ctr01] vm/vm_1.vmdk`` -> ``/ctr01/vm/vm_1-flat.vmdk`` (the NFS file Stargate serves)."""
    text = disk.backing_file
    if text.startswith("[") and "]" in text:
        ds, _, rest = text[1:].partition("]")
        rest = rest.strip()
        if rest.endswith(".vmdk"):
            rest = rest[:-5] + "-flat.vmdk"
        return f"/{ds}/{rest}"
    return text


def disk_address(disk: Disk) -> str:
    """``scsi0:1`` -> ``scsi.1`` (Prism's bus.index form); an AHV scenario's unit already is one."""
    if ":" not in disk.unit:
        return disk.unit
    bus, _, unit = disk.unit.partition(":")
    return f"{bus.rstrip('0123456789')}.{unit}"


def _r(value: float) -> str:
    """A Prism statistic: an integer, written as a string."""
    return str(int(math.floor(value + 0.5)))


def _stats(prefix: str, w: DiskSecond, span: int) -> dict[str, str]:
    """The v2 statistics of one view over one sample: rates, counts in the sample, totals."""
    r_ops, w_ops = w.read_ops, w.write_ops
    ops = r_ops + w_ops
    rb, wb = w.read_bytes, w.write_bytes
    rl, wl = w.read_latency_sum_s, w.write_latency_sum_s

    def avg(lat: float, n: float) -> str:
        return _r(lat / n * 1e6) if n else "0"

    return {
        f"{prefix}_num_iops": _r(ops / span),
        f"{prefix}_num_read_iops": _r(r_ops / span),
        f"{prefix}_num_write_iops": _r(w_ops / span),
        f"{prefix}_num_io": _r(ops),
        f"{prefix}_num_read_io": _r(r_ops),
        f"{prefix}_num_write_io": _r(w_ops),
        f"{prefix}_io_bandwidth_kBps": _r((rb + wb) / 1024 / span),
        f"{prefix}_read_io_bandwidth_kBps": _r(rb / 1024 / span),
        f"{prefix}_write_io_bandwidth_kBps": _r(wb / 1024 / span),
        f"{prefix}_avg_io_latency_usecs": avg(rl + wl, ops),
        f"{prefix}_avg_read_io_latency_usecs": avg(rl, r_ops),
        f"{prefix}_avg_write_io_latency_usecs": avg(wl, w_ops),
        f"{prefix}_total_io_time_usecs": _r((rl + wl) * 1e6),
        f"{prefix}_total_read_io_time_usecs": _r(rl * 1e6),
        f"{prefix}_total_io_size_kbytes": _r((rb + wb) / 1024),
        f"{prefix}_total_read_io_size_kbytes": _r(rb / 1024),
        f"{prefix}_read_io_ppm": _r(r_ops / ops * 1e6) if ops else "0",
        f"{prefix}_write_io_ppm": _r(w_ops / ops * 1e6) if ops else "0",
        f"{prefix}_timespan_usecs": str(span * 1_000_000),
    }


_HYPERVISOR_KEYS = tuple(_stats("hypervisor", DiskSecond(), SAMPLE_SECONDS))
_CONTROLLER_UNAVAILABLE = ("controller_random_io_ppm", "controller_seq_io_ppm")

#: v4 VmDiskStatsTuple fields (camelCase, integers) from the v2 controller keys they mirror.
V4_DISK_FIELDS = {
    "controllerNumIops": "controller_num_iops",
    "controllerNumReadIops": "controller_num_read_iops",
    "controllerNumWriteIops": "controller_num_write_iops",
    "controllerNumIo": "controller_num_io",
    "controllerNumReadIo": "controller_num_read_io",
    "controllerNumWriteIo": "controller_num_write_io",
    "controllerIoBandwidthKbps": "controller_io_bandwidth_kBps",
    "controllerReadIoBandwidthKbps": "controller_read_io_bandwidth_kBps",
    "controllerWriteIoBandwidthKbps": "controller_write_io_bandwidth_kBps",
    "controllerAvgIoLatencyMicros": "controller_avg_io_latency_usecs",
    "controllerAvgReadIoLatencyMicros": "controller_avg_read_io_latency_usecs",
    "controllerAvgWriteIoLatencyMicros": "controller_avg_write_io_latency_usecs",
    "controllerTotalIoTimeMicros": "controller_total_io_time_usecs",
    "controllerTotalReadIoTimeMicros": "controller_total_read_io_time_usecs",
    "controllerTotalIoSizeKb": "controller_total_io_size_kbytes",
    "controllerTotalReadIoSizeKb": "controller_total_read_io_size_kbytes",
    "controllerReadIoPpm": "controller_read_io_ppm",
    "controllerWriteIoPpm": "controller_write_io_ppm",
    "controllerTimespanMicros": "controller_timespan_usecs",
}


def iso_time(epoch: float) -> str:
    """RFC 3339 UTC, as v4 writes timestamps: ``2026-11-26T10:00:30Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso_time(text: str) -> float:
    """RFC 3339 (``Z`` or an offset, optional fraction) -> epoch seconds; ValueError otherwise."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class PrismModel:
    """The Prism answers of one scenario. ``powered_off`` and ``deleted`` hold VM names changed
    at runtime (tests, ``/-/sim/vm``); ``publish_delay`` is how long after a sample's end Prism
    serves it."""

    scenario: Scenario
    trace: Trace
    publish_delay: float = DEFAULT_PUBLISH_DELAY
    powered_off: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    #: When a VM of ``powered_off`` was powered off (epoch): samples ending after it have no VM
    #: view; a sample already published keeps its values, as in Prism. Absent: every sample.
    powered_off_at: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sc = self.scenario
        self.vm_uuids = {vm.name: uuid_of("vm", sc.name, vm.name) for vm in sc.vms}
        self.cluster_uuid = uuid_of("cluster", sc.name, sc.cluster.name)
        self.cluster_id = int(hashlib.sha256(self.cluster_uuid.encode()).hexdigest()[:12], 16)
        self.container_uuid = uuid_of("container", sc.name, "ctr01")
        self.host_uuids = {vm.host: uuid_of("host", sc.name, vm.host) for vm in sc.vms}
        # Every host of the cluster (one per CVM) and its CVM, listed among the VMs with is_cvm.
        for h in self.trace.hosts:
            self.host_uuids.setdefault(h.name, uuid_of("host", sc.name, h.name))
        self.cvms = {h.cvm_vm: h for h in self.trace.hosts if h.cvm}
        self.cvm_uuids = {name: uuid_of("vm", sc.name, name) for name in self.cvms}
        self._by_uuid = {d.vdisk_uuid: d for d in sc.disks}

    # -- time -------------------------------------------------------------------------------
    def sample_end(self, now: float) -> int:
        """End (epoch seconds) of the newest sample Prism serves at ``now``."""
        return int(math.floor((now - self.publish_delay) / SAMPLE_SECONDS)) * SAMPLE_SECONDS

    # -- statistics -------------------------------------------------------------------------
    def disk_stats(self, disk: Disk, end: int) -> dict[str, str]:
        """The v2 ``stats`` map of a virtual disk for the sample ending at ``end``."""
        w = self.trace.window(disk, self.trace.period_second(end), SAMPLE_SECONDS)
        if disk.vm in self.powered_off and end > self.powered_off_at.get(disk.vm, float("-inf")):
            hyper = dict.fromkeys(_HYPERVISOR_KEYS, "-1")
            ctrl = _stats("controller", DiskSecond(), SAMPLE_SECONDS)
        else:
            hyper = _stats("hypervisor", w, SAMPLE_SECONDS)
            ctrl = _stats("controller", w, SAMPLE_SECONDS)
        stats = {**hyper, **ctrl}
        stats.update(dict.fromkeys(_CONTROLLER_UNAVAILABLE, "-1"))
        stats["controller_user_bytes"] = str(
            int(min(float(disk.capacity_bytes), sum(s.working_set_bytes for s in disk.streams)))
        )
        return stats

    # -- v2.0 -------------------------------------------------------------------------------
    def live_disks(self) -> list[Disk]:
        return [d for d in self.trace.disks if d.vm not in self.deleted]

    def virtual_disk_entity(self, disk: Disk, end: int) -> dict[str, Any]:
        return {
            "virtual_disk_id": f"{self.cluster_id}::{disk.vdisk_id}",
            "uuid": disk.vdisk_uuid,
            "device_uuid": disk.uuid,
            "nutanix_nfsfile_path": nfs_file_path(disk),
            "disk_address": disk_address(disk),
            "attached_vm_id": f"{self.cluster_id}::{self.vm_uuids[disk.vm]}",
            "attached_vm_uuid": self.vm_uuids[disk.vm],
            "attached_vmname": disk.vm,
            "attached_volume_group_id": None,
            "disk_capacity_in_bytes": disk.capacity_bytes,
            "cluster_uuid": self.cluster_uuid,
            "storage_container_id": f"{self.cluster_id}::1001",
            "storage_container_uuid": self.container_uuid,
            "flash_mode_enabled": False,
            "data_source_url": None,
            "stats": self.disk_stats(disk, end),
        }

    def virtual_disks(self, now: float, page: int | None = None, count: int | None = None) -> dict[str, Any]:
        """v2.0 ``GET /virtual_disks/``: the whole cluster, or one page (1-based ``page``,
        ``count`` entities; v2's ``metadata`` with 1-based ``start_index``/``end_index``)."""
        end = self.sample_end(now)
        disks = self.live_disks()
        return _paged([lambda d=d: self.virtual_disk_entity(d, end) for d in disks], page, count)

    def virtual_disk(self, uuid: str, now: float) -> dict[str, Any] | None:
        d = self._by_uuid.get(uuid)
        if d is None or d.vm in self.deleted:
            return None
        return self.virtual_disk_entity(d, self.sample_end(now))

    # -- CPU ------------------------------------------------------------------------------
    def cpu_stats(self, series: CpuSeries, capacity_mhz: float, vcpus: int, end: int) -> dict[str, str]:
        """``hypervisor_cpu_usage_ppm`` (of ``capacity_mhz``: a VM's vCPUs, a host's cores) and
        ``hypervisor.cpu_ready_time_ppm`` (ready time per vCPU) of the 30 s sample ending at ``end``."""
        used, ready = series.window(self.trace.period_second(end), SAMPLE_SECONDS)
        out = {"hypervisor_cpu_usage_ppm": _r(used / SAMPLE_SECONDS / capacity_mhz * 1e6)}
        out["hypervisor.cpu_ready_time_ppm"] = _r(ready / SAMPLE_SECONDS / vcpus * 1e6) if vcpus else "-1"
        return out

    def cvm_entity(self, name: str, now: float | None) -> dict[str, Any]:
        h = self.cvms[name]
        cc = self.scenario.cluster.cpu
        entity: dict[str, Any] = {
            "uuid": self.cvm_uuids[name],
            "name": name,
            "power_state": "on",
            "host_uuid": self.host_uuids[h.name],
            "num_vcpus": cc.cvm_vcpus,
            "memory_mb": 32768,
            "is_cvm": True,
        }
        if now is not None:
            entity["stats"] = self.cpu_stats(
                self.trace.cvm_cpu[h.name], cc.cvm_vcpus * cc.core_mhz, cc.cvm_vcpus, self.sample_end(now)
            )
        return entity

    def vm_entity(self, vm_name: str, include_disks: bool, now: float | None = None) -> dict[str, Any]:
        if vm_name in self.cvms:
            return self.cvm_entity(vm_name, now)
        vm = next(v for v in self.scenario.vms if v.name == vm_name)
        entity: dict[str, Any] = {
            "uuid": self.vm_uuids[vm.name],
            "name": vm.name,
            "power_state": "off" if vm.name in self.powered_off else "on",
            "host_uuid": self.host_uuids[vm.host] if vm.name not in self.powered_off else None,
            "num_vcpus": vm.cpu.vcpus,
            "memory_mb": 8192,
            "description": vm.guest_os,
            "is_cvm": False,
        }
        if now is not None:
            cc = self.scenario.cluster.cpu
            if vm.name in self.powered_off:
                entity["stats"] = {"hypervisor_cpu_usage_ppm": "-1", "hypervisor.cpu_ready_time_ppm": "-1"}
            else:
                entity["stats"] = self.cpu_stats(
                    self.trace.vm_cpu[vm.name], vm.cpu.vcpus * cc.core_mhz, vm.cpu.vcpus, self.sample_end(now)
                )
        if include_disks:
            entity["vm_disk_info"] = [
                {
                    "disk_address": {
                        "device_bus": disk_address(d).partition(".")[0],
                        "device_index": int(disk_address(d).partition(".")[2]),
                        "disk_label": disk_address(d),
                        "vmdisk_uuid": d.vdisk_uuid,
                        "device_uuid": d.uuid,
                        "ndfs_filepath": nfs_file_path(d),
                    },
                    "is_cdrom": False,
                    "size": d.capacity_bytes,
                    "storage_container_uuid": self.container_uuid,
                }
                for d in vm.disks
            ]
        return entity

    def vms(
        self, include_disks: bool = False, page: int | None = None, count: int | None = None, now: float | None = None
    ) -> dict[str, Any]:
        """v2.0 ``GET /vms/`` (``include_vm_disk_config=true`` adds ``vm_disk_info``): the scenario's
        VMs, then the CVMs (``is_cvm``); with ``now``, each with the CPU ``stats`` of the sample
        Prism serves then."""
        names = [vm.name for vm in self.scenario.vms if vm.name not in self.deleted] + list(self.cvms)
        return _paged([lambda n=n: self.vm_entity(n, include_disks, now) for n in names], page, count)

    def host_entity(self, name: str, uuid: str, now: float | None) -> dict[str, Any]:
        cc = self.scenario.cluster.cpu
        entity: dict[str, Any] = {
            "uuid": uuid,
            "name": name,
            "hypervisor_type": "kKvm",
            "num_cpu_cores": cc.cores,
            "cpu_frequency_in_hz": cc.core_mhz * 1_000_000,
            "cpu_capacity_in_hz": cc.core_mhz * cc.cores * 1_000_000,
        }
        if now is not None and name in self.trace.host_cpu:
            stats = self.cpu_stats(self.trace.host_cpu[name], cc.host_capacity_mhz, 0, self.sample_end(now))
            stats.pop("hypervisor.cpu_ready_time_ppm")
            entity["stats"] = stats
        return entity

    def hosts_doc(self, now: float | None = None) -> dict[str, Any]:
        """v2.0 ``GET /hosts/``: the cluster's hosts (uuid, name, CPU hardware; with ``now`` the
        CPU ``stats`` of the sample Prism serves then)."""
        return _paged(
            [lambda n=n, u=u: self.host_entity(n, u, now) for n, u in self.host_uuids.items()],
            None,
            None,
        )

    # -- v4 ---------------------------------------------------------------------------------
    def v4_disk_stats(
        self, vm_uuid: str, disk_uuid: str, start: float, end: float, interval: int, stat_type: str
    ) -> dict[str, Any] | None:
        """``GET /api/vmm/v4.x/ahv/stats/vms/{vmExtId}/disks/{extId}``: the disk's controller
        statistics as a time series (VmDiskStats: ``stats`` is a list of VmDiskStatsTuple, one
        per ``interval`` with a ``timestamp``, the end of its sample) for samples ending in
        ``(start, end]``, at most what Prism has published. ``interval`` a multiple of 30;
        ``stat_type`` AVG (the mean of the 30 s samples) or LAST. None when unknown."""
        d = self._by_uuid.get(disk_uuid)
        if d is None or d.vm in self.deleted or self.vm_uuids.get(d.vm) != vm_uuid:
            return None
        step = max(SAMPLE_SECONDS, (interval // SAMPLE_SECONDS) * SAMPLE_SECONDS)
        first = int(math.floor(start / step)) * step + step
        last = min(int(math.floor(end / step)) * step, (self.sample_end(end) // step) * step)
        ends = list(range(first, last + 1, step))[-V4_MAX_SAMPLES:]
        tuples = []
        for e in ends:
            parts = [self.disk_stats(d, e - step + SAMPLE_SECONDS * (i + 1)) for i in range(step // SAMPLE_SECONDS)]
            if stat_type.upper() == "LAST":
                parts = parts[-1:]
            row: dict[str, Any] = {"$objectType": "vmm.v4.ahv.stats.VmDiskStatsTuple", "timestamp": iso_time(e)}
            for f4, f2 in V4_DISK_FIELDS.items():
                vals = [int(p[f2]) for p in parts]
                if f2 == "controller_timespan_usecs":
                    row[f4] = step * 1_000_000 if stat_type.upper() != "LAST" else vals[-1]
                elif any(v < 0 for v in vals):
                    continue  # not available: v4 leaves the field out
                else:
                    row[f4] = int(math.floor(sum(vals) / len(vals) + 0.5))
            tuples.append(row)
        return {
            "$objectType": "vmm.v4.ahv.stats.GetDiskStatsApiResponse",
            "data": {
                "$objectType": "vmm.v4.ahv.stats.VmDiskStats",
                "vmExtId": vm_uuid,
                "vmDiskExtId": disk_uuid,
                "stats": tuples,
            },
            "metadata": {"flags": [], "totalAvailableResults": len(tuples)},
        }


def _paged(makers: list, page: int | None, count: int | None) -> dict[str, Any]:
    """v2.0's list answer; entities are built only for the page asked for."""
    n = len(makers)
    if page is None and count is None:
        first, last = 0, n
    else:
        size = count if count is not None else DEFAULT_PAGE_COUNT
        first = ((page or 1) - 1) * size
        last = min(n, first + size)
    entities = [m() for m in makers[first:last]]
    return {
        "metadata": {
            "grand_total_entities": n,
            "total_entities": n,
            "count": len(entities),
            "page": page or 1,
            "start_index": first + 1 if entities else None,
            "end_index": first + len(entities) if entities else None,
        },
        "entities": entities,
    }
