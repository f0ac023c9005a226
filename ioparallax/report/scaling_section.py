"""The report's scalability section: the ramp's plateaus (ioparallax.report.scaling), the Universal
Scalability Law fitted to them, a table and a figure. Nothing is computed here but the page."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ioparallax.report.context import ReportContext
from ioparallax.report.figures import COLORS, fmt_ops, rows_csv, to_svg
from ioparallax.report.scaling import APP, VIEWS_DIFFER, CvmOverhead, Density, Scaling
from ioparallax.report.sections import Figure, Section, esc


def scaling_section(ctx: ReportContext, s: Scaling | None) -> Section | None:
    """The section of the side ``ctx``'s ramp (ioparallax/report/builders.py); None without a ramp."""
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
        head = [f'<p class="lead"><b>{esc(s.labels[s.primary])}:</b> {esc(lead)}</p>']
        if s.primary == APP:
            head.append(_density_paragraph(s))
            if s.cvm is not None:  # the other half of the density answer: what the storage cost the hosts
                head.append(cvm_paragraph(s.cvm))
            if s.io_primary:
                f = s.views[s.io_primary].fit
                head.append(
                    f"<p>Beside it, the storage as the I/O views saw it: <b>{esc(s.labels[s.io_primary])}:</b> "
                    f"{esc(f.statement if f else 'no plateau had data.')}</p>"
                )
        parts[0:0] = head
        same = [v for v in s.io_views if v != s.io_primary and v not in s.differ]
        if same:
            parts.append(
                f"<p>The {esc(' and '.join(s.labels[v] for v in same))} view{'s' if len(same) > 1 else ''} "
                f"measured the same plateaus as the {esc(s.labels[s.io_primary])} view within {VIEWS_DIFFER:.0%}: "
                "the same fit.</p>"
            )
        for v in s.differ:
            f = s.views[v].fit
            parts.append(
                f"<p><b>{esc(s.labels[v])} differs</b> by more than {VIEWS_DIFFER:.0%} from the "
                f"{esc(s.labels[s.io_primary])} view on some plateau: {esc(f.statement if f else 'no fit')}</p>"
            )
        parts.append(_fit_table(s))
        for v in dict.fromkeys([s.primary, s.io_primary, *s.differ]):
            f = s.views[v].fit if v else None
            for note in f.notes if f else []:
                parts.append(f'<p class="note">{esc(s.labels[v])}: {esc(note)}.</p>')
        if s.primary == APP:
            figures.append(_figure(ctx, s, [APP], "scalability-app"))
        if s.io_primary:
            figures.append(_figure(ctx, s, [s.io_primary, *s.differ], "scalability-usl"))
    if s.cvm is not None and s.primary != APP:
        parts.append(cvm_paragraph(s.cvm))
    parts.append(_plateau_table(s))
    return Section(
        id="scalability",
        title="Scalability (Universal Scalability Law)",
        html="".join(parts),
        figures=figures,
        csv={"scalability-plateaus.csv": _plateaus_csv(s)},
        page_break=True,
    )


def density_sentence(d: Density, unit: str) -> str:
    """The density line: the application's throughput at the largest N, % of linear, the peak."""
    what = "VM" if d.n_max == 1 else "VMs"
    text = (
        f"Density: {_fmt(d.n_max)} {what} together completed {_fmt(d.total)} {unit}, "
        f"{100 * d.linear_share:.1f} % of linear ({_fmt(d.n_max)} x {_fmt(d.per_vm)} {unit}, one VM's, "
        f"{d.per_vm_source})"
    )
    if d.peak_n is not None and d.peak_x is not None and d.peak_n <= d.n_max:
        text += f"; the fit peaked at {_sig3(d.peak_x)} {unit} near {_fmt(d.peak_n)} VMs: more VMs lowered the total"
    elif d.peak_n is not None and d.peak_x is not None:
        text += (
            f"; the fit predicts a peak of {_sig3(d.peak_x)} {unit} near {_fmt(d.peak_n)} VMs, beyond the "
            f"{_fmt(d.n_max)} measured: more VMs than that would lower the total"
        )
    elif d.fitted:
        text += "; the fit has no peak: every VM added still added throughput"
    else:
        text += "; no fit, so no peak can be told (see above)"
    return text + "."


def _density_paragraph(s: Scaling) -> str:
    if s.density is None:
        return (
            "<p><b>Density:</b> no plateau with one VM and no fit to give one VM's throughput: "
            "% of linear is not known.</p>"
        )
    return _labelled("density", density_sentence(s.density, s.unit(APP)))


