"""The PoC overview dashboard (ioparallax-overview.json)."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import dashboard as db, timeseries

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, Expr, new_dashboard
from ioparallax.mixin.dashboards.panels import Q, labelled, row, single, tbl, ts


def overview(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    t = cfg.thresholds
    firing = 'ALERTS{alertname=~"Ioparallax.*",alertstate="firing"}'
    vd = "{{vm}} {{disk}} (vdisk {{vdisk_id}})"
    d = new_dashboard(
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
            [firing],
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
            [f"max by (instance, page, table, kind, item) (stargate_parse_unknown_field_pages{e.sel('stargate')})"],
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
            [f"max by (instance, answer, kind, item) (prism_parse_unknown_field_entities{e.sel('prism')})"],
            w=24,
            h=5,
        )
    )
    d.with_row(row("Storage: zeros and cache"))

    def vdisk_share(title: str, description: str, ratio: str, limit: float, **options: Any) -> timeseries.Panel:
        """A share per VM disk: the vdisk ratio rule ``ratio``, its alert threshold dashed."""
        return ts(title, description, "percentunit", [Q(e.vdisk_ratio(ratio), vd)], limit=limit, **options)

    d.with_panel(
        vdisk_share(
            "Zero share of reads",
            "Share of the read bytes the storage served from its zero buckets "
            "(zero, estore_zero, oplog_zero): bytes no disk ever read. Above the dashed line "
            f"({t.zero_read_ratio:.0%}) on a busy vdisk the benchmark is inflated (distortions.md, 1).",
            "read_zero",
            t.zero_read_ratio,
        )
    )
    d.with_panel(
        vdisk_share(
            "Zero share of writes",
            "Share of the written bytes that went to oplog_zero: zeros the storage "
            "stored as metadata only. Typical of fio zero_buffers=1, compressible buffers without "
            "buffer_pattern, or dd if=/dev/zero. Not measurable (no line) on 2014/2015 page builds: their "
            "Write Destination table has no Oplog Zero row (see 'Zero writes measurable').",
            "write_zero",
            t.zero_write_ratio,
            w=9,
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
        )
    )
    d.with_panel(
        vdisk_share(
            "Reads from cache",
            "Share of read bytes served from DRAM or the extent cache. Above "
            f"{t.cache_read_ratio:.0%} with a working set below the cache the benchmark measures the "
            "CVM's memory, not its disks (hero numbers).",
            "read_cache",
            t.cache_read_ratio,
        )
    )
    d.with_panel(
        vdisk_share(
            "Working set / CVM cache",
            "The vdisk's 2-minute union working set over the configured CVM "
            f"cache ({t.cvm_cache_bytes / 2**30:g} GiB, thresholds.cvm_cache_bytes). Below 1 the whole "
            "working set fits in cache.",
            "working_set_to_cache",
            t.working_set_to_cache_ratio,
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
    d.with_row(row("Hosts: what the storage controller costs"))
    d.with_panel(
        ts(
            "CVM share of host CPU",
            "The CPU each host's Controller VM used, as a share of the host's capacity (vCenter: the "
            "CVM's cpu.usagemhz against cpuMhz x cores; Prism: hypervisor_cpu_usage_ppm x its vCPUs over "
            "the host's cores), per host and over all hosts (dashed). Nutanix's density study measured "
            f"~5 %; above the dashed line ({t.cvm_host_cpu_ratio:.0%}, thresholds.cvm_host_cpu_ratio) "
            "IoparallaxCvmCpuHigh says so. Beside it, the whole host's usage: what is left for the VMs.",
            "percentunit",
            [
                Q(f"host:ioparallax_cvm_cpu_usage:ratio_rate{cfg.w}{{}}", "CVM on {{host}}"),
                Q(f"hosts:ioparallax_cvm_cpu_usage:ratio_rate{cfg.w}{{}}", "CVMs, all hosts"),
            ],
            w=12,
            limit=t.cvm_host_cpu_ratio,
            dashed=["CVMs, all hosts"],
            no_value="No CPU series: vcenter-exporter or prism-exporter with cpu: true (the default), on a "
            "vCenter or Prism that offers the CPU counters (docs/vcenter.md, docs/prism.md).",
        )
    )
    d.with_panel(
        ts(
            "Host CPU used",
            "The share of each host's CPU capacity used by everything on it: its VMs, its CVM and the "
            "hypervisor (vCenter's host cpu.usagemhz, Prism's host hypervisor_cpu_usage_ppm). Near 1 the "
            "VMs wait for cores (CPU ready) and a density test is CPU-bound.",
            "percentunit",
            [Q(f"host:ioparallax_cpu_usage:ratio_rate{cfg.w}{{}}", "{{host}}")],
            w=12,
        )
    )
    return d
