"""Recording rules and alerts, generated from the mixin config.

The three views of one virtual disk are joined on the labels ``vm`` (the VM's name in vCenter or
Prism) and ``disk`` (vCenter's instance, e.g. ``scsi0:1``, or Prism's disk address, ``scsi.1``):

- VM view: the ``vcenter_*`` series (ESXi) or the ``prism_*`` series (AHV) carry both labels; every
  VM-view rule reads either (ioparallax/mixin/vmview.py), and ``vm_disk:ioparallax_vm_source:info``
  says which one a VM disk's came from.
- Storage view: ``stargate_vdisk_info{vdisk_id, vm, disk}`` (the exporter's mapping file or Prism).
- Guest view: a fio job's ``file`` (a raw device such as ``/dev/sdb``) names the guest device, the
  guest's ``fio_guest_disk_info{disk_uuid}`` names the virtual disk (on AHV the UUID is read from
  the Nutanix serial, ``NFS_<ctr>_0_<n>_<uuid with underscores>``), and
  ``vcenter_virtual_disk_info{disk_uuid}`` or ``prism_virtual_disk_info{disk_uuid}`` gives its vm and disk.
- Guest OS view (node_exporter's ``node_disk_*``, the block layer after request splitting): the
  guest's node_exporter and fio-exporter targets carry the same ``vm`` target label, renamed
  ``guest`` (it names the guest, not yet the vCenter VM), so ``node_disk_*{guest, device}`` meets
  ``fio_guest_disk_info{guest, disk=device, disk_uuid}`` and, through ``disk_uuid``, the VM disk.
- Windows guest OS view (windows_exporter's ``windows_physical_disk_*{disk}``, the counterpart of
  node_exporter's diskstats): a Windows guest has no disk serial to meet ``disk_uuid``; its
  ``windows_logical_disk_info{disk, volume}`` puts each volume on a disk number, its
  ``windows_os_hostname{hostname}`` names the guest as VMware Tools reports it to vCenter, and
  vCenter's ``vcenter_vm_guest_disk_info{hostname, disk_path, vm, disk}`` (``guest.disk``) puts the
  volume on the VM disk.

- Guest view from DiskSPD (``diskspd_*``, the results of finished runs): a target's ``host`` is
  DiskSPD's ``ComputerName`` and its path names the volume (``D:\\...``), so it meets
  ``vcenter_vm_guest_disk_info{hostname, disk_path}`` like a Windows volume; only each host's
  newest run, while it is recent, counts as the guest's current view.

Recording rules are named ``level:metric:operation`` (``vm_disk:ioparallax_guest_read_bytes:rate1m``).
Every rule has a comment in the generated file saying what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ioparallax.mixin.cluster import per_cluster
from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.vmview import SAMPLE_SECONDS, Source, either

DIRECTIONS = ("read", "write")
# What identifies one DiskSPD target of one run (the exporter's labels plus the target's).
DS_TARGET = "instance, job, host, source, timespan, target_id, target"
DS_RUN = "instance, job, host, source"
# What identifies one host of one vdbench output directory (a multi-host run's hd=).
VD_HOST = "instance, job, source, host"
VD_RUN = "instance, job, source, run, seq"
# A guest block device in a vdbench lun= (the device's name, as the guest's disk facts name it).
VD_LUN_RE = r"/dev/(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+)(p?[0-9]+)?"
# What identifies one fio job (fio's own labels plus the target's).
FIO_JOB = "instance, job, jobname, jobid, host, source"
# A raw guest block device in a fio job's filename (partitions map to their disk).
DEVICE_RE = r"/dev/(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+)(p?[0-9]+)?"
ZERO = ".*zero.*"  # estore_zero, oplog_zero, zero (2015 "Zeroes"), any future *zero*
CACHE = "cache_dram|extent_cache"  # reads served from the CVM's memory
# The serial an AHV guest sees for a Nutanix vdisk (docs/prism.md#the-guests-disk-on-ahv):
# NFS_<container id>_0_<n>_<vmdisk UUID with underscores>; the groups are the UUID's five parts.
_H = "[0-9a-f]"
AHV_SERIAL_RE = f"NFS_[0-9]+_[0-9]+_[0-9]+_({_H}{{8}})_({_H}{{4}})_({_H}{{4}})_({_H}{{4}})_({_H}{{12}})"


@dataclass
class Rule:
    comment: str
    expr: str
    record: str | None = None
    alert: str | None = None
    for_: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"record": self.record} if self.record else {"alert": self.alert}
        d["expr"] = self.expr.strip() + "\n"
        if self.for_:
            d["for"] = self.for_
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        return d


@dataclass
class Group:
    name: str
    comment: str
    rules: list[Rule]


# ---------------------------------------------------------------------------------------------
# recording rules


def recording_rules(cfg: MixinConfig) -> list[Group]:
    """The recording rule groups, one per view of the VM disk and one per comparison of the views."""
    x = _Exprs(cfg)
    groups = [
        _identity_joins(x),
        _guest_fio_rates(x),
        _guest_os_block_layer_rates(x),
        _vm_sample_rates(x),
        _storage_frontend_rates(x),
        _storage_bucket_shares(x),
        _view_ratios(x),
    ]
    if cfg.windows.agreement != x.w:
        groups.append(_agreement_window_rates(x))
    # else the views-disagree alerts judge the ratios of ioparallax.views
    return _per_cluster(groups, cfg)


class _Exprs:
    """The PromQL pieces the recording rules share, bound to one config (selectors, rate window)."""

    def __init__(self, cfg: MixinConfig) -> None:
        self.cfg = cfg
        self.w = cfg.windows.rate
        self.vc, self.fio, self.node = cfg.sel("vcenter"), cfg.sel("fio"), cfg.sel("node")
        self.win = cfg.sel("windows")
        self.ds = cfg.sel("diskspd")
        self.vd = cfg.sel("vdbench")

    def vm(self, build: Callable[[Source], str]) -> str:
        """A VM-view expression from vCenter's series or Prism's (whichever the cluster has)."""
        return either(self.cfg, build)

    def vm_rate(self, suffix: str, window: str) -> str:
        # sum by (vm, disk) of the rate of a VM-view counter, from vCenter or Prism.
        return self.vm(lambda s: f"sum by (vm, disk) (rate({s(suffix)}[{window}]))")

    def guest_disk_uuid(self) -> str:
        # The guest's disks with the virtual disk's UUID: the serial is the UUID on ESXi
        # (disk.EnableUUID), and carries it with underscores on AHV.
        with_uuid = self.cfg.sel("fio", 'disk_uuid!=""')
        ahv = self.cfg.sel("fio", 'disk_uuid=""', f'serial=~"{AHV_SERIAL_RE}"')
        return (
            f"(\n    fio_guest_disk_info{with_uuid}\n    or\n    label_replace(\n"
            f"      fio_guest_disk_info{ahv},\n"
            f'      "disk_uuid", "$1-$2-$3-$4-$5", "serial", "{AHV_SERIAL_RE}"\n    )\n  )'
        )

    def vm_disk_uuids(self) -> str:
        known = 'disk_uuid!=""'
        return self.vm(lambda s: f"max by (disk_uuid, vm, disk) ({s('info', known)})")

    def st_metric(self, name: str, *matchers: str) -> str:
        return name + self.cfg.sel("stargate", *matchers)

    def storage_by_vdisk(self, metric: str, *matchers: str, window: str | None = None) -> str:
        # One value per vdisk even while a moving vdisk is listed by two CVMs (two targets).
        return f"max by (vdisk_id) (avg_over_time({self.st_metric(metric, *matchers)}[{window or self.w}]))"

    def sources(self, metric: str, matcher: str = "") -> str:
        # One value per vdisk and bucket, then summed over the buckets. Averaged over the window:
        # the page's gauges are 0 between the bursts of a bursty writer, and a share that vanished
        # there would blink on the dashboards and restart the zero alerts' `for`.
        label = "source" if "read_source" in metric else "destination"
        return (
            f"sum by (vdisk_id) (max by (vdisk_id, {label}) "
            f"(avg_over_time({self.st_metric(metric, matcher)}[{self.w}])))"
        )

    def to_vm_disk(self, expr: str) -> str:
        return f"sum by (vm, disk) (\n  {expr}\n  * on (vdisk_id) group_left (vm, disk) vdisk:ioparallax_vdisk:info\n)"

    def with_vm_disk(self, expr: str) -> str:
        return f"(\n{expr}\n)\n* on (vdisk_id) group_left (vm, disk) vdisk:ioparallax_vdisk:info"

    def per_run_second(self, counter: str, window: str | None = None) -> str:
        # rate() over a window that a new series covers only in part is not extrapolated to the whole
        # window (a 30 s old job reads half its rate over 1m). fio's job_runtime grows over the same
        # part of the window, so the quotient is exact from the job's first record on.
        window, fio = window or self.w, self.fio
        return (
            f"rate({counter}{fio}[{window}])\n  / on ({FIO_JOB}) "
            f"(rate(fio_job_runtime_seconds_total{fio}[{window}]) > 0)"
        )

    def guest_sum(self, expr: str) -> str:
        return (
            f"sum by (vm, disk) (\n  {expr}\n  * on ({FIO_JOB}) group_left (vm, disk) "
            f"guest_job:ioparallax_vm_disk:info\n)"
        )

    def os_sum(self, expr: str) -> str:
        # node_disk_*{vm (target label), device} -> the VM disk; "guest" carries the target's vm label
        # because the join's own vm (vCenter's) replaces it.
        return (
            f'sum by (vm, disk) (\n  label_replace({expr}, "guest", "$1", "vm", "(.+)")\n'
            f"  * on (guest, device) group_left (vm, disk) guest_device:ioparallax_guest_os_disk:info\n)"
        )

    def diskspd_sum(self, expr: str) -> str:
        # A DiskSPD target's figures of the current run (each host's newest, while recent) -> the VM disk.
        return (
            f"sum by (vm, disk) (\n  ({expr})\n  * on ({DS_TARGET}) group_left (vm, disk) "
            f"guest_target:ioparallax_diskspd_vm_disk:info\n"
            f"  and on ({DS_RUN}) guest_run:ioparallax_diskspd_current:info\n)"
        )

    def vdbench_sum(self, expr: str) -> str:
        # A vdbench host's series (one host of a multi-host run) -> the VM disk its lun is.
        return (
            f"sum by (vm, disk) (\n  ({expr})\n  * on ({VD_HOST}) group_left (vm, disk) "
            f"guest_host:ioparallax_vdbench_vm_disk:info\n)"
        )

    def vdbench_per_run_second(self, counter: str, window: str | None = None) -> str:
        # As fio's: a run that starts inside the window is not extrapolated.
        # A finished run is left out at once: for a window after a period's run ends and the next
        # begins, both runs' rates per run second are full, and their sum would count twice.
        window, vd = window or self.w, self.vd
        return (
            f"(\n  rate({counter}{vd}[{window}])\n  / on ({VD_HOST}, run, seq) "
            f"(rate(vdbench_host_measured_seconds_total{vd}[{window}]) > 0)\n)\n"
            f"unless on ({VD_HOST}, run, seq) (vdbench_host_finished{vd} == 1)"
        )

    def guest_view(self, fio_expr: str, diskspd_expr: str, vdbench_expr: str | None = None) -> str:
        # The guest view of a VM disk from its load generator: fio's jobs, DiskSPD's current run or
        # vdbench's host (a disk is measured by one of them; fio wins where several are).
        out = f"(\n{fio_expr}\n)\nor\n(\n{diskspd_expr}\n)"
        return out + (f"\nor\n(\n{vdbench_expr}\n)" if vdbench_expr else "")

    def win_sum(self, expr: str) -> str:
        # windows_physical_disk_*{disk="1"} (or "1 D:" before windows_exporter 0.30) -> the VM disk,
        # through the Windows disk's volume and vCenter's guest.disk (guest_device:...windows_disk:info).
        return (
            f'sum by (vm, disk) (\n  label_replace({expr}, "device", "$1", "disk", "([0-9]+).*")\n'
            f"  * on (instance, job, device) group_left (vm, disk) guest_device:ioparallax_guest_windows_disk:info\n)"
        )

    def os_view(self, node_expr: str, win_expr: str) -> str:
        # The guest OS view of a VM disk: node_exporter's diskstats in a Linux guest, or
        # windows_exporter's physical disk in a Windows guest (a guest is one or the other).
        return f"(\n{self.os_sum(node_expr)}\n)\nor\n(\n{self.win_sum(win_expr)}\n)"

    def both(self, layer: str, what: str, op: str) -> str:
        w = self.w
        return f"(vm_disk:ioparallax_{layer}_read_{what}:{op}{w} + vm_disk:ioparallax_{layer}_write_{what}:{op}{w})"

    # vCenter counters advance in 20 s steps (Prism's in 30 s steps), so rate() over a 1m window sees
    # two or three steps depending on its alignment (+-30 %, +-50 % for Prism). Dividing by the
    # manager's time integrated in the same window (samples x interval, stepping together with the
    # data) gives the exact mean of the samples.
    def vm_sampled_seconds(self, window: str) -> Rule:
        return Rule(
            "VM: seconds of vCenter (or Prism) samples integrated per second of wall time (1 when no "
            f"sample is missed; the denominator of every VM rate over {window}).",
            self.vm(
                lambda s: (
                    f"sum by (vm, disk) (\n  rate({s('samples_total')}[{window}])\n"
                    f"  * {s('sample_interval_seconds')}\n) > 0"
                )
            ),
            record=f"vm_disk:ioparallax_vm_sampled_seconds:rate{window}",
        )

    def vm_outstanding_ios(self, window: str) -> Rule:
        return Rule(
            "VM: mean I/Os in flight implied by Little's law (latency x ops integrated over time, both "
            f"directions), the concurrency the VM view says the disk ran at over {window}.",
            f"(\n  {self.vm_rate('read_latency_seconds_total', window)}\n  +\n"
            f"  {self.vm_rate('write_latency_seconds_total', window)}\n)\n"
            f"/\nvm_disk:ioparallax_vm_sampled_seconds:rate{window}",
            record=f"vm_disk:ioparallax_vm_outstanding_ios:rate{window}",
        )


def _identity_joins(x: _Exprs) -> Group:
    """Who is who: a vdisk, a guest block device and a fio job each with the VM disk it is, and
    where each VM disk's VM view comes from."""
    fio, cfg = x.fio, x.cfg
    intervals = ", ".join(f"{s} {n} s" for s, n in SAMPLE_SECONDS.items())
    return Group(
        "ioparallax.identity",
        "Who is who across the layers: joins used by every other rule.",
        [
            Rule(
                "Each vdisk once (a moving vdisk is listed by two CVMs) with the VM disk it backs.",
                f"max by (vdisk_id, vm, disk) ({x.st_metric('stargate_vdisk_info')})",
                record="vdisk:ioparallax_vdisk:info",
            ),
            Rule(
                "Where the VM view of each VM disk comes from (vm_source: vcenter on ESXi, prism on AHV): "
                "the dashboards and the report name it.",
                x.vm(
                    lambda s: (
                        "max by (vm, disk, vm_source) ("
                        + f'label_replace({s("info")}, "vm_source", "{s.name}", "", ""))'
                    )
                ),
                record="vm_disk:ioparallax_vm_source:info",
            ),
            Rule(
                f"The VM view's sample period in seconds ({intervals}): the window its samples average a burst over.",
                x.vm(lambda s: f"max by (vm, disk) ({s('sample_interval_seconds')})"),
                record="vm_disk:ioparallax_vm_sample_interval:seconds",
            ),
            Rule(
                "A guest block device with the VM disk it is: the guest's disk serial (disk_uuid; on AHV "
                "the UUID inside the Nutanix serial) joined to vCenter's or Prism's virtual disk UUID.",
                f"""max by (instance, job, device, disk_uuid, vm, disk) (
  label_replace({x.guest_disk_uuid()}, "device", "$1", "disk", "(.+)")
  * on (disk_uuid) group_left (vm, disk)
    {x.vm_disk_uuids()}
)""",
                record="guest_device:ioparallax_guest_disk:info",
            ),
            Rule(
                "A fio job with the VM disk it runs on (its filename is a raw device, e.g. /dev/sdb).",
                f"""max by ({FIO_JOB}, vm, disk) (
  label_replace(fio_job_info{fio}, "device", "$1", "file", "{DEVICE_RE}")
  * on (instance, job, device) group_left (vm, disk) guest_device:ioparallax_guest_disk:info
)""",
                record="guest_job:ioparallax_vm_disk:info",
            ),
            Rule(
                "A guest block device as node_exporter names it (the guest's vm target label, as guest, and "
                "device) with the VM disk it is: the guest's fio_guest_disk_info (same vm target label) gives "
                "its serial (disk_uuid), vCenter's or Prism's virtual disk UUID the VM disk.",
                f"""max by (guest, device, disk_uuid, vm, disk) (
  label_replace(
    label_replace({x.guest_disk_uuid()}, "device", "$1", "disk", "(.+)"),
    "guest", "$1", "vm", "(.+)"
  )
  * on (disk_uuid) group_left (vm, disk)
    {x.vm_disk_uuids()}
)""",
                record="guest_device:ioparallax_guest_os_disk:info",
            ),
            Rule(
                "A Windows guest's disk (windows_exporter's disk number, as device) with the VM disk it is: "
                "windows_logical_disk_info puts a volume on the disk, windows_os_hostname names the guest as "
                "VMware Tools reports it to vCenter (guest.hostName), and vCenter's guest.disk "
                "(vcenter_vm_guest_disk_info) puts the volume (disk_path D:\\ for volume D:) on the VM disk. "
                "Volumes spanning disks (disk 1;2) and mount points without a drive letter do not join.",
                f"""max by (instance, job, device, vm, disk) (
  label_replace({"windows_logical_disk_info" + cfg.sel("windows", 'disk=~"[0-9]+"')}, "device", "$1", "disk", "(.+)")
  * on (instance, job) group_left (hostname) max by (instance, job, hostname) (windows_os_hostname{x.win})
  * on (hostname, volume) group_left (vm, disk)
    max by (hostname, volume, vm, disk) (
      label_replace(vcenter_vm_guest_disk_info{x.vc}, "volume", "$1", "disk_path", "([A-Za-z]:).*")
    )
)""",
                record="guest_device:ioparallax_guest_windows_disk:info",
            ),
            Rule(
                "A DiskSPD target with the VM disk it runs on: the run's host (DiskSPD's ComputerName) is the "
                "guest's host name vCenter shows (guest.hostName), the target path's drive letter (D:\\test.dat: "
                "D:) is a volume of vCenter's guest.disk, on the VM disk. Physical drive targets (#1) and paths "
                "without a drive letter do not join.",
                f"""group by ({DS_TARGET}, vm, disk) (
  label_replace(
    label_replace(diskspd_target_block_size_bytes{x.ds}, "hostname", "$1", "host", "(.+)"),
    "volume", "$1", "target", "([A-Za-z]:).*"
  )
  * on (hostname, volume) group_left (vm, disk)
    max by (hostname, volume, vm, disk) (
      label_replace(vcenter_vm_guest_disk_info{x.vc}, "volume", "$1", "disk_path", "([A-Za-z]:).*")
    )
)""",
                record="guest_target:ioparallax_diskspd_vm_disk:info",
            ),
            Rule(
                "Each DiskSPD host's current run: its newest result (RunTime), while it ended less than three "
                "of its test times ago. DiskSPD writes a result only when a run ends, so the guest view of a "
                "DiskSPD disk is the last finished run; an older one, or a result copied off long after, is "
                "history (its -D series backfilled), not the current view.",
                f"""group by ({DS_RUN}) (
  (
    diskspd_run_start_timestamp_seconds{x.ds}
    == on (host) group_left () max by (host) (diskspd_run_start_timestamp_seconds{x.ds})
  )
  and on (host, source)
  (
    max by (host, source) (diskspd_run_start_timestamp_seconds{x.ds})
    + on (host, source) sum by (host, source) (
      diskspd_timespan_warmup_seconds{x.ds} + diskspd_timespan_test_seconds{x.ds} + diskspd_timespan_cooldown_seconds{x.ds}
    )
    > on (host, source) (time() - 3 * sum by (host, source) (diskspd_timespan_test_seconds{x.ds}))
  )
)""",
                record="guest_run:ioparallax_diskspd_current:info",
            ),
            Rule(
                "A vdbench host (hd= of a multi-host run, named after the guest: the same name as the guest's "
                "targets' vm label) with the VM disk its lun= is: the run's storage definition names the guest "
                "device (lun=/dev/sdb), the guest's disk facts its serial, vCenter the VM disk. One lun per "
                "output directory; a lun that is not a /dev block device does not join.",
                f"""group by ({VD_HOST}, vm, disk) (
  label_replace(
    group by ({VD_HOST}) (vdbench_host_read_ops_total{x.vd})
    * on (instance, job, source) group_left (device)
      max by (instance, job, source, device) (
        label_replace(vdbench_parmfile_sd_info{x.vd}, "device", "$1", "lun", "{VD_LUN_RE}")
      ),
    "guest", "$1", "host", "(.+)"
  )
  * on (guest, device) group_left (vm, disk) guest_device:ioparallax_guest_os_disk:info
)""",
                record="guest_host:ioparallax_vdbench_vm_disk:info",
            ),
        ],
    )


