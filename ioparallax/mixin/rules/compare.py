"""The views compared: ratios between the guest, VM and storage views of one VM disk."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import DIRECTIONS, Exprs
from ioparallax.mixin.rules.model import Group, Rule


def view_ratios(x: Exprs) -> Group:
    """The views side by side: bytes, ops and latency ratios between layers, Little's law, peak to average."""
    fio, w, both = x.fio, x.w, x.both
    views = [
        Rule(
            "Guest bytes over VM bytes (1: the layers agree; compare bytes, not ops, when requests are split).",
            f"{both('guest', 'bytes', 'rate')}\n/\n({both('vm', 'bytes', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_guest_to_vm_bytes:ratio{w}",
        ),
        Rule(
            "Storage (Stargate frontend) bytes over VM bytes.",
            f"{both('storage', 'bytes', 'avg')}\n/\n({both('vm', 'bytes', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_storage_to_vm_bytes:ratio{w}",
        ),
        Rule(
            "Guest ops over VM ops (above 1 when the hypervisor merges, below when the guest splits).",
            f"{both('guest', 'ops', 'rate')}\n/\n({both('vm', 'ops', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_guest_to_vm_ops:ratio{w}",
        ),
        Rule(
            "Guest OS block-layer requests over fio's ops on the same VM disk: the request splitting "
            "factor (2 for 1 MiB fio I/O at a 512 KiB max_sectors_kb, 1 for I/O within it).",
            f"{both('guest_os', 'ops', 'rate')}\n/\n({both('guest', 'ops', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_guest_os_to_fio_ops:ratio{w}",
        ),
        Rule(
            "Guest OS block-layer bytes over fio's bytes on the same VM disk (1: splitting keeps bytes; "
            "above 1, something besides fio writes to the disk).",
            f"{both('guest_os', 'bytes', 'rate')}\n/\n({both('guest', 'bytes', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_guest_os_to_fio_bytes:ratio{w}",
        ),
        Rule(
            "Storage ops over VM ops.",
            f"{both('storage', 'ops', 'avg')}\n/\n({both('vm', 'ops', 'rate')} > 0)",
            record=f"vm_disk:ioparallax_storage_to_vm_ops:ratio{w}",
        ),
    ]
    for d in DIRECTIONS:
        views += [
            Rule(
                f"Guest {d} latency over VM {d} latency (op-weighted; the guest adds its own stack).",
                f"vm_disk:ioparallax_guest_{d}_latency_seconds:mean{w}\n/\n(vm_disk:ioparallax_vm_{d}_latency_seconds:mean{w} > 0)",
                record=f"vm_disk:ioparallax_guest_to_vm_{d}_latency:ratio{w}",
            ),
            Rule(
                f"Storage {d} latency over VM {d} latency (the VM adds the hypervisor's stack).",
                f"vm_disk:ioparallax_storage_{d}_latency_seconds:avg{w}\n/\n(vm_disk:ioparallax_vm_{d}_latency_seconds:mean{w} > 0)",
                record=f"vm_disk:ioparallax_storage_to_vm_{d}_latency:ratio{w}",
            ),
        ]
    views += [
        Rule(
            "Little's law: the queue depth the guest's fio jobs ask for over the concurrency the VM view "
            "implies (throughput x latency), on every VM disk. ~1 when the asked depth is reached and "
            "the I/O is steady; above 1 either bursts (direct I/O) or a depth never reached (buffered).",
            f"vm_disk:ioparallax_guest_iodepth:sum\n/\n(vm_disk:ioparallax_vm_outstanding_ios:rate{w} > 0)",
            record=f"vm_disk:ioparallax_asked_to_implied_iodepth:ratio{w}",
        ),
        Rule(
            "Burstiness by Little's law: the guest's queue depth over the concurrency the VM view implies "
            "(throughput x latency). ~1 for steady I/O; a 1 s burst every 20 s at QD32 gives ~20: the "
            "VM's 20 s samples (Prism's 30 s) then show about a twentieth of the throughput the application saw. Not "
            "for buffered I/O (vm_disk:ioparallax_guest_buffered_io:bool 1): its asked depth is never "
            "reached, so the ratio says nothing about bursts there.",
            f"vm_disk:ioparallax_asked_to_implied_iodepth:ratio{w}\n"
            f"unless on (vm, disk) vm_disk:ioparallax_guest_buffered_io:bool == 1",
            record=f"vm_disk:ioparallax_burstiness:ratio{w}",
        ),
        Rule(
            "Peak to average: the highest per-interval guest throughput fio reported in the window (its "
            "status interval, 1 s in the demo; DiskSPD: the busiest -D interval of the current run, reads and "
            "writes, x block size) over the highest 20 s vCenter sample (30 s Prism sample). Sampled, so a lower bound of the "
            "real ratio when scrapes are slower than fio's interval.",
            "(\n"
            + x.guest_view(
                x.guest_sum(f"max_over_time(fio_read_interval_bandwidth_bytes_per_second{fio}[{w}])")
                + "\n+\n"
                + x.guest_sum(f"max_over_time(fio_write_interval_bandwidth_bytes_per_second{fio}[{w}])"),
                x.diskspd_sum(
                    f"(diskspd_read_interval_iops_max{x.ds} + diskspd_write_interval_iops_max{x.ds})"
                    f" * diskspd_target_block_size_bytes{x.ds}"
                ),
                x.vdbench_sum(f"max_over_time(vdbench_host_interval_bandwidth_bytes_per_second{x.vd}[{w}])"),
            )
            + "\n)\n/\n("
            + x.vm(
                lambda s: (
                    f"sum by (vm, disk) (max_over_time({s('sample_read_bytes_per_second')}[{w}])"
                    f" + max_over_time({s('sample_write_bytes_per_second')}[{w}]))"
                )
            )
            + " > 0)",
            record=f"vm_disk:ioparallax_guest_peak_to_vm_sample_bytes:ratio{w}",
        ),
    ]
    return Group("ioparallax.views", "The views side by side: ratios that name the gap.", views)


