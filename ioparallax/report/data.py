"""The fetch stage: everything the report reads from Prometheus, fetched once per kind of series,
as one :class:`Dataset` per side (the analysis and the sections read it, and query nothing).

Each *family* is one query over every VM disk at once (a recording rule of
alerts/ioparallax.rules.yml with the --match matchers, or a raw series summed by ``(vm, disk)``),
so the number of queries is fixed by the list below, whatever the number of VM disks. Range
families become numpy arrays on the report's step grid (NaN where Prometheus had no value).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ioparallax.mixin.vmview import SAMPLE_SECONDS, SOURCES, Missing, metric
from ioparallax.report.context import ReportContext
from ioparallax.report.promapi import PromError, parse_seconds

log = logging.getLogger(__name__)

FIO_JOB = "instance, job, jobname, jobid, host, source"
DS_TARGET = "instance, job, host, source, timespan, target_id, target"  # a DiskSPD target of one run
DIRECTIONS = ("read", "write")
QUANTITIES = ("ops", "bytes", "latency_seconds")
LAYERS = ("guest", "guest_os", "vm", "storage")

Key = tuple[str, str]  # (vm, disk)
VCENTER_SAMPLE_SECONDS = float(SAMPLE_SECONDS["vcenter"])  # fixed by vCenter, whatever the scrape


def rule_name(cfg_w: str, layer: str, d: str, q: str) -> str:
    """The per-layer rule names of the contract (as ioparallax/mixin/dashboards/base.py Expr.vm_disk builds them)."""
    if layer == "storage":
        agg = f"avg{cfg_w}"
    elif q == "latency_seconds":
        agg = f"mean{cfg_w}"
    else:
        agg = f"rate{cfg_w}"
    return f"vm_disk:ioparallax_{layer}_{d}_{q}:{agg}"


def range_families(ctx: ReportContext) -> dict[str, str]:
    """Family id -> PromQL of every range query (the report's whole list: its length is the count)."""
    w = ctx.config.w
    job_info = ctx.rule("guest_job:ioparallax_vm_disk:info")
    out: dict[str, str] = {}
    for layer in LAYERS:
        for d in DIRECTIONS:
            for q in QUANTITIES:
                out[f"{layer}_{d}_{q}"] = ctx.rule(rule_name(w, layer, d, q))
    raw_fio = {
        "ops": "fio_{d}_interval_iops",
        "bytes": "fio_{d}_interval_bandwidth_bytes_per_second",
        "latency_seconds": "fio_{d}_interval_clat_mean_seconds",
    }
    # The VM view's latest sample, vCenter's (20 s) or Prism's (30 s): ioparallax/mixin/vmview.py.
    raw_vc = {
        "ops": "sample_{d}_ops_per_second",
        "bytes": "sample_{d}_bytes_per_second",
        "latency_seconds": "sample_{d}_latency_precise_seconds",
    }
    for d in DIRECTIONS:
        for q in QUANTITIES:
            metric = raw_fio[q].format(d=d) + ctx.sel("fio")
            agg = "avg" if q == "latency_seconds" else "sum"
            if q == "latency_seconds":  # absent for intervals without completions: keep the last one
                metric = f"last_over_time({metric}[{ctx.config.w}])"
            out[f"fio_{d}_{q}"] = f"{agg} by (vm, disk) ({metric} * on ({FIO_JOB}) group_left (vm, disk) {job_info})"
            out[f"vcsample_{d}_{q}"] = vm_either(ctx, f"{agg} by (vm, disk) ({{}})", raw_vc[q].format(d=d))
    for name in (
        "read_zero:ratio",
        "write_zero:ratio",
        "read_zero_measurable:bool",
        "write_zero_measurable:bool",
        "read_cache:ratio",
        "working_set_to_cache:ratio",
        f"rmw_read_to_write:ratio{w}",
    ):
        out[name.split(":")[0]] = f"max by (vm, disk) ({ctx.rule('vdisk:ioparallax_' + name)})"
    # The youngest running fio job per VM disk (finished jobs keep their last elapsed): views_agree and
    # bursts leave out the steps before it has run the settling time (verdicts.unsettled).
    out["job_elapsed"] = (
        f"min by (vm, disk) ((fio_job_elapsed_seconds{ctx.sel('fio')} unless on ({FIO_JOB}) "
        f"(fio_job_finished{ctx.sel('fio')} == 1)) * on ({FIO_JOB}) group_left (vm, disk) "
        f"{job_info})"
    )
    out["iodepth"] = ctx.rule("vm_disk:ioparallax_guest_iodepth:sum")
    # The application view (docs/pgbench.md), keyed (vm, app): the scalability section's control.
    out["app_transactions"] = ctx.rule(f"vm_app:ioparallax_app_transactions:rate{w}")
    # The CVM overhead: the CVMs' share of their hosts' CPU, per host and over the hosts (per cluster).
    out["cvm_share"] = ctx.rule(f"host:ioparallax_cvm_cpu_usage:ratio_rate{w}")
    out["cvm_share_hosts"] = ctx.rule(f"hosts:ioparallax_cvm_cpu_usage:ratio_rate{w}")
    out["vm_outstanding"] = ctx.rule(f"vm_disk:ioparallax_vm_outstanding_ios:rate{w}")
    # The 2 s VM view on ESXi (esxtop): its peak over vCenter's, what the bursts verdict judges there.
    out["esxtop_peak_ratio"] = ctx.rule(f"vm_disk:ioparallax_esxtop_peak_to_vm_sample_bytes:ratio{w}")
    out["buffered"] = ctx.rule("vm_disk:ioparallax_guest_buffered_io:bool")
    out["splitting"] = ctx.rule(f"vm_disk:ioparallax_guest_os_to_fio_ops:ratio{w}")
    # Hygiene findings of the load generator on the disk: fio's jobs, or DiskSPD's targets (each
    # result's finding, as IoparallaxDiskspdTargetHygiene sees them).
    ds_target = ctx.rule("guest_target:ioparallax_diskspd_vm_disk:info")
    out["hygiene"] = (
        f"max by (vm, disk, problem) (fio_job_hygiene_problem{ctx.sel('fio')} "
        f"* on ({FIO_JOB}) group_left (vm, disk) {job_info})\n"
        f"or max by (vm, disk, problem) (diskspd_target_hygiene_problem{ctx.sel('diskspd')} "
        f"* on ({DS_TARGET}) group_left (vm, disk) {ds_target})"
    )
    # vdbench's findings are per output directory (source), its hosts per VM disk: a many-to-many
    # join PromQL cannot do, so both come as labelled series and meet in analysis.disk_input.
    out["vdbench_hygiene"] = f"max by (source, problem) (vdbench_run_hygiene_problem{ctx.sel('vdbench')})"
    out["vdbench_disks"] = f"group by (source, vm, disk) ({ctx.rule('guest_host:ioparallax_vdbench_vm_disk:info')})"
    # Which tool measured the guest view, and which exporter the guest OS view (report cells say it).
    out["guest_tool"] = ctx.rule("vm_disk:ioparallax_guest_tool:info")
    out["guest_os_source"] = ctx.rule("vm_disk:ioparallax_guest_os_source:info")
    out["split_ios"] = ctx.rule(f"vm_disk:ioparallax_guest_os_split_ios:ratio{w}")
    for kind, metric in (
        ("read_sources", "stargate_vdisk_read_source_bytes_per_second"),
        ("write_destinations", "stargate_vdisk_write_destination_bytes_per_second"),
    ):
        label = "source" if kind == "read_sources" else "destination"
        out[kind] = f"max by (vdisk_id, {label}) ({metric}{ctx.sel('stargate')})"
    out["alerts"] = ctx.rule("ALERTS", 'alertstate="firing"')
    return out


def vm_either(ctx: ReportContext, template: str, suffix: str) -> str:
    """``template`` with ``{}`` as vCenter's ``vcenter_virtual_disk_<suffix>`` ``or`` as Prism's
    counterpart (where Prism has it), each with its selector and the --match matchers."""
    parts = []
    for source in SOURCES:
        try:
            parts.append(template.format(metric(source, suffix) + ctx.sel(source)))
        except Missing:
            continue
    return " or ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


def instant_families(ctx: ReportContext) -> dict[str, str]:
    """Family id -> PromQL of the instant queries at the range's end, over the whole range."""
    r = f"{ctx.range_seconds}s"
    job_info = ctx.rule("guest_job:ioparallax_vm_disk:info")
    builds = ctx.rule("", '__name__=~"[a-z]+_exporter_build_info"')
    out = {
        "vdisk_info": f"last_over_time({ctx.rule('vdisk:ioparallax_vdisk:info')}[{r}])",
        "vcenter_disk_info": f"last_over_time(vcenter_virtual_disk_info{ctx.sel('vcenter')}[{r}])",
        "prism_disk_info": f"last_over_time(prism_virtual_disk_info{ctx.sel('prism')}[{r}])",
        # Where each VM disk's VM view came from (vm_source: vcenter, prism), its sample period as value.
        "vm_source": (
            f"last_over_time({ctx.rule('vm_disk:ioparallax_vm_source:info')}[{r}]) * on (vm, disk) group_left () "
            f"last_over_time({ctx.rule('vm_disk:ioparallax_vm_sample_interval:seconds')}[{r}])"
        ),
        # esxtop's sample period of each VM disk an esxtop capture covers (the 2 s VM view on ESXi).
        "esxtop_period": f"last_over_time({ctx.rule('vm_disk:ioparallax_esxtop_sample_interval:seconds')}[{r}])",
        "guest_disk_info": f"last_over_time({ctx.rule('guest_device:ioparallax_guest_disk:info')}[{r}])",
        "fio_disk_info": f"last_over_time(fio_guest_disk_info{ctx.sel('fio')}[{r}])",
        "partitions": f"last_over_time(fio_guest_partition_start_bytes{ctx.sel('fio')}[{r}])",
        "fio_versions": f"count by (version) (last_over_time(fio_job_info{ctx.sel('fio')}[{r}]))",
        "stargate_builds": f"count by (build_version) (last_over_time(stargate_cvm_info{ctx.sel('stargate')}[{r}]))",
        # Each exporter's <name>_exporter_build_info, on its own /metrics (docs/metrics.md): by job,
        # as the range functions drop the metric's name.
        "exporter_builds": f"count by (job, version, revision) (last_over_time({builds}[{r}]))",
    }
    for d in DIRECTIONS:
        out[f"guest_latency_{d}"] = (
            f"sum by (vm, disk, le) (increase(fio_{d}_clat_seconds_bucket{ctx.sel('fio')}[{r}]) "
            f"* on ({FIO_JOB}) group_left (vm, disk) last_over_time({job_info}[{r}]))"
        )
        out[f"storage_latency_{d}"] = (
            f"max by (vdisk_id, le) (avg_over_time("
            f"stargate_vdisk_{d}_latency_seconds_bucket{ctx.sel('stargate')}[{r}]))"
        )
    for view, sources in (("guest", ["fio"]), ("vm", SOURCES), ("storage", ["stargate"]), ("guest_os", ["node"])):
        out[f"up_{view}"] = " or ".join(
            f"max by (job, instance) (max_over_time(up{ctx.sel(source)}[{r}]))" for source in sources
        )
    out["source_up_vm"] = " or ".join(
        f"max by (instance) (max_over_time({source}_up{ctx.sel(source)}[{r}]))" for source in SOURCES
    )
    # The guest views of other tools and of Windows guests: their targets count as the view's targets.
    out["up_guest"] += f" or max by (job, instance) (max_over_time(up{ctx.sel('diskspd')}[{r}]))"
    out["up_guest_os"] += f" or max by (job, instance) (max_over_time(up{ctx.sel('windows')}[{r}]))"
    out["source_up_storage"] = f"max by (instance) (max_over_time(stargate_up{ctx.sel('stargate')}[{r}]))"
    out["source_up_guest"] = f"max by (instance, source) (max_over_time(fio_source_up{ctx.sel('fio')}[{r}]))"
    return out


@dataclass
class Dataset:
    times: np.ndarray
    series: dict[str, dict[Key, np.ndarray]] = field(default_factory=dict)  # (vm, disk) families
    labelled: dict[str, list[tuple[dict[str, str], np.ndarray]]] = field(default_factory=dict)
    instant: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    promql: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # family -> error
    missing_views: dict[str, str] = field(default_factory=dict)
    vdisk_of: dict[Key, str] = field(default_factory=dict)
    # (source, sample period in seconds) of each VM disk's VM view: ("vcenter", 20) or ("prism", 30)
    vm_source_of: dict[Key, tuple[str, float]] = field(default_factory=dict)
    esxtop_period_of: dict[Key, float] = field(default_factory=dict)  # esxtop's sample period (s)
    clusters: set[str] = field(default_factory=set)  # values of the config's cluster label seen
    # Steps at the range's start in which the VM and storage views' windows (the rules' rate window,
    # vCenter's 20 s sample) still show I/O that ended before the range (:func:`settle_seconds`).
    settle_points: int = 0
    settle_seconds: float = 0.0
    rate_window: str = ""  # the config's windows.rate, named where the settling time is explained

    def get(self, family: str, key: Key) -> np.ndarray | None:
        return self.series.get(family, {}).get(key)

    def vm_sample_seconds(self) -> float:
        """The VM view's longest sample period in the data (vCenter's 20 s, Prism's 30 s); vCenter's
        when no VM disk says where its VM view came from."""
        return max((period for _, period in self.vm_source_of.values()), default=VCENTER_SAMPLE_SECONDS)

    def _known(self, busy: bool) -> set[Key]:
        keys: set[Key] = set()
        for fam in self.series:
            if fam.split("_")[0] in ("guest", "vm", "storage") and ("bytes" in fam or "ops" in fam):
                keys.update(
                    k
                    for k, v in self.series[fam].items()
                    if (np.nanmax(v, initial=0) > 0 if busy else np.any(~np.isnan(v)))
                )
        return keys

    def disks(self) -> list[Key]:
        """Every VM disk with I/O (a value above 0) in any view's byte or ops family, sorted; not one
        whose only I/O is the windows' tail of I/O before the range (:meth:`tail_only`)."""
        return sorted(k for k in self._known(busy=True) if not self.tail_only(k))

    def tail_only(self, key: Key) -> bool:
        """No fio job on the disk in the whole range (the guest view has no value for it, while it has
        for other disks) and its I/O in the other views only in the first ``settle_points``
        steps, quiet again before the range's end: the 1m windows remembering I/O that ended before
        the range (a job that ended at the range's start), not I/O in it."""
        if not self.settle_points or not any(self.series.get(f) for f in ("guest_read_bytes", "guest_write_bytes")):
            return False
        fams = [
            f for f in self.series if f.split("_")[0] in ("guest", "vm", "storage") and ("bytes" in f or "ops" in f)
        ]
        if any(
            key in self.series[f] and np.any(~np.isnan(self.series[f][key]))
            for f in fams
            if f.startswith("guest_") and not f.startswith("guest_os_")
        ):
            return False
        busy = [
            np.flatnonzero(np.nan_to_num(self.series[f][key]) > 0)
            for f in fams
            if key in self.series[f] and not (f.startswith("guest_") and not f.startswith("guest_os_"))
        ]
        n = len(self.times)  # quiet again before the range's end, within the settle steps
        return bool(any(b.size for b in busy)) and all(
            b.size == 0 or b[-1] < min(self.settle_points, n - 1) for b in busy
        )

    def idle_disks(self) -> list[Key]:
        """VM disks the views know but that did no I/O in the range (e.g. a VM not started yet, or only
        the windows' tail of I/O before it: :meth:`tail_only`)."""
        return sorted(self._known(busy=False) - set(self.disks()))


def _to_grid(points: np.ndarray, start: float, step: float, n: int) -> np.ndarray:
    """(time, value) rows on the report's step grid, NaN where there is no point."""
    out = np.full(n, np.nan)
    if not len(points):
        return out
    idx = np.rint((points[:, 0] - start) / step).astype(int)
    ok = (idx >= 0) & (idx < n)
    out[idx[ok]] = points[ok, 1]
    return out


def fetch(ctx: ReportContext, workers: int = 4) -> Dataset:
    """Run every family's query (a few at a time) and shape the answers."""
    times = ctx.times
    ds = Dataset(times=times)
    rng, inst = range_families(ctx), instant_families(ctx)
    ds.promql = {**rng, **inst}

    n = len(times)
    cluster_label = getattr(ctx.config, "cluster_label", "")
    lock = threading.Lock()

    def run(item: tuple[str, str, bool]) -> None:
        # Each answer is shaped into arrays in its own thread as soon as it arrives, and its JSON
        # dropped: a hundred VM disks' answers held as JSON lists would take hundreds of MB.
        fam, expr, is_range = item
        try:
            if not is_range:
                answer = ctx.instant(expr)
                with lock:
                    ds.instant[fam] = answer
                return
            result = ctx.range_arrays(expr)
        except PromError as e:
            log.warning("query %s failed: %s", fam, e)
            with lock:
                ds.errors[fam] = str(e)
            return
        if fam in (
            "hygiene",
            "read_sources",
            "write_destinations",
            "alerts",
            "guest_tool",
            "guest_os_source",
            "vdbench_hygiene",
            "vdbench_disks",
            "cvm_share",
            "cvm_share_hosts",
        ):
            shaped = [(m, _to_grid(points, ctx.start, ctx.step, n)) for m, points in result]
            with lock:
                ds.labelled[fam] = shaped
            return
        fam_series: dict[Key, np.ndarray] = {}
        seen: set[str] = set()
        for m, points in result:
            if cluster_label and m.get(cluster_label):
                seen.add(m[cluster_label])
            if fam == "app_transactions" and "vm" in m:  # per VM and application, no disk
                fam_series[(m["vm"], m.get("app", ""))] = _to_grid(points, ctx.start, ctx.step, n)
            elif "vm" in m and "disk" in m:
                fam_series[(m["vm"], m["disk"])] = _to_grid(points, ctx.start, ctx.step, n)
        with lock:
            ds.series[fam] = fam_series
            ds.clusters |= seen

    items = [(f, e, True) for f, e in rng.items()] + [(f, e, False) for f, e in inst.items()]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, items))
    release_freed_memory()
    for r in ds.instant.get("vdisk_info", []):
        m = r["metric"]
        if "vm" in m and "disk" in m:
            ds.vdisk_of[(m["vm"], m["disk"])] = m.get("vdisk_id", "")
    for r in ds.instant.get("vm_source", []):
        m = r["metric"]
        if "vm" in m and "disk" in m and m.get("vm_source") in SAMPLE_SECONDS:
            ds.vm_source_of[(m["vm"], m["disk"])] = (m["vm_source"], float(r["value"][1]))
    for r in ds.instant.get("esxtop_period", []):
        m = r["metric"]
        if "vm" in m and "disk" in m:
            ds.esxtop_period_of[(m["vm"], m["disk"])] = float(r["value"][1])
    ds.missing_views = missing_views(ctx, ds)
    ds.settle_seconds = settle_seconds(ctx.config.w, ds.vm_sample_seconds(), ctx.step)
    ds.rate_window = ctx.config.w
    ds.settle_points = int(math.ceil(ds.settle_seconds / ctx.step))
    return ds


