"""Exposition: the metric families of one probe, built fresh from a collection snapshot."""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .integrate import latency_seconds
from .target import Snapshot

DISK_LABELS = ["vm", "disk"]

#: (metric suffix, DiskCounters attribute, HELP) for the integrated counters, per direction.
COUNTERS = (
    ("ops_total", "ops", "I/O operations completed, integrated from every 20 s sample "
                         "(virtualDisk.number{Dir}Averaged.average x interval)."),
    ("bytes_total", "bytes", "Bytes transferred, integrated from every 20 s sample "
                             "(virtualDisk.{dir}.average KBps x 1024 x interval)."),
    ("latency_seconds_total", "latency_seconds",
     "Sum of the latencies of the I/Os completed (latency x ops, from virtualDisk.{dir}LatencyUS.latest, "
     "else virtualDisk.total{Dir}Latency.average); divide its rate by the ops rate for the mean latency."),
    ("outstanding_seconds_total", "outstanding_seconds",
     "Outstanding I/Os integrated over time (virtualDisk.{dir}OIO.latest x interval), "
     "like node_disk_io_time_weighted_seconds_total."),
)

#: (metric suffix, counter name template, scale to base units, HELP) for the latest-sample gauges.
SAMPLE_GAUGES = (
    ("ops_per_second", "virtualDisk.number{Dir}Averaged.average", 1.0,
     "I/O operations per second averaged over the latest 20 s sample, as vCenter's chart shows it "
     "(virtualDisk.number{Dir}Averaged.average)."),
    ("bytes_per_second", "virtualDisk.{dir}.average", 1024.0,
     "Bytes per second averaged over the latest 20 s sample (virtualDisk.{dir}.average, KBps x 1024)."),
    ("latency_seconds", "virtualDisk.total{Dir}Latency.average", 1e-3,
     "Mean latency of the I/Os completed in the latest 20 s sample, in vCenter's integer milliseconds "
     "(virtualDisk.total{Dir}Latency.average; sub-ms latency reads 0)."),
    ("latency_precise_seconds", "virtualDisk.{dir}LatencyUS.latest", 1e-6,
     "Mean latency of the I/Os completed in the latest 20 s sample, microsecond resolution "
     "(virtualDisk.{dir}LatencyUS.latest)."),
    ("outstanding_ios", "virtualDisk.{dir}OIO.latest", 1.0,
     "Average outstanding I/O requests in the latest 20 s sample (virtualDisk.{dir}OIO.latest)."),
    ("io_size_bytes", "virtualDisk.{dir}IOSize.latest", 1.0,
     "Average request size in the latest 20 s sample (virtualDisk.{dir}IOSize.latest)."),
)


def _fmt(text: str, d: str) -> str:
    return text.format(dir=d, Dir=d.capitalize())


