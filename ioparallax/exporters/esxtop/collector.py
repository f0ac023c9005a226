"""Exposition: esxtop batch CSVs and vscsiStats outputs as Prometheus metric families, built fresh
per scrape.

On each scrape the :class:`EsxtopCollector` asks the watcher to read what the files gained
(O(new bytes)), then yields the families of every file. Nothing is updated in the background and
no sample carries a timestamp (``esxtop-exporter backfill`` writes the run's own timestamps).
Every metric is listed in docs/esxtop.md.

Per esxtop file: virtual disks (``vm``, ``disk``: the labels vcenter-exporter gives the same
disk), devices, paths, adapters and NFS volumes (the latency split GAVG = KAVG + DAVG), the CPU of
each VM's group; each as counters integrated from every sample and as the latest sample's values
(``_sample_``). Per vscsiStats file: histograms per VM disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from ioparallax.exporters.common.families import MetricFamilies, finite
from ioparallax.exporters.common.watch.scrape import WatchCollector, source_state
from ioparallax.exporters.esxtop.hygiene import Capture, HygieneConfig, cannot_tell, clock_offset, problems
from ioparallax.exporters.esxtop.parse import LAYERS, STORAGE_OBJECTS
from ioparallax.exporters.esxtop.reader import (
    LINE_REASONS,
    VALUE_REASONS,
    EsxtopFile,
    ObjectState,
    Snapshot,
    UnknownFile,
    VscsiFile,
    Watcher,
)
from ioparallax.exporters.esxtop.vscsi import Histogram

log = logging.getLogger(__name__)

MB = 1048576.0
_MS = 1e-3

VDISK_LABELS = ["source", "host", "vm", "disk"]
CPU_LABELS = ["source", "host", "vm"]
#: kind -> (metric prefix, instance label)
STORAGE = {kind: (f"esxtop_{kind}", label) for kind, label in STORAGE_OBJECTS.values()}
_STORAGE_WHAT = {
    "device": "SCSI device (Physical Disk SCSI Device: naa/t10/mpx id)",
    "path": "path (Physical Disk Path: vmhbaN:C:T:L)",
    "adapter": "adapter (Physical Disk Adapter: vmhbaN)",
    "nfs_volume": "NFS datastore (Physical Disk NFS Volume; a Nutanix container on ESXi is one)",
}
_LAYER_HELP = {
    "guest": "guest (GAVG: what the VM sees, = kernel + driver)",
    "kernel": "kernel (KAVG: time in the VMkernel, queueing included)",
    "driver": "driver (DAVG: the device and the fabric, from the HBA driver on)",
    "queue": "queue (QAVG: waiting in the VMkernel's queue, part of KAVG)",
}
_OP_WORD = {"command": "", "read": "read_", "write": "write_"}
_OP_HELP = {"command": "commands", "read": "reads", "write": "writes"}
#: The latest sample's gauges of a virtual disk, in the order of its values (suffix, scale to base
#: units, esxtop's column); a device, path, adapter or datastore has the first five, then its
#: latency layers.
_LATEST_DISK = (
    ("commands_per_second", 1.0, "Commands/sec"),
    ("read_ops_per_second", 1.0, "Reads/sec"),
    ("write_ops_per_second", 1.0, "Writes/sec"),
    ("read_bytes_per_second", MB, "MBytes Read/sec x 2^20"),
    ("write_bytes_per_second", MB, "MBytes Written/sec x 2^20"),
    ("read_latency_seconds", _MS, "Average MilliSec/Read"),
    ("write_latency_seconds", _MS, "Average MilliSec/Write"),
)

#: vscsiStats family -> (metric name part, unit suffix, divisor to base units, HELP): divided, not
#: multiplied by 1e-6, so 100 us is le="0.0001" (100 x 1e-6 is 9.999999999999999e-05)
VSCSI = {
    "io_length": ("io_length", "bytes", 1, "I/O length in bytes (IO lengths)"),
    "seek_distance": (
        "seek_distance",
        "blocks",
        1,
        "Distance in logical blocks (LBNs) from the previous command's (negative: backwards); 1 is sequential",
    ),
    "seek_distance_closest16": (
        "seek_distance_closest16",
        "blocks",
        1,
        "Distance in logical blocks (LBNs) to the closest of the previous 16 commands "
        "(interleaved sequential streams read as small)",
    ),
    "outstanding_ios": ("outstanding", "ios", 1, "I/Os outstanding on the virtual disk when a new one is issued"),
    "latency": ("latency", "seconds", 1_000_000, "Latency of the I/Os (vscsiStats: microseconds)"),
    "interarrival": ("interarrival", "seconds", 1_000_000, "Time between successive I/Os (vscsiStats: microseconds)"),
}
VSCSI_LABELS = ["source", "vm", "disk", "world_group_id", "handle_id"]


def _layer_name(prefix: str, layer: str, op: str) -> str:
    return f"{prefix}_{_OP_WORD[op]}{layer}_latency_seconds"


class EsxtopCollector(WatchCollector):
    prefix = "esxtop"
    output = "esxtop output"
    up_help = (
        "1 if every watched path and file could be read on this scrape and no file is down, else 0 "
        "(esxtop_source_error_info and the log name the file and the cause)."
    )
    duration_help = "Seconds spent reading esxtop and vscsiStats files and building this scrape."

    hygiene_config = HygieneConfig

    def __init__(
        self,
        watcher: Watcher,
        hygiene: HygieneConfig | None = None,
        clock: Callable[[], float] = time.time,
        poll: bool = True,
    ):
        super().__init__(watcher, hygiene, clock, poll)
        self._vm_names: dict[str, str] = {}

    def take_snapshot(self) -> list[Snapshot]:
        # vscsiStats names a VM only by its worldGroupID: the esxtop files of the same scrape
        # give the names
        self._vm_names = {}
        snapshot = self.watcher.snapshot()
        self._vm_names = self.watcher.vm_names()
        return snapshot

    def source(self, fams: MetricFamilies, snap: Snapshot) -> bool:
        self._source(fams, snap, self._vm_names)
        return snap.source.up

    def failed(self, fams: MetricFamilies, snap: Snapshot, exc: Exception) -> None:
        src = snap.source
        log.error("exposing %s failed", src.name, exc_info=exc)
        source_state(fams, "esxtop", _UP_HELP, _ERR_HELP, [src.name], False, "internal_error")

    # -----------------------------------------------------------------------------------------
    def _source(self, fams: MetricFamilies, snap: Snapshot, vm_names: dict[str, str]) -> None:
        src = snap.source
        s = [src.name]
        source_state(fams, "esxtop", _UP_HELP, _ERR_HELP, s, src.up, src.reason)
        if isinstance(src, UnknownFile):
            return
        fams.gauge(
            "esxtop_source_info",
            "What the file is: format esxtop (a batch CSV) or vscsistats; host as esxtop's header names it. Value 1.",
            ["source", "format", "host"],
            s + (["esxtop", src.host] if isinstance(src, EsxtopFile) else ["vscsistats", ""]),
            1,
        )
        fams.gauge(
            "esxtop_source_finished",
            "1 once the file has not grown for --esxtop.idle-timeout (the capture ended).",
            ["source"],
            s,
            1.0 if snap.finished else 0.0,
        )
        if src.last_growth:
            fams.gauge(
                "esxtop_source_last_change_timestamp_seconds",
                "When the file last changed (its mtime), seconds since the epoch.",
                ["source"],
                s,
                src.last_growth,
            )
        fams.counter(
            "esxtop_source_read_errors_total", "Failed attempts to read the file.", ["source"], s, src.read_errors
        )
        if isinstance(src, EsxtopFile):
            self._esxtop_health(fams, src, snap)
            if snap.visible and src.reason not in ("bad_header", "internal_error"):
                self._esxtop(fams, src)
        elif snap.visible and src.up:
            self._vscsi(fams, src, vm_names)

    def _esxtop_health(self, fams: MetricFamilies, src: EsxtopFile, snap: Snapshot) -> None:
        s = [src.name]
        fams.counter("esxtop_source_rows_total", "Sample rows read from the file.", ["source"], s, src.rows)
        for reason in LINE_REASONS:
            fams.counter(
                "esxtop_source_rejected_lines_total",
                "Lines rejected: before_header, bad_header, not_csv, wrong_column_count (a cut-off "
                "row, or one of another layout), bad_timestamp, time_not_increasing, too_long, not_text.",
                ["source", "reason"],
                s + [reason],
                src.rejected.get(reason, 0),
            )
        for reason in VALUE_REASONS:
            fams.counter(
                "esxtop_source_rejected_values_total",
                "Value cells of the selected columns not used: not_a_number, invalid_value (negative, NaN, infinite).",
                ["source", "reason"],
                s + [reason],
                src.rejected_values.get(reason, 0),
            )
        fams.counter(
            "esxtop_source_resets_total",
            "Times the file was truncated, replaced or rewritten and read again from the start.",
            ["source"],
            s,
            src.resets,
        )
        fams.counter(
            "esxtop_source_headers_total",
            "Header lines read (more than 1: esxtop was restarted into the same file).",
            ["source"],
            s,
            src.headers,
        )
        fams.counter(
            "esxtop_source_gaps_total",
            "Samples more than 10 minutes after the previous one (another esxtop run appended to the "
            "file): integrated over the interval seen before the gap.",
            ["source"],
            s,
            src.gaps,
        )
        hm = src.header
        if hm is not None:
            fams.gauge(
                "esxtop_source_columns", "Columns of the header (the time column included).", ["source"], s, hm.columns
            )
            fams.gauge(
                "esxtop_source_selected_columns",
                "Columns the exporter reads of each row.",
                ["source"],
                s,
                len(hm.selected),
            )
        if src.first_ts is not None and src.last_ts is not None:
            fams.gauge(
                "esxtop_source_first_sample_timestamp_seconds",
                "Time of the file's first sample (the host's clock), seconds since the epoch.",
                ["source"],
                s,
                src.first_ts,
            )
            fams.gauge(
                "esxtop_source_last_sample_timestamp_seconds",
                "Time of the file's newest sample (the host's clock), seconds since the epoch.",
                ["source"],
                s,
                src.last_ts,
            )
        if src.mean_interval is not None:
            fams.gauge(
                "esxtop_source_sample_interval_seconds",
                "Mean time between samples (esxtop's -d delay as it ran).",
                ["source"],
                s,
                src.mean_interval,
            )
            fams.gauge(
                "esxtop_source_sample_interval_max_seconds",
                "Longest time between two samples.",
                ["source"],
                s,
                src.max_interval or 0.0,
            )
        capture = Capture(
            samples=src.rows,
            first_ts=src.first_ts,
            last_ts=src.last_ts,
            mean_interval_s=src.mean_interval,
            finished=snap.finished,
            last_growth=src.last_growth,
        )
        offset = clock_offset(capture)
        if offset is not None:
            fams.gauge(
                "esxtop_source_clock_offset_seconds",
                "While the file grows: its newest sample's time minus the file's mtime (when the line "
                "arrived, on this machine's clock); positive: the host's clock is ahead.",
                ["source"],
                s,
                offset,
            )
        for problem in problems(capture, self.hygiene):
            fams.gauge(
                "esxtop_source_hygiene_problem",
                "1 for each capture hygiene problem: long_delay (samples further apart than "
                "--esxtop.max-delay), too_few_samples, host_clock_skew; see docs/esxtop.md.",
                ["source", "problem"],
                s + [problem],
                1,
            )
        for problem in cannot_tell(capture):
            fams.gauge(
                "esxtop_source_hygiene_cannot_tell",
                "1 for each hygiene check that cannot decide yet: long_delay (fewer than 2 samples), "
                "host_clock_skew (the file no longer grows).",
                ["source", "problem"],
                s + [problem],
                1,
            )

    # -----------------------------------------------------------------------------------------
    def _esxtop(self, fams: MetricFamilies, src: EsxtopFile) -> None:
        for vm, uuid in sorted(src.vms.items()):
            gid = next((g for g, name in src.gids.items() if name == vm), "")
            fams.gauge(
                "esxtop_vm_info",
                "A VM of the capture: vm_uuid as older esxtop builds write it after the name (empty "
                "otherwise), gid its group id (Group Cpu; vscsiStats' worldGroupID). Value 1.",
                ["source", "host", "vm", "vm_uuid", "gid"],
                [src.name, src.host, vm, uuid, gid],
                1,
            )
        for st in src.objects.values():
            if st.kind == "vdisk":
                self._vdisk(fams, src, st)
            elif st.kind == "cpu":
                self._cpu(fams, src, st)
            else:
                self._storage(fams, src, st)

    def _vdisk(self, fams: MetricFamilies, src: EsxtopFile, st: ObjectState) -> None:
        names = VDISK_LABELS
        labels = [src.name, src.host, st.key[0], st.key[1]]
        tot = st.totals
        p = "esxtop_virtual_disk"
        # each counter needs its columns: (rate) or (ops, latency)
        needs = ((0,), (1,), (2,), (3,), (4,), (1, 5), (2, 6))
        for i, (suffix, doc) in enumerate(
            (
                ("commands_total", "Commands issued (Commands/sec x interval), reads, writes and others"),
                ("read_ops_total", "Reads completed (Reads/sec x interval)"),
                ("write_ops_total", "Writes completed (Writes/sec x interval)"),
                ("read_bytes_total", "Bytes read (MBytes Read/sec x 2^20 x interval)"),
                ("write_bytes_total", "Bytes written (MBytes Written/sec x 2^20 x interval)"),
                (
                    "read_latency_seconds_total",
                    "Sum of the reads' latencies (Average MilliSec/Read x reads): rate() over rate() "
                    "of read_ops_total is the mean",
                ),
                ("write_latency_seconds_total", "Sum of the writes' latencies (Average MilliSec/Write x writes)"),
            )
        ):
            if st.present.issuperset(needs[i]):
                fams.counter(f"{p}_{suffix}", f"{doc}, integrated from every esxtop sample.", names, labels, tot[i])
        fams.counter(f"{p}_samples_total", "esxtop samples integrated into the counters.", names, labels, st.samples)
        v = st.latest
        if v is None:
            return
        for value, (suffix, scale, doc) in zip(v, _LATEST_DISK, strict=False):
            if value is not None:
                fams.gauge(f"{p}_sample_{suffix}", f"The latest esxtop sample: {doc}.", names, labels, value * scale)
        if st.latest_ts is not None:
            fams.gauge(
                f"{p}_sample_timestamp_seconds",
                "Time of the latest sample (the host's clock), seconds since the epoch.",
                names,
                labels,
                st.latest_ts,
            )

    def _storage(self, fams: MetricFamilies, src: EsxtopFile, st: ObjectState) -> None:
        p, label = STORAGE[st.kind]
        what = _STORAGE_WHAT[st.kind]
        names = ["source", "host", label]
        labels = [src.name, src.host, st.key[0]]
        tot = st.totals
        for i, (suffix, doc) in enumerate(
            (
                ("commands_total", "Commands (Commands/sec x interval)"),
                ("read_ops_total", "Reads (Reads/sec x interval)"),
                ("write_ops_total", "Writes (Writes/sec x interval)"),
                ("read_bytes_total", "Bytes read (MBytes Read/sec x 2^20 x interval)"),
                ("write_bytes_total", "Bytes written (MBytes Written/sec x 2^20 x interval)"),
            )
        ):
            if i in st.present:
                fams.counter(
                    f"{p}_{suffix}", f"{doc} of the {what}, integrated from every esxtop sample.", names, labels, tot[i]
                )
        i = 5
        for layer in LAYERS:
            for j, op in enumerate(("command", "read", "write")):
                if i not in st.present or j not in st.present:
                    i += 1
                    continue
                fams.counter(
                    _layer_name(p, layer, op) + "_total",
                    f"Sum of the {_LAYER_HELP[layer]} latencies of the {_OP_HELP[op]} of the {what} "
                    f"(Average {layer.capitalize()} MilliSec/{op.capitalize()} x {_OP_HELP[op]}): "
                    f"rate() over rate() of the {_OP_HELP[op]} is the mean.",
                    names,
                    labels,
                    tot[i],
                )
                i += 1
        fams.counter(f"{p}_samples_total", "esxtop samples integrated into the counters.", names, labels, st.samples)
        v = st.latest
        if v is None:
            return
        for value, (suffix, scale, doc) in zip(v, _LATEST_DISK[:5], strict=False):
            if value is not None:
                fams.gauge(
                    f"{p}_sample_{suffix}",
                    f"The latest esxtop sample of the {what}: {doc}.",
                    names,
                    labels,
                    value * scale,
                )
        i = 5
        for layer in LAYERS:
            for op in ("command", "read", "write"):
                value = v[i]
                i += 1
                if value is not None:
                    fams.gauge(
                        _layer_name(f"{p}_sample", layer, op),
                        f"The latest esxtop sample of the {what}: mean {_LAYER_HELP[layer]} latency of "
                        f"the {_OP_HELP[op]} (Average {layer.capitalize()} MilliSec/{op.capitalize()}).",
                        names,
                        labels,
                        value * _MS,
                    )
        for value, suffix, doc in (
            (v[17], "queue_depth", "The device's queue depth (Device Q Depth)"),
            (
                v[18],
                "sample_active_commands",
                "The latest esxtop sample: commands issued and not completed (Active Commands)",
            ),
            (
                v[19],
                "sample_queued_commands",
                "The latest esxtop sample: commands waiting in the VMkernel's queue (Queued Commands)",
            ),
        ):
            if value is not None:
                fams.gauge(f"{p}_{suffix}", f"{doc}.", names, labels, value)

    def _cpu(self, fams: MetricFamilies, src: EsxtopFile, st: ObjectState) -> None:
        names = CPU_LABELS
        labels = [src.name, src.host, st.key[0]]
        for i, (what, counter, doc) in enumerate(
            (
                (
                    "used",
                    "% Used",
                    "used (run time with the system time charged to the VM, turbo and hyper-threading accounted)",
                ),
                ("run", "% Run", "running"),
                ("ready", "% Ready", "ready to run but waiting for a physical CPU (%RDY)"),
                ("costop", "% CoStop", "stopped by co-scheduling (%CSTP: a vCPU waiting for its siblings)"),
            )
        ):
            fams.counter(
                f"esxtop_vm_cpu_{what}_seconds_total",
                f"CPU seconds the VM's vCPUs were {doc} (Group Cpu {counter} / 100 x interval, summed "
                "over the group's worlds): rate() is in CPUs.",
                names,
                labels,
                st.totals[i],
            )
            value = st.latest[i] if st.latest is not None else None
            if value is not None:
                fams.gauge(
                    f"esxtop_vm_cpu_sample_{what}_ratio",
                    f"The latest esxtop sample: Group Cpu {counter} / 100 (summed over the group's worlds: "
                    "up to the number of vCPUs).",
                    names,
                    labels,
                    value / 100.0,
                )
        fams.counter(
            "esxtop_vm_cpu_samples_total", "esxtop samples integrated into the counters.", names, labels, st.samples
        )

    # -----------------------------------------------------------------------------------------
    def _vscsi(self, fams: MetricFamilies, src: VscsiFile, vm_names: dict[str, str]) -> None:
        fams.counter(
            "esxtop_source_vscsistats_parses_total",
            "Times the vscsiStats file was read whole (at each change).",
            ["source"],
            [src.name],
            src.parses,
        )
        for h in src.histograms:
            self._histogram(fams, src, h, vm_names.get(h.world_group_id, ""))

    def _histogram(self, fams: MetricFamilies, src: VscsiFile, h: Histogram, vm: str) -> None:
        part, unit, divisor, doc = VSCSI[h.family]
        op = "" if h.op == "all" else f"{h.op}_"
        name = f"vscsistats_{op}{part}_{unit}"
        buckets = [
            ("+Inf" if limit == float("inf") else floatToGoString(limit / divisor), float(c))
            for limit, c in h.cumulative()
        ]
        mean = h.stats.get("mean", 0.0)
        total = finite(f"{name}_sum", mean / divisor * h.count)
        fams.add(
            HistogramMetricFamily,
            name,
            f"{doc}, of {'all commands' if h.op == 'all' else h.op + 's'}: vscsiStats' histogram, cumulative since "
            "collection started (vscsiStats -s). _sum is vscsiStats' mean (rounded) x count. vm from the "
            "Group Cpu columns of a watched esxtop CSV with this worldGroupID, empty without one.",
            VSCSI_LABELS,
            [src.name, vm, h.disk, h.world_group_id, h.handle_id],
            buckets,
            total,
        )


_UP_HELP = (
    "1 if the file could be read on this scrape and is an esxtop batch CSV or vscsiStats output (or "
    "still empty); 0: see esxtop_source_error_info."
)
_ERR_HELP = (
    "Why a file is down (present only while it is): unreadable, not_esxtop (neither an esxtop batch CSV "
    "nor vscsiStats output), bad_header, too_large, corrupt (a broken vscsiStats histogram), truncated "
    "(convert: its last line is cut off), internal_error. The log names the file and the cause. Value 1."
)
