"""The report's scalability section: the ramp's plateaus and the Universal Scalability Law fitted to them.

Built from the report's shared data (ioparallax.report.data): no query of its own. Offered
concurrency, the first that shows a ramp (plateaus at three levels or more; two are a job that
starts and stops, as in the noisy-neighbour scenario, not a ramp):

1. VMs running fio jobs (the guest view's asked iodepth per VM disk above 0): X-Ray's shape, a VM
   added every few minutes;
2. the sum of the asked iodepth of the running fio jobs: an iodepth sweep on the same VMs;
3. VMs with I/O in the VM view (vCenter's or Prism's ops above 0), when there is no guest view.

The plateaus come from that series (ioparallax.report.ramps; ``--steps`` gives them instead, stored
in ``ctx.shared["steps"]``), dropping the first ``settle`` seconds of each step: the rules' rate
window plus vCenter's 20 s sample, so every view has settled. Each view's throughput (read plus
write IO/s, summed over VM disks) is averaged over the same settled seconds and fitted separately;
the figure shows the first view with data in full and the others where they differ from it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC

import numpy as np

from ioparallax.report import ramps, usl
from ioparallax.report.promapi import parse_seconds
from ioparallax.report.sections import Figure, ReportContext, Section, esc

log = logging.getLogger(__name__)

VIEWS = ("guest", "vm", "storage")
LABELS: dict[str, str] = {"guest": "guest (fio)", "vm": "VM (vCenter)", "storage": "storage (Stargate)"}
VCENTER_SAMPLE_S = 20.0  # vCenter's realtime sample interval: fixed by vCenter, whatever the scrape
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
    """What the section shows; also what the e2e test checks (``scaling(ctx)``)."""

    what: str  # what concurrency counts ("VMs", "outstanding I/Os asked")
    source: str  # how it was measured (a sentence fragment)
    plateaus: list[ramps.Plateau]
    views: dict[str, ViewFit] = field(default_factory=dict)
    primary: str = ""  # the view drawn in full
    differ: list[str] = field(default_factory=list)  # other views drawn because they differ
    settle: float = 0.0
    given_steps: bool = False
    # The views' names as the section prints them: the VM view is vCenter's on ESXi, Prism's on AHV.
    labels: dict[str, str] = field(default_factory=lambda: dict(LABELS))
    vm_sample: str = "vCenter's 20 s sample"


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


def throughput_by_view(ds, n: int) -> dict[str, np.ndarray]:
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


def in_flight_by_view(ds, n: int) -> dict[str, np.ndarray]:
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


def concurrency_candidates(ds, n: int) -> list[tuple[str, str, np.ndarray]]:
    """(what, how measured, series) in order of preference."""
    iodepth = ds.series.get("iodepth", {})
    vm_ops = dict(ds.series.get("vm_read_ops", {}))
    for k, v in ds.series.get("vm_write_ops", {}).items():
        vm_ops[k] = np.nansum(np.vstack([vm_ops[k], v]), axis=0) if k in vm_ops else v
    return [
        ("VMs", "VMs running fio jobs (the guest view's asked iodepth above 0)", _per_vm_count(iodepth, n)),
        (
            "outstanding I/Os asked",
            "the asked iodepth of the running fio jobs, summed",
            _sum_over_disks(list(iodepth.values()), n),
        ),
        ("VMs", "VMs with I/O in the VM view (its IO/s above 0)", _per_vm_count(vm_ops, n)),
    ]


def settle_seconds(ctx: ReportContext) -> float:
    """Seconds to drop after each step: the rules' rate window, the VM view's sample (vCenter's 20 s,
    Prism's 30 s: the longest the data has, ``vm_sample_seconds`` of the dataset), one step."""
    return parse_seconds(ctx.config.w) + ctx.shared.get("vm_sample_seconds", VCENTER_SAMPLE_S) + ctx.step


def scaling(ctx: ReportContext) -> Scaling | None:
    """The ramp and the fits, or None when the range holds no ramp (plateaus at fewer than 3 levels)."""
    from ioparallax.report.summary import dataset

    ds = dataset(ctx)
    t = ds.times
    n = len(t)
    tput = throughput_by_view(ds, n)
    flight = in_flight_by_view(ds, n)
    settle = settle_seconds(ctx)
    min_length = max(MIN_LENGTH_STEPS * ctx.step, 10.0)
    steps = ctx.shared.get("steps")
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
    for view in VIEWS:
        x = tput[view]
        means, spreads = [], []
        for p in plateaus:
            sel = (t >= p.start) & (t <= p.end) & ~np.isnan(x)
            means.append(float(np.mean(x[sel])) if sel.any() else math.nan)
            spreads.append(float(np.std(x[sel], ddof=1)) if sel.sum() > 1 else 0.0)
        if all(math.isnan(m) for m in means):
            continue
        vf = ViewFit(view, means, spreads)
        for p in plateaus:
            sel = (t >= p.start) & (t <= p.end) & ~np.isnan(flight[view])
            vf.in_flight.append(float(np.mean(flight[view][sel])) if sel.any() else math.nan)
        pts = [(p.concurrency, m) for p, m in zip(plateaus, means) if not math.isnan(m) and p.concurrency > 0]
        vf.fit = usl.fit([a for a, _ in pts], [b for _, b in pts], unit="IO/s", what=what) if pts else None
        out.views[view] = vf
    if not out.views:
        return out
    out.primary = next(v for v in VIEWS if v in out.views)
    base = out.views[out.primary].throughput
    for view, vf in out.views.items():
        if view == out.primary:
            continue
        rel = [abs(a - b) / b for a, b in zip(vf.throughput, base) if b and not math.isnan(a) and not math.isnan(b)]
        if rel and max(rel) > VIEWS_DIFFER:
            out.differ.append(view)
    return out


# -- the section ------------------------------------------------------------------------------


def scaling_section(ctx: ReportContext) -> Section | None:
    """The section builder (ioparallax/report/builders.py)."""
    s = scaling(ctx)
    if s is None:
        return None
    parts = [
        f'<p class="note">Offered concurrency: {esc(s.source)}. Each step\'s first {s.settle:.0f} s are '
        f"dropped (the {esc(ctx.config.w)} rate window, {esc(s.vm_sample)} and one step) and the rest "
        f'averaged. <a href="{esc(_doc(ctx))}">How to run a ramp so that the fit means something</a>.</p>'
    ]
    figures: list[Figure] = []
    if not s.views:
        parts.append("<p>No view has throughput in the ramp's plateaus: nothing to fit.</p>")
    else:
        primary = s.views[s.primary]
        fit = primary.fit
        lead = fit.statement if fit else "No plateau had data."
        parts.insert(0, f'<p class="lead"><b>{esc(s.labels[s.primary])}:</b> {esc(lead)}</p>')
        same = [v for v in s.views if v != s.primary and v not in s.differ]
        if same:
            parts.append(
                f"<p>The {esc(' and '.join(s.labels[v] for v in same))} view{'s' if len(same) > 1 else ''} "
                f"measured the same plateaus within {VIEWS_DIFFER:.0%}: the same fit.</p>"
            )
        for v in s.differ:
            f = s.views[v].fit
            parts.append(
                f"<p><b>{esc(s.labels[v])} differs</b> by more than {VIEWS_DIFFER:.0%} on some plateau: "
                f"{esc(f.statement if f else 'no fit')}</p>"
            )
        parts.append(_fit_table(s))
        for v in [s.primary, *s.differ]:
            f = s.views[v].fit
            for note in f.notes if f else []:
                parts.append(f'<p class="note">{esc(s.labels[v])}: {esc(note)}.</p>')
        figures.append(_figure(ctx, s))
    parts.append(_plateau_table(s))
    return Section(
        id="scalability",
        title="Scalability (Universal Scalability Law)",
        html="".join(parts),
        figures=figures,
        csv={"scalability-plateaus.csv": _plateaus_csv(s)},
        page_break=True,
    )


def _doc(ctx: ReportContext) -> str:
    """docs/usl.md beside the runbook the config points at (a URL or the repository path)."""
    runbook = ctx.config.alerts.runbook_url
    head, sep, _ = runbook.rpartition("/")
    return f"{head}{sep}usl.md" if runbook.endswith("runbook.md") else "docs/usl.md"


def _fmt(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def _spread(v: float) -> str:
    """A standard deviation to 0.1: 1e-12 of floating-point noise is 0."""
    return "-" if not math.isfinite(v) else _fmt(round(v, 1), 2)


def _fit_table(s: Scaling) -> str:
    rows = []
    for v in [s.primary, *[x for x in s.views if x != s.primary]]:
        f = s.views[v].fit
        if f is None or not f.ok:
            rows.append(
                f"<tr><th>{esc(s.labels[v])}</th><td colspan='7'>{esc(f.statement if f else 'no data')}</td></tr>"
            )
            continue
        cells = []
        for c in f.coefficients():
            ci = f" [{_fmt(c.low)}, {_fmt(c.high)}]" if c.low is not None else ""
            cells.append(f"{_fmt(c.value)}{ci}{' (bound)' if c.at_bound else ''}")
        peak = f"{_fmt(f.peak_x)} IO/s at {_fmt(f.peak_n)}" if f.peak_n is not None else "none (kappa 0)"
        amdahl = f"{_fmt(f.amdahl_x)} IO/s" if f.amdahl_x is not None else "none (sigma 0)"
        rows.append(
            f"<tr><th>{esc(s.labels[v])}</th>"
            + "".join(f"<td>{esc(c)}</td>" for c in cells)
            + f"<td>{'-' if f.r_squared is None else f'{f.r_squared:.4f}'}</td><td>{esc(peak)}</td><td>{esc(amdahl)}</td>"
            f"<td>{100 * (f.linear_share or 0):.0f} %</td></tr>"
        )
    level = next((vw.fit.level for vw in s.views.values() if vw.fit), 0.95)
    return (
        "<table class='kv usl'><thead><tr><th>view</th><th>sigma (contention)</th><th>kappa (coherency)</th>"
        f"<th>gamma (IO/s at 1)</th><th>R squared</th><th>peak</th><th>Amdahl ceiling</th>"
        f"<th>% of linear at {esc(_fmt(max((p.concurrency for p in s.plateaus), default=0)))}</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<p class='note'>Brackets: {level:.0%} confidence intervals (Student's t on the plateaus' residual "
        "degrees of freedom).</p>"
    )


def _plateau_table(s: Scaling) -> str:
    from datetime import datetime

    views = list(s.views)
    head = "".join(f"<th>{esc(s.labels[v])} IO/s</th>" for v in views)
    head += "".join(f"<th>in flight, {esc(s.labels[v].split(' ')[0])}</th>" for v in views)
    rows = []
    for i, p in enumerate(s.plateaus):
        when = datetime.fromtimestamp(p.start, UTC).strftime("%H:%M:%S")
        cells = "".join(
            f"<td>{_fmt(s.views[v].throughput[i], 4)} &plusmn; {_spread(s.views[v].spread[i])}</td>" for v in views
        )
        cells += "".join(f"<td>{_fmt(s.views[v].in_flight[i], 3)}</td>" for v in views)
        rows.append(f"<tr><td>{_fmt(p.concurrency, 4)}</td><td>{when}</td><td>{p.length:.0f} s</td>{cells}</tr>")
    return (
        f"<table class='kv plateaus'><thead><tr><th>{esc(s.what)}</th><th>from (UTC)</th><th>settled</th>{head}"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<p class='note'>Plateau means &plusmn; standard deviation of the settled points; in flight: the "
        "I/Os outstanding by Little's law in each view (IO/s times mean latency), the concurrency the "
        "storage saw.</p>"
    )


def _plateaus_csv(s: Scaling) -> str:
    from ioparallax.report.figures import rows_csv

    views = list(s.views)
    header = ["concurrency", "start_unix", "end_unix", "settled_seconds"]
    for v in views:
        header += [f"{v}_iops_mean", f"{v}_iops_std", f"{v}_in_flight"]
    rows = []
    for i, p in enumerate(s.plateaus):
        row: list[object] = [f"{p.concurrency:.6g}", f"{p.start:.0f}", f"{p.end:.0f}", f"{p.length:.0f}"]
        for v in views:
            row += [f"{s.views[v].throughput[i]:.6g}", f"{s.views[v].spread[i]:.6g}", f"{s.views[v].in_flight[i]:.6g}"]
        rows.append(row)
    return rows_csv(header, rows)


def _figure(ctx: ReportContext, s: Scaling) -> Figure:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from ioparallax.report.figures import COLORS, fmt_ops, rows_csv, to_svg

    fig, ax = plt.subplots(figsize=(10.5, 4.2))
    n_max = max(p.concurrency for p in s.plateaus)
    primary = s.views[s.primary].fit
    top_n = n_max * 1.25
    if primary and primary.ok and primary.peak_n is not None and primary.peak_n < 2.5 * n_max:
        top_n = max(top_n, primary.peak_n * 1.2)
    grid = np.linspace(0, top_n, 300)[1:]
    y_max = 0.0
    rows: list[list[object]] = []
    for v in [s.primary, *s.differ]:
        vf = s.views[v]
        color = COLORS[v]
        xs = np.array([p.concurrency for p in s.plateaus])
        ys = np.array(vf.throughput)
        ok = ~np.isnan(ys)
        ax.errorbar(
            xs[ok],
            ys[ok],
            yerr=np.array(vf.spread)[ok],
            fmt="o",
            color=color,
            ms=4.5,
            capsize=3,
            label=f"{s.labels[v]}: plateau mean \u00b1 std",
            zorder=3,
        )
        y_max = max(y_max, float(np.nanmax(ys + np.array(vf.spread))) if ok.any() else 0)
        for xi, yi, si in zip(xs[ok], ys[ok], np.array(vf.spread)[ok]):
            rows.append([v, "plateau", f"{xi:.6g}", f"{yi:.6g}", f"{si:.6g}"])
        f = vf.fit
        if f and f.ok:
            curve = f.predict(grid)
            style = "-" if v == s.primary else "--"
            ax.plot(grid, curve, style, color=color, label=f"{s.labels[v]}: USL fit (R\u00b2 {f.r_squared:.3f})")
            for g, c in zip(grid[::10], curve[::10]):
                rows.append([v, "fit", f"{g:.6g}", f"{c:.6g}", ""])
            if f.peak_n is not None and f.peak_x is not None and f.peak_n <= top_n:  # set together
                ax.plot(
                    [f.peak_n],
                    [f.peak_x],
                    marker="v",
                    color=color,
                    ms=7,
                    ls="none",
                    label=f"{s.labels[v]}: peak {fmt_ops(f.peak_x)} IO/s at {f.peak_n:.3g} {s.what}",
                )
    if primary and primary.ok and primary.gamma is not None:  # an ok fit has its coefficients
        g = primary.gamma.value
        y_max = max(y_max, float(np.max(primary.predict(grid))))
        ax.plot(grid, g * grid, ":", color="#616161", lw=1.1, label=f"linear: {fmt_ops(g)} IO/s per one")
        if primary.amdahl_x is not None:
            if primary.amdahl_x <= 2.0 * y_max:
                ax.axhline(
                    primary.amdahl_x,
                    color="#9e9e9e",
                    ls="-.",
                    lw=1.0,
                    label=f"Amdahl ceiling gamma/sigma {fmt_ops(primary.amdahl_x)} IO/s",
                )
            else:
                ax.plot(
                    [],
                    [],
                    color="#9e9e9e",
                    ls="-.",
                    lw=1.0,
                    label=f"Amdahl ceiling gamma/sigma {fmt_ops(primary.amdahl_x)} IO/s (above the chart)",
                )
    ax.set_xlim(0, top_n)
    ax.set_ylim(0, y_max * 1.3 if y_max > 0 else 1)
    ax.set_xlabel(f"offered concurrency ({s.what})")
    ax.set_ylabel("throughput (IO/s, read + write)")
    ax.yaxis.set_major_formatter(FuncFormatter(fmt_ops))
    ax.set_title("Throughput against concurrency: plateaus and the Universal Scalability Law")
    ax.legend(loc="lower right", ncol=1)
    svg = to_svg(fig)
    caption = (
        f"Each point is one plateau of the ramp ({len(s.plateaus)} plateaus, {s.what}); error bars are the "
        "standard deviation of its settled points. Solid: the USL fit; dotted: linear scaling from the "
        "fitted gamma; dash-dot: the contention (Amdahl) ceiling the curve could approach without coherency "
        "cost."
    )
    promql = [
        ctx.rule(f"vm_disk:ioparallax_{v}_{d}_ops:{'avg' if v == 'storage' else 'rate'}{ctx.config.w}")
        for v in s.views
        for d in ("read", "write")
    ] + [ctx.rule("vm_disk:ioparallax_guest_iodepth:sum")]
    return Figure(
        id="scalability-usl",
        caption=caption,
        svg=svg,
        promql=promql,
        csv=rows_csv(["view", "kind", "concurrency", "iops", "std"], rows),
    )