def cvm_sentence(c: CvmOverhead) -> str:
    """The CVM overhead line: its number and what it means for density."""
    return (
        f"CVM overhead: the CVMs used {100 * c.mean:.1f} % of their hosts' CPU capacity over the range "
        f"(the busiest, on {c.busiest_host}, {100 * c.busiest:.1f} %; {c.hosts} host{'s' if c.hosts != 1 else ''}). "
        "That share of every host serves the storage and is not left for the application VMs: the "
        "density above is what remains."
    )


def cvm_paragraph(c: CvmOverhead) -> str:
    return _labelled("cvm", cvm_sentence(c))


def _labelled(cls: str, sentence: str) -> str:
    """A line whose label (up to its first colon) is bold: "<b>Density:</b> 8 VMs ..."."""
    label, _, rest = sentence.partition(": ")
    return f'<p class="{cls}"><b>{esc(label)}:</b> {esc(rest)}</p>'


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
    if abs(v) >= 999.5:  # 999.86 is "1,000", not "1e+03"
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def _spread(v: float) -> str:
    """A standard deviation to 0.1 (1e-12 of floating-point noise is 0), whole from 100 up (not 1.2e+02)."""
    if not math.isfinite(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 99.5 else _fmt(round(v, 1), 2)


def _sig3(v: float) -> str:
    """Three significant digits, as the fit's sentence words a peak (17,900, not 17,883)."""
    return _fmt(float(f"{v:.3g}"))


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
        for i, c in enumerate(f.coefficients()):
            ci = f" [{_fmt(c.low)}, {_fmt(c.high)}]" if c.low is not None else ""
            unit = f" {s.unit(v)}" if i == 2 else ""  # gamma: the view's throughput at 1
            cells.append(f"{_fmt(c.value)}{unit}{ci}{' (bound)' if c.at_bound else ''}")
        u = s.unit(v)
        peak = f"{_fmt(f.peak_x)} {u} at {_fmt(f.peak_n)}" if f.peak_n is not None else "none (kappa 0)"
        amdahl = f"{_fmt(f.amdahl_x)} {u}" if f.amdahl_x is not None else "none (sigma 0)"
        rows.append(
            f"<tr><th>{esc(s.labels[v])}</th>"
            + "".join(f"<td>{esc(c)}</td>" for c in cells)
            + f"<td>{'-' if f.r_squared is None else f'{f.r_squared:.4f}'}</td><td>{esc(peak)}</td><td>{esc(amdahl)}</td>"
            f"<td>{100 * (f.linear_share or 0):.0f} %</td></tr>"
        )
    level = next((vw.fit.level for vw in s.views.values() if vw.fit), 0.95)
    return (
        "<table class='kv usl'><thead><tr><th>view</th><th>sigma (contention)</th><th>kappa (coherency)</th>"
        f"<th>gamma (throughput at 1)</th><th>R squared</th><th>peak</th><th>Amdahl ceiling</th>"
        f"<th>% of linear at {esc(_fmt(max((p.concurrency for p in s.plateaus), default=0)))}</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<p class='note'>Brackets: {level:.0%} confidence intervals (Student's t on the plateaus' residual "
        "degrees of freedom).</p>"
    )


def _plateau_table(s: Scaling) -> str:
    views = list(s.views)
    head = "".join(f"<th>{esc(s.labels[v])} {esc(s.unit(v))}</th>" for v in views)
    head += "".join(f"<th>in flight, {esc(s.labels[v].split(' ')[0])}</th>" for v in s.io_views)
    rows = []
    for i, p in enumerate(s.plateaus):
        when = datetime.fromtimestamp(p.start, UTC).strftime("%H:%M:%S")
        cells = "".join(
            f"<td>{_fmt(s.views[v].throughput[i], 4)} &plusmn; {_spread(s.views[v].spread[i])}</td>" for v in views
        )
        cells += "".join(f"<td>{_fmt(s.views[v].in_flight[i], 3)}</td>" for v in s.io_views)
        rows.append(f"<tr><td>{_fmt(p.concurrency, 4)}</td><td>{when}</td><td>{p.length:.0f} s</td>{cells}</tr>")
    return (
        f"<table class='kv plateaus'><thead><tr><th>{esc(s.what)}</th><th>from (UTC)</th><th>settled</th>{head}"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<p class='note'>Plateau means &plusmn; standard deviation of the settled points; in flight: the "
        "I/Os outstanding by Little's law in each view (IO/s times mean latency), the concurrency the "
        "storage saw.</p>"
    )


def _plateaus_csv(s: Scaling) -> str:
    views = list(s.views)
    header = ["concurrency", "start_unix", "end_unix", "settled_seconds"]
    for v in views:
        q = "tps" if v == APP else "iops"  # the application's transactions per second, else IO/s
        header += [f"{v}_{q}_mean", f"{v}_{q}_std", f"{v}_in_flight"]
    rows = []
    for i, p in enumerate(s.plateaus):
        row: list[object] = [f"{p.concurrency:.6g}", f"{p.start:.0f}", f"{p.end:.0f}", f"{p.length:.0f}"]
        for v in views:
            row += [f"{s.views[v].throughput[i]:.6g}", f"{s.views[v].spread[i]:.6g}", f"{s.views[v].in_flight[i]:.6g}"]
        rows.append(row)
    return rows_csv(header, rows)


def _figure(ctx: ReportContext, s: Scaling, views: list[str], fig_id: str) -> Figure:
    """The plateaus and fits of ``views`` (the first drawn in full, with linear scaling and the
    Amdahl ceiling): the application's alone, or the I/O views'."""
    fig, ax = plt.subplots(figsize=(10.5, 4.2))
    n_max = max(p.concurrency for p in s.plateaus)
    lead = views[0]
    unit = s.unit(lead)
    primary = s.views[lead].fit
    top_n = n_max * 1.25
    if primary and primary.ok and primary.peak_n is not None and primary.peak_n < 2.5 * n_max:
        top_n = max(top_n, primary.peak_n * 1.2)
    grid = np.linspace(0, top_n, 300)[1:]
    y_max = 0.0
    rows: list[list[object]] = []
    for v in views:
        vf = s.views[v]
        color = COLORS.get(v, "#6a1b9a")
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
            style = "-" if v == lead else "--"
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
                    label=f"{s.labels[v]}: peak {fmt_ops(f.peak_x)} {unit} at {f.peak_n:.3g} {s.what}",
                )
    if primary and primary.ok and primary.gamma is not None:  # an ok fit has its coefficients
        g = primary.gamma.value
        y_max = max(y_max, float(np.max(primary.predict(grid))))
        ax.plot(grid, g * grid, ":", color="#616161", lw=1.1, label=f"linear: {fmt_ops(g)} {unit} per one")
        if primary.amdahl_x is not None:
            if primary.amdahl_x <= 2.0 * y_max:
                ax.axhline(
                    primary.amdahl_x,
                    color="#9e9e9e",
                    ls="-.",
                    lw=1.0,
                    label=f"Amdahl ceiling gamma/sigma {fmt_ops(primary.amdahl_x)} {unit}",
                )
            else:
                ax.plot(
                    [],
                    [],
                    color="#9e9e9e",
                    ls="-.",
                    lw=1.0,
                    label=f"Amdahl ceiling gamma/sigma {fmt_ops(primary.amdahl_x)} {unit} (above the chart)",
                )
    ax.set_xlim(0, top_n)
    ax.set_ylim(0, y_max * 1.3 if y_max > 0 else 1)
    ax.set_xlabel(f"offered concurrency ({s.what})")
    app = lead == APP
    ax.set_ylabel(f"throughput ({unit}, all VMs)" if app else "throughput (IO/s, read + write)")
    ax.yaxis.set_major_formatter(FuncFormatter(fmt_ops))
    if s.what == "VMs":  # whole VMs: no 0.5 VM tick
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if app:
        title = "The application's throughput against the VMs that run it (the control)"
    elif APP in s.views:
        title = "Beside it: the I/O views' throughput against the same VMs"
    else:
        title = "Throughput against concurrency: plateaus and the Universal Scalability Law"
    ax.set_title(title)
    ax.legend(loc="lower right", ncol=1)
    svg = to_svg(fig)
    what = "the transactions per second of every application VM together; " if app else ""
    caption = (
        f"Each point is one plateau of the ramp ({len(s.plateaus)} plateaus, {s.what}): {what}error bars are the "
        "standard deviation of its settled points. Solid: the USL fit; dotted: linear scaling from the "
        "fitted gamma; dash-dot: the contention (Amdahl) ceiling the curve could approach without coherency "
        "cost."
    )
    if app:
        promql = [ctx.rule(f"vm_app:ioparallax_app_transactions:rate{ctx.config.w}")]
    else:
        promql = [
            ctx.rule(f"vm_disk:ioparallax_{v}_{d}_ops:{'avg' if v == 'storage' else 'rate'}{ctx.config.w}")
            for v in s.io_views
            for d in ("read", "write")
        ] + [ctx.rule("vm_disk:ioparallax_guest_iodepth:sum")]
    return Figure(
        id=fig_id,
        caption=caption,
        svg=svg,
        promql=promql,
        csv=rows_csv(["view", "kind", "concurrency", "tps" if app else "iops", "std"], rows),
    )
