"""Exposition: the metric families of one probe, written from a collection snapshot with
:class:`~ioparallax.exporters.common.exposition.Exposition` (see there why not prometheus_client)."""

from __future__ import annotations

from ioparallax.exporters.common.exposition import Exposition, label_block
from ioparallax.exporters.vcenter.integrate import CpuCounters
from ioparallax.exporters.vcenter.target import Snapshot

#: vm and disk name the disk; vm_id (the VM's managed object id, vm-42) keeps two VMs of the
#: same name (legal in different folders) apart. Joins use vm and disk where names are unique.
DISK_LABELS = ["vm", "disk", "vm_id"]

#: (metric suffix, DiskCounters attribute, HELP) for the integrated counters, per direction.
COUNTERS = (
    (
        "ops_total",
        "ops",
        "I/O operations completed, integrated from every 20 s sample "
        "(virtualDisk.number{Dir}Averaged.average x interval).",
    ),
    (
        "bytes_total",
        "bytes",
        "Bytes transferred, integrated from every 20 s sample (virtualDisk.{dir}.average KBps x 1024 x interval).",
    ),
    (
        "latency_seconds_total",
        "latency_seconds",
        "Sum of the latencies of the I/Os completed (latency x ops, from virtualDisk.{dir}LatencyUS.latest, "
        "else virtualDisk.total{Dir}Latency.average); divide its rate by the ops rate for the mean latency.",
    ),
    (
        "outstanding_seconds_total",
        "outstanding_seconds",
        "Outstanding I/Os integrated over time (virtualDisk.{dir}OIO.latest x interval), "
        "like node_disk_io_time_weighted_seconds_total.",
    ),
)

#: (metric suffix, counter name template, scale to base units, HELP) for the latest-sample gauges.
SAMPLE_GAUGES = (
    (
        "ops_per_second",
        "virtualDisk.number{Dir}Averaged.average",
        1.0,
        "I/O operations per second averaged over the latest 20 s sample, as vCenter's chart shows it "
        "(virtualDisk.number{Dir}Averaged.average).",
    ),
    (
        "bytes_per_second",
        "virtualDisk.{dir}.average",
        1024.0,
        "Bytes per second averaged over the latest 20 s sample (virtualDisk.{dir}.average, KBps x 1024).",
    ),
    (
        "latency_seconds",
        "virtualDisk.total{Dir}Latency.average",
        1e-3,
        "Mean latency of the I/Os completed in the latest 20 s sample, in vCenter's integer milliseconds "
        "(virtualDisk.total{Dir}Latency.average; sub-ms latency reads 0).",
    ),
    (
        "latency_precise_seconds",
        "virtualDisk.{dir}LatencyUS.latest",
        1e-6,
        "Mean latency of the I/Os completed in the latest 20 s sample, microsecond resolution "
        "(virtualDisk.{dir}LatencyUS.latest).",
    ),
    (
        "outstanding_ios",
        "virtualDisk.{dir}OIO.latest",
        1.0,
        "Average outstanding I/O requests in the latest 20 s sample (virtualDisk.{dir}OIO.latest).",
    ),
    (
        "io_size_bytes",
        "virtualDisk.{dir}IOSize.latest",
        1.0,
        "Average request size in the latest 20 s sample (virtualDisk.{dir}IOSize.latest).",
    ),
)


def _fmt(text: str, d: str) -> str:
    return text.format(dir=d, Dir=d.capitalize())


#: warming_up: the first inventory of the target is not complete yet (see target.py).
ERROR_KINDS = ("login", "tls", "connect", "timeout", "protocol", "error", "warming_up")
VM_INFO_LABELS = ("vm", "vm_id", "host", "power_state", "vm_uuid", "instance_uuid")
DISK_INFO_LABELS = ("vm", "disk", "vm_id", "label", "disk_uuid", "backing_file", "datastore", "host")
GUEST_DISK_INFO_LABELS = ("vm", "vm_id", "disk", "disk_path", "hostname")
SEEK_CLASSES = ("small", "medium", "large")


