"""A page per VM disk: its verdicts, the identity chain, the three views overlaid, read sources and
write destinations, latency distributions guest vs storage. With --compare, the other data set is
drawn dashed on the same axes."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

import numpy as np
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter

from ioparallax.report.analysis import Side, VerdictTable, guest_devices, partitions
from ioparallax.report.context import ReportContext
from ioparallax.report.data import DIRECTIONS, QUANTITIES, Dataset, Key
from ioparallax.report.figures import (
    COLORS,
    LABELS,
    as_dates,
    axes_points,
    flat_index,
    fmt_seconds,
    has_data,
    headroom,
    line,
    reused,
    rows_csv,
    series_csv,
    stack,
    thin,
    thin_index,
    time_axis,
    to_svg,
    unit_axis,
)
from ioparallax.report.sections import Figure, Section, esc
from ioparallax.report.summary import disk_anchor, fmt_time, verdict_cell
from ioparallax.report.svgcache import legend
from ioparallax.report.verdicts import TRAPS

ZERO_SOURCES = ("zero",)
TITLES = {"ops": "Operations (IO/s)", "bytes": "Throughput (bytes/s)", "latency_seconds": "Mean latency"}
LAYER_STYLE: dict[str, dict[str, Any]] = {
    "guest": {"lw": 4.5, "alpha": 0.45},
    "guest_os": {"lw": 1.2, "ls": ":"},
    "vm": {"lw": 2.2, "alpha": 0.9},
    "storage": {"lw": 1.0},
}  # any source/destination whose name contains it (estore_zero, oplog_zero, zero)


# The compare side's context and data, drawn dashed (None without --compare).
Other = tuple[ReportContext, Dataset] | None
# (ctx, dataset, verdicts, other) for the forked workers, set by disk_sections while they run.
_WORK: tuple[ReportContext, Dataset, VerdictTable, Other] | None = None


def _one(key: Key) -> Section:
    assert _WORK is not None, "set by disk_sections before any page is drawn"
    ctx, ds, table, other = _WORK
    return disk_section(ctx, ds, key, table.get(key, {}), other)


def _many(keys: list[Key]) -> list[Section]:
    return [_one(k) for k in keys]


def disk_sections(a: Side, b: Side | None) -> list[Section]:
    """A page per VM disk of side ``a``, with side ``b`` (--compare) drawn dashed. Drawing is most
    of the report's time, so with more than a few disks the pages are drawn by this process and
    forked worker processes, one per core in all (they inherit the data, and send back only the
    finished HTML and CSV text). This process draws too rather than wait: each forked worker
    counts the pages it shares with this process (the libraries, the data) in its own resident
    memory, so one worker fewer is ~150 MB less for the process tree at 100 VM disks, for the
    same use of the cores."""
    global _WORK
    ctx, ds = a.ctx, a.data
    table = a.verdicts.get()
    other = (b.ctx, b.data) if b is not None else None
    keys = ds.disks()
    _WORK = (ctx, ds, table, other)
    try:
        workers = min(len(keys), os.cpu_count() or 1, 8)
        if workers < 2 or len(keys) < 4 or "fork" not in mp.get_all_start_methods():
            return [_one(k) for k in keys]
        chunks = guided(keys, workers)
        done: list[list[Section] | None] = [None] * len(chunks)
        with ProcessPoolExecutor(max_workers=workers - 1, mp_context=mp.get_context("fork")) as pool:
            pending: dict[Future, int] = {}
            taken = 0

            def feed() -> None:  # two chunks in hand per worker, so that none waits for the next
                nonlocal taken
                while taken < len(chunks) and len(pending) < 2 * (workers - 1):
                    pending[pool.submit(_many, chunks[taken])] = taken
                    taken += 1

            feed()  # the workers fork now, before this process draws anything
            while taken < len(chunks) or pending:
                if taken < len(chunks):  # this process draws the next chunk itself
                    i, taken = taken, taken + 1
                    done[i] = _many(chunks[i])
                elif pending:
                    wait(pending, return_when=FIRST_COMPLETED)
                for f in [f for f in pending if f.done()]:
                    done[pending.pop(f)] = f.result()
                feed()
        return [section for chunk in done for section in chunk or []]
    finally:
        _WORK = None


def guided(keys: list[Key], workers: int) -> list[list[Key]]:
    """The pages in chunks of decreasing size (guided scheduling): large first, few hand-overs;
    single pages at the end, so that no process waits long for another's last chunk (12 pages
    at a time left one process idle for up to 12 pages' drawing at the end, seconds on a loaded
    machine)."""
    out, i = [], 0
    while i < len(keys):
        size = max(1, (len(keys) - i) // (4 * workers))
        out.append(keys[i : i + size])
        i += size
    return out


def _new(figsize: tuple[float, float], **grid) -> tuple[MplFigure, object]:
    fig = MplFigure(figsize=figsize)
    return fig, fig.subplots(**grid)


def fid(key: Key, what: str) -> str:
    return f"{disk_anchor(key)}-{what}"


def disk_section(ctx: ReportContext, ds: Dataset, key: Key, row: dict, other: Other) -> Section:
    parts = []
    if row:
        head = "".join(f"<th>{esc(TRAPS[t][0])}</th>" for t in row)
        parts.append(
            f'<table class="verdicts one"><thead><tr>{head}</tr></thead><tbody><tr>'
            + "".join(verdict_cell(ctx, v) for v in row.values())
            + "</tr></tbody></table>"
        )
    ident_html, ident_csv = identity(ds, key)
    parts.append(ident_html)
    figures = [
        three_views(ctx, ds, key, other),
        read_sources(ctx, ds, key, other, "read_sources"),
        read_sources(ctx, ds, key, other, "write_destinations"),
        latency_distribution(ctx, ds, key),
    ]
    return Section(
        id=disk_anchor(key),
        title=f"{key[0]} {key[1]}",
        html="".join(parts),
        figures=figures,
        csv={f"{disk_anchor(key)}-identity.csv": ident_csv},
        promql=[
            ds.promql[f]
            for f in (
                "vdisk_info",
                "vm_source",
                "vcenter_disk_info",
                "prism_disk_info",
                "guest_disk_info",
                "fio_disk_info",
                "partitions",
            )
        ],
        page_break=True,
    )


# -- identity chain ---------------------------------------------------------------------------


def identity(ds: Dataset, key: Key) -> tuple[str, str]:
    vc = [
        r["metric"]
        for r in ds.instant.get("vcenter_disk_info", [])
        if (r["metric"].get("vm"), r["metric"].get("disk")) == key
    ]
    prism = [
        r["metric"]
        for r in ds.instant.get("prism_disk_info", [])
        if (r["metric"].get("vm"), r["metric"].get("disk")) == key
    ]
    source, period = ds.vm_source_of.get(key, ("prism" if prism and not vc else "vcenter", 0.0))
    uuid = vc[0].get("disk_uuid", "") if vc else (prism[0].get("disk_uuid", "") if prism else "")
    devices = guest_devices(ds, key)
    serials = sorted(
        {
            r["metric"].get("serial", "")
            for r in ds.instant.get("fio_disk_info", [])
            if (r["metric"].get("instance", ""), r["metric"].get("disk", "")) in devices
        }
    )
    parts = partitions(ds, key)
    part_text = (
        "raw device (no partition)"
        if parts == {}
        else ", ".join(f"{p} at {s:,.0f} B{'' if s % 4096 == 0 else ' (misaligned)'}" for p, s in sorted(parts.items()))
        if parts
        else ""
    )

    def seen(fam: str, label: str) -> str:
        return ", ".join(
            sorted(
                {
                    m.get(label, "")
                    for m, v in ds.labelled.get(fam, [])
                    if (m.get("vm"), m.get("disk")) == key and np.any(~np.isnan(v))
                }
            )
        )

    view = (
        f"{'Prism' if source == 'prism' else 'vCenter'}" + (f", {period:g} s samples" if period else "")
        if vc or prism or key in ds.vm_source_of
        else ""
    )
    vm_counters = (
        "AHV: Prism's hypervisor_* statistics" if source == "prism" else "ESXi: vCenter's performance counters"
    )
    rows = [
        ("Measured by", seen("guest_tool", "tool"), "guest view's load generator (vm_disk:ioparallax_guest_tool:info)"),
        ("Guest OS view", seen("guest_os_source", "source"), "vm_disk:ioparallax_guest_os_source:info"),
        ("VM view", view, f"vm_disk:ioparallax_vm_source:info ({vm_counters})"),
    ]
    if source == "prism":
        rows += [
            ("VM", key[0], "Prism (prism_virtual_disk_info)"),
            ("Virtual disk", key[1], "Prism (disk_address)"),
            ("Backing file", prism[0].get("nfs_path", "") if prism else "", "Prism (NFS path)"),
            ("Disk UUID", uuid, "Prism (vmdisk UUID); inside the guest's disk serial"),
        ]
    else:
        rows += [
            ("VM", key[0], "vCenter (vcenter_virtual_disk_info)"),
            (
                "Virtual disk",
                key[1] + (f" ({vc[0].get('label', '')})" if vc and vc[0].get("label") else ""),
                "vCenter",
            ),
            ("Backing file", vc[0].get("backing_file", "") if vc else "", "vCenter"),
            ("Disk UUID", uuid, "vCenter; the guest's disk serial"),
        ]
    rows += [
        ("Vdisk id", ds.vdisk_of.get(key, ""), "Stargate (stargate_vdisk_info)"),
        ("Guest device", ", ".join(f"{d} on {i}" for i, d in devices), "guest (fio exporter)"),
        ("Disk serial", ", ".join(serials), "guest sysfs (fio_guest_disk_info)"),
        ("Partition start", part_text, "guest sysfs (fio_guest_partition_start_bytes)"),
    ]
    body = "".join(
        f"<tr><th>{esc(a)}</th><td>{esc(b) if b else '<span class=nm-text>not known</span>'}</td>"
        f"<td class='src'>{esc(c)}</td></tr>"
        for a, b, c in rows
    )
    html = f'<h3>Identity chain</h3><table class="identity"><tbody>{body}</tbody></table>'
    return html, rows_csv(["field", "value", "source"], rows)


# -- three views ------------------------------------------------------------------------------


def _shift(ctx: ReportContext, other_ctx: ReportContext) -> float:
    return ctx.start - other_ctx.start


def three_views(ctx: ReportContext, ds: Dataset, key: Key, other: Other) -> Figure:
    id_ = fid(key, "three-views")
    fams = [
        f"{layer}_{d}_{q}"
        for q in QUANTITIES
        for d in DIRECTIONS
        for layer in ("guest", "guest_os", "vm", "storage", "fio", "vcsample")
    ]
    promql = [ds.promql[f] for f in fams if f in ds.promql]
    if not any(has_data(ds.get(f, key)) for f in fams):
        return Figure.empty(id_, "Three views: no view has ops, bytes or latency for this disk in the range.", promql)
    times = ds.times
    dates = as_dates(times)
    source, period = ds.vm_source_of.get(key, ("vcenter", 20.0))
    manager = "Prism" if source == "prism" else "vCenter"
    fig, axes = reused("three-views", lambda: _new(figsize=(10.5, 8.2), nrows=3, ncols=2, sharex=True))
    # Fixed margins, not tight_layout: laying out by measuring every tick label costs most of the
    # drawing time, and every disk's figure has the same labels' sizes. Set first: the lines are
    # thinned to the axes' width.
    fig.subplots_adjust(left=0.085, right=0.99, top=0.96, bottom=0.1, hspace=0.28, wspace=0.16)
    columns: dict[str, np.ndarray] = {}
    handles: dict[str, Any] = {}  # label -> the line's style, the first of that label (the legend's order)

    def draw(ax, data: Dataset, x: np.ndarray, family: str, label: str, column: str | None, **style: Any) -> bool:
        """Draw the disk's ``family`` of ``data`` if it has values, kept as ``column`` of the CSV
        (None: not kept); whether it was drawn."""
        y = data.get(family, key)
        if not has_data(y):
            return False
        handles.setdefault(label, line(ax, *thin(ax, x, y), **style))
        if column:
            columns[column] = y
        return True

    for r, q in enumerate(QUANTITIES):
        for c, d in enumerate(DIRECTIONS):
            ax = axes[r][c]
            drawn = draw(
                ax,
                ds,
                dates,
                f"fio_{d}_{q}",
                "guest, fio 1 s interval",
                f"guest_fio_interval_{d}_{q}",
                color=COLORS["guest"],
                lw=0.7,
                alpha=0.45,
            )
            drawn |= draw(
                ax,
                ds,
                dates,
                f"vcsample_{d}_{q}",
                f"VM, {manager} {period:g} s sample",
                f"vm_{source}_sample_{d}_{q}",
                color=COLORS["vm"],
                lw=0.9,
                alpha=0.6,
                drawstyle="steps-post",
                ls="--",
            )
            for layer in ("guest", "guest_os", "vm", "storage"):
                # Views that agree draw on top of each other: wide to narrow, so each stays visible.
                label = f"{LABELS[layer].replace('(vCenter)', f'({manager})')}, {ctx.config.w}"
                style = {"color": COLORS[layer], **LAYER_STYLE[layer]}
                drawn |= draw(ax, ds, dates, f"{layer}_{d}_{q}", label, f"{layer}_{d}_{q}", **style)
            if other is not None:
                octx, ods = other
                odates = as_dates(ods.times + _shift(ctx, octx))
                for layer in ("guest", "vm", "storage"):
                    style = {"color": COLORS[layer], "ls": (0, (4, 2)), "lw": 1.1, "alpha": 0.8}
                    drawn |= draw(ax, ods, odates, f"{layer}_{d}_{q}", f"{octx.label}: {LABELS[layer]}", None, **style)
            ax.set_title(f"{TITLES[q]}, {d}s")
            unit_axis(ax, q)
            headroom(ax)
            if not drawn:
                ax.text(
                    0.5, 0.5, f"no {d}s in any view", transform=ax.transAxes, ha="center", va="center", color="#757575"
                )
    time_axis(axes[0][0], times)  # the axes share x: one call sets them all
    labels = list(handles)
    legend(fig, [handles[label] for label in labels], labels, loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.0))
    caption = (
        f"The three views of the same I/O, per direction: guest (fio), guest OS block layer, VM ({manager}) "
        f"and storage (Stargate) over {ctx.config.w}, with the raw instants beside them: fio's per-second "
        f"interval (thin green) and {manager}'s {period:g} s samples drawn as steps (dashed blue). A burst "
        f"shorter than {period:g} s is tall in fio and flattened in the steps. Latency is op-weighted, so "
        f"not diluted."
    )
    if other is not None:
        caption += (
            f" Dashed: {other[0].label} ({fmt_time(other[0].start)} - {fmt_time(other[0].end)}), shifted to this range."
        )
    return Figure(id_, caption, to_svg(fig), promql, series_csv(times, columns))


# -- read sources / write destinations ---------------------------------------------------------


def read_sources(ctx: ReportContext, ds: Dataset, key: Key, other: Other, kind: str) -> Figure:
    label = "source" if kind == "read_sources" else "destination"
    title = "Read sources" if kind == "read_sources" else "Write destinations"
    id_ = fid(key, kind.replace("_", "-"))
    promql = [ds.promql[kind]]
    vd = ds.vdisk_of.get(key)
    if kind in ds.errors:
        return Figure.empty(id_, f"{title}: the query failed ({ds.errors[kind]}).", promql)
    if "storage" in ds.missing_views:
        return Figure.empty(id_, f"{title}: the storage view is missing ({ds.missing_views['storage']}).", promql)
    if not vd:
        return Figure.empty(
            id_,
            f"{title}: no vdisk is mapped to this VM disk (stargate_vdisk_info has no vm/disk labels for it).",
            promql,
        )
    rows = sorted((m.get(label, "?"), v) for m, v in ds.labelled.get(kind, []) if m.get("vdisk_id") == vd)
    rows = [(n, v) for n, v in rows if has_data(v)]
    if not rows or all(np.nanmax(v) <= 0 for _, v in rows):
        return Figure.empty(
            id_,
            f"{title} of vdisk {vd}: none in the range (the vdisk was not "
            f"{'read' if kind == 'read_sources' else 'written'}).",
            promql,
        )
    times = ds.times
    dates = as_dates(times)
    fig, ax = reused("stacked", lambda: _new(figsize=(10.5, 2.9)))
    fig.subplots_adjust(left=0.085, right=0.8, top=0.88, bottom=0.12)
    palette = ["#90caf9", "#a5d6a7", "#ffcc80", "#ce93d8", "#80cbc4", "#bcaaa4", "#b0bec5", "#fff59d"]
    ys, colors, names, hatches = [], [], [], []
    i = 0
    zero_names = []
    for n, v in rows:
        ys.append(np.nan_to_num(v, nan=0.0))
        is_zero = any(z in n.lower() for z in ZERO_SOURCES)
        colors.append(COLORS["zero"] if is_zero else palette[i % len(palette)])
        hatches.append("///" if is_zero else None)
        names.append(f"{n} (zero bucket)" if is_zero else n)
        if is_zero:
            zero_names.append(n)
        else:
            i += 1
    # Thinned at the highest and lowest total of each bucket: every layer at the same instants.
    idx = thin_index(np.sum(ys, axis=0), axes_points(ax), flat=False)
    idx = idx[flat_index(np.vstack(ys)[:, idx])]
    polys = stack(ax, dates[idx], [y[idx] for y in ys], colors, names, 0.9)
    for p, h in zip(polys, hatches):
        if h:
            p.set_hatch(h)
            p.set_edgecolor("white")
    compare_total = None
    if other is not None:
        octx, ods = other
        ovd = ods.vdisk_of.get(key)
        tot = [v for m, v in ods.labelled.get(kind, []) if ovd and m.get("vdisk_id") == ovd]
        if tot:
            total = np.nansum(np.vstack(tot), axis=0)
            compare_total = line(
                ax, *thin(ax, as_dates(ods.times + _shift(ctx, octx)), total), color=COLORS["compare"], ls=(0, (4, 2))
            )
    unit_axis(ax, "bytes")
    headroom(ax)
    time_axis(ax, times)
    ax.set_title(f"{title} of vdisk {vd} (Stargate), stacked")
    handles, labels = ax.get_legend_handles_labels()
    if compare_total is not None:
        handles.append(compare_total)
        labels.append(f"{other[0].label}: total")  # type: ignore[index]
    legend(ax, handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    zero = (
        f" Zero buckets ({', '.join(zero_names)}) are red and hatched: bytes no disk "
        f"{'read' if kind == 'read_sources' else 'stored'}."
        if zero_names
        else (
            " The page shows no zero bucket here."
            if kind == "read_sources"
            else " The page shows no zero destination: on 2014/2015 builds zero writes count as Oplog, so they "
            "cannot be told apart."
        )
    )
    caption = f"{title} of the vdisk behind this VM disk, bytes/s as the Stargate page reports them.{zero}"
    return Figure(id_, caption, to_svg(fig), promql, series_csv(times, dict(rows)))


# -- latency distribution ---------------------------------------------------------------------


def _buckets(results: list[dict], match) -> tuple[np.ndarray, np.ndarray] | None:
    pts = []
    for r in results:
        m = r["metric"]
        if match(m):
            le = m.get("le", "+Inf")
            pts.append((float("inf") if le in ("+Inf", "Inf") else float(le), float(r["value"][1])))
    if not pts:
        return None
    pts.sort()
    les = np.array([p[0] for p in pts])
    cum = np.array([p[1] for p in pts])
    if cum[-1] <= 0:
        return None
    return les, cum / cum[-1]


def latency_distribution(ctx: ReportContext, ds: Dataset, key: Key) -> Figure:
    id_ = fid(key, "latency")
    fams = [f"{view}_latency_{d}" for d in DIRECTIONS for view in ("guest", "storage")]
    promql = [ds.promql[f] for f in fams]
    vd = ds.vdisk_of.get(key)
    data = {}
    for d in DIRECTIONS:
        data[("guest", d)] = _buckets(
            ds.instant.get(f"guest_latency_{d}", []), lambda m: (m.get("vm"), m.get("disk")) == key
        )
        data[("storage", d)] = _buckets(
            ds.instant.get(f"storage_latency_{d}", []), lambda m: vd is not None and m.get("vdisk_id") == vd
        )
    if not any(v is not None for v in data.values()):
        why = "; ".join(f"{v} missing ({ds.missing_views[v]})" for v in ("guest", "storage") if v in ds.missing_views)
        return Figure.empty(
            id_,
            "Latency distribution: neither fio's clat histogram nor the Stargate page's "
            "latency histogram has completions for this disk in the range" + (f" ({why})" if why else "") + ".",
            promql,
        )
    fig, axes = reused("latency", lambda: _new(figsize=(10.5, 2.9), nrows=1, ncols=2))
    rows: list[tuple[str, str, str, str]] = []
    for ax, d in zip(axes, DIRECTIONS):
        drawn = False
        handles: list[Any] = []
        labels: list[str] = []
        for view, color in (("guest", COLORS["guest"]), ("storage", COLORS["storage"])):
            b = data[(view, d)]
            if b is None:
                continue
            les, cdf = b
            finite = np.isfinite(les)
            handles.append(line(ax, les[finite], cdf[finite], drawstyle="steps-post", color=color))
            labels.append("guest (fio clat)" if view == "guest" else "storage (Stargate frontend)")
            rows.extend((view, d, f"{le:g}", f"{c:.6f}") for le, c in zip(les, cdf))
            drawn = True
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(fmt_seconds))
        ax.set_ylim(0, 1.02)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: f"{y * 100:.0f} %"))
        ax.set_title(f"Latency distribution, {d}s (share of I/Os at or below)")
        if drawn:
            legend(ax, handles, labels, loc="lower right")
        else:
            ax.text(0.5, 0.5, f"no {d} completions", transform=ax.transAxes, ha="center", va="center", color="#757575")
    fig.subplots_adjust(left=0.07, right=0.99, top=0.88, bottom=0.14, wspace=0.14)
    caption = (
        "Cumulative latency distribution over the whole range: the guest's (fio completion latency "
        "buckets) against the storage's (the Stargate page's frontend histogram, averaged). The gap between "
        "the curves is the stack in between (guest kernel, hypervisor, network); a storage curve far left of "
        "what media can do means zeros or cache."
    )
    return Figure(
        id_, caption, to_svg(fig), promql, rows_csv(["view", "direction", "le_seconds", "share_at_or_below"], rows)
    )