def settle_seconds(rate_window: str, vm_sample_seconds: float, step: float) -> float:
    """Seconds for every view to settle after a change of load: the rules' rate window, the VM
    view's sample (vCenter's 20 s, Prism's 30 s: :meth:`Dataset.vm_sample_seconds`) and one step.
    The verdicts leave out the steps before a fio job has run that long, the scalability section
    the first that many seconds of each ramp step."""
    return parse_seconds(rate_window) + vm_sample_seconds + step


def release_freed_memory() -> None:
    """Give the heap the answers' decoding freed back to the system (glibc keeps it for reuse
    otherwise): the drawing workers are forked from this process, and each counts what it holds."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def missing_views(ctx: ReportContext, ds: Dataset) -> dict[str, str]:
    """View -> why it is missing (no target, target down, source unreadable, or no series)."""
    out: dict[str, str] = {}
    checks = (
        ("vm", SOURCES, "vm_read_bytes", "source_up_vm"),
        ("guest", ("fio",), "guest_read_bytes", "source_up_guest"),
        ("storage", ("stargate",), "storage_read_bytes", "source_up_storage"),
        ("guest_os", ("node",), "guest_os_read_bytes", None),
    )
    for view, sources, family, source_up in checks:
        has_data = any(
            np.any(~np.isnan(v))
            for fam in (family, family.replace("read", "write"))
            for v in ds.series.get(fam, {}).values()
        )
        if has_data:
            continue
        selector = " or up".join(ctx.sel(source) for source in sources)
        if f"up_{view}" in ds.errors:
            out[view] = f"query failed: {ds.errors['up_' + view]}"
            continue
        ups = ds.instant.get(f"up_{view}", [])
        if not ups:
            out[view] = f"Prometheus scrapes no target matching up{selector} in the range"
        elif all(float(u["value"][1]) == 0 for u in ups):
            out[view] = (
                f"every target of up{selector} was down in the whole range ("
                + ", ".join(sorted(u["metric"].get("instance", "?") for u in ups))[:200]
                + ")"
            )
        elif source_up and ds.instant.get(source_up) and all(float(u["value"][1]) == 0 for u in ds.instant[source_up]):
            out[view] = (
                "the exporter answers but cannot read its source ("
                + ", ".join(
                    sorted(u["metric"].get("instance", u["metric"].get("source", "?")) for u in ds.instant[source_up])
                )[:200]
                + ")"
            )
        elif view in ("guest", "guest_os") and "vm" in out:
            out[view] = (
                "its exporter answers, but the guest's disks are matched to VM disks by vCenter's "
                "(or Prism's) disk UUID, and the VM view is missing"
            )
        else:
            out[view] = (
                f"no series of {ds.promql.get(family, family)} in the range (are the recording rules "
                "of alerts/ioparallax.rules.yml loaded?)"
            )
    return out


def choose_step(range_seconds: float, scrape_interval: float | None, points: int = 600) -> float:
    """max(scrape interval, range / points), rounded up to whole seconds."""
    return float(max(1, math.ceil(max(scrape_interval or 1.0, range_seconds / points))))
