"""The ioparallax Grafana dashboards, as code (grafana-foundation-sdk, Grafana 11.6 build).

``build_dashboards(cfg)`` returns {file name: dashboard JSON model}; ``write_dashboards(cfg,
outdir)`` writes them with sorted keys and 2-space indents, so regenerating from the same config
gives the same bytes (tests/dashboards checks it against the committed dashboards/).

One variable vocabulary on every dashboard: ``$datasource``, ``$vm`` and ``$disk`` (from the
recording rule ``vm_disk:ioparallax_vm_source:info``: the VM disks vCenter or Prism knows; the VM
disk is the join key of the three views) and ``$vdisk``
(``stargate_vdisk_info`` of that VM disk). Guest series join through the recording rule
``guest_device:ioparallax_guest_disk:info``; storage series through ``stargate_vdisk_info``.
See docs/dashboards.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

from ioparallax.mixin.cluster import per_cluster, select_cluster
from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards_panels import (
    DATASOURCE,
    LAYER_COLORS,
    ZERO_COLOR,
    Q,
    heat,
    labelled,
    note,
    row,
    single,
    tbl,
    ts,
)
from ioparallax.mixin.queries import panels
from ioparallax.mixin.vmview import SAMPLE_SECONDS, Source, either

DIRECTIONS = ("read", "write")
RI = "$__rate_interval"
# vCenter's realtime counters advance once per 20 s sample, whatever the scrape interval: rates of
# the vcenter_*_total counters get this as their Min step, so $__rate_interval spans at least four
# samples (Grafana: max($__interval + step, 4 x step)) instead of the datasource's 4 scrapes.
VCENTER_SAMPLE = "20s"
# Prism's stats are 30 s samples: a query that reads Prism's counters gets 30s.
PRISM_SAMPLE = "30s"
# The recorded VM disks of either manager, with their source (vcenter, prism).
VM_SOURCE_INFO = "vm_disk:ioparallax_vm_source:info"
VM_SOURCES = 'vm_source=~"' + "|".join(SAMPLE_SECONDS) + '"'


# -- variables ------------------------------------------------------------------------------


def _variables(cfg: MixinConfig, all_default: bool) -> list[Any]:
    """$datasource, $cluster (with cfg.cluster_label), $vm, $disk, $vdisk. ``all_default``: start
    on All (the overview). Every query but $cluster's gets the cluster matcher in build_dashboards."""
    ds = (
        db.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(dm.VariableOption(selected=True, text=cfg.dashboards.datasource, value=cfg.dashboards.datasource))
    )
    out: list[Any] = [ds]
    sg = cfg.selectors.stargate
    if cfg.cluster_label:
        # All by default: a Prometheus with one cluster has no such label, and All (.*) matches
        # series without it.
        out.append(
            db.QueryVariable(CLUSTER_VARIABLE)
            .label("cluster")
            .description(
                f"Cluster ({cfg.cluster_label} label, set by Prometheus): vdisk ids and VM "
                "names are unique only within one. All when Prometheus holds one cluster."
            )
            .datasource(DATASOURCE)
            .query(f"label_values({VM_SOURCE_INFO}{_braces(VM_SOURCES)}, {cfg.cluster_label})")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.NATURAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
        )
    for name, label, query, doc in (
        (
            "vm",
            "VM",
            f"label_values({VM_SOURCE_INFO}{_braces(VM_SOURCES)}, vm)",
            "VM name as vCenter (or Prism, on AHV) knows it: the join key of the guest, VM and storage views.",
        ),
        (
            "disk",
            "disk",
            f"label_values({VM_SOURCE_INFO}" + _braces(VM_SOURCES, 'vm=~"$vm"') + ", disk)",
            "Virtual disk of the VM (vCenter instance, e.g. scsi0:1; Prism disk address on AHV, e.g. scsi.1).",
        ),
        (
            "vdisk",
            "vdisk",
            "label_values(stargate_vdisk_info" + _braces(sg, VMDISK) + ", vdisk_id)",
            "Stargate vdisk id backing the VM disk (stargate_vdisk_info, from the exporter's vdisk mapping).",
        ),
    ):
        v = (
            db.QueryVariable(name)
            .label(label)
            .description(doc)
            .datasource(DATASOURCE)
            .query(query)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.NATURAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
        if all_default:
            v.current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
        out.append(v)
    return out


def _braces(*matchers: str) -> str:
    parts = [m for m in matchers if m]
    return "{" + ",".join(parts) + "}"


VMDISK = 'vm=~"$vm",disk=~"$disk"'
CLUSTER_VARIABLE = "cluster"
VDISK = 'vdisk_id=~"$vdisk"'


def _dashboard(cfg: MixinConfig, name: str, title: str, description: str, all_default: bool = False) -> db.Dashboard:
    d = cfg.dashboards
    return (
        db.Dashboard(title)
        .uid(f"{d.uid_prefix}-{name}")
        .description(description)
        .tags(list(d.tags))
        .refresh(d.refresh)
        .time(d.time_from, "now")
        .timezone("browser")
        .editable()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .variables(_variables(cfg, all_default))
        .link(
            db.DashboardLink("ioparallax")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(list(d.tags))
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


# -- expressions --------------------------------------------------------------------------------


class Expr:
    """PromQL built from the config: selectors from cfg.selectors, rule names with cfg.w."""

    def __init__(self, cfg: MixinConfig):
        self.cfg = cfg
        self.w = cfg.w

    def sel(self, source: str, *extra: str) -> str:
        return self.cfg.sel(source, *extra)

    def rule(self, name: str, *extra: str) -> str:
        """A recording rule of the contract (alerts/ioparallax.rules.yml) on the selected VM disks."""
        return f"{name}{_braces(VMDISK, *extra)}"

    def vm_disk(self, layer: str, d: str, quantity: str) -> str:
        agg = {"guest": f"rate{self.w}", "guest_os": f"rate{self.w}", "vm": f"rate{self.w}", "storage": f"avg{self.w}"}[
            layer
        ]
        if quantity == "latency_seconds":
            agg = {
                "guest": f"mean{self.w}",
                "guest_os": f"mean{self.w}",
                "vm": f"mean{self.w}",
                "storage": f"avg{self.w}",
            }[layer]
        return self.rule(f"vm_disk:ioparallax_{layer}_{d}_{quantity}:{agg}")

    def ratio(self, name: str) -> str:
        return self.rule(f"vm_disk:ioparallax_{name}:ratio{self.w}")

    def vdisk_ratio(self, name: str, *extra: str) -> str:
        return f"vdisk:ioparallax_{name}:ratio{_braces(VMDISK, *extra)}"

    def vdisk_flag(self, name: str, *extra: str) -> str:
        return f"vdisk:ioparallax_{name}:bool{_braces(VMDISK, *extra)}"

    # Storage series of the selected vdisks, with vm and disk from stargate_vdisk_info.
    def storage(self, metric: str, *extra: str) -> str:
        return (
            f"{metric}{self.sel('stargate', VDISK, *extra)}"
            f" * on (vdisk_id) group_left (vm, disk) max by (vdisk_id, vm, disk) "
            f"(stargate_vdisk_info{self.sel('stargate', VDISK, VMDISK)})"
        )

    # The fio jobs on the selected VM disks (recording rule: fio_job_info's raw device -> guest
    # disk serial -> vCenter disk UUID -> vm, disk).
    FIO_JOB_KEY = "instance, job, jobname, jobid, host, source"

    def fio_jobs(self) -> str:
        return f"guest_job:ioparallax_vm_disk:info{_braces(VMDISK)}"

    def fio(self, metric: str, *extra: str) -> str:
        return self.fio_join(f"{metric}{self.sel('fio', *extra)}")

    def fio_join(self, expr: str) -> str:
        return f"{expr} * on ({self.FIO_JOB_KEY}) group_left (vm, disk) {self.fio_jobs()}"

    def vm(self, build: Callable[[Source], str], *extra: str) -> str:
        """A VM-view query on the selected VM disks from vCenter's series or Prism's (where Prism has
        every series it names; else vCenter's alone): ioparallax/mixin/vmview.py."""
        return either(self.cfg, build, VMDISK, *extra)

    def vm_sample(self, suffix: str) -> str:
        """The latest sample of ``vcenter_virtual_disk_<suffix>`` or its Prism counterpart."""
        return self.vm(lambda s: s(suffix))

    def vm_source(self) -> str:
        """Each selected VM disk's VM-view source (vm_source label) with its sample period as value."""
        return (
            f"{VM_SOURCE_INFO}{_braces(VMDISK)} * on (vm, disk) group_left () "
            f"vm_disk:ioparallax_vm_sample_interval:seconds{_braces(VMDISK)}"
        )


def min_step(expr: str) -> str:
    """The Min step of a query that rates the managers' counters: their slowest sample period."""
    return PRISM_SAMPLE if "prism_" in expr else VCENTER_SAMPLE


# -- PoC overview -------------------------------------------------------------------------------


def overview(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    t = cfg.thresholds
    firing = 'ALERTS{alertname=~"Ioparallax.*",alertstate="firing"}'
    vd = "{{vm}} {{disk}} (vdisk {{vdisk_id}})"
    d = _dashboard(
        cfg,
        "overview",
        "ioparallax / PoC overview",
        "Every VM disk of the PoC: what is wrong now (firing alerts), zero share, cache fit, "
        "whether the guest, VM and storage views agree, and whether every exporter is up.",
        all_default=True,
    )
    d.with_row(row("What is wrong now"))
    d.with_panel(
        single(
            "Firing ioparallax alerts",
            "Number of Ioparallax* alerts firing now. 0 is green; the table "
            "beside names them. Each alert's runbook is in docs/runbook.md.",
            "none",
            [Q(f"count({firing}) or vector(0)", "firing")],
            w=4,
            h=8,
            limit=1,
        )
    )
    d.with_panel(
        tbl(
            "Firing alerts",
            "Ioparallax* alerts firing now, with the VM disk, vdisk or job they are about "
            "and their severity (ALERTS series of Prometheus).",
            "none",
            [Q(firing, instant=True, fmt="table")],
            w=20,
            h=8,
            hide=("Time", "__name__", "Value", "alertstate"),
        )
    )
    d.with_panel(
        ts(
            "Exporters and targets up",
            "Prometheus' up for every exporter job, and each probe's own "
            "stargate_up / vcenter_up (prism_up on AHV) / fio_up (1: the target was read). 0 means a view "
            "is missing: its "
            "panels go blank and the ratios cannot be computed.",
            "bool",
            [
                Q(f"up{e.sel('exporters')}", "up {{job}} {{instance}}"),
                Q(f"stargate_up{e.sel('stargate')}", "stargate_up {{instance}}"),
                Q(f"vcenter_up{e.sel('vcenter')} or prism_up{e.sel('prism')}", "{{__name__}} {{instance}}"),
                Q(f"fio_up{e.sel('fio')}", "fio_up {{instance}}"),
            ],
            w=24,
            h=7,
            min0=True,
        )
    )
    d.with_panel(
        tbl(
            "Page fields ioparallax does not read",
            "Tables, rows, columns and cells on a CVM's Stargate pages that the exporter does not read "
            "(stargate_parse_unknown_field_pages: pages of the last probe holding each). Empty is normal. "
            "A row here means another page build than the parser knows, and the storage view may be "
            "incomplete: capture the pages (stargate-exporter capture --target <instance>) and report "
            "them (README: Reporting a page or answer ioparallax misreads).",
            "none",
            [
                Q(
                    f"max by (instance, page, table, kind, item) "
                    f"(stargate_parse_unknown_field_pages{e.sel('stargate')})",
                    instant=True,
                    fmt="table",
                )
            ],
            w=24,
            h=5,
        )
    )
    d.with_panel(
        tbl(
            "Prism statistics ioparallax does not read",
            "Stats keys in a Prism's virtual_disks answers that the prism-exporter does not map "
            "(prism_parse_unknown_field_entities: entities of the last probe holding each). Empty is "
            "normal. A row here means an AOS version the exporter does not know: capture the answers "
            "(prism-exporter capture --target <instance>) and report them (README: Reporting a page or "
            "answer ioparallax misreads).",
            "none",
            [
                Q(
                    f"max by (instance, answer, kind, item) (prism_parse_unknown_field_entities{e.sel('prism')})",
                    instant=True,
                    fmt="table",
                )
            ],
            w=24,
            h=5,
        )
    )
    d.with_row(row("Storage: zeros and cache"))
    d.with_panel(
        ts(
            "Zero share of reads",
            "Share of the read bytes the storage served from its zero buckets "
            "(zero, estore_zero, oplog_zero): bytes no disk ever read. Above the dashed line "
            f"({t.zero_read_ratio:.0%}) on a busy vdisk the benchmark is inflated (distortions.md, 1).",
            "percentunit",
            [Q(e.vdisk_ratio("read_zero"), vd)],
            w=12,
            limit=t.zero_read_ratio,
        )
    )
    d.with_panel(
        ts(
            "Zero share of writes",
            "Share of the written bytes that went to oplog_zero: zeros the storage "
            "stored as metadata only. Typical of fio zero_buffers=1, compressible buffers without "
            "buffer_pattern, or dd if=/dev/zero. Not measurable (no line) on 2014/2015 page builds: their "
            "Write Destination table has no Oplog Zero row (see 'Zero writes measurable').",
            "percentunit",
            [Q(e.vdisk_ratio("write_zero"), vd)],
            w=9,
            limit=t.zero_write_ratio,
            no_value="not measurable (page build without Oplog Zero) or no writes",
        )
    )
    d.with_panel(
        labelled(
            "Zero writes measurable",
            "Whether the vdisk's Stargate page can show zero writes at all "
            "(vdisk:ioparallax_write_zero_measurable:bool): 2016 builds have an Oplog Zero write "
            "destination; 2014/2015 builds count zero writes as Oplog, so the zero share of writes is not "
            "measurable there and IoparallaxZeroHeavyWrites cannot fire (fio's hygiene findings are then "
            "the only sign of zero writes).",
            "none",
            [Q(e.vdisk_flag("write_zero_measurable"), vd)],
            {0: ("not measurable", "orange"), 1: ("measurable", "green")},
            no_value="no write destinations (no detail page)",
            w=3,
            h=8,
        )
    )
    d.with_panel(
        ts(
            "Reads from cache",
            "Share of read bytes served from DRAM or the extent cache. Above "
            f"{t.cache_read_ratio:.0%} with a working set below the cache the benchmark measures the "
            "CVM's memory, not its disks (hero numbers).",
            "percentunit",
            [Q(e.vdisk_ratio("read_cache"), vd)],
            w=12,
            limit=t.cache_read_ratio,
        )
    )
    d.with_panel(
        ts(
            "Working set / CVM cache",
            "The vdisk's 2-minute union working set over the configured CVM "
            f"cache ({t.cvm_cache_bytes / 2**30:g} GiB, thresholds.cvm_cache_bytes). Below 1 the whole "
            "working set fits in cache.",
            "percentunit",
            [Q(e.vdisk_ratio("working_set_to_cache"), vd)],
            w=12,
            limit=t.working_set_to_cache_ratio,
        )
    )
    d.with_row(row("Do the views agree?"))
    for what, unit_doc in (
        ("bytes", "Bytes are the fair comparison: request splitting changes ops, not bytes."),
        ("ops", "Ops differ when a layer splits or merges requests (large blocks)."),
        (
            "latency",
            "Op-weighted mean latency per direction: a gap is where the time "
            "is spent (point of measurement), not an averaging artefact.",
        ),
    ):
        names = (
            [(f"{layer}_to_vm_{what}", f"{layer}/VM {{{{vm}}}} {{{{disk}}}}") for layer in ("guest", "storage")]
            if what != "latency"
            else [
                (f"{layer}_to_vm_{dr}_latency", f"{layer}/VM {dr} {{{{vm}}}} {{{{disk}}}}")
                for layer in ("guest", "storage")
                for dr in DIRECTIONS
            ]
        )
        d.with_panel(
            ts(
                f"Guest and storage {what} / VM {what}",
                f"Guest (fio) and storage (Stargate) {what} over the VM's (vCenter), per VM disk, over "
                f"{cfg.w}. 1 means the views agree. {unit_doc} Bytes outside "
                f"[1/{t.views_bytes_ratio:g}, {t.views_bytes_ratio:g}] for long: IoparallaxViewsDisagree.",
                "none",
                [Q(e.ratio(n), legend) for n, legend in names],
                w=8,
                limit=t.views_bytes_ratio if what == "bytes" else None,
            )
        )
    d.with_panel(
        ts(
            "Burstiness (Little's law)",
            "The guest's queue depth (sum of fio iodepth) over the "
            "concurrency the VM view implies (ops/s x latency). ~1: steady I/O; far above 1: bursts the "
            f"VM's 20 s averages hide (dashed line: {t.burstiness_ratio:g}). No line for disks with a "
            "buffered fio job (direct=0): their asked depth is never reached, which is not a burst "
            "(IoparallaxAskedQueueDepthNotReached).",
            "none",
            [Q(e.ratio("burstiness"), "{{vm}} {{disk}}")],
            w=12,
            limit=t.burstiness_ratio,
        )
    )
    d.with_panel(
        ts(
            "Guest peak / VM sample",
            "The highest bytes/s fio reported in one of its status intervals "
            f"over {cfg.w}, against the highest 20 s vCenter sample of the VM disk over the same window. "
            "Far above 1: the guest's bursts are averaged away in the VM view.",
            "none",
            [Q(e.ratio("guest_peak_to_vm_sample_bytes"), "{{vm}} {{disk}}")],
            w=12,
        )
    )
    return d


# -- Three views --------------------------------------------------------------------------------

# The guest OS view (node_exporter diskstats) beside fio's: a colour of its own, solid (dashed is
# for the raw instants).
GUEST_OS_COLOR = "purple"

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
    d = _dashboard(
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
            f"guest_host:ioparallax_vdbench_vm_disk:info{_braces(VMDISK)}\n"
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
                    f"latest interval) and vCenter's latest 20 s sample (Prism's 30 s one on AHV). "
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
            w=3,
            h=8,
        )
    )
    d.with_panel(
        ts(
            "Burstiness and guest peak / VM sample",
            "Burstiness: guest iodepth / VM implied concurrency "
            "(~1 steady; not computed for buffered jobs). Guest peak / VM sample: fio's highest interval bytes/s over vCenter's highest 20 s "
            "sample. Either far above 1: the VM's throughput panels under-read the bursts.",
            "none",
            [
                Q(e.ratio("burstiness"), "burstiness"),
                Q(e.ratio("guest_peak_to_vm_sample_bytes"), "guest peak / VM sample"),
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
                Q(e.rule("vm_disk:ioparallax_guest_tool:info"), instant=True, fmt="table"),
                Q(e.rule("vm_disk:ioparallax_guest_os_source:info"), instant=True, fmt="table"),
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


# -- vDisk deep dive ----------------------------------------------------------------------------


def vdisk(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    t = cfg.thresholds
    S = lambda m, *x: f"{m}{e.sel('stargate', VDISK, *x)}"  # noqa: E731
    d = _dashboard(
        cfg,
        "vdisk",
        "ioparallax / vDisk deep dive",
        "What the storage (Stargate, port 2009 pages) did for the selected vdisks: where reads "
        "came from and writes went (zero buckets in red), the categorizer, working set against "
        "the cache, latency and size histograms, the oplog and the queue.",
    )
    d.with_row(row("Read sources and write destinations"))
    d.with_panel(
        ts(
            "Read sources",
            "Read bytes/s by source, stacked (Read Source table). Red: the zero buckets, "
            "bytes no disk read. DRAM / extent cache: served from memory.",
            "binBps",
            [Q(f"sum by (source) ({S('stargate_vdisk_read_source_bytes_per_second')})", "{{source}}")],
            stack=True,
            regex_colors={"^(zero|estore_zero|oplog_zero)$": ZERO_COLOR},
        )
    )
    d.with_panel(
        ts(
            "Write destinations",
            "Write bytes/s by destination, stacked (Write Destination table). Red: "
            "oplog_zero, zeros kept as metadata only.",
            "binBps",
            [Q(f"sum by (destination) ({S('stargate_vdisk_write_destination_bytes_per_second')})", "{{destination}}")],
            stack=True,
            regex_colors={"^(zero|estore_zero|oplog_zero)$": ZERO_COLOR},
        )
    )
    d.with_panel(
        ts(
            "Zero share",
            "Zero-bucket share of read bytes and of written bytes (recording rules "
            f"vdisk:ioparallax_*_zero:ratio). Dashed: the {t.zero_read_ratio:.0%} alert threshold. No "
            "writes line on 2014/2015 page builds: no Oplog Zero row, so zero writes are not measurable.",
            "percentunit",
            [
                Q(f"max by (vdisk_id) ({e.vdisk_ratio('read_zero', VDISK)})", "reads {{vdisk_id}}"),
                Q(f"max by (vdisk_id) ({e.vdisk_ratio('write_zero', VDISK)})", "writes {{vdisk_id}}"),
            ],
            w=6,
            limit=t.zero_read_ratio,
            no_value="no reads or writes",
        )
    )
    # The share where it is measurable, -1 (shown as words) where the page has no Oplog Zero row.
    d.with_panel(
        labelled(
            "Zero share of writes",
            "The zero share of written bytes now, or 'not measurable' where the "
            "vdisk's page has no Oplog Zero write destination (2014/2015 builds count zero writes as Oplog: "
            "vdisk:ioparallax_write_zero_measurable:bool 0; the query reads -1 there). Red from the "
            f"{t.zero_write_ratio:.0%} alert threshold.",
            "percentunit",
            [
                Q(
                    f"max by (vdisk_id) (\n  {e.vdisk_ratio('write_zero', VDISK)}\n"
                    f"  or ({e.vdisk_flag('write_zero_measurable', VDISK)} == 0) - 1\n)",
                    "{{vdisk_id}}",
                )
            ],
            {-1: ("not measurable", "orange")},
            no_value="no writes",
            w=3,
            h=8,
            limit=t.zero_write_ratio,
        )
    )
    d.with_panel(
        ts(
            "Categorizer: random share",
            "Stargate's categorizer, per direction: share of random ops "
            "(the rest is sequential). A 'sequential' benchmark that shows random here is interleaved "
            "by numjobs or by the hypervisor.",
            "percentunit",
            [
                Q(
                    f"max by (vdisk_id, direction) ({S('stargate_vdisk_random_ratio')})",
                    "random {{direction}} {{vdisk_id}}",
                ),
                Q(
                    f"max by (vdisk_id, direction) ({S('stargate_vdisk_sequential_ratio')})",
                    "sequential {{direction}} {{vdisk_id}}",
                ),
            ],
            w=7,
        )
    )
    d.with_panel(
        ts(
            "Working set vs CVM cache",
            "Working set sizes (read, write, union; 2 min and 1 h windows). "
            f"Dashed: the configured CVM cache ({t.cvm_cache_bytes / 2**30:g} GiB). A 2 min union below "
            "it fits in cache.",
            "bytes",
            [
                Q(
                    f"max by (vdisk_id, kind, window) ({S('stargate_vdisk_working_set_bytes')})",
                    "{{kind}} {{window}} {{vdisk_id}}",
                )
            ],
            w=8,
            limit=t.cvm_cache_bytes,
        )
    )
    d.with_row(row("Latency and size histograms"))
    for dr in DIRECTIONS:
        d.with_panel(
            heat(
                f"Frontend {dr} latency",
                f"Stargate's Frontend {dr.capitalize()} Latency histogram "
                "(a gauge histogram of the page's recent window: ops per bucket now, not cumulative).",
                "s",
                Q(f"sum by (le) ({S(f'stargate_vdisk_{dr}_latency_seconds_bucket')})", "{{le}}", fmt="heatmap"),
                w=12,
            )
        )
    for dr in DIRECTIONS:
        d.with_panel(
            heat(
                f"{dr.capitalize()} size",
                f"Stargate's {dr.capitalize()} Size Distribution (ops per size "
                "bucket, recent window). Small ops on a large-block benchmark: splitting or misalignment.",
                "bytes",
                Q(f"sum by (le) ({S(f'stargate_vdisk_{dr}_size_bytes_bucket')})", "{{le}}", fmt="heatmap"),
                w=12,
            )
        )
    d.with_panel(
        ts(
            "Mean latency",
            "Op-weighted mean of the latency histograms (_gsum / _gcount) per direction, and "
            "the page's Avg latency for both.",
            "s",
            [
                Q(
                    f"sum by (vdisk_id) ({S(f'stargate_vdisk_{dr}_latency_seconds_gsum')}) / "
                    f"sum by (vdisk_id) ({S(f'stargate_vdisk_{dr}_latency_seconds_gcount')})",
                    f"{dr} {{{{vdisk_id}}}}",
                )
                for dr in DIRECTIONS
            ]
            + [Q(S("stargate_vdisk_latency_seconds"), "avg latency {{vdisk_id}}")],
            w=12,
        )
    )
    d.with_panel(
        ts(
            "Ops by kind",
            "The vdisk's ops/s (read, write, random, error) from the main page.",
            "iops",
            [
                Q(S(f"stargate_vdisk_{k}_ops_per_second"), f"{k} {{{{vdisk_id}}}}")
                for k in ("read", "write", "random", "error")
            ],
            w=12,
        )
    )
    d.with_row(row("Oplog and queue"))
    d.with_panel(
        ts(
            "Oplog data",
            "Data held in the oplog for the vdisk (Oplog KB). Growing without draining: "
            "writes arrive faster than the extent store absorbs them.",
            "bytes",
            [Q(S("stargate_vdisk_oplog_bytes"), "oplog {{vdisk_id}}")],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Oplog fragments",
            "Oplog Fragments: many small fragments mean small or random writes.",
            "short",
            [Q(S("stargate_vdisk_oplog_fragments"), "fragments {{vdisk_id}}")],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Oplog drain",
            "Oplog drain rate (Oplog KB/s) from oplog to extent store.",
            "binBps",
            [Q(S("stargate_vdisk_oplog_drain_bytes_per_second"), "drain {{vdisk_id}}")],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Outstanding ops",
            "Ops in flight at the CVM per direction, and to the extent store. Compare "
            "with the guest's iodepth: far lower means the queue is elsewhere (guest, hypervisor).",
            "short",
            [
                Q(
                    f"max by (vdisk_id, direction) ({S('stargate_vdisk_outstanding_ops')})",
                    "{{direction}} {{vdisk_id}}",
                ),
                Q(S("stargate_vdisk_outstanding_estore_ops"), "estore {{vdisk_id}}"),
            ],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Queue length and busy",
            "Avg qlen and % busy (as a ratio) of the vdisk (main page).",
            "short",
            [
                Q(S("stargate_vdisk_queue_length"), "qlen {{vdisk_id}}"),
                Q(S("stargate_vdisk_busy_ratio"), "busy {{vdisk_id}}"),
            ],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Read-modify-write (heuristic)",
            "Storage reads beyond the frontend's, over frontend writes "
            f"(vdisk:ioparallax_rmw_read_to_write:ratio{cfg.w}). On a write-only benchmark, reads here are "
            "the storage reading partial 4 KiB blocks: misaligned writes suspected (confirm with the "
            f"guest's partition start). Dashed: {t.misaligned_read_to_write_ratio:.0%}.",
            "percentunit",
            [Q(f"vdisk:ioparallax_rmw_read_to_write:ratio{cfg.w}{{{VDISK}}}", "{{vdisk_id}}")],
            w=8,
            limit=t.misaligned_read_to_write_ratio,
        )
    )
    return d


# -- fio jobs -----------------------------------------------------------------------------------


def fio_jobs(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    J = "{{jobname}} ({{host}})"
    d = _dashboard(
        cfg,
        "fio",
        "ioparallax / fio jobs",
        "The guest's view: every fio job on the selected VM disks, per interval, with fio's own "
        "percentiles and the benchmark hygiene findings. Jobs join to a VM disk through their "
        "filename (/dev/sdX) and the guest disk's serial (the VMware disk UUID).",
    )
    d.with_row(row("Hygiene"))
    d.with_panel(
        tbl(
            "Hygiene findings",
            "Benchmark traps found in each job's options (fio_job_hygiene_problem, see "
            "docs/hygiene.md): zero_buffers, compressible buffers without a pattern, buffered I/O, "
            "gtod_reduce, a working set below the cache, short time_based runs.",
            "none",
            [Q(f"{e.fio('fio_job_hygiene_problem')} == 1", instant=True, fmt="table")],
            w=14,
            h=7,
            hide=("Time", "__name__", "Value", "job"),
        )
    )
    d.with_panel(
        tbl(
            "Jobs",
            "Options of each job on the selected VM disks (fio_job_info): file, rw, bs, iodepth, "
            "numjobs, direct, ioengine.",
            "none",
            [Q(e.fio("fio_job_info"), instant=True, fmt="table")],
            w=10,
            h=7,
            hide=("Time", "__name__", "Value", "job", "groupid", "version"),
        )
    )
    for dr in DIRECTIONS:
        d.with_row(row(f"{dr.capitalize()}s"))
        d.with_panel(
            ts(
                f"IOPS, {dr}s",
                "fio's own IOPS over its last status interval (solid) against "
                "Prometheus' rate of the same counter over $__rate_interval (dashed). The gap is how much a "
                "rate window dilutes a burst.",
                "iops",
                [
                    Q(e.fio(f"fio_{dr}_interval_iops"), f"{J} interval"),
                    Q(e.fio_join(f"rate(fio_{dr}_ios_total{e.sel('fio')}[{RI}])"), f"{J} rate"),
                ],
                w=8,
                dashed=[".* rate$"],
            )
        )
        d.with_panel(
            ts(
                f"Bandwidth, {dr}s",
                "fio's interval bandwidth (solid) and the rate of its byte counter (dashed).",
                "binBps",
                [
                    Q(e.fio(f"fio_{dr}_interval_bandwidth_bytes_per_second"), f"{J} interval"),
                    Q(e.fio_join(f"rate(fio_{dr}_bytes_total{e.sel('fio')}[{RI}])"), f"{J} rate"),
                ],
                w=8,
                dashed=[".* rate$"],
            )
        )
        d.with_panel(
            ts(
                f"Completion latency percentiles, {dr}s",
                "fio's own exact clat percentiles (since the job "
                "started) and the mean of its latest status interval with completions (held between "
                "bursts).",
                "s",
                [
                    Q(
                        e.fio(f"fio_{dr}_clat_percentile_seconds", 'percentile=~"50|99|99.9"'),
                        f"{J} p{{{{percentile}}}}",
                    ),
                    Q(
                        e.fio_join(f"last_over_time(fio_{dr}_interval_clat_mean_seconds{e.sel('fio')}[{RI}])"),
                        f"{J} interval mean",
                    ),
                ],
                w=8,
            )
        )
        buckets = e.fio_join(f"rate(fio_{dr}_clat_seconds_bucket{e.sel('fio')}[{RI}])")
        d.with_panel(
            heat(
                f"Completion latency histogram, {dr}s",
                "Completions per latency bucket per second "
                f"(rate of fio_{dr}_clat_seconds_bucket over $__rate_interval).",
                "s",
                Q(f"sum by (le) ({buckets})", "{{le}}", fmt="heatmap"),
                w=24,
            )
        )
    d.with_row(row("Queue"))
    d.with_panel(
        ts(
            "iodepth levels",
            "Share of each job's time with this many I/Os in flight (fio's iodepth "
            "distribution). A job asking QD32 that spends its time at 1-2 is CPU- or engine-bound.",
            "percentunit",
            [Q(e.fio("fio_job_iodepth_level_ratio"), f"{J} depth {{{{depth}}}}")],
            w=12,
            stack=True,
        )
    )
    d.with_panel(
        ts(
            "Asked iodepth",
            "The iodepth option of each job (fio_job_iodepth).",
            "short",
            [Q(e.fio("fio_job_iodepth"), J)],
            w=12,
        )
    )
    return d


# -- vCenter view -------------------------------------------------------------------------------


def vm_source_panel(e: Expr) -> Any:
    """Which manager the VM view of each selected VM disk comes from, and its sample period."""
    periods = ", ".join(f"{src} {n} s" for src, n in SAMPLE_SECONDS.items())
    return single(
        "VM view: source and sample period",
        "Where the VM view of each VM disk comes from (vm_disk:ioparallax_vm_source:info: vcenter on "
        f"ESXi, prism on AHV) and the length of its samples ({periods}): a burst shorter than the "
        "sample is averaged over it.",
        "s",
        [Q(e.vm_source(), "{{vm}} {{disk}}: {{vm_source}}")],
        w=24,
        h=3,
    )


def vcenter(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    V = "{{vm}} {{disk}}"

    def per_second(counter: str, by: str = "") -> str:
        # The manager's time integrated in the same window steps together with the counter, so the
        # quotient is exact whatever the window's alignment with the 20 s (30 s) samples (docs/rules.md).
        match = f" / ignoring ({by}) group_left () " if by else " / "
        return e.vm(
            lambda s: (
                f"rate({s(counter)}[{RI}]){match}(rate({s('samples_total')}[{RI}]) * {s('sample_interval_seconds')})"
            )
        )

    def mean(numerator: str, denominator: str) -> str:
        return e.vm(lambda s: f"rate({s(numerator)}[{RI}]) / rate({s(denominator)}[{RI}])")

    def rated(expr: str, legend: str) -> Q:
        return Q(expr, legend, min_step=min_step(expr))

    d = _dashboard(
        cfg,
        "vcenter",
        "ioparallax / VM view (vCenter, Prism)",
        "The VM's view: vCenter's 20 s samples (Prism's 30 s samples on AHV) as their charts show them "
        "(dashed) beside the true averages integrated from every sample (the _total counters over the "
        "manager's time integrated in $__rate_interval, exact at any alignment with the samples). "
        "Outstanding I/Os, I/O size samples and seeks are vCenter's only: empty on AHV.",
    )
    d.with_panel(vm_source_panel(e))
    for dr in DIRECTIONS:
        d.with_row(row(f"{dr.capitalize()}s"))
        d.with_panel(
            ts(
                f"Ops, {dr}s",
                "Dashed: the latest 20 s sample (30 s on AHV: what the vSphere or Prism chart shows). Solid: "
                "the true average over $__rate_interval, from every sample integrated.",
                "iops",
                [
                    Q(e.vm_sample(f"sample_{dr}_ops_per_second"), f"{V} sample"),
                    rated(per_second(f"{dr}_ops_total"), f"{V} true average"),
                ],
                w=8,
                dashed=[".* sample$"],
            )
        )
        d.with_panel(
            ts(
                f"Throughput, {dr}s",
                "The latest sample (dashed) and the true average (solid).",
                "binBps",
                [
                    Q(e.vm_sample(f"sample_{dr}_bytes_per_second"), f"{V} sample"),
                    rated(per_second(f"{dr}_bytes_total"), f"{V} true average"),
                ],
                w=8,
                dashed=[".* sample$"],
            )
        )
        d.with_panel(
            ts(
                f"Latency, {dr}s",
                "vCenter's millisecond counter (sub-ms shows 0; Prism's sample, in microseconds, on AHV), "
                "the microsecond counter (Prism's sample again), and the true op-weighted mean "
                "(integrated latency / integrated ops).",
                "s",
                [
                    Q(e.vm_sample(f"sample_{dr}_latency_seconds"), f"{V} sample (ms)"),
                    Q(e.vm_sample(f"sample_{dr}_latency_precise_seconds"), f"{V} sample (us)"),
                    rated(mean(f"{dr}_latency_seconds_total", f"{dr}_ops_total"), f"{V} true mean"),
                ],
                w=8,
                dashed=[".* sample .*"],
            )
        )
        d.with_panel(
            ts(
                f"Outstanding I/Os, {dr}s",
                "The sample's OIO against the time-integrated outstanding I/Os (vCenter's only), "
                "and Little's law: ops/s x latency. Implied far below reported: bursts.",
                "short",
                [
                    Q(e.vm_sample(f"sample_{dr}_outstanding_ios"), f"{V} sample OIO"),
                    rated(per_second(f"{dr}_outstanding_seconds_total"), f"{V} mean OIO"),
                    rated(per_second(f"{dr}_latency_seconds_total"), f"{V} Little (ops/s x latency)"),
                ],
                w=12,
                dashed=[".* sample OIO$"],
            )
        )
        d.with_panel(
            ts(
                f"I/O size, {dr}s",
                "The sample's I/O size (vCenter's only) and the true mean (bytes / ops).",
                "bytes",
                [
                    Q(e.vm_sample(f"sample_{dr}_io_size_bytes"), f"{V} sample"),
                    rated(mean(f"{dr}_bytes_total", f"{dr}_ops_total"), f"{V} true mean"),
                ],
                w=12,
                dashed=[".* sample$"],
            )
        )
    d.with_row(row("Seeks and sampling"))
    d.with_panel(
        ts(
            "Seeks",
            "Seeks by distance class (small < 64, medium 64-8192, large > 8192 LBNs): the latest "
            "sample and the rate of the integrated counter. Mostly small seeks: sequential. vCenter's only.",
            "short",
            [
                Q(e.vm_sample("sample_seeks"), f"{V} {{{{class}}}} sample"),
                rated(per_second("seeks_total", "class"), f"{V} {{{{class}}}} per second"),
            ],
            w=12,
            dashed=[".* sample$"],
        )
    )
    d.with_panel(
        ts(
            "Sample age",
            "Seconds since the end of the latest vCenter (20 s) or Prism (30 s) sample. Above ~60 s (90 s "
            "on AHV) the VM view is stale.",
            "s",
            [Q(e.vm(lambda s: f"time() - {s('sample_timestamp_seconds')}"), V)],
            w=12,
        )
    )
    return d


# -- all of them --------------------------------------------------------------------------------

BUILDERS = {
    "ioparallax-overview.json": overview,
    "ioparallax-three-views.json": three_views,
    "ioparallax-vdisk.json": vdisk,
    "ioparallax-fio.json": fio_jobs,
    "ioparallax-vcenter.json": vcenter,
}


def _number_panels(model: dict[str, Any]) -> dict[str, Any]:
    """Stable panel ids in layout order (Grafana needs unique ids; the SDK leaves them unset)."""
    n = 0
    for panel in model.get("panels", []):
        n += 1
        panel["id"] = n
        for sub in panel.get("panels", []):
            n += 1
            sub["id"] = n
    return model


def _per_cluster(model: dict[str, Any], label: str) -> dict[str, Any]:
    """Every panel query and variable (but $cluster) selects ``$cluster`` and keeps the cluster
    label in each by/on (ioparallax/mixin/cluster.py), so two clusters' equal vdisk ids never mix."""
    for p in panels(model):
        for t in p.get("targets", []) or []:
            t["expr"] = select_cluster(per_cluster(t["expr"], label), label, CLUSTER_VARIABLE)
    for v in model.get("templating", {}).get("list", []):
        if v.get("type") == "query" and v["name"] != CLUSTER_VARIABLE:
            v["query"] = select_cluster(v["query"], label, CLUSTER_VARIABLE)
    return model


def build_dashboards(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """{file name: dashboard JSON model} of every dashboard, from the mixin config."""
    out = {}
    for filename, build in BUILDERS.items():
        model = json.loads(json.dumps(build(cfg).build(), cls=JSONEncoder))
        out[filename] = _number_panels(_per_cluster(model, cfg.cluster_label))
    return out


def render(model: dict[str, Any]) -> str:
    """The committed form: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(model, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_dashboards(cfg: MixinConfig, outdir: str | os.PathLike[str]) -> list[Path]:
    """Write every dashboard to ``outdir``; returns the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, model in build_dashboards(cfg).items():
        path = outdir / filename
        path.write_text(render(model))
        written.append(path)
    return written
