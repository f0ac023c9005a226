"""Pure functions from what Prism answers to plain records (tested on recorded answers).

Prism writes statistics as strings, ``"-1"`` for "not available". Here a ``-1``, a missing key,
``null`` or anything that is not a finite number is *absent* (``None``): the exporter adds
nothing for it and shows no gauge for it, never a made-up 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# The v2.0 list envelope is shared with the Stargate exporter's Prism mapping.
from ioparallax.exporters.common.prismlist import ParseError as ParseError, entities as entities

#: Prism's statistics period and the timespan assumed when a sample does not state its own.
SAMPLE_SECONDS = 30.0


def stat(stats: dict[str, Any], key: str) -> float | None:
    """One statistic as a float, or None for ``-1``, missing, null, or not a finite number."""
    raw = stats.get(key)
    if raw is None or isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON integer beyond a double
        return None
    if value < 0 or not math.isfinite(value):  # -1: not available (no statistic is negative)
        return None
    return value


@dataclass(frozen=True)
class Amounts:
    """One view's amounts in one sample (None: not available): ops, bytes, latency x ops in
    seconds, per direction; ``span`` the sample's length in seconds."""

    span: float
    read_ops: float | None = None
    write_ops: float | None = None
    read_bytes: float | None = None
    write_bytes: float | None = None
    read_latency: float | None = None
    write_latency: float | None = None

    @property
    def empty(self) -> bool:
        return all(
            v is None
            for v in (
                self.read_ops,
                self.write_ops,
                self.read_bytes,
                self.write_bytes,
                self.read_latency,
                self.write_latency,
            )
        )


def _diff(total: float | None, part: float | None) -> float | None:
    return max(0.0, total - part) if total is not None and part is not None else None


def amounts(stats: dict[str, Any], prefix: str) -> Amounts:
    """The amounts of view ``prefix`` (``hypervisor`` or ``controller``) in a v2 stats map.

    Counts in the sample are used when Prism gives them (``_num_read_io``,
    ``_total_read_io_size_kbytes``, ``_total_io_size_kbytes`` less the read part), else the
    rate times the sample's timespan. Latency x ops is the mean latency times the ops.
    kB are KiB (1024 bytes), as the rest of Nutanix's statistics."""
    s = stats
    span_us = stat(s, f"{prefix}_timespan_usecs")
    span = span_us / 1e6 if span_us else SAMPLE_SECONDS

    def count(n_key: str, rate_key: str) -> float | None:
        n = stat(s, n_key)
        if n is not None:
            return n
        rate = stat(s, rate_key)
        return rate * span if rate is not None else None

    r_ops = count(f"{prefix}_num_read_io", f"{prefix}_num_read_iops")
    w_ops = count(f"{prefix}_num_write_io", f"{prefix}_num_write_iops")
    r_kb = stat(s, f"{prefix}_total_read_io_size_kbytes")
    if r_kb is None:
        bw = stat(s, f"{prefix}_read_io_bandwidth_kBps")
        r_kb = bw * span if bw is not None else None
    w_kb = _diff(stat(s, f"{prefix}_total_io_size_kbytes"), stat(s, f"{prefix}_total_read_io_size_kbytes"))
    if w_kb is None:
        bw = stat(s, f"{prefix}_write_io_bandwidth_kBps")
        w_kb = bw * span if bw is not None else None
    r_lat = stat(s, f"{prefix}_avg_read_io_latency_usecs")
    w_lat = stat(s, f"{prefix}_avg_write_io_latency_usecs")
    return Amounts(
        span=span,
        read_ops=r_ops,
        write_ops=w_ops,
        read_bytes=r_kb * 1024.0 if r_kb is not None else None,
        write_bytes=w_kb * 1024.0 if w_kb is not None else None,
        read_latency=r_lat / 1e6 * r_ops if r_lat is not None and r_ops is not None else None,
        write_latency=w_lat / 1e6 * w_ops if w_lat is not None and w_ops is not None else None,
    )


#: The per-view stats keys (``hypervisor_``/``controller_`` + these) that Prism sends on virtual
#: disks as the public sources and the simulator show them. :func:`amounts` and
#: :func:`latest_sample` read some; the others (the combined read+write rates, the ppm mixes, the
#: I/O time sums, ``user_bytes``) repeat what they read or are not per-I/O quantities, and are
#: left deliberately. Any other key is *unknown* (:func:`unknown_stats_keys`).
VIEW_STATS_SUFFIXES = (
    "num_io",
    "num_iops",
    "num_read_io",
    "num_read_iops",
    "num_write_io",
    "num_write_iops",
    "io_bandwidth_kBps",
    "read_io_bandwidth_kBps",
    "write_io_bandwidth_kBps",
    "avg_io_latency_usecs",
    "avg_read_io_latency_usecs",
    "avg_write_io_latency_usecs",
    "total_io_size_kbytes",
    "total_read_io_size_kbytes",
    "total_io_time_usecs",
    "total_read_io_time_usecs",
    "timespan_usecs",
    "random_io_ppm",
    "seq_io_ppm",
    "read_io_ppm",
    "write_io_ppm",
    "user_bytes",
)
KNOWN_STATS_KEYS = frozenset(f"{view}_{s}" for view in ("hypervisor", "controller") for s in VIEW_STATS_SUFFIXES)