def _inventory_section(s: Snapshot) -> tuple[str, dict[tuple[str, str], str]]:
    """The _info and capacity families and each disk's label block: they change only with the
    inventory, so they are written once per inventory refresh and kept in its render cache."""
    cached = s.render_cache.get("inventory")
    if cached is not None and cached[0] is s.vms:
        return cached[1], cached[2]
    vm_info, disk_info, capacity, guest_disk_info = [], [], [], []
    disk_labels: dict[tuple[str, str], str] = {}
    for vm in s.vms:
        vm_info.append(
            (label_block(VM_INFO_LABELS, (vm.name, vm.moref, vm.host, vm.power_state, vm.uuid, vm.instance_uuid)), 1)
        )
        for d in vm.disks:
            disk_info.append(
                (
                    label_block(
                        DISK_INFO_LABELS,
                        (vm.name, d.instance, vm.moref, d.label, d.disk_uuid, d.backing_file, d.datastore, vm.host),
                    ),
                    1,
                )
            )
            labels = disk_labels[(vm.moref, d.instance)] = label_block(DISK_LABELS, (vm.name, d.instance, vm.moref))
            capacity.append((labels, d.capacity_bytes))
        for instance, path in vm.guest_disk_rows():
            guest_disk_info.append(
                (label_block(GUEST_DISK_INFO_LABELS, (vm.name, vm.moref, instance, path, vm.hostname)), 1)
            )
    out = Exposition()
    out.family(
        "vcenter_vm_info",
        "gauge",
        "Virtual machines (cached inventory): join on vm (vm_id, the "
        "managed object id, tells apart VMs of the same name).",
        vm_info,
    )
    out.family(
        "vcenter_virtual_disk_info",
        "gauge",
        "Virtual disks (cached inventory): join on vm and disk "
        "(the controller address, e.g. scsi0:1) to disk_uuid (lowercase 8-4-4-4-12, as the guest's disk "
        "serial), backing_file, datastore.",
        disk_info,
    )
    out.family("vcenter_virtual_disk_capacity_bytes", "gauge", "Virtual disk capacity (inventory).", capacity)
    out.family(
        "vcenter_vm_guest_disk_info",
        "gauge",
        "Guest volumes as VMware Tools reports them (guest.disk, cached inventory): disk_path (diskPath, "
        "the root of drive D: or a mount point) lies on the virtual disk disk (mappings[].key, vSphere 7+); hostname is guest.hostName. "
        "Joins a Windows volume (windows_exporter) or a DiskSPD target to its VM disk.",
        guest_disk_info,
    )
    text = out.text()
    s.render_cache["inventory"] = (s.vms, text, disk_labels)
    return text, disk_labels


VM_CPU_LABELS = ("vm", "vm_id")
HOST_LABELS = ("host", "host_id")


def _cpu_section(out: Exposition, s: Snapshot) -> None:
    """The CVMs, and the CPU of the VMs and hosts (when this vCenter offers the CPU counters)."""
    out.family(
        "vcenter_vm_cvm_info",
        "gauge",
        "Nutanix Controller VMs (cached inventory): the VMs whose name matches cvm_name_pattern (default the "
        "installer's NTNX-<block>-<position>-CVM) or whose .vmx lies in a ServiceVM folder "
        "(config.files.vmPathName), with the host they run on.",
        [(label_block(("vm", "vm_id", "host"), (vm.name, vm.moref, vm.host)), 1) for vm, _ in s.cvms],
    )
    if not s.cpu_counters:
        return
    out.unlabelled(
        (
            (
                "vcenter_cpu_query_failed",
                "gauge",
                "1 if this probe's CPU query failed (the disks were collected; the cause is in the exporter's log).",
                1 if s.cpu_error else 0,
            ),
            (
                "vcenter_perf_new_cpu_samples",
                "gauge",
                "20 s CPU samples integrated by this collection.",
                s.new_cpu_samples,
            ),
            (
                "vcenter_perf_cpu_queries",
                "gauge",
                "QueryPerf calls made by this collection for the CPU of the VMs and hosts (beside vcenter_perf_queries).",
                s.cpu_queries,
            ),
        )
    )
    vms = [(label_block(VM_CPU_LABELS, (vm.name, vm.moref)), c) for vm, c in s.vm_cpu]
    _cpu_counters(out, "vm", "the VM's", vms, VM_CPU_HELP)
    hosts = [(label_block(HOST_LABELS, (h.name, h.host_id)), h) for h in s.hosts]
    out.family(
        "vcenter_host_cpu_capacity_hertz",
        "gauge",
        "The host's CPU capacity: summary.hardware.cpuMhz x numCpuCores x 10^6 (cached inventory; hosts known "
        "through their VMs). The host's usage can read above it (turbo, hyper-threads).",
        [(lbl, h.cpu_mhz * h.cores * 1e6) for lbl, h in hosts if h.cpu_mhz and h.cores],
    )
    out.family(
        "vcenter_host_cpu_cores",
        "gauge",
        "The host's physical CPU cores (summary.hardware.numCpuCores, cached inventory).",
        [(lbl, h.cores) for lbl, h in hosts if h.cores],
    )
    with_cpu = [(lbl, h.cpu) for lbl, h in hosts if h.cpu is not None]
    _cpu_counters(out, "host", "the host's", with_cpu, HOST_CPU_HELP)


