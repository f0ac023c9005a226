"""The scalability analysis: the ramp's plateaus and the Universal Scalability Law fitted to them
(the section that shows them: ioparallax.report.scaling_section).

Computed from a side's Dataset (ioparallax.report.data): no query of its own. Offered
concurrency, the first that shows a ramp (plateaus at three levels or more; two are a job that
starts and stops, as in the noisy-neighbour scenario, not a ramp):

0. VMs whose application completes transactions (the application view, a density test);
1. VMs running fio jobs (the guest view's asked iodepth per VM disk above 0): X-Ray's shape, a VM
   added every few minutes;
2. the sum of the asked iodepth of the running fio jobs: an iodepth sweep on the same VMs;
3. VMs with I/O in the VM view (vCenter's or Prism's ops above 0), when there is no guest view.

The plateaus come from that series (ioparallax.report.ramps; ``--steps`` gives them instead, the
``steps`` argument of :func:`scaling`), dropping the first ``settle`` seconds of each step (the
rules' rate window, the VM view's sample and one step: ioparallax.report.data.settle_seconds), so
every view has settled. Each view's throughput (read plus write IO/s, summed over VM disks) is
averaged over the same settled seconds and fitted separately; the section draws the first view
with data (:attr:`Scaling.primary`) in full and the others where they differ from it
(:attr:`Scaling.differ`). With an application view, the application's transactions per second
(every VM's together) are the control: fitted first (:attr:`Scaling.primary` is ``app``), with the
density line (:class:`Density`), the I/O views beside them (:attr:`Scaling.io_primary`); the CVMs'
share of their hosts' CPU (:class:`CvmOverhead`) comes from the CPU rules.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from ioparallax.report import ramps, usl
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Dataset, settle_seconds

log = logging.getLogger(__name__)

VIEWS = ("guest", "vm", "storage")  # the I/O views
APP = "app"  # the application view (vm_app:ioparallax_app_transactions): the control, fitted first
LABELS: dict[str, str] = {
    APP: "application",
    "guest": "guest (fio)",
    "vm": "VM (vCenter)",
    "storage": "storage (Stargate)",
}
UNITS: dict[str, str] = {APP: "transactions/s"}  # every other view's: IO/s
VIEWS_DIFFER = 0.05  # views whose plateau means differ by more than 5 % are fitted and drawn apart
MIN_LEVELS = 3  # a ramp has at least 3 levels; 2 are a workload that starts and stops
MIN_LENGTH_STEPS = 3  # a plateau keeps at least 3 report steps (and 10 s) after settling


@dataclass
class ViewFit:
    view: str
    throughput: list[float]  # per plateau, mean IO/s (NaN: no data in that plateau)
    spread: list[float]  # per plateau, standard deviation
    in_flight: list[float] = field(default_factory=list)  # per plateau, mean I/Os in flight (Little's law)
    fit: usl.UslFit | None = None


@dataclass
class Scaling:
    """What the section shows; also what the e2e test checks (:func:`scaling`)."""

    what: str  # what concurrency counts ("VMs", "outstanding I/Os asked")
    source: str  # how it was measured (a sentence fragment)
    plateaus: list[ramps.Plateau]
    views: dict[str, ViewFit] = field(default_factory=dict)
    primary: str = ""  # the view drawn in full: the application's where there is one (the control)
    io_primary: str = ""  # the first I/O view with data (drawn in full beside the application's)
    differ: list[str] = field(default_factory=list)  # other I/O views drawn because they differ from io_primary
    settle: float = 0.0
    given_steps: bool = False
    # The views' names as the section prints them: the VM view is vCenter's on ESXi, Prism's on AHV.
    labels: dict[str, str] = field(default_factory=lambda: dict(LABELS))
    vm_sample: str = "vCenter's 20 s sample"
    density: Density | None = None  # the application's density line (with an application view)
    cvm: CvmOverhead | None = None  # the CVMs' share of their hosts' CPU over the range (CPU rules)

    def unit(self, view: str) -> str:
        return UNITS.get(view, "IO/s")

    @property
    def io_views(self) -> list[str]:
        return [v for v in self.views if v != APP]


@dataclass
class Density:
    """A density test's answer from the application view's plateaus: the total throughput at the
    largest number of VMs, against linear scaling from one VM's (measured on the 1-VM plateau, else
    the fit's gamma), and the fit's peak if it has one."""

    n_max: float  # the largest number of VMs with application throughput
    total: float  # the application's throughput there (transactions/s, all VMs)
    per_vm: float  # one VM's throughput, linear scaling's unit
    per_vm_source: str  # "measured with 1 VM" or "the fit's gamma"
    linear_share: float  # total / (n_max x per_vm)
    peak_n: float | None = None
    peak_x: float | None = None
    apps: tuple[str, ...] = ()  # the applications measured (the app label)
    fitted: bool = False  # the USL fit succeeded (else no peak can be said either way)


@dataclass
class CvmOverhead:
    """The CVMs' share of their hosts' CPU capacity over the range (hosts:/host:ioparallax_cvm_cpu_usage:ratio_rate)."""

    mean: float  # over all hosts (per cluster): the CVMs' CPU over the hosts' capacity, range mean
    busiest_host: str  # the host whose CVM took the most (range mean)
    busiest: float
    hosts: int


def _sum_over_disks(arrays: list[np.ndarray], n: int) -> np.ndarray:
    if not arrays:
        return np.full(n, np.nan)
    stacked = np.vstack(arrays)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    return out


def _per_vm_count(series: dict[tuple[str, str], np.ndarray], n: int) -> np.ndarray:
    """How many VMs have a value above 0 at each point; NaN where no VM has any value."""
    by_vm: dict[str, np.ndarray] = {}
    for (vm, _disk), a in series.items():
        active = np.where(np.isnan(a), 0.0, (a > 0).astype(float))
        by_vm[vm] = np.maximum(by_vm.get(vm, np.zeros(n)), active)
    if not by_vm:
        return np.full(n, np.nan)
    count = np.sum(np.vstack(list(by_vm.values())), axis=0)
    seen = np.any(np.vstack([~np.isnan(a) for a in series.values()]), axis=0)
    count[~seen] = np.nan
    return count


def throughput_by_view(ds: Dataset, n: int) -> dict[str, np.ndarray]:
    """Read plus write IO/s summed over every VM disk, per view."""
    out = {}
    for view in VIEWS:
        arrays = []
        for key in set(ds.series.get(f"{view}_read_ops", {})) | set(ds.series.get(f"{view}_write_ops", {})):
            r, w = ds.get(f"{view}_read_ops", key), ds.get(f"{view}_write_ops", key)
            parts = [a for a in (r, w) if a is not None]
            stacked = np.vstack(parts)
            s = np.nansum(stacked, axis=0)
            s[np.all(np.isnan(stacked), axis=0)] = np.nan
            arrays.append(s)
        out[view] = _sum_over_disks(arrays, n)
    return out


def app_throughput(ds: Dataset, n: int) -> np.ndarray:
    """Transactions per second of every application VM together (the app_transactions family,
    keyed (vm, app)); all NaN without an application view."""
    return _sum_over_disks(list(ds.series.get("app_transactions", {}).values()), n)


def in_flight_by_view(ds: Dataset, n: int) -> dict[str, np.ndarray]:
    """I/Os in flight by Little's law, per view: ops/s x mean latency, both directions, summed over
    VM disks (the concurrency each view says the ramp ran at)."""
    out = {}
    for view in VIEWS:
        arrays = []
        for d in ("read", "write"):
            for key, ops in ds.series.get(f"{view}_{d}_ops", {}).items():
                lat = ds.get(f"{view}_{d}_latency_seconds", key)
                if lat is not None:
                    arrays.append(np.where(ops > 0, ops * lat, 0.0))
        out[view] = _sum_over_disks(arrays, n)
    return out


def concurrency_candidates(ds: Dataset, n: int) -> list[tuple[str, str, np.ndarray]]:
    """(what, how measured, series) in order of preference."""
    iodepth = ds.series.get("iodepth", {})
    vm_ops = dict(ds.series.get("vm_read_ops", {}))
    for k, v in ds.series.get("vm_write_ops", {}).items():
        vm_ops[k] = np.nansum(np.vstack([vm_ops[k], v]), axis=0) if k in vm_ops else v
    out = [
        ("VMs", "VMs running fio jobs (the guest view's asked iodepth above 0)", _per_vm_count(iodepth, n)),
        (
            "outstanding I/Os asked",
            "the asked iodepth of the running fio jobs, summed",
            _sum_over_disks(list(iodepth.values()), n),
        ),
        ("VMs", "VMs with I/O in the VM view (its IO/s above 0)", _per_vm_count(vm_ops, n)),
    ]
    apps = ds.series.get("app_transactions", {})
    if apps:  # a density test: the VMs whose application runs are its x axis
        out.insert(
            0,
            (
                "VMs",
                "VMs whose application completes transactions (its transactions per second above 0)",
                _per_vm_count(apps, n),
            ),
        )
    return out


def scaling(ctx: ReportContext, ds: Dataset, steps: list[ramps.Step] | None = None) -> Scaling | None:
    """The ramp and the fits, or None when the range holds no ramp (plateaus at fewer than 3 levels).
    ``steps`` (``--steps``) are the ramp's boundaries, given instead of found. Each step's first
    seconds are dropped (data.settle_seconds: the rules' rate window, the VM view's longest sample
    in the data, one step)."""
    t = ds.times
    n = len(t)
    tput = {APP: app_throughput(ds, n), **throughput_by_view(ds, n)}
    flight = in_flight_by_view(ds, n)
    settle = settle_seconds(ctx.config.w, ds.vm_sample_seconds(), ctx.step)
    min_length = max(MIN_LENGTH_STEPS * ctx.step, 10.0)
    chosen: tuple[str, str, list[ramps.Plateau]] | None = None
    for what, how, conc in concurrency_candidates(ds, n):
        if steps:
            plateaus = ramps.plateaus_from_steps(
                t,
                conc,
                np.zeros(n),
                steps,
                range_start=ctx.start,
                range_end=ctx.end,
                settle=settle,
                min_length=min_length,
            )
        else:
            plateaus = ramps.find_plateaus(
                t,
                conc,
                np.zeros(n),
                settle=settle,
                min_length=min_length,
                rel_tol=0.1,
                abs_tol=0.5,
                smooth=5,
                min_concurrency=0.0,
            )
        if len({round(p.concurrency, 6) for p in plateaus}) >= MIN_LEVELS:
            chosen = (what, how, plateaus)
            break
    if chosen is None and steps and any(s.concurrency is not None for s in steps):
        plateaus = ramps.plateaus_from_steps(
            t, None, np.zeros(n), steps, range_start=ctx.start, range_end=ctx.end, settle=settle, min_length=min_length
        )
        chosen = ("units", "the concurrency given with --steps", plateaus)
    if chosen is None:
        return None
    what, how, plateaus = chosen
    if steps:
        how = f"steps given with --steps; concurrency: {how}"
    out = Scaling(what=what, source=how, plateaus=plateaus, settle=settle, given_steps=bool(steps))
    if {src for src, _ in ds.vm_source_of.values()} == {"prism"}:  # an AHV cluster's VM view
        period = max(p for _, p in ds.vm_source_of.values())
        out.labels["vm"], out.vm_sample = "VM (Prism)", f"Prism's {period:g} s sample"
    apps = sorted({app for _, app in ds.series.get("app_transactions", {})})
    if apps:
        out.labels[APP] = f"application ({', '.join(apps)})"
    for view in (APP, *VIEWS):
        x = tput[view]
        means, spreads = [], []
        # A view whose series begins inside the range (its exporter's first samples, a Prometheus
        # started with the ramp) reads low until its own windows have filled: its first settling time
        # is dropped too, whatever the plateau (the VM view's first 1m rate over vCenter's first 20 s
        # samples put a first plateau 1 % low, and four levels turned that into a sigma 35 % off).
        valid = ~np.isnan(x)
        first = int(np.argmax(valid)) if valid.any() else 0
        begin = t[first] + settle if first > 0 else -math.inf
        for p in plateaus:
            sel = (t >= p.start) & (t <= p.end) & valid & (t >= begin)
            means.append(float(np.mean(x[sel])) if sel.any() else math.nan)
            spreads.append(float(np.std(x[sel], ddof=1)) if sel.sum() > 1 else 0.0)
        if all(math.isnan(m) for m in means):
            continue
        vf = ViewFit(view, means, spreads)
        for p in plateaus:
            lf = flight.get(view)
            sel = (t >= p.start) & (t <= p.end) & ~np.isnan(lf) if lf is not None else np.zeros(n, bool)
            vf.in_flight.append(float(np.mean(lf[sel])) if lf is not None and sel.any() else math.nan)
        pts = [(p.concurrency, m) for p, m in zip(plateaus, means) if not math.isnan(m) and p.concurrency > 0]
        vf.fit = usl.fit([a for a, _ in pts], [b for _, b in pts], unit=out.unit(view), what=what) if pts else None
        out.views[view] = vf
    out.cvm = cvm_overhead(ds)
    if not out.views:
        return out
    out.primary = next(v for v in (APP, *VIEWS) if v in out.views)
    if APP in out.views:
        out.density = density(out, apps)
    out.io_primary = next((v for v in VIEWS if v in out.views), "")
    if not out.io_primary:
        return out
    base = out.views[out.io_primary].throughput
    for view, vf in out.views.items():
        if view in (out.io_primary, APP):
            continue
        rel = [abs(a - b) / b for a, b in zip(vf.throughput, base) if b and not math.isnan(a) and not math.isnan(b)]
        if rel and max(rel) > VIEWS_DIFFER:
            out.differ.append(view)
    return out


def density(s: Scaling, apps: list[str]) -> Density | None:
    """The application view's density line (:class:`Density`); None without a plateau with data."""
    vf = s.views[APP]
    pts = [(p.concurrency, x) for p, x in zip(s.plateaus, vf.throughput) if not math.isnan(x) and p.concurrency > 0]
    if not pts:
        return None
    n_max = max(c for c, _ in pts)
    total = float(np.mean([x for c, x in pts if c == n_max]))
    ones = [x for c, x in pts if round(c, 6) == 1]
    f = vf.fit
    if ones:
        per_vm, source = float(np.mean(ones)), "measured with 1 VM"
    elif f is not None and f.ok and f.gamma is not None:
        per_vm, source = f.gamma.value, "the fit's gamma"
    else:
        return None
    ok = f is not None and f.ok
    return Density(
        n_max=n_max,
        total=total,
        per_vm=per_vm,
        per_vm_source=source,
        linear_share=total / (n_max * per_vm),
        peak_n=f.peak_n if ok and f is not None else None,
        peak_x=f.peak_x if ok and f is not None else None,
        apps=tuple(apps),
        fitted=ok,
    )


def cvm_overhead(ds: Dataset) -> CvmOverhead | None:
    """The CVMs' share of their hosts' CPU over the range: the mean of hosts:..:ratio_rate (per
    cluster; the mean of the clusters' when --match leaves several) and the host whose CVM took the
    most on average (host:..:ratio_rate); None without the CPU rules' series."""
    over = [a for _, a in ds.labelled.get("cvm_share_hosts", []) if np.any(~np.isnan(a))]
    per_host = [(m.get("host", "?"), a) for m, a in ds.labelled.get("cvm_share", []) if np.any(~np.isnan(a))]
    if not over or not per_host:
        return None
    host, share = max(((h, float(np.nanmean(a))) for h, a in per_host), key=lambda hv: hv[1])
    return CvmOverhead(
        mean=float(np.mean([np.nanmean(a) for a in over])),
        busiest_host=host,
        busiest=share,
        hosts=len({h for h, _ in per_host}),
    )
