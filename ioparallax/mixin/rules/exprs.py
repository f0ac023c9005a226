"""The label sets, patterns and PromQL pieces the recording rules share."""

from __future__ import annotations

from collections.abc import Callable

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.rules.model import Rule
from ioparallax.mixin.vmview import Source, either

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


class Exprs:
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