def agreement_window_rates(x: Exprs) -> Group:
    """Bytes of each view and their ratios over the agreement window, for the views-disagree alerts."""
    a = x.cfg.windows.agreement
    # The views-disagree alerts judge bytes over the agreement window: a ratio of rates over it, not
    # an average of 1m ratios (a 1m window holds two or three 20 s samples or bursts, so each 1m
    # ratio can be a third off, and an average of ratios is biased upwards).
    sampled = f"vm_disk:ioparallax_vm_sampled_seconds:rate{a}"
    agreement = [
        x.vm_sampled_seconds(a),
        Rule(
            f"Guest: bytes per second of fio's jobs on the VM disk, both directions, per second of their "
            f"run time over the agreement window ({a}); DiskSPD: its current run's.",
            x.guest_view(
                " + ".join(f"(\n{x.guest_sum(x.per_run_second(f'fio_{d}_bytes_total', a))}\n)" for d in DIRECTIONS),
                x.diskspd_sum(
                    f"diskspd_read_bandwidth_bytes_per_second{x.ds} + diskspd_write_bandwidth_bytes_per_second{x.ds}"
                ),
                " + ".join(
                    f"(\n{x.vdbench_sum(x.vdbench_per_run_second(f'vdbench_host_{d}_bytes_total', a))}\n)"
                    for d in DIRECTIONS
                ),
            ),
            record=f"vm_disk:ioparallax_guest_bytes:rate{a}",
        ),
        Rule(
            f"VM: bytes per second, both directions, from every vCenter (or Prism) sample in the agreement "
            f"window ({a}).",
            "(\n"
            + x.vm(lambda s: " + ".join(f"sum by (vm, disk) (rate({s(f'{d}_bytes_total')}[{a}]))" for d in DIRECTIONS))
            + f"\n)\n/\n{sampled}",
            record=f"vm_disk:ioparallax_vm_bytes:rate{a}",
        ),
        Rule(
            f"Storage: frontend bytes per second of the vdisk behind the VM disk, both directions, averaged "
            f"over the agreement window ({a}).",
            " + ".join(
                f"(\n{x.to_vm_disk(x.storage_by_vdisk(f'stargate_vdisk_{d}_bytes_per_second', window=a))}\n)"
                for d in DIRECTIONS
            ),
            record=f"vm_disk:ioparallax_storage_bytes:avg{a}",
        ),
        x.vm_outstanding_ios(a),
        Rule(
            f"Burstiness by Little's law over the agreement window ({a}): steadier than the 1m ratio for "
            "bursts a minute apart (a 1m window's vCenter samples miss such a burst a third of the time).",
            f"vm_disk:ioparallax_guest_iodepth:sum\n/\n(vm_disk:ioparallax_vm_outstanding_ios:rate{a} > 0)\n"
            f"unless on (vm, disk) vm_disk:ioparallax_guest_buffered_io:bool == 1",
            record=f"vm_disk:ioparallax_burstiness:ratio{a}",
        ),
        Rule(
            f"Guest bytes over VM bytes over the agreement window ({a}): what IoparallaxViewsDisagree judges.",
            f"vm_disk:ioparallax_guest_bytes:rate{a}\n/\n(vm_disk:ioparallax_vm_bytes:rate{a} > 0)",
            record=f"vm_disk:ioparallax_guest_to_vm_bytes:ratio{a}",
        ),
        Rule(
            f"Storage frontend bytes over VM bytes over the agreement window ({a}): what "
            "IoparallaxStorageViewDisagrees judges.",
            f"vm_disk:ioparallax_storage_bytes:avg{a}\n/\n(vm_disk:ioparallax_vm_bytes:rate{a} > 0)",
            record=f"vm_disk:ioparallax_storage_to_vm_bytes:ratio{a}",
        ),
    ]
    return Group(
        "ioparallax.agreement",
        f"The views over the agreement window ({a}): what the views-disagree alerts judge.",
        agreement,
    )
