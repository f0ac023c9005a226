"""The guest's views: its load generator (fio, DiskSPD, vdbench) and its OS's block layer."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import DIRECTIONS, DS_RUN, DS_TARGET, FIO_JOB, VD_RUN, Exprs
from ioparallax.mixin.rules.model import Group, Rule


def guest_fio_rates(x: Exprs) -> Group:
    """The guest view: the load generator on each VM disk, fio's jobs or DiskSPD's current run (ops,
    bytes, latency, asked queue depth, buffered I/O, which tool)."""
    fio, ds, w = x.fio, x.ds, x.w
    guest: list[Rule] = []
    for d in DIRECTIONS:
        # (recorded kind, what it is, fio's counter, DiskSPD's gauge, vdbench's counter)
        rates = (
            (
                "ops",
                "I/Os per second the load generator completed on the VM disk: fio's jobs per second of their "
                "run time in the window (exact from a job's first record on), or DiskSPD's current run (its "
                "count over its test time).",
                "ios_total",
                "iops",
                "ops_total",
            ),
            (
                "bytes",
                "bytes per second of the load generator on the VM disk (as above).",
                "bytes_total",
                "bandwidth_bytes_per_second",
                "bytes_total",
            ),
        )
        guest += [
            Rule(
                f"Guest: {d} {what}",
                x.guest_view(
                    x.guest_sum(x.per_run_second(f"fio_{d}_{fio_counter}")),
                    x.diskspd_sum(f"diskspd_{d}_{diskspd_gauge}{ds}"),
                    x.vdbench_sum(x.vdbench_per_run_second(f"vdbench_host_{d}_{vdbench_counter}")),
                ),
                record=f"vm_disk:ioparallax_guest_{d}_{kind}:rate{w}",
            )
            for kind, what, fio_counter, diskspd_gauge, vdbench_counter in rates
        ]
        guest += [
            Rule(
                f"Guest: op-weighted mean {d} completion latency on the VM disk (fio clat; DiskSPD -L).",
                x.guest_view(
                    x.guest_sum(f"rate(fio_{d}_clat_seconds_sum{fio}[{w}])")
                    + "\n/\n("
                    + x.guest_sum(f"rate(fio_{d}_clat_seconds_count{fio}[{w}])")
                    + " > 0)",
                    x.diskspd_sum(f"diskspd_{d}_latency_seconds_total{ds}")
                    + "\n/\n("
                    + x.diskspd_sum(f"diskspd_{d}_ios_total{ds}")
                    + " > 0)",
                    x.vdbench_sum(f"rate(vdbench_host_{d}_response_seconds_total{x.vd}[{w}])")
                    + "\n/\n("
                    + x.vdbench_sum(f"rate(vdbench_host_{d}_ops_total{x.vd}[{w}])")
                    + " > 0)",
                ),
                record=f"vm_disk:ioparallax_guest_{d}_latency_seconds:mean{w}",
            ),
        ]
    guest.append(
        Rule(
            "Guest: the concurrency the load generator asks for on the VM disk (sum of iodepth of running fio "
            "jobs; DiskSPD: RequestCount x threads of the current run's targets).",
            x.guest_view(
                x.guest_sum(f"(fio_job_iodepth{fio} unless on ({FIO_JOB}) (fio_job_finished{fio} == 1))"),
                x.diskspd_sum(f"diskspd_target_outstanding_ios{ds}"),
                x.vdbench_sum(
                    f"(vdbench_host_finished{x.vd} == bool 0)\n"
                    f"  * on ({VD_RUN}) group_left () vdbench_run_threads{x.vd}"
                ),
            ),
            record="vm_disk:ioparallax_guest_iodepth:sum",
        )
    )
    # fio_job_info's direct label is "1" for direct=1 or buffered=0, "0" otherwise (fio's default).
    guest.append(
        Rule(
            "Guest: 1 when the load generator does buffered I/O on the VM disk (fio direct=0: the guest page "
            "cache in between, and buffered libaio is synchronous, so the asked iodepth is never reached; "
            "DiskSPD without -Sh/-Su: os_cache on; vdbench without openflags=o_direct), 0 when every running "
            "job or target is direct.",
            f"""(
max by (vm, disk) (
  (
    (
      max by ({FIO_JOB}) (0 * {"fio_job_info" + x.cfg.sel("fio", 'direct="0"')} + 1)
      or max by ({FIO_JOB}) (0 * fio_job_info{fio})
    )
    unless on ({FIO_JOB}) (fio_job_finished{fio} == 1)
  )
  * on ({FIO_JOB}) group_left (vm, disk) guest_job:ioparallax_vm_disk:info
)
)
or
(
max by (vm, disk) (
  (
    max by ({DS_TARGET}) (0 * {"diskspd_target_info" + x.cfg.sel("diskspd", 'os_cache="on"')} + 1)
    or max by ({DS_TARGET}) (0 * diskspd_target_info{ds})
  )
  * on ({DS_TARGET}) group_left (vm, disk) guest_target:ioparallax_diskspd_vm_disk:info
  and on ({DS_RUN}) guest_run:ioparallax_diskspd_current:info
)
)
or
(
max by (vm, disk) (
  (
    max by (instance, job, source) (0 * {"vdbench_parmfile_sd_info" + x.cfg.sel("vdbench", 'openflags!~".*o_direct.*"')} + 1)
    or max by (instance, job, source) (0 * vdbench_parmfile_sd_info{x.vd})
  )
  * on (instance, job, source) group_right () guest_host:ioparallax_vdbench_vm_disk:info
)
)""",
            record="vm_disk:ioparallax_guest_buffered_io:bool",
        )
    )
    guest.append(
        Rule(
            "Which load generator gives the guest view of the VM disk (tool: fio, diskspd, vdbench), for "
            "dashboards and reports to say who measured.",
            'label_replace(group by (vm, disk) (guest_job:ioparallax_vm_disk:info), "tool", "fio", "", "")\n'
            "or\nlabel_replace(\n  group by (vm, disk) (\n    guest_target:ioparallax_diskspd_vm_disk:info\n"
            f"    and on ({DS_RUN}) guest_run:ioparallax_diskspd_current:info\n  ),\n"
            '  "tool", "diskspd", "", ""\n)\n'
            "or\nlabel_replace(\n  group by (vm, disk) (guest_host:ioparallax_vdbench_vm_disk:info),\n"
            '  "tool", "vdbench", "", ""\n)',
            record="vm_disk:ioparallax_guest_tool:info",
        )
    )
    return Group("ioparallax.guest", "The guest view per VM disk: the load generator's jobs on that disk.", guest)


def guest_os_block_layer_rates(x: Exprs) -> Group:
    """The guest OS view: node_exporter's diskstats (Linux, after request splitting) or
    windows_exporter's physical disks (Windows) of each VM disk, and which of them measured."""
    node, win, w = x.node, x.win, x.w
    guest_os: list[Rule] = []
    for d in DIRECTIONS:
        done, nbytes, time_ = (
            ("reads_completed", "read_bytes", "read_time_seconds")
            if d == "read"
            else ("writes_completed", "written_bytes", "write_time_seconds")
        )
        wdone, wbytes, wlat = f"{d}s_total", f"{d}_bytes_total", f"{d}_latency_seconds_total"
        guest_os += [
            Rule(
                f"Guest OS: {d} requests per second the guest OS completed on the VM disk (node_exporter "
                "diskstats: a request larger than the device's max_sectors_kb is split, so a 1 MiB fio op is "
                "two 512 KiB requests; windows_exporter's physical disk: requests above the class driver, "
                "counted once).",
                x.os_view(f"rate(node_disk_{done}_total{node}[{w}])", f"rate(windows_physical_disk_{wdone}{win}[{w}])"),
                record=f"vm_disk:ioparallax_guest_os_{d}_ops:rate{w}",
            ),
            Rule(
                f"Guest OS: {d} bytes per second of the guest OS on the VM disk (splitting keeps bytes: "
                "compare these across layers).",
                x.os_view(
                    f"rate(node_disk_{nbytes}_total{node}[{w}])", f"rate(windows_physical_disk_{wbytes}{win}[{w}])"
                ),
                record=f"vm_disk:ioparallax_guest_os_{d}_bytes:rate{w}",
            ),
            Rule(
                f"Guest OS: mean {d} request latency in the guest OS (time spent on completed requests over "
                "requests completed; Windows: the Avg. Disk sec/Read or sec/Write numerator over its count).",
                "(\n"
                + x.os_sum(f"rate(node_disk_{time_}_total{node}[{w}])")
                + "\n/\n("
                + x.os_sum(f"rate(node_disk_{done}_total{node}[{w}])")
                + " > 0)\n)\nor\n(\n"
                + x.win_sum(f"rate(windows_physical_disk_{wlat}{win}[{w}])")
                + "\n/\n("
                + x.win_sum(f"rate(windows_physical_disk_{wdone}{win}[{w}])")
                + " > 0)\n)",
                record=f"vm_disk:ioparallax_guest_os_{d}_latency_seconds:mean{w}",
            ),
        ]
    guest_os += [
        Rule(
            "Guest OS (Windows): the share of the VM disk's I/Os that Windows split into several "
            "(windows_exporter split_ios_total over reads and writes): near 1 on a partition off the 4 KiB "
            "grid, about 0 on an aligned, unfragmented test file. A misalignment hint (fragmentation splits too).",
            x.win_sum(f"rate(windows_physical_disk_split_ios_total{win}[{w}])")
            + "\n/\n("
            + x.win_sum(
                f"(rate(windows_physical_disk_reads_total{win}[{w}]) + rate(windows_physical_disk_writes_total{win}[{w}]))"
            )
            + " > 0)",
            record=f"vm_disk:ioparallax_guest_os_split_ios:ratio{w}",
        ),
        Rule(
            "Which exporter gives the guest OS view of the VM disk (source: node_exporter or windows_exporter), "
            "for dashboards and reports to say who measured.",
            "max by (vm, disk, source) (\n  label_replace(0 * group by (vm, disk) ("
            + 'guest_device:ioparallax_guest_os_disk:info), "source", "node_exporter", "", "") + 1\n'
            + "  or label_replace(0 * group by (vm, disk) ("
            + 'guest_device:ioparallax_guest_windows_disk:info), "source", "windows_exporter", "", "") + 1\n)',
            record="vm_disk:ioparallax_guest_os_source:info",
        ),
    ]
    return Group(
        "ioparallax.guest-os",
        "The guest OS view per VM disk: the guest's block layer (node_exporter diskstats, after request "
        "splitting) or its Windows physical disk (windows_exporter).",
        guest_os,
    )
