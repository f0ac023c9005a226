"""The storage view: Stargate's frontend rates and the shares of its read sources and write destinations."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import CACHE, DIRECTIONS, ZERO, Exprs
from ioparallax.mixin.rules.model import Group, Rule


def storage_frontend_rates(x: Exprs) -> Group:
    """The storage view: the Stargate frontend rates of the vdisk behind each VM disk, and per vdisk."""
    w = x.w
    storage: list[Rule] = []
    for d in DIRECTIONS:
        storage += [
            Rule(
                f"Storage: {d} ops/s of the vdisk backing the VM disk (Stargate Hosted VDisks), averaged over the window.",
                x.to_vm_disk(x.storage_by_vdisk(f"stargate_vdisk_{d}_ops_per_second")),
                record=f"vm_disk:ioparallax_storage_{d}_ops:avg{w}",
            ),
            Rule(
                f"Storage: {d} bytes/s of the vdisk backing the VM disk, averaged over the window.",
                x.to_vm_disk(x.storage_by_vdisk(f"stargate_vdisk_{d}_bytes_per_second")),
                record=f"vm_disk:ioparallax_storage_{d}_bytes:avg{w}",
            ),
            Rule(
                f"Storage: op-weighted mean frontend {d} latency (the page's latency histogram sum over count).",
                x.to_vm_disk(x.storage_by_vdisk(f"stargate_vdisk_{d}_latency_seconds_gsum"))
                + "\n/\n("
                + x.to_vm_disk(x.storage_by_vdisk(f"stargate_vdisk_{d}_latency_seconds_gcount"))
                + " > 0)",
                record=f"vm_disk:ioparallax_storage_{d}_latency_seconds:avg{w}",
            ),
            Rule(
                f"Storage: frontend {d} bytes/s per vdisk, averaged over the window (gates the storage alerts).",
                x.storage_by_vdisk(f"stargate_vdisk_{d}_bytes_per_second"),
                record=f"vdisk:ioparallax_frontend_{d}_bytes:avg{w}",
            ),
        ]
    return Group(
        "ioparallax.storage-frontend", "The storage view per VM disk: the Stargate page of its vdisk.", storage
    )


def storage_bucket_shares(x: Exprs) -> Group:
    """What the storage did with each vdisk's I/O: zero and cache shares, working set, read-modify-write."""
    w, sources, with_vm_disk = x.w, x.sources, x.with_vm_disk
    cache_bytes = f"{x.cfg.thresholds.cvm_cache_bytes:.0f}"
    rs, wd = "stargate_vdisk_read_source_bytes_per_second", "stargate_vdisk_write_destination_bytes_per_second"
    zero_src, zero_dst, cache_src = f'source=~"{ZERO}"', f'destination=~"{ZERO}"', f'source=~"{CACHE}"'
    wss = x.st_metric("stargate_vdisk_working_set_bytes", 'kind="union"', 'window="2m"')

    def share(metric: str, matcher: str) -> str:
        # A bucket row the page does not have counts as 0 (a page without cache rows reads no cache).
        return with_vm_disk(
            f"  (\n    {sources(metric, matcher)}\n"
            f"    or on (vdisk_id) 0 * {sources(metric)}\n  )\n"
            f"  /\n  ({sources(metric)} > 0)"
        )

    def zero_share(metric: str, matcher: str) -> str:
        # Only where the page has a zero row: a 2014/2015 page has no Oplog Zero write destination
        # (its zero writes count as Oplog), and 0 there would read "no zeros" where none can be seen.
        return with_vm_disk(f"  {sources(metric, matcher)}\n  /\n  ({sources(metric)} > 0)")

    def measurable(metric: str, matcher: str) -> str:
        return with_vm_disk(f"  0 * {sources(metric, matcher)} + 1\n  or on (vdisk_id)\n  0 * {sources(metric)}")

    return Group(
        "ioparallax.storage",
        "What the storage did with the I/O: zero buckets, cache, working set.",
        [
            Rule(
                "1 when the vdisk's page has a zero read source (2014/2015 Zeroes, 2016 Estore Zero and Oplog "
                "Zero: every known build), 0 when it lists read sources but none for zeros.",
                measurable(rs, zero_src),
                record="vdisk:ioparallax_read_zero_measurable:bool",
            ),
            Rule(
                "1 when the vdisk's page has a zero write destination (Oplog Zero, 2016 builds), 0 when it "
                "lists write destinations but none for zeros (2014/2015 builds count zero writes as Oplog): "
                "the write zero share is then not measurable, and absent rather than 0.",
                measurable(wd, zero_dst),
                record="vdisk:ioparallax_write_zero_measurable:bool",
            ),
            Rule(
                "Share of read bytes served from zero buckets (Estore Zero, Oplog Zero, Zeroes): bytes no disk "
                "read. Absent where the page has no zero read source (read_zero_measurable 0).",
                zero_share(rs, zero_src),
                record="vdisk:ioparallax_read_zero:ratio",
            ),
            Rule(
                "Share of written bytes that were all-zero blocks (Oplog Zero): bytes no disk stored. Absent "
                "where the page has no zero write destination (write_zero_measurable 0: 2014/2015 builds).",
                zero_share(wd, zero_dst),
                record="vdisk:ioparallax_write_zero:ratio",
            ),
            Rule(
                "Share of read bytes served from the CVM's memory (Cache DRAM, Extent cache): the cache-fit signal.",
                share(rs, cache_src),
                record="vdisk:ioparallax_read_cache:ratio",
            ),
            Rule(
                f"Union working set of the last 2 minutes over the CVM cache size ({cache_bytes} bytes, "
                "thresholds.cvm_cache_bytes): below 1 the benchmark fits in cache.",
                with_vm_disk(f"  max by (vdisk_id) ({wss})\n  / {cache_bytes}"),
                record="vdisk:ioparallax_working_set_to_cache:ratio",
            ),
            Rule(
                "Storage reads beyond the frontend's, over frontend writes: read-modify-write of partial "
                "blocks, the storage-side sign of misaligned writes (a heuristic).",
                with_vm_disk(
                    f"  clamp_min(\n    sum by (vdisk_id) (max by (vdisk_id, source) (avg_over_time("
                    f"{x.st_metric('stargate_vdisk_read_source_bytes_per_second')}[{w}])))\n"
                    f"    - on (vdisk_id) vdisk:ioparallax_frontend_read_bytes:avg{w},\n    0\n  )\n"
                    f"  / on (vdisk_id) (vdisk:ioparallax_frontend_write_bytes:avg{w} > 0)"
                ),
                record=f"vdisk:ioparallax_rmw_read_to_write:ratio{w}",
            ),
        ],
    )