def _guest_fio_rates(x: _Exprs) -> Group:
    """The guest view: the load generator on each VM disk, fio's jobs or DiskSPD's current run (ops,
    bytes, latency, asked queue depth, buffered I/O, which tool)."""
    fio, ds, w = x.fio, x.ds, x.w
    guest: list[Rule] = []
    for d in DIRECTIONS:
        guest += [
            Rule(
                f"Guest: {d} I/Os per second the load generator completed on the VM disk: fio's jobs per "
                "second of their run time in the window (exact from a job's first record on), or DiskSPD's "
                "current run (its count over its test time).",
                x.guest_view(
                    x.guest_sum(x.per_run_second(f"fio_{d}_ios_total")),
                    x.diskspd_sum(f"diskspd_{d}_iops{ds}"),
                    x.vdbench_sum(x.vdbench_per_run_second(f"vdbench_host_{d}_ops_total")),
                ),
                record=f"vm_disk:ioparallax_guest_{d}_ops:rate{w}",
            ),
            Rule(
                f"Guest: {d} bytes per second of the load generator on the VM disk (as above).",
                x.guest_view(
                    x.guest_sum(x.per_run_second(f"fio_{d}_bytes_total")),
                    x.diskspd_sum(f"diskspd_{d}_bandwidth_bytes_per_second{ds}"),
                    x.vdbench_sum(x.vdbench_per_run_second(f"vdbench_host_{d}_bytes_total")),
                ),
                record=f"vm_disk:ioparallax_guest_{d}_bytes:rate{w}",
            ),
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


def _guest_os_block_layer_rates(x: _Exprs) -> Group:
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


def _vm_sample_rates(x: _Exprs) -> Group:
    """The VM view: vCenter's 20 s samples (or Prism's 30 s samples) of each VM disk, integrated over
    the manager's time they cover."""
    w = x.w
    vm: list[Rule] = [x.vm_sampled_seconds(w)]
    for d in DIRECTIONS:
        vm += [
            Rule(
                f"VM: {d} I/Os per second from every 20 s vCenter sample (30 s Prism sample on AHV): the "
                "ops integrated over the manager's time they cover (exact whatever the window's alignment "
                "with the samples).",
                f"{x.vm_rate(f'{d}_ops_total', w)}\n/\nvm_disk:ioparallax_vm_sampled_seconds:rate{w}",
                record=f"vm_disk:ioparallax_vm_{d}_ops:rate{w}",
            ),
            Rule(
                f"VM: {d} bytes per second from every vCenter or Prism sample (as above).",
                f"{x.vm_rate(f'{d}_bytes_total', w)}\n/\nvm_disk:ioparallax_vm_sampled_seconds:rate{w}",
                record=f"vm_disk:ioparallax_vm_{d}_bytes:rate{w}",
            ),
            Rule(
                f"VM: op-weighted mean {d} latency (latency x ops integrated, over ops).",
                f"{x.vm_rate(f'{d}_latency_seconds_total', w)}\n/\n({x.vm_rate(f'{d}_ops_total', w)} > 0)",
                record=f"vm_disk:ioparallax_vm_{d}_latency_seconds:mean{w}",
            ),
        ]
    vm.append(x.vm_outstanding_ios(w))
    return Group(
        "ioparallax.vm",
        "The VM view per VM disk: every 20 s vCenter sample (30 s Prism sample on AHV), integrated.",
        vm,
    )


def _storage_frontend_rates(x: _Exprs) -> Group:
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


def _view_ratios(x: _Exprs) -> Group:
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


def _storage_bucket_shares(x: _Exprs) -> Group:
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


def _agreement_window_rates(x: _Exprs) -> Group:
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


def _per_cluster(groups: list[Group], cfg: MixinConfig) -> list[Group]:
    """Every by/on of every rule keeps the cluster label (ioparallax/mixin/cluster.py)."""
    for g in groups:
        for rule in g.rules:
            rule.expr = per_cluster(rule.expr, cfg.cluster_label)
    return groups


# ---------------------------------------------------------------------------------------------
# alerts


def alert_groups(cfg: MixinConfig) -> list[Group]:
    """The alert groups, one per kind of signal: the guest's facts, the storage, the views, the monitoring."""
    kit = _AlertKit(cfg)
    return _per_cluster([_guest_fact_alerts(kit), _storage_alerts(kit), _view_alerts(kit), _exporter_alerts(kit)], cfg)


class _AlertKit:
    """What every alert group uses: the config's thresholds, `for` durations and selectors, one alert builder."""

    def __init__(self, cfg: MixinConfig) -> None:
        self.cfg = cfg
        self.t, self.f, self.w = cfg.thresholds, cfg.for_, cfg.windows.rate
        self.fio, self.st, self.vc = cfg.sel("fio"), cfg.sel("stargate"), cfg.sel("vcenter")
        self.prism = cfg.sel("prism")
        self.busy = f"{self.t.busy_bytes_per_second:.0f}"

    def alert(
        self,
        name: str,
        severity: str,
        for_: str,
        expr: str,
        summary: str,
        description: str,
        comment: str,
        **labels: str,
    ) -> Rule:
        annotations = {"summary": summary, "description": description, "runbook_url": self.cfg.alerts.runbook(name)}
        return Rule(
            comment, expr, alert=name, for_=for_, labels={"severity": severity, **labels}, annotations=annotations
        )


def _guest_fact_alerts(kit: _AlertKit) -> Group:
    """Facts of the guest itself: partition alignment (and Windows' split I/Os), fio job hygiene."""
    f, fio, alert, t, w, busy = kit.f, kit.fio, kit.alert, kit.t, kit.w, kit.busy
    return Group(
        "ioparallax-guest-alerts",
        "What the guest's own facts say (reliable signals).",
        [
            alert(
                "IoparallaxMisalignedPartition",
                "warning",
                f.misaligned_partition,
                f"fio_guest_partition_aligned{fio} == 0",
                "A guest partition is not on the 4 KiB grid.",
                "Partition {{ $labels.partition }} of {{ $labels.disk }} on {{ $labels.instance }} starts at an "
                "offset that is not a multiple of 4096 bytes: every write straddles two storage blocks and "
                "needs a read-modify-write (1 MiB writes run at ~60 % of aligned throughput). Recreate the "
                "partition at 1 MiB (parted -a optimal) before measuring.",
                "The guest's partition start (sysfs start x 512) modulo 4096 is not 0.",
            ),
            alert(
                "IoparallaxFioJobHygiene",
                "warning",
                f.hygiene,
                f"fio_job_hygiene_problem{fio} == 1",
                "A fio job's options make its results unrepresentative.",
                "fio job {{ $labels.jobname }} on {{ $labels.host }} has the hygiene problem {{ $labels.problem }} "
                "(see docs/hygiene.md): its numbers do not describe what the application will get. Fix the "
                "job file and run it again.",
                "One alert per trap found in a job's options by the fio exporter.",
            ),
            alert(
                "IoparallaxDiskspdTargetHygiene",
                "warning",
                f.hygiene,
                f"diskspd_target_hygiene_problem{kit.cfg.sel('diskspd')} == 1",
                "A DiskSPD result was measured with a benchmark trap.",
                "DiskSPD target {{ $labels.target }} of {{ $labels.host }} ({{ $labels.source }}) has the hygiene "
                "problem {{ $labels.problem }} (see docs/hygiene.md): its numbers do not describe what the "
                "application will get. Fix the command line (check it first with ioparallax-check) and run it again.",
                "One alert per trap the DiskSPD exporter found in a result's target (the fio alert's counterpart; "
                "checks the XML cannot decide, diskspd_target_hygiene_cannot_tell, are not alerts).",
            ),
            alert(
                "IoparallaxVdbenchRunHygiene",
                "warning",
                f.hygiene,
                f"vdbench_run_hygiene_problem{kit.cfg.sel('vdbench')} == 1",
                "A vdbench run was measured with a benchmark trap.",
                "vdbench run {{ $labels.run }} in {{ $labels.source }} has the hygiene problem {{ $labels.problem }} "
                "(see docs/hygiene.md): its numbers do not describe what the application will get. Fix the "
                "parameter file (check it first with ioparallax-check) and run it again.",
                "One alert per trap the vdbench exporter found in a run (the fio alert's counterpart; checks the "
                "output directory cannot decide, vdbench_run_hygiene_cannot_tell, are not alerts).",
            ),
            alert(
                "IoparallaxGuestSplitIo",
                "info",
                f.misaligned_partition,
                f"vm_disk:ioparallax_guest_os_split_ios:ratio{w} > {t.split_io_ratio:g}\n"
                f"and on (vm, disk) (\n  vm_disk:ioparallax_guest_os_read_bytes:rate{w}\n"
                f"  + vm_disk:ioparallax_guest_os_write_bytes:rate{w}\n) > {busy}",
                "Windows splits most of this disk's I/Os: a misaligned partition is suspected (hint).",
                "Windows split {{ $value | humanizePercentage }} of the I/Os on {{ $labels.vm }} {{ $labels.disk }} "
                "(windows_exporter split_ios_total): the signature of a partition off the 4 KiB grid (Windows "
                "2003's 63 sectors, 1536 bytes) or of a fragmented test file. Check the partition offset "
                "(Get-Partition | fl Offset: a multiple of 4096) before trusting the results; windows_exporter "
                "does not show it.",
                "Windows guest hint (windows_exporter has no partition offset): split I/Os over I/Os, disk busy.",
                signal="heuristic",
            ),
        ],
    )


def _storage_alerts(kit: _AlertKit) -> Group:
    """What the storage did with the benchmark's I/O: zero buckets, cache, read-modify-write."""
    t, f, w, busy, alert = kit.t, kit.f, kit.w, kit.busy, kit.alert
    return Group(
        "ioparallax-storage-alerts",
        "What the storage did with the benchmark's I/O.",
        [
            alert(
                "IoparallaxZeroHeavyReads",
                "warning",
                f.zero_heavy,
                f"vdisk:ioparallax_read_zero:ratio > {t.zero_read_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_read_bytes:avg{w} > {busy}",
                "Reads are served from zero buckets: the storage reads no disk for them.",
                "{{ $value | humanizePercentage }} of the bytes read from vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) come from zero buckets (Estore/Oplog Zero): never-written "
                "or all-zero blocks that no disk serves. IOPS and latency are inflated. Fill the test files with "
                "non-zero data first (fio without zero_buffers, with refill_buffers) and run again.",
                "Zero share of read bytes above the threshold while the vdisk is busy reading.",
            ),
            alert(
                "IoparallaxZeroHeavyWrites",
                "warning",
                f.zero_heavy,
                f"vdisk:ioparallax_write_zero:ratio > {t.zero_write_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_write_bytes:avg{w} > {busy}",
                "Writes are all-zero blocks: the storage stores metadata only.",
                "{{ $value | humanizePercentage }} of the bytes written to vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) land in Oplog Zero: all-zero blocks that are never "
                "stored. Write throughput and latency are inflated. Use non-zero buffers (fio: no zero_buffers; "
                "buffer_compress_percentage only with buffer_pattern; DiskSPD -Z).",
                "Zero share of written bytes above the threshold while the vdisk is busy writing.",
            ),
            alert(
                "IoparallaxBenchmarkFromCache",
                "warning",
                f.cache,
                f"vdisk:ioparallax_read_cache:ratio > {t.cache_read_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_working_set_to_cache:ratio < {t.working_set_to_cache_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_read_bytes:avg{w} > {busy}",
                "The benchmark's working set fits in the CVM's memory (hero numbers).",
                "{{ $value | humanizePercentage }} of the bytes read from vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) come from the CVM's DRAM/extent cache and its 2-minute "
                "working set is smaller than the cache: latency and IOPS describe memory, not the storage. "
                "Size the test files above the cache (several times the working set of the real application).",
                "Read share from memory above the threshold, working set below the cache, vdisk busy.",
            ),
            alert(
                "IoparallaxMisalignedIoSuspected",
                "info",
                f.misaligned_io,
                f"vdisk:ioparallax_rmw_read_to_write:ratio{w} > {t.misaligned_read_to_write_ratio:g}\n"
                f"and on (vdisk_id) (\n  vdisk:ioparallax_frontend_read_bytes:avg{w}\n"
                f"  < {t.misaligned_frontend_read_to_write_ratio:g} * vdisk:ioparallax_frontend_write_bytes:avg{w}\n)\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_write_bytes:avg{w} > {busy}",
                "The storage reads on a write-only workload: misaligned writes suspected (heuristic).",
                "Vdisk {{ $labels.vdisk_id }} ({{ $labels.vm }} {{ $labels.disk }}) is written but hardly read, "
                "yet the storage reads {{ $value | humanizePercentage }} of the written bytes: the signature "
                "of read-modify-write on writes that straddle 4 KiB blocks. This is a heuristic: confirm with "
                "the guest's partition offsets (IoparallaxMisalignedPartition, fio_guest_partition_aligned).",
                "Storage-side heuristic, labelled as such: back-end reads on a write-only workload.",
                signal="heuristic",
            ),
        ],
    )


def _view_alerts(kit: _AlertKit) -> Group:
    """Where the views disagree: bursts averaged away, a queue depth never reached, bytes that differ."""
    cfg, t, f, w, busy, alert = kit.cfg, kit.t, kit.f, kit.w, kit.busy, kit.alert

    def disagree(layer: str) -> str:
        # Ratio and busy gate over the agreement window (recording_rules): a 1m gate flaps for a
        # workload that bursts once a minute, and every flap would restart the alert's `for`.
        a = cfg.windows.agreement
        ratio = f"vm_disk:ioparallax_{layer}_to_vm_bytes:ratio{a}"
        gate = f"vm_disk:ioparallax_vm_bytes:rate{a}" if a != w else both_bytes(w)
        expr = (
            f"(\n  {ratio} > {t.views_bytes_ratio:g}\n  or {ratio} < {1 / t.views_bytes_ratio:.4g}\n)\n"
            f"and on (vm, disk) {gate} > {busy}"
        )
        if layer == "storage":
            # The Stargate page shows rates over a window of a few seconds, sampled at each scrape:
            # bursts shorter than the scrape interval are seen at their height or not at all, the
            # same way every time when the burst period is a multiple of the scrape interval. Its
            # bytes cannot be compared while IoparallaxBurstAveragedAway's condition holds.
            expr += f"\nunless on (vm, disk) vm_disk:ioparallax_burstiness:ratio{a} > {t.burstiness_ratio:g}"
        return expr

    return Group(
        "ioparallax-views-alerts",
        "Where the views disagree, and why.",
        [
            alert(
                "IoparallaxBurstAveragedAway",
                "warning",
                f.burst,
                f"vm_disk:ioparallax_burstiness:ratio{w} > {t.burstiness_ratio:g}\n"
                f"and on (vm, disk) {both_bytes(w)} > {busy}",
                "The VM view's sample averages flatten this disk's bursts.",
                'The guest runs {{ $labels.vm }} {{ $labels.disk }} at a queue depth {{ $value | printf "%.1f" }} '
                "times the concurrency the VM view implies (throughput x latency): the I/O comes in bursts that "
                "the VM view's samples (vCenter's 20 s, Prism's 30 s on AHV) average away (high latency, "
                '"low" throughput). Judge throughput on '
                "fio's per-interval numbers or irate() with short scrapes, and latency op-weighted.",
                "Little's law: guest iodepth over the VM's implied concurrency, while the disk is busy.",
            ),
            alert(
                "IoparallaxAskedQueueDepthNotReached",
                "warning",
                f.burst,
                f"vm_disk:ioparallax_asked_to_implied_iodepth:ratio{w} > {t.asked_to_implied_iodepth_ratio:g}\n"
                f"and on (vm, disk) vm_disk:ioparallax_guest_buffered_io:bool == 1\n"
                f"and on (vm, disk) {both_bytes(w)} > {busy}",
                "Asked queue depth not reached (buffered I/O).",
                'The fio jobs on {{ $labels.vm }} {{ $labels.disk }} ask for a queue depth {{ $value | printf "%.1f" }} '
                "times the concurrency the VM view implies (throughput x latency), and they run buffered "
                "(direct=0): buffered libaio submits synchronously, so the asked iodepth is never reached and the "
                "result describes a queue depth of about one per job, through the guest page cache. Run with "
                "direct=1 to test the asked depth, or with a synchronous engine (psync) and numjobs set to the "
                "concurrency wanted.",
                "Little's law on a buffered disk: the asked depth far above the VM's implied concurrency, "
                "while the disk is busy (IoparallaxBurstAveragedAway does not judge buffered disks).",
            ),
            alert(
                "IoparallaxViewsDisagree",
                "warning",
                f.views_disagree,
                disagree("guest"),
                "The guest and the VM disagree on the bytes moved.",
                'Over {cfg.windows.agreement}, the guest moved {{ $value | printf "%.2f" }} times the bytes '
                "the VM view (vCenter, or Prism on AHV) counted for {{ $labels.vm }} {{ $labels.disk }}. Check "
                "that the fio jobs run on this "
                "disk (filename), that no other process writes to it, and that every exporter is up.".replace(
                    "{cfg.windows.agreement}", cfg.windows.agreement
                ),
                "Guest bytes against VM bytes over the agreement window, outside the tolerance.",
            ),
            alert(
                "IoparallaxStorageViewDisagrees",
                "warning",
                f.views_disagree,
                disagree("storage"),
                "The storage and the VM disagree on the bytes moved.",
                "Over " + cfg.windows.agreement + ", the Stargate frontend of {{ $labels.vm }} {{ $labels.disk }} "
                'moved {{ $value | printf "%.2f" }} times the bytes the VM view (vCenter, or Prism on AHV) '
                "counted. Check the vdisk mapping "
                "(stargate_vdisk_info vm/disk), that every CVM is probed (a moved vdisk), and other VMs on the "
                "same vdisk.",
                "Storage frontend bytes against VM bytes over the agreement window, outside the tolerance.",
            ),
        ],
    )


def _exporter_alerts(kit: _AlertKit) -> Group:
    """The monitoring itself: an exporter, a CVM, a vCenter, a Prism or a fio file that cannot be read, slow scrapes."""
    cfg, t, f, fio, st, vc, alert = kit.cfg, kit.t, kit.f, kit.fio, kit.st, kit.vc, kit.alert
    return Group(
        "ioparallax-exporters-alerts",
        "The monitoring itself: what cannot be seen.",
        [
            alert(
                "IoparallaxExporterDown",
                "critical",
                f.down,
                f"up{{{cfg.selectors.exporters}}} == 0",
                "Prometheus cannot scrape an ioparallax exporter.",
                "{{ $labels.job }} target {{ $labels.instance }} does not answer Prometheus: a whole view is "
                "missing from the dashboards. Check that the exporter runs and listens where the scrape "
                "config says.",
                "The scrape itself fails (exporter process down or unreachable).",
            ),
            alert(
                "IoparallaxStargateDown",
                "warning",
                f.down,
                f"stargate_up{st} == 0",
                "A CVM's Stargate page cannot be read.",
                "The Stargate exporter cannot read {{ $labels.instance }} (port 2009): the vdisks hosted there "
                "are missing from the storage view. The exporter's log names the cause (refused: firewall; "
                "timeout; not a Stargate page).",
                "The probe of one CVM fails (the exporter is up).",
            ),
            alert(
                "IoparallaxVcenterDown",
                "warning",
                f.down,
                f"vcenter_up{vc} == 0",
                "vCenter cannot be collected.",
                "The vCenter exporter cannot collect {{ $labels.instance }}: the VM view is missing. "
                "vcenter_probe_error_info names the cause (login, tls, connect, timeout).",
                "The probe of one vCenter fails (the exporter is up).",
            ),
            alert(
                "IoparallaxPrismDown",
                "warning",
                f.down,
                f"prism_up{kit.prism} == 0",
                "Prism cannot be collected.",
                "The Prism exporter cannot collect {{ $labels.instance }}: the VM view of the AHV cluster is "
                "missing. prism_probe_error_info names the cause (login, tls, connect, timeout); the "
                "exporter's log names the target.",
                "The probe of one Prism (an AHV cluster's VM view) fails (the exporter is up).",
            ),
            alert(
                "IoparallaxFioSourceDown",
                "warning",
                f.down,
                f"fio_source_up{fio} == 0",
                "A fio output file cannot be used.",
                "The fio exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that job's guest "
                "view is missing. fio_source_error_info{reason} says why (unreadable, corrupt, invalid_value, "
                "too_large, truncated); the exporter's log names the file and the cause.",
                "One watched fio output file is unreadable, corrupt or holds values fio cannot write.",
            ),
            alert(
                "IoparallaxDiskspdSourceDown",
                "warning",
                f.down,
                f"diskspd_source_up{kit.cfg.sel('diskspd')} == 0",
                "A DiskSPD result file cannot be used.",
                "The DiskSPD exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that run's guest "
                "view is missing. diskspd_source_error_info{reason} says why (unreadable, corrupt, truncated, "
                "not_diskspd, invalid_value, forbidden_markup, too_large); the exporter's log names the file.",
                "One watched DiskSPD result is unreadable, cut off or not a DiskSPD -Rxml document.",
            ),
            alert(
                "IoparallaxVdbenchSourceDown",
                "warning",
                f.down,
                f"vdbench_source_up{kit.cfg.sel('vdbench')} == 0",
                "A vdbench output directory cannot be used.",
                "The vdbench exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that run's guest "
                "view is missing. vdbench_source_error_info{file, reason} names the file and why (unreadable, "
                "not_vdbench, too_large); the exporter's log names the file.",
                "One watched vdbench output directory has a file that cannot be read or is not vdbench output.",
            ),
            alert(
                "IoparallaxStargateUnreadFields",
                "info",
                f.unread_fields,
                f"stargate_parse_unknown_fields{st} > 0",
                "A CVM's pages hold fields ioparallax does not read.",
                "The Stargate pages of {{ $labels.instance }} hold {{ $value }} tables, rows or columns "
                "ioparallax does not read (stargate_parse_unknown_field_pages names them; the exporter's "
                "log too, with the page build): the storage view may be incomplete. Capture the pages and "
                "report them: stargate-exporter capture --target {{ $labels.instance }} (README: Reporting "
                "a page or answer ioparallax misreads).",
                "Parse coverage (issue 26): another page build than the ones the parser knows.",
            ),
            alert(
                "IoparallaxPrismUnreadFields",
                "info",
                f.unread_fields,
                f"prism_parse_unknown_fields{kit.prism} > 0",
                "A Prism's answers hold statistics ioparallax does not read.",
                "The virtual_disks answers of Prism {{ $labels.instance }} hold {{ $value }} stats keys "
                "ioparallax does not map (prism_parse_unknown_field_entities names them; the exporter's "
                "log too): another AOS version than the ones the exporter knows. Capture the answers and "
                "report them: prism-exporter capture --target {{ $labels.instance }} (README: Reporting a "
                "page or answer ioparallax misreads).",
                "Parse coverage (issue 26): stats keys of an AOS version the exporter does not know.",
            ),
            alert(
                "IoparallaxScrapeSlow",
                "warning",
                f.scrape_slow,
                f"scrape_duration_seconds{{{cfg.selectors.exporters}}}\n"
                f"> {t.scrape_duration_ratio:g} * scrape_timeout_seconds{{{cfg.selectors.exporters}}}",
                "A scrape takes most of its timeout.",
                "Scrapes of {{ $labels.job }} target {{ $labels.instance }} take {{ $value | humanizeDuration }}, "
                "close to the scrape timeout: soon they fail and the view has gaps. Raise scrape_timeout, "
                "probe fewer CVMs per target, or raise the exporter's concurrency.",
                "Needs Prometheus' --enable-feature=extra-scrape-metrics (scrape_timeout_seconds).",
            ),
        ],
    )


def both_bytes(w: str) -> str:
    return f"(vm_disk:ioparallax_vm_read_bytes:rate{w} + vm_disk:ioparallax_vm_write_bytes:rate{w})"


# ---------------------------------------------------------------------------------------------
# output

HEADER = """\
# GENERATED by `ioparallax-mixin rules` from {config}: edit the config (or ioparallax/mixin/rules.py), not
# this file, then run `make rules`. A test fails when this file differs from a fresh generation.
"""


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, so the rule files read like hand-written ones."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _dump_rule(rule: Rule) -> str:
    body = yaml.dump(
        [rule.as_dict()], Dumper=_Dumper, sort_keys=False, width=1000, default_flow_style=False, allow_unicode=True
    )
    comment = "\n".join("    # " + line for line in _wrap(rule.comment, 94))
    return comment + "\n" + "\n".join("    " + line if line else line for line in body.splitlines()) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def render(groups: list[Group], config_name: str, interval: str | None = None) -> str:
    out = [HEADER.format(config=config_name), "groups:\n"]
    for g in groups:
        out.append(f"  # {g.comment}\n")
        out.append(f"  - name: {g.name}\n")
        if interval:
            out.append(f"    interval: {interval}\n")
        out.append("    rules:\n")
        for rule in g.rules:
            out.append(_dump_rule(rule))
    return "".join(out)


def rule_files(
    cfg: MixinConfig, config_name: str = "ioparallax/mixin/config.yml", interval: str | None = None
) -> dict[str, str]:
    """File name -> content: the recording rules and the alerts, one file each."""
    return {
        "ioparallax.rules.yml": render(recording_rules(cfg), config_name, interval),
        "ioparallax-alerts.rules.yml": render(alert_groups(cfg), config_name, interval),
    }


def write_rule_files(
    cfg: MixinConfig, outdir: Path, config_name: str = "ioparallax/mixin/config.yml", interval: str | None = None
) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rule_files(cfg, config_name, interval).items():
        path = outdir / name
        path.write_text(text)
        written.append(path)
    return written
