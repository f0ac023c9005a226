"""Exposition: the metric families of one probe, written from a :class:`.target.Snapshot` with
:class:`~ioparallax.exporters.common.exposition.Exposition`."""

from __future__ import annotations

from ioparallax.exporters.common.exposition import Exposition, label_block
from ioparallax.exporters.prism.config import Collectors
from ioparallax.exporters.prism.target import DiskState, Snapshot, ViewCounters

#: vm and disk name the disk; vm_id (Prism's VM uuid) keeps two VMs of the same name apart.
DISK_LABELS = ("vm", "disk", "vm_id")
DISK_INFO_LABELS = ("vm", "disk", "vm_id", "disk_uuid", "vdisk_id", "container", "nfs_path")
VM_INFO_LABELS = ("vm", "vm_id", "host", "power_state")
ERROR_KINDS = ("login", "tls", "connect", "timeout", "protocol", "error")

#: (suffix, ViewCounters attribute prefix, HELP with {dir}) of the integrated counters.
COUNTERS = (
    ("ops_total", "ops", "I/O operations completed, integrated from every 30 s sample ({src}_num_{dir}_io)."),
    (
        "bytes_total",
        "bytes",
        "Bytes transferred, integrated from every 30 s sample ({src}_total_{dir}_io_size_kbytes x 1024, "
        "else {src}_{dir}_io_bandwidth_kBps x 1024 x timespan).",
    ),
    (
        "latency_seconds_total",
        "latency",
        "Sum of the latencies of the I/Os completed ({src}_avg_{dir}_io_latency_usecs x ops); "
        "divide its rate by the ops rate for the mean latency.",
    ),
)

#: (suffix, LatestSample attribute, HELP) of the latest-sample gauges.
SAMPLE_GAUGES = (
    (
        "ops_per_second",
        "ops_per_second",
        "I/O operations per second in the latest 30 s sample (hypervisor_num_{dir}_iops).",
    ),
    (
        "bytes_per_second",
        "bytes_per_second",
        "Bytes per second in the latest 30 s sample (hypervisor_{dir}_io_bandwidth_kBps x 1024).",
    ),
    (
        "latency_seconds",
        "latency_seconds",
        "Mean latency of the I/Os completed in the latest 30 s sample (hypervisor_avg_{dir}_io_latency_usecs).",
    ),
)


def _counter_rows(rows: list[tuple[str, DiskState]], view: str, attr: str) -> list[tuple[str, float]]:
    out = []
    for lbl, d in rows:
        c: ViewCounters = getattr(d, view)
        out.append((lbl, getattr(c, attr)))
    return out


def _cpu_section(out: Exposition, s: Snapshot) -> None:
    """The CVMs and the CPU of the VMs and hosts: the latest 30 s sample of the VM and host lists'
    stats (gauges: the lists carry one sample, not a series), absent where Prism has none."""
    host_name = s.hosts.get
    vm_lbl = [(label_block(("vm", "vm_id"), (vm.name, vm.uuid)), vm) for vm in s.vms]
    out.family(
        "prism_vm_cvm_info",
        "gauge",
        "Nutanix Controller VMs (the VM list's is_cvm / controller_vm), with the host they run on.",
        [
            (label_block(("vm", "vm_id", "host"), (vm.name, vm.uuid, host_name(vm.host_uuid, vm.host_uuid))), 1)
            for vm in s.vms
            if vm.is_cvm
        ],
    )
    out.family(
        "prism_vm_cpu_usage_ratio",
        "gauge",
        "Share of the VM's vCPUs it used in Prism's latest 30 s sample (hypervisor_cpu_usage_ppm / 10^6); "
        "x prism_vm_vcpus x the host's core clock is its CPU in Hz.",
        [(lbl, vm.cpu_usage) for lbl, vm in vm_lbl if vm.cpu_usage is not None],
    )
    out.family(
        "prism_vm_cpu_ready_ratio",
        "gauge",
        "Share of the latest 30 s sample the VM's vCPUs were ready but waited for a core, per vCPU "
        "(hypervisor.cpu_ready_time_ppm / 10^6).",
        [(lbl, vm.cpu_ready) for lbl, vm in vm_lbl if vm.cpu_ready is not None],
    )
    out.family(
        "prism_vm_vcpus", "gauge", "The VM's vCPUs (num_vcpus).", [(lbl, vm.vcpus) for lbl, vm in vm_lbl if vm.vcpus]
    )
    hosts = [(label_block(("host", "host_id"), (h.name, h.uuid)), h) for h in s.host_records]
    out.family(
        "prism_host_cpu_capacity_hertz",
        "gauge",
        "The host's CPU capacity (cpu_capacity_in_hz).",
        [(lbl, h.capacity_hz) for lbl, h in hosts if h.capacity_hz],
    )
    out.family(
        "prism_host_cpu_cores",
        "gauge",
        "The host's CPU cores (num_cpu_cores).",
        [(lbl, h.cores) for lbl, h in hosts if h.cores],
    )
    out.family(
        "prism_host_cpu_usage_ratio",
        "gauge",
        "Share of the host's capacity used in Prism's latest 30 s sample (hypervisor_cpu_usage_ppm / 10^6).",
        [(lbl, h.cpu_usage) for lbl, h in hosts if h.cpu_usage is not None],
    )