class ProbeCollector(Collector):
    """Yields the families of one probe of one vCenter (a fresh instance per /probe request)."""

    def __init__(self, target: str, snapshot: Snapshot, probe_duration: float, shared: bool):
        self.target = target
        self.snap = snapshot
        self.probe_duration = probe_duration
        self.shared = shared

    def collect(self) -> Iterator[Metric]:
        s = self.snap
        yield GaugeMetricFamily("vcenter_up", "1 if the vCenter was collected in this probe, 0 if not "
                                "(see vcenter_probe_error_info and the exporter's log for the cause).",
                                value=1 if s.up else 0)
        yield GaugeMetricFamily("vcenter_scrape_duration_seconds",
                                "Seconds this probe took (waiting for a shared collection included).",
                                value=self.probe_duration)
        yield GaugeMetricFamily("vcenter_probe_shared_collection",
                                "1 if this probe joined a collection already running for the target "
                                "(overlapping probes share one collection).", value=1 if self.shared else 0)
        err = InfoMetricFamily("vcenter_probe_error", "Why this probe failed (absent when vcenter_up is 1).",
                               labels=[])
        if not s.up:
            err.add_metric([], {"kind": s.kind, "cause": s.cause})
        yield err
        errors = CounterMetricFamily("vcenter_probe_errors", "Failed probes of this target since the "
                                     "exporter started, by kind (login, tls, connect, timeout, protocol, error).",
                                     labels=["kind"])
        for kind in ("login", "tls", "connect", "timeout", "protocol", "error"):
            errors.add_metric([kind], s.errors.get(kind, 0))
        yield errors
        if not s.up:
            return  # never show stale values as fresh

        yield GaugeMetricFamily("vcenter_collection_duration_seconds",
                                "Seconds the collection (inventory if due, perf queries) took.", value=s.duration)
        yield GaugeMetricFamily("vcenter_inventory_age_seconds",
                                "Age of the cached inventory (VMs, disks, hosts, datastores); refreshed every "
                                "inventory_refresh.", value=s.inventory_age)
        yield GaugeMetricFamily("vcenter_perf_queries", "QueryPerf calls made by this collection "
                                "(batched to respect config.vpxd.stats.maxQueryMetrics).", value=s.queries)
        yield GaugeMetricFamily("vcenter_perf_new_samples", "20 s disk samples integrated by this collection.",
                                value=s.new_samples)
        yield GaugeMetricFamily("vcenter_perf_misaligned_series",
                                "Series left out because their value count did not match the sample count "
                                "(zeros dropped by the server).", value=s.misaligned_series)
        yield GaugeMetricFamily("vcenter_perf_empty_series",
                                "Series that came back without any value (nothing shown for them, no made-up 0).",
                                value=s.empty_series)
        yield GaugeMetricFamily("vcenter_perf_missing_counters",
                                "virtualDisk counters this vCenter does not offer.", value=len(s.missing_counters))
        yield CounterMetricFamily("vcenter_session_logins", "Logins to this vCenter since the exporter started "
                                  "(one session is kept and re-established when it expires).", value=s.logins)

        vm_info = InfoMetricFamily("vcenter_vm", "Virtual machines (cached inventory): join on vm.",
                                   labels=["vm", "moref", "host", "power_state", "vm_uuid", "instance_uuid"])
        disk_info = InfoMetricFamily("vcenter_virtual_disk", "Virtual disks (cached inventory): join on vm and disk "
                                     "(the controller address, e.g. scsi0:1) to disk_uuid, backing_file, datastore.",
                                     labels=["vm", "disk", "label", "disk_uuid", "backing_file", "datastore", "host"])
        capacity = GaugeMetricFamily("vcenter_virtual_disk_capacity_bytes", "Virtual disk capacity (inventory).",
                                     labels=DISK_LABELS)
        for vm in s.vms:
            vm_info.add_metric([vm.name], {"moref": vm.moref, "host": vm.host, "power_state": vm.power_state,
                                           "vm_uuid": vm.uuid, "instance_uuid": vm.instance_uuid})
            for d in vm.disks:
                disk_info.add_metric([vm.name, d.instance], {
                    "label": d.label, "disk_uuid": d.disk_uuid, "backing_file": d.backing_file,
                    "datastore": d.datastore, "host": vm.host})
                capacity.add_metric([vm.name, d.instance], d.capacity_bytes)
        yield vm_info
        yield disk_info
        yield capacity

        for direction in ("read", "write"):
            for suffix, attr, help_text in COUNTERS:
                fam = CounterMetricFamily(f"vcenter_virtual_disk_{direction}_{suffix[:-6]}",
                                          _fmt(help_text, direction), labels=DISK_LABELS)
                for row in s.disks:
                    fam.add_metric([row.vm.name, row.vm.disks[row.disk_index].instance],
                                   getattr(row.counters, f"{direction}_{attr}"))
                yield fam
        seeks = CounterMetricFamily("vcenter_virtual_disk_seeks", "Seeks by distance class (small < 64 LBNs, "
                                    "medium 64-8192, large > 8192), summed over every 20 s sample "
                                    "(virtualDisk.{small,medium,large}Seeks.latest).", labels=DISK_LABELS + ["class"])
        samples = CounterMetricFamily("vcenter_virtual_disk_samples", "20 s samples integrated into the counters.",
                                      labels=DISK_LABELS)
        ts = GaugeMetricFamily("vcenter_virtual_disk_sample_timestamp_seconds",
                               "End of the latest 20 s sample (vCenter's timestamp, Unix seconds).", labels=DISK_LABELS)
        width = GaugeMetricFamily("vcenter_virtual_disk_sample_interval_seconds",
                                  "Length of the latest sample's interval (20 for realtime).", labels=DISK_LABELS)
        for row in s.disks:
            labels = [row.vm.name, row.vm.disks[row.disk_index].instance]
            for cls in ("small", "medium", "large"):
                seeks.add_metric(labels + [cls], row.counters.seeks[cls])
            samples.add_metric(labels, row.counters.samples)
            if row.counters.latest is not None:
                ts.add_metric(labels, row.counters.latest.timestamp)
                width.add_metric(labels, row.counters.latest.interval)
        yield seeks
        yield samples
        yield ts
        yield width

        for direction in ("read", "write"):
            for suffix, counter, scale, help_text in SAMPLE_GAUGES:
                fam = GaugeMetricFamily(f"vcenter_virtual_disk_sample_{direction}_{suffix}",
                                        _fmt(help_text, direction), labels=DISK_LABELS)
                name = _fmt(counter, direction)
                for row in s.disks:
                    latest = row.counters.latest
                    if latest is None or name not in latest.values:
                        continue  # no value from vCenter: nothing shown, never a made-up 0
                    fam.add_metric([row.vm.name, row.vm.disks[row.disk_index].instance],
                                   latest.values[name] * scale)
                yield fam
        sample_seeks = GaugeMetricFamily("vcenter_virtual_disk_sample_seeks",
                                         "Seeks in the latest 20 s sample by distance class "
                                         "(virtualDisk.{small,medium,large}Seeks.latest).",
                                         labels=DISK_LABELS + ["class"])
        for row in s.disks:
            latest = row.counters.latest
            if latest is None:
                continue
            for cls in ("small", "medium", "large"):
                v = latest.values.get(f"virtualDisk.{cls}Seeks.latest")
                if v is not None:
                    sample_seeks.add_metric([row.vm.name, row.vm.disks[row.disk_index].instance, cls], v)
        yield sample_seeks


__all__ = ["ProbeCollector", "latency_seconds"]