def unknown_stats_keys(ents: list[dict[str, Any]]) -> dict[str, int]:
    """Stats keys of ``virtual_disks`` entities that ioparallax does not know (neither reads nor
    leaves deliberately, :data:`KNOWN_STATS_KEYS`) -> the entities holding each: what another
    AOS build sends that the exporter may be missing (docs/prism.md, "Parse coverage")."""
    out: dict[str, int] = {}
    for e in ents:
        stats = e.get("stats")
        if isinstance(stats, dict):
            for key in stats:
                if key not in KNOWN_STATS_KEYS:
                    out[key] = out.get(key, 0) + 1
    return out


@dataclass(frozen=True)
class LatestSample:
    """The hypervisor sample as Prism's charts show it, in base units (None: not available)."""

    span: float
    read_ops_per_second: float | None
    write_ops_per_second: float | None
    read_bytes_per_second: float | None
    write_bytes_per_second: float | None
    read_latency_seconds: float | None
    write_latency_seconds: float | None


def latest_sample(stats: dict[str, Any]) -> LatestSample | None:
    """The VM view's rates and mean latencies of the sample; None when it has none at all."""

    def scaled(key: str, factor: float) -> float | None:
        v = stat(stats, key)
        return v * factor if v is not None else None

    span_us = stat(stats, "hypervisor_timespan_usecs")
    sample = LatestSample(
        span=span_us / 1e6 if span_us else SAMPLE_SECONDS,
        read_ops_per_second=scaled("hypervisor_num_read_iops", 1.0),
        write_ops_per_second=scaled("hypervisor_num_write_iops", 1.0),
        read_bytes_per_second=scaled("hypervisor_read_io_bandwidth_kBps", 1024.0),
        write_bytes_per_second=scaled("hypervisor_write_io_bandwidth_kBps", 1024.0),
        read_latency_seconds=scaled("hypervisor_avg_read_io_latency_usecs", 1e-6),
        write_latency_seconds=scaled("hypervisor_avg_write_io_latency_usecs", 1e-6),
    )
    values = (
        sample.read_ops_per_second,
        sample.write_ops_per_second,
        sample.read_bytes_per_second,
        sample.write_bytes_per_second,
        sample.read_latency_seconds,
        sample.write_latency_seconds,
    )
    return None if all(v is None for v in values) else sample


@dataclass(frozen=True)
class VirtualDisk:
    """One entity of v2.0 ``virtual_disks``, attached to a VM."""

    uuid: str  # the vmdisk uuid (= Stargate's vdisk UUID)
    vm: str
    vm_id: str  # the VM's uuid
    disk: str  # disk_address, scsi.1
    vdisk_id: str  # second part of virtual_disk_id
    container: str  # first component of the NFS path (the container's name), else its uuid
    nfs_path: str
    capacity_bytes: float | None
    hypervisor: Amounts
    controller: Amounts
    latest: LatestSample | None
    stats_hash: int = 0  # of the raw stats: two answers dated the same sample must agree


def _text(e: dict[str, Any], key: str) -> str:
    v = e.get(key)
    return v if isinstance(v, str) else ""


def virtual_disk(e: dict[str, Any]) -> VirtualDisk | None:
    """A record of one entity; None for entities not attached to a VM (volume groups, images)."""
    vm, vm_id, uuid = _text(e, "attached_vmname"), _text(e, "attached_vm_uuid"), _text(e, "uuid")
    if not vm or not vm_id or not uuid:
        return None
    stats = e.get("stats")
    if not isinstance(stats, dict):
        stats = {}
    nfs = _text(e, "nutanix_nfsfile_path") or _text(e, "nutanix_nfs_file_path")
    first = nfs.strip("/").partition("/")[0] if nfs.startswith("/") else ""
    return VirtualDisk(
        uuid=uuid.lower(),
        vm=vm,
        vm_id=vm_id.lower(),
        disk=_text(e, "disk_address"),
        vdisk_id=_text(e, "virtual_disk_id").rpartition("::")[2],
        container=first or _text(e, "storage_container_uuid"),
        nfs_path=nfs,
        capacity_bytes=stat(e, "disk_capacity_in_bytes"),
        hypervisor=amounts(stats, "hypervisor"),
        controller=amounts(stats, "controller"),
        latest=latest_sample(stats),
        stats_hash=hash(tuple(stats.items())) if all(isinstance(v, str) or v is None for v in stats.values()) else 0,
    )


