"""The Three views dashboard (ioparallax-three-views.json): one VM disk seen by the guest, the VM
and the storage, side by side.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, RI, VMDISK, Expr, braces, new_dashboard, vm_source_panel
from ioparallax.mixin.dashboards.esxtop import PEAK_RATIO, SAMPLE_LEGEND, sample_overlay
from ioparallax.mixin.dashboards.panels import LAYER_COLORS, Q, labelled, note, row, tbl, ts

# The guest OS view (node_exporter diskstats) beside fio's: a colour of its own, solid (dashed is
# for the raw instants).
GUEST_OS_COLOR = "purple"
# esxtop's 2 s VM view: the VM's blue, darker (dashed like the other raw samples).
ESXTOP_COLOR = "dark-blue"

TEXT_ZERO = """
**Storage far below guest and VM (ops and bytes):** zero suppression. The storage keeps all-zero
blocks as metadata and reads unwritten regions without a disk: check the zero share on the
*vDisk deep dive*, and the fio job's `zero_buffers` / `buffer_compress_percentage` on *fio jobs*.
"""
TEXT_AVG = """
**Guest far above VM in throughput, same latency:** averaging. vCenter publishes 20 s averages; a
1 s burst at rate R reads as R/20. fio's own 1 s interval numbers (dotted) and the burstiness ratio
show it. Ratios of rates (mean latency) are not diluted, so latency still agrees.
"""
TEXT_SPLIT = """
**Ops differ, bytes agree:** request splitting. The guest block layer splits requests above
`max_sectors_kb` (a 1 MiB write can be two 512 KiB device writes), and the storage may split or
merge again. Compare bytes across layers, not IOPS. The guest OS series (purple, node_exporter's
diskstats) show it inside the guest: twice fio's ops for 1 MiB I/O at 512 KiB, the same bytes
(*guest OS / fio ops* below).
"""
TEXT_POINT = """
**Latency guest > VM > storage:** point of measurement. fio's completion latency includes the
syscall and reaping; vCenter's includes the hypervisor stack; Stargate's starts at the CVM. The
gaps are where the time goes: a large guest-VM gap is the guest, a large VM-storage gap the
network and hypervisor.
"""


def three_views(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    t = cfg.thresholds
    d = new_dashboard(
        cfg,
        "three-views",
        "ioparallax / Three views",
        "One VM disk seen by the guest (its load generator: fio, DiskSPD or vdbench; and its OS by "
        "node_exporter or windows_exporter; 'Who measured' says which), the VM "
        "(vCenter on ESXi, Prism on AHV) and the storage (Stargate): ops, "
        "bytes and latency overlaid per direction, the ratios between the views, and what a "
        "gap means.",
    )
    d.with_panel(vm_source_panel(e))
    colors = {f"{layer} {{dir}}": c for layer, c in LAYER_COLORS.items()}
    colors["guest OS {dir}"] = GUEST_OS_COLOR
    colors[SAMPLE_LEGEND.format(d="{dir}")] = ESXTOP_COLOR
    quantities = (
        (
            "ops",
            "Operations per second",
            "iops",
            "ops",
            "fio_{d}_interval_iops",
            "sample_{d}_ops_per_second",
        ),
        (
            "bytes",
            "Throughput",
            "binBps",
            "bytes",
            "fio_{d}_interval_bandwidth_bytes_per_second",
            "sample_{d}_bytes_per_second",
        ),
        (
            "latency_seconds",
            "Mean latency",
            "s",
            "latency",
            "fio_{d}_interval_clat_mean_seconds",
            "sample_{d}_latency_precise_seconds",
        ),
    )

    def fio_instant(metric: str) -> str:
        # An interval's mean latency exists only for intervals with completions (absent, not 0):
        # between bursts the latest one stands, so the panel has a value at every instant.
        if "clat_mean" in metric:
            return e.fio_join(f"last_over_time({metric}{e.sel('fio')}[{RI}])")
        return e.fio(metric)

    def vdbench_instant(quantity: str, dr: str) -> str:
        # vdbench's own latest interval of each host's running run (vdbench prints rates, both
        # directions together: split by its read share), on the selected VM disks.
        vd = e.sel("vdbench")
        share = (
            f"vdbench_host_interval_read_ratio{vd}" if dr == "read" else f"(1 - vdbench_host_interval_read_ratio{vd})"
        )
        metric = {
            "ops": f"vdbench_host_interval_iops{vd} * {share}",
            "bytes": f"vdbench_host_interval_bandwidth_bytes_per_second{vd} * {share}",
            "latency_seconds": f"vdbench_host_interval_{dr}_response_mean_seconds{vd}",
        }[quantity]
        agg = "avg" if quantity == "latency_seconds" else "sum"
        return (
            f"{agg} by (vm, disk) (\n  ({metric})\n  * on (instance, job, source, host) group_left (vm, disk) "
            f"guest_host:ioparallax_vdbench_vm_disk:info{braces(VMDISK)}\n"
            f"  and on (instance, job, source, run, seq, host) (vdbench_host_finished{vd} == 0)\n)"
        )

    for quantity, title, unit, short, fio_raw, vc_raw in quantities:
        d.with_row(row(f"{title}: guest / VM / storage"))
        for dr in DIRECTIONS:
            agg = "sum by (vm, disk)" if quantity != "latency_seconds" else "avg by (vm, disk)"
            d.with_panel(
                ts(
                    f"{title}, {dr}s",
                    f"{title} of {dr}s on the VM disk, as each view reports it over {cfg.w}: guest = the load "
                    f"generator, fio, DiskSPD or vdbench (vm_disk:ioparallax_guest_*), guest OS = the guest's block "
                    f"layer after request splitting or a Windows guest's disk (node_exporter diskstats or "
                    f"windows_exporter, vm_disk:ioparallax_guest_os_*, purple), "
                    f"VM = vCenter integrated counters (Prism's on AHV), storage = Stargate "
                    f"(averaged page gauges). Dashed: the raw instants, fio's own 1 s interval (or vdbench's "
                    f"latest interval), vCenter's latest 20 s sample (Prism's 30 s one on AHV) and, on ESXi "
                    f"hosts with an esxtop capture, esxtop's latest 2 s sample (the VM view a burst is not "
                    f"averaged away in). "
                    + (
                        "Op-weighted means: not diluted by the window."
                        if short == "latency"
                        else "Bursts shorter than the window are averaged down."
                    ),
                    unit,
                    [
                        Q(e.vm_disk("guest", dr, quantity), f"guest {dr}"),
                        Q(e.vm_disk("guest_os", dr, quantity), f"guest OS {dr}"),
                        Q(e.vm_disk("vm", dr, quantity), f"VM {dr}"),
                        Q(e.vm_disk("storage", dr, quantity), f"storage {dr}"),
                        Q(f"{agg} ({fio_instant(fio_raw.format(d=dr))})", f"guest {dr}, fio 1 s interval"),
                        Q(vdbench_instant(quantity, dr), f"guest {dr}, vdbench interval"),
                        Q(e.vm_sample(vc_raw.format(d=dr)), f"VM {dr}, vCenter 20 s / Prism 30 s sample"),
                        sample_overlay(e, quantity, dr),
                    ],
                    colors={k.format(dir=dr): c for k, c in colors.items()},
                    dashed=[".*(interval|sample)$"],
                )
            )
    d.with_row(row("Ratios between the views"))
    for what in ("bytes", "ops"):
        d.with_panel(
            ts(
                f"{what.capitalize()}: guest / VM and storage / VM",
                f"{what.capitalize()} of the guest and of the storage over the VM's, read and write together, "
                f"over {cfg.w}. 1: the views agree."
                + (
                    " Guest OS / fio: the guest's block-layer requests over fio's ops, the request splitting "
                    "factor (2 for 1 MiB I/O at a 512 KiB max_sectors_kb)."
                    if what == "ops"
                    else ""
                ),
                "none",
                [Q(e.ratio(f"guest_to_vm_{what}"), "guest / VM"), Q(e.ratio(f"storage_to_vm_{what}"), "storage / VM")]
                + ([Q(e.ratio("guest_os_to_fio_ops"), "guest OS / fio")] if what == "ops" else []),
                w=8,
                limit=t.views_bytes_ratio if what == "bytes" else None,
                colors={
                    "guest / VM": LAYER_COLORS["guest"],
                    "storage / VM": LAYER_COLORS["storage"],
                    "guest OS / fio": GUEST_OS_COLOR,
                },
            )
        )
    d.with_panel(
        ts(
            "Latency: guest / VM and storage / VM",
            f"Op-weighted mean latency of the guest and of the storage over the VM's, per direction, over {cfg.w}. "
            "Guest above 1: the guest's own stack; storage below 1: the hypervisor and network between.",
            "none",
            [
                Q(e.ratio(f"{layer}_to_vm_{dr}_latency"), f"{layer} / VM {dr}")
                for layer in ("guest", "storage")
                for dr in DIRECTIONS
            ],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Queue depth: asked vs implied",
            "The guest's asked concurrency (sum of fio iodepth of the jobs "
            "on the disk) against the VM's mean outstanding I/Os implied by Little's law (integrated "
            "latency per second). The VM's far below the guest's: the I/O came in bursts, or, for buffered "
            "jobs, the asked depth was never reached.",
            "short",
            [
                Q(e.rule("vm_disk:ioparallax_guest_iodepth:sum"), "guest iodepth"),
                Q(e.rule(f"vm_disk:ioparallax_vm_outstanding_ios:rate{cfg.w}"), "VM implied outstanding I/Os"),
            ],
            w=9,
        )
    )
    d.with_panel(
        labelled(
            "Guest I/O",
            "Whether a running fio job on the disk does buffered I/O (direct=0; "
            "vm_disk:ioparallax_guest_buffered_io:bool). Buffered libaio is synchronous: the asked iodepth "
            "is never reached, so the burstiness ratio is not computed and IoparallaxAskedQueueDepthNotReached "
            "judges the gap instead.",
            "none",
            [Q(e.rule("vm_disk:ioparallax_guest_buffered_io:bool"), "{{vm}} {{disk}}")],
            {0: ("direct", "green"), 1: ("buffered", "orange")},
            no_value="no running fio job",
        )
    )
    d.with_panel(
        ts(
            "Burstiness and guest peak / VM sample",
            "Burstiness: guest iodepth / VM implied concurrency "
            "(~1 steady; not computed for buffered jobs). Guest peak / VM sample: fio's highest interval bytes/s over vCenter's highest 20 s "
            "sample. esxtop 2 s peak / 20 s sample (ESXi hosts with an esxtop capture): the highest esxtop "
            "sample over vCenter's highest, the VM view's own measure of the bursts (what "
            "IoparallaxBurstAveragedAway judges where it exists). Any far above 1: the VM's 20 s throughput "
            "panels under-read the bursts.",
            "none",
            [
                Q(e.ratio("burstiness"), "burstiness"),
                Q(e.ratio("guest_peak_to_vm_sample_bytes"), "guest peak / VM sample"),
                Q(e.ratio(PEAK_RATIO), "esxtop 2 s peak / 20 s sample"),
            ],
            w=12,
            limit=t.burstiness_ratio,
        )
    )
    d.with_row(row("Who measured"))
    d.with_panel(
        tbl(
            "Guest tools",
            "Which load generator gives the guest view of each VM disk (vm_disk:ioparallax_guest_tool:info: "
            "fio, diskspd, vdbench) and which exporter its guest OS view (vm_disk:ioparallax_guest_os_source:info: "
            "node_exporter in Linux guests, windows_exporter in Windows guests).",
            "none",
            [
                e.rule("vm_disk:ioparallax_guest_tool:info"),
                e.rule("vm_disk:ioparallax_guest_os_source:info"),
            ],
            w=12,
            h=6,
            hide=("Time", "__name__", "Value", "Value #A", "Value #B"),
        )
    )
    d.with_panel(
        ts(
            "Windows split I/Os",
            "Share of the VM disk's I/Os that Windows split into several (windows_exporter split_ios_total over "
            "reads and writes; vm_disk:ioparallax_guest_os_split_ios:ratio): near 1 on a partition off the "
            f"4 KiB grid, about 0 aligned. A misalignment hint (IoparallaxGuestSplitIo above {t.split_io_ratio:g}, "
            "dashed); Windows guests only.",
            "percentunit",
            [Q(e.ratio("guest_os_split_ios"), "{{vm}} {{disk}}")],
            w=12,
            h=6,
            limit=t.split_io_ratio,
        )
    )
    d.with_row(row("What a gap means"))
    for title, body in (
        ("Zero suppression", TEXT_ZERO),
        ("Averaging", TEXT_AVG),
        ("Request splitting", TEXT_SPLIT),
        ("Point of measurement", TEXT_POINT),
    ):
        d.with_panel(
            note(
                title,
                f"How to read a gap between the views: {title.lower()} (docs/dashboards.md, distortions reference).",
                body,
                w=6,
                h=7,
            )
        )
    return d
