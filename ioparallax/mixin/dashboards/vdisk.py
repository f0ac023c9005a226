"""The vDisk deep dive dashboard (ioparallax-vdisk.json)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, VDISK, Expr, new_dashboard
from ioparallax.mixin.dashboards.panels import ZERO_COLOR, Q, heat, labelled, row, ts


def vdisk(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    t = cfg.thresholds
    S = lambda m, *x: f"{m}{e.sel('stargate', VDISK, *x)}"  # noqa: E731
    d = new_dashboard(
        cfg,
        "vdisk",
        "ioparallax / vDisk deep dive",
        "What the storage (Stargate, port 2009 pages) did for the selected vdisks: where reads "
        "came from and writes went (zero buckets in red), the categorizer, working set against "
        "the cache, latency and size histograms, the oplog and the queue.",
    )
    d.with_row(row("Read sources and write destinations"))
    # Stacked by where the bytes came from or went to (Read Source, Write Destination tables), the
    # zero buckets in red: (title, description, the label, the family)
    flows = (
        (
            "Read sources",
            "Read bytes/s by source, stacked (Read Source table). Red: the zero buckets, "
            "bytes no disk read. DRAM / extent cache: served from memory.",
            "source",
            "stargate_vdisk_read_source_bytes_per_second",
        ),
        (
            "Write destinations",
            "Write bytes/s by destination, stacked (Write Destination table). Red: "
            "oplog_zero, zeros kept as metadata only.",
            "destination",
            "stargate_vdisk_write_destination_bytes_per_second",
        ),
    )
    for title, desc, by, family in flows:
        query = Q(f"sum by ({by}) ({S(family)})", f"{{{{{by}}}}}")
        zeros = {"^(zero|estore_zero|oplog_zero)$": ZERO_COLOR}
        d.with_panel(ts(title, desc, "binBps", [query], stack=True, regex_colors=zeros))
    d.with_panel(
        ts(
            "Zero share",
            "Zero-bucket share of read bytes and of written bytes (recording rules "
            f"vdisk:ioparallax_*_zero:ratio). Dashed: the {t.zero_read_ratio:.0%} alert threshold. No "
            "writes line on 2014/2015 page builds: no Oplog Zero row, so zero writes are not measurable.",
            "percentunit",
            [
                Q(f"max by (vdisk_id) ({e.vdisk_ratio(f'{dr}_zero', VDISK)})", f"{dr}s {{{{vdisk_id}}}}")
                for dr in DIRECTIONS
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
    histograms = [
        (
            f"Frontend {dr} latency",
            f"Stargate's Frontend {dr.capitalize()} Latency histogram "
            "(a gauge histogram of the page's recent window: ops per bucket now, not cumulative).",
            "s",
            f"stargate_vdisk_{dr}_latency_seconds_bucket",
        )
        for dr in DIRECTIONS
    ] + [
        (
            f"{dr.capitalize()} size",
            f"Stargate's {dr.capitalize()} Size Distribution (ops per size "
            "bucket, recent window). Small ops on a large-block benchmark: splitting or misalignment.",
            "bytes",
            f"stargate_vdisk_{dr}_size_bytes_bucket",
        )
        for dr in DIRECTIONS
    ]
    for title, desc, unit, buckets in histograms:
        d.with_panel(heat(title, desc, unit, Q(f"sum by (le) ({S(buckets)})", "{{le}}", fmt="heatmap"), w=12))
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
    oplog = (
        (
            "Oplog data",
            "Data held in the oplog for the vdisk (Oplog KB). Growing without draining: "
            "writes arrive faster than the extent store absorbs them.",
            "bytes",
            "stargate_vdisk_oplog_bytes",
            "oplog",
        ),
        (
            "Oplog fragments",
            "Oplog Fragments: many small fragments mean small or random writes.",
            "short",
            "stargate_vdisk_oplog_fragments",
            "fragments",
        ),
        (
            "Oplog drain",
            "Oplog drain rate (Oplog KB/s) from oplog to extent store.",
            "binBps",
            "stargate_vdisk_oplog_drain_bytes_per_second",
            "drain",
        ),
    )
    for title, desc, unit, metric, legend in oplog:
        d.with_panel(ts(title, desc, unit, [Q(S(metric), legend + " {{vdisk_id}}")], w=8))
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