@dataclass(frozen=True)
class Vm:
    uuid: str
    name: str
    power_state: str
    host_uuid: str
    is_cvm: bool = False  # a Controller VM (is_cvm, controller_vm or v1's controllerVm true)
    vcpus: int = 0  # num_vcpus; 0 when not given
    cpu_usage: float | None = None  # hypervisor_cpu_usage_ppm / 10^6: share of its vCPUs used
    cpu_ready: float | None = None  # hypervisor.cpu_ready_time_ppm / 10^6: ready share per vCPU


@dataclass(frozen=True)
class Host:
    """A host of v2.0 ``hosts`` with its CPU (the latest 30 s sample of its ``stats``)."""

    uuid: str
    name: str
    cores: int  # num_cpu_cores (0: not given)
    capacity_hz: float | None  # cpu_capacity_in_hz
    cpu_usage: float | None  # hypervisor_cpu_usage_ppm / 10^6: share of the capacity used


def _flag(e: dict[str, Any], *keys: str) -> bool:
    return any(e.get(k) is True for k in keys)


def _count(e: dict[str, Any], key: str) -> int:
    v = e.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _ppm(stats: Any, key: str) -> float | None:
    v = stat(stats, key) if isinstance(stats, dict) else None
    return v / 1e6 if v is not None else None


def vms(ents: list[dict[str, Any]]) -> list[Vm]:
    out = []
    for e in ents:
        uuid, name = _text(e, "uuid"), _text(e, "name")
        if uuid and name:
            stats = e.get("stats")
            out.append(
                Vm(
                    uuid.lower(),
                    name,
                    _text(e, "power_state"),
                    _text(e, "host_uuid").lower(),
                    is_cvm=_flag(e, "is_cvm", "controller_vm", "controllerVm"),
                    vcpus=_count(e, "num_vcpus"),
                    cpu_usage=_ppm(stats, "hypervisor_cpu_usage_ppm"),
                    cpu_ready=_ppm(stats, "hypervisor.cpu_ready_time_ppm"),
                )
            )
    return out


def host_records(ents: list[dict[str, Any]]) -> list[Host]:
    """v2.0 ``hosts`` entities -> hosts with their CPU capacity and latest usage."""
    out = []
    for e in ents:
        uuid, name = _text(e, "uuid").lower(), _text(e, "name")
        if uuid and name:
            cap = stat(e, "cpu_capacity_in_hz")
            out.append(
                Host(
                    uuid,
                    name,
                    _count(e, "num_cpu_cores"),
                    cap or None,
                    _ppm(e.get("stats"), "hypervisor_cpu_usage_ppm"),
                )
            )
    return out


def hosts(ents: list[dict[str, Any]]) -> dict[str, str]:
    """host uuid -> name."""
    return {_text(e, "uuid").lower(): _text(e, "name") for e in ents if _text(e, "uuid") and _text(e, "name")}


def iso_time(epoch: float) -> str:
    """RFC 3339 UTC (v4's ``$startTime``/``$endTime``): ``2026-11-26T10:00:30Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sample_end(date: float, delay: float) -> int | None:
    """The end of the 30 s sample an answer dated ``date`` (Prism's clock) holds, or None when
    the answer is dated less than ``delay`` after a boundary: it may then still hold the
    previous sample (see docs/prism.md, "Every 30 s sample exactly once")."""
    end = int(math.floor(date / SAMPLE_SECONDS) * SAMPLE_SECONDS)
    return end if date - end >= delay else None


#: v4 VmDiskStatsTuple fields (nutanix/ntnx-api-golang-clients, vmm-go-client
#: models/vmm/v4/ahv/stats) and the v2.0 keys they carry the same value as.
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
    "controllerTimespanMicros": "controller_timespan_usecs",
}


def v4_disk_series(doc: Any) -> list[tuple[int, Amounts]]:
    """(sample end, storage-view amounts) of a v4 ``GET .../stats/vms/{vm}/disks/{disk}``
    answer, ascending; the tuple's ``timestamp`` is taken as its sample's end. Tuples without a
    readable timestamp are skipped; a field left out (v4's "not available") is absent."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("stats"), list):
        raise ParseError("the v4 disk stats answer has no data.stats list")
    out = []
    for t in data["stats"]:
        if not isinstance(t, dict) or not isinstance(t.get("timestamp"), str):
            continue
        try:
            end = int(round(datetime.fromisoformat(t["timestamp"].replace("Z", "+00:00")).timestamp()))
        except ValueError:
            continue
        stats = {v2: t[v4] for v4, v2 in V4_DISK_FIELDS.items() if v4 in t}
        out.append((end, amounts(stats, "controller")))
    out.sort(key=lambda x: x[0])
    return out