#: HELP of the CPU cycles and ready seconds counters of a VM and of a host.
VM_CPU_HELP = (
    "CPU cycles the VM used, integrated from every 20 s sample (cpu.usagemhz.average x 10^6 x interval); "
    "its rate is in Hz: divide by vcenter_host_cpu_capacity_hertz for the share of its host.",
    "Seconds the VM's vCPUs were ready to run but waited for a core, summed over its vCPUs "
    "(cpu.ready.summation ms / 1000); its rate / vCPUs is the ready share per vCPU.",
)
HOST_CPU_HELP = (
    "CPU cycles the host used (its VMs, their CVM and the hypervisor), integrated from every 20 s sample "
    "(cpu.usagemhz.average x 10^6 x interval).",
    "Seconds the vCPUs of the host's VMs were ready but waited for a core (cpu.ready.summation ms / 1000).",
)


def _cpu_counters(
    out: Exposition, kind: str, whose: str, rows: list[tuple[str, CpuCounters]], helps: tuple[str, str]
) -> None:
    """The CPU counters of the VMs or hosts (``kind``) of ``rows`` (label block, counters)."""
    usage_help, ready_help = helps
    out.family(
        f"vcenter_{kind}_cpu_usage_cycles_total", "counter", usage_help, [(lbl, c.usage_cycles) for lbl, c in rows]
    )
    out.family(
        f"vcenter_{kind}_cpu_ready_seconds_total", "counter", ready_help, [(lbl, c.ready_seconds) for lbl, c in rows]
    )
    out.family(
        f"vcenter_{kind}_cpu_samples_total",
        "counter",
        f"20 s CPU samples integrated into {whose} CPU counters.",
        [(lbl, c.samples) for lbl, c in rows],
    )