def render_probe(target: str, s: Snapshot, probe_duration: float, collectors: Collectors | None = None) -> bytes:
    collectors = collectors or Collectors()
    out = Exposition()
    gauge = "gauge"
    out.unlabelled(
        (
            (
                "prism_up",
                gauge,
                "1 if Prism was read in this probe, 0 if not (see prism_probe_error_info and the exporter's log).",
                1 if s.up else 0,
            ),
            ("prism_scrape_duration_seconds", gauge, "Seconds this probe took.", probe_duration),
        )
    )
    out.family(
        "prism_probe_error_info",
        gauge,
        "Why this probe failed (absent when prism_up is 1).",
        [] if s.up else [(label_block(("kind", "cause"), (s.kind, s.cause)), 1)],
    )
    out.family(
        "prism_probe_errors_total",
        "counter",
        "Failed probes of this target since the exporter started, by kind.",
        [(f'kind="{k}"', s.errors.get(k, 0)) for k in ERROR_KINDS],
    )
    out.unlabelled(
        (
            (
                "prism_session_logins_total",
                "counter",
                "Requests that sent the password (the first, and one after each session Prism forgot).",
                s.logins,
            ),
            (
                "prism_v2_samples_missed_total",
                "counter",
                "30 s samples of the cluster that no read could date safely (Prism unreachable for a whole sample).",
                s.missed,
            ),
            (
                "prism_v2_late_samples_total",
                "counter",
                "30 s samples whose values changed after an answer dated in their safe window was integrated: "
                "Prism published them later than v2_sample_delay (raise it; the values integrated for them were "
                "the previous sample's).",
                s.late,
            ),
        )
    )
    if not s.up:
        return out.render()  # never show stale values as fresh

    out.family(
        "prism_parse_unknown_fields",
        gauge,
        "Distinct stats keys in this probe's virtual_disks answer that ioparallax does not know (neither "
        "reads nor leaves deliberately): another AOS build's fields; capture and report them (docs/prism.md).",
        [("", s.unknown_count)],
    )
    out.family(
        "prism_parse_unknown_field_entities",
        gauge,
        "Entities (virtual disks) of this probe's answer holding each unknown field (the first 50 keys by name).",
        [
            (label_block(("answer", "kind", "item"), ("virtual_disks", "stats_key", key)), n)
            for key, n in s.unknown_keys.items()
        ],
    )

    out.unlabelled(
        (
            (
                "prism_v2_requests",
                gauge,
                "HTTP requests of the read this probe used (v2.0 pages; with controller_api v4, one more per disk).",
                s.requests,
            ),
            (
                "prism_v2_new_samples",
                gauge,
                "Disk samples (VM view) integrated since the previous probe of this target.",
                s.new_samples,
            ),
        )
    )
    labels: dict[str, str] = {}
    rows = []
    info = []
    capacity = []
    for d in s.disks:
        r = d.disk
        lbl = label_block(DISK_LABELS, (r.vm, r.disk, r.vm_id))
        labels[r.uuid] = lbl
        rows.append((lbl, d))
        info.append(
            (label_block(DISK_INFO_LABELS, (r.vm, r.disk, r.vm_id, r.uuid, r.vdisk_id, r.container, r.nfs_path)), 1)
        )
        if r.capacity_bytes is not None:
            capacity.append((lbl, r.capacity_bytes))
    out.family(
        "prism_virtual_disk_info",
        gauge,
        "Virtual disks attached to VMs: join on vm and disk (Prism's disk_address, e.g. scsi.1) to disk_uuid "
        "(the vmdisk uuid, Stargate's vdisk UUID), vdisk_id (Stargate's vdisk id), container, nfs_path.",
        info,
    )
    out.family("prism_virtual_disk_capacity_bytes", gauge, "Virtual disk capacity (disk_capacity_in_bytes).", capacity)
    if collectors.vm_info:
        if s.cpu:
            _cpu_section(out, s)
        out.family(
            "prism_vm_info",
            gauge,
            "Virtual machines (VM list, refreshed every inventory_refresh): host and power state; "
            "vm_id (Prism's uuid) tells apart VMs of the same name.",
            [
                (
                    label_block(
                        VM_INFO_LABELS, (vm.name, vm.uuid, s.hosts.get(vm.host_uuid, vm.host_uuid), vm.power_state)
                    ),
                    1,
                )
                for vm in s.vms
            ],
        )
    for direction in ("read", "write"):
        for suffix, attr, help_text in COUNTERS:
            out.family(
                f"prism_virtual_disk_{direction}_{suffix}",
                "counter",
                "VM view (what the hypervisor saw). " + help_text.format(src="hypervisor", dir=direction),
                _counter_rows(rows, "hypervisor", f"{direction}_{attr}"),
            )
    out.family(
        "prism_virtual_disk_samples_total",
        "counter",
        "30 s samples with VM-view values integrated into the counters.",
        [(lbl, d.samples) for lbl, d in rows],
    )
    if collectors.controller:
        for direction in ("read", "write"):
            for suffix, attr, help_text in COUNTERS:
                out.family(
                    f"prism_virtual_disk_controller_{direction}_{suffix}",
                    "counter",
                    "Storage view (what Stargate saw for the vdisk). "
                    + help_text.format(src="controller", dir=direction),
                    _counter_rows(rows, "controller", f"{direction}_{attr}"),
                )
    dated = [(lbl, d) for lbl, d in rows if d.last_end is not None]
    out.family(
        "prism_virtual_disk_sample_timestamp_seconds",
        gauge,
        "End of the newest 30 s sample integrated (Prism's clock, Unix seconds).",
        [(lbl, d.last_end) for lbl, d in dated if d.last_end is not None],
    )
    with_latest = [(lbl, d) for lbl, d in rows if d.latest is not None and d.latest_end == s.newest_end]
    out.family(
        "prism_virtual_disk_sample_interval_seconds",
        gauge,
        "Length of the newest sample integrated (hypervisor_timespan_usecs; 30).",
        [(lbl, d.disk.hypervisor.span) for lbl, d in dated],
    )
    if s.prism_now is not None:
        out.family(
            "prism_virtual_disk_sample_age_seconds",
            gauge,
            "Prism's time at this probe less the end of the newest sample integrated.",
            [(lbl, max(0.0, s.prism_now - d.last_end)) for lbl, d in dated if d.last_end is not None],
        )
    if not collectors.latest_samples:
        return out.render()
    for direction in ("read", "write"):
        for suffix, attr, help_text in SAMPLE_GAUGES:
            name = f"{direction}_{attr}"
            out.family(
                f"prism_virtual_disk_sample_{direction}_{suffix}",
                gauge,
                help_text.format(dir=direction)
                + " Shown only while it is the newest sample (not for a powered-off VM).",
                [
                    (lbl, v)
                    for lbl, d in with_latest
                    if d.latest is not None and (v := getattr(d.latest, name)) is not None
                ],
            )
    return out.render()


__all__ = ["render_probe"]