def render_probe(target: str, s: Snapshot, probe_duration: float, shared: bool, latest_samples: bool = True) -> bytes:
    """The exposition of one probe of one vCenter; ``latest_samples=False``
    (``--no-collector.latest-samples``) leaves out the latest-sample value gauges, 15 series per
    VM disk that repeat what the counters hold (the sample's timestamp and interval stay: the
    rules divide by the interval and the age of the data is read from the timestamp)."""
    out = Exposition()
    gauge = "gauge"
    out.unlabelled(
        (
            (
                "vcenter_up",
                gauge,
                "1 if the vCenter was collected in this probe, 0 if not "
                "(see vcenter_probe_error_info and the exporter's log for the cause).",
                1 if s.up else 0,
            ),
            (
                "vcenter_scrape_duration_seconds",
                gauge,
                "Seconds this probe took (waiting for a shared collection included).",
                probe_duration,
            ),
            (
                "vcenter_probe_shared_collection",
                gauge,
                "1 if this probe joined a collection already running for the target (overlapping probes share "
                "one collection).",
                1 if shared else 0,
            ),
        )
    )
    out.family(
        "vcenter_probe_error_info",
        gauge,
        "Why this probe failed (absent when vcenter_up is 1).",
        [] if s.up else [(label_block(("kind", "cause"), (s.kind, s.cause)), 1)],
    )
    out.family(
        "vcenter_probe_errors_total",
        "counter",
        "Failed probes of this target since the exporter started, "
        "by kind (login, tls, connect, timeout, protocol, error, warming_up: the first inventory was "
        "not complete yet).",
        [(f'kind="{k}"', s.errors.get(k, 0)) for k in ERROR_KINDS],
    )
    if not s.up:
        return out.render()  # never show stale values as fresh

    out.unlabelled(
        (
            (
                "vcenter_collection_duration_seconds",
                gauge,
                "Seconds the collection (inventory if due, perf queries) took.",
                s.duration,
            ),
            (
                "vcenter_inventory_age_seconds",
                gauge,
                "Seconds since the cached inventory (VMs, disks, hosts, datastores) was last known current: "
                "brought up to date every inventory_refresh, in the background (WaitForUpdatesEx).",
                s.inventory_age,
            ),
            (
                "vcenter_inventory_build_duration_seconds",
                gauge,
                "Seconds the last full inventory read "
                "took (PropertyCollector over a ContainerView; off the probe path unless inventory_mode is sync; "
                "later refreshes read only the changes).",
                s.inventory_build_seconds,
            ),
            (
                "vcenter_perf_queries",
                gauge,
                "QueryPerf calls made by this collection for the virtual disks (batched to respect "
                "config.vpxd.stats.maxQueryMetrics; the CPU's are vcenter_perf_cpu_queries).",
                s.queries,
            ),
            ("vcenter_perf_new_samples", gauge, "20 s disk samples integrated by this collection.", s.new_samples),
            (
                "vcenter_perf_misaligned_series",
                gauge,
                "Series left out because their value count did not match the sample count (zeros dropped by the server).",
                s.misaligned_series,
            ),
            (
                "vcenter_perf_empty_series",
                gauge,
                "Series that came back without any value (nothing shown for them, no made-up 0).",
                s.empty_series,
            ),
            (
                "vcenter_perf_missing_counters",
                gauge,
                "virtualDisk counters this vCenter does not offer.",
                len(s.missing_counters),
            ),
            (
                "vcenter_unmapped_counters",
                gauge,
                "virtualDisk counters this vCenter offers that ioparallax does not read (their names are "
                "in the exporter's log at the first collection): another build may offer one worth mapping.",
                len(s.unmapped_counters),
            ),
            (
                "vcenter_perf_unread_series",
                gauge,
                "Series of this probe's QueryPerf answers that were not read: a counter not asked for, or a "
                "disk instance the inventory does not list (logged once per instance).",
                s.unread_series,
            ),
            (
                "vcenter_inventory_unread_disks",
                gauge,
                "Virtual disks of the cached inventory left out: no controller address the exporter reads, so no "
                "performance instance (logged once per VM).",
                s.unread_disks,
            ),
            (
                "vcenter_session_logins_total",
                "counter",
                "Logins to this vCenter since the exporter started (one session is kept and re-established when it expires).",
                s.logins,
            ),
        )
    )

    inventory_text, disk_labels = _inventory_section(s)
    out.append_text(inventory_text)
    _cpu_section(out, s)

    # Per-disk families: the label block of each disk escaped once per inventory.
    rows = [(disk_labels[(row.vm.moref, row.vm.disks[row.disk_index].instance)], row.counters) for row in s.disks]
    fresh = [(lbl, c.latest) for (lbl, c), row in zip(rows, s.disks) if row.fresh and c.latest is not None]
    for direction in ("read", "write"):
        for suffix, attr, help_text in COUNTERS:
            field = f"{direction}_{attr}"
            out.family(
                f"vcenter_virtual_disk_{direction}_{suffix}",
                "counter",
                _fmt(help_text, direction),
                [(lbl, getattr(c, field)) for lbl, c in rows],
            )
    out.family(
        "vcenter_virtual_disk_seeks_total",
        "counter",
        "Seeks by distance class (small < 64 LBNs, "
        "medium 64-8192, large > 8192), summed over every 20 s sample "
        "(virtualDisk.{small,medium,large}Seeks.latest).",
        [(f'{lbl},class="{cls}"', c.seeks[cls]) for lbl, c in rows for cls in SEEK_CLASSES],
    )
    out.family(
        "vcenter_virtual_disk_samples_total",
        "counter",
        "20 s samples integrated into the counters.",
        [(lbl, c.samples) for lbl, c in rows],
    )
    with_latest = [(lbl, c.latest) for lbl, c in rows if c.latest is not None]
    out.family(
        "vcenter_virtual_disk_sample_timestamp_seconds",
        gauge,
        "End of the newest 20 s sample integrated (vCenter's timestamp, Unix seconds); kept while the "
        "disk exists, so its age shows a VM that stopped reporting.",
        [(lbl, latest.timestamp) for lbl, latest in with_latest],
    )
    out.family(
        "vcenter_virtual_disk_sample_interval_seconds",
        gauge,
        "Length of the latest sample's interval (20 for realtime).",
        [(lbl, latest.interval) for lbl, latest in with_latest],
    )

    if not latest_samples:
        return out.render()
    for direction in ("read", "write"):
        for suffix, counter, scale, help_text in SAMPLE_GAUGES:
            name = _fmt(counter, direction)
            # no value from vCenter: nothing shown, never a made-up 0
            # only fresh samples (sample_max_age): a powered-off VM's last value is not shown as current
            out.family(
                f"vcenter_virtual_disk_sample_{direction}_{suffix}",
                gauge,
                _fmt(help_text, direction),
                [(lbl, latest.values[name] * scale) for lbl, latest in fresh if name in latest.values],
            )
    seek_names = [(cls, f"virtualDisk.{cls}Seeks.latest") for cls in SEEK_CLASSES]
    out.family(
        "vcenter_virtual_disk_sample_seeks",
        gauge,
        "Seeks in the latest 20 s sample by distance class (virtualDisk.{small,medium,large}Seeks.latest).",
        [
            (f'{lbl},class="{cls}"', latest.values[name])
            for lbl, latest in fresh
            for cls, name in seek_names
            if name in latest.values
        ],
    )
    return out.render()


__all__ = ["render_probe"]
