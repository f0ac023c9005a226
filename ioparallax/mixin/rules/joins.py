"""Identity joins: who is who (a vdisk, a guest device, a load generator's job: which VM disk)."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import DEVICE_RE, DS_RUN, DS_TARGET, FIO_JOB, VD_HOST, VD_LUN_RE, Exprs
from ioparallax.mixin.rules.model import Group, Rule
from ioparallax.mixin.vmview import SAMPLE_SECONDS


def identity_joins(x: Exprs) -> Group:
    """Who is who: a vdisk, a guest block device and a fio job each with the VM disk it is, and
    where each VM disk's VM view comes from."""
    fio, cfg = x.fio, x.cfg
    intervals = ", ".join(f"{s} {n} s" for s, n in SAMPLE_SECONDS.items())
    # A guest volume (hostname, volume: "D:") onto the VM disk vCenter's guest.disk puts it on.
    on_vm_disk_by_volume = f"""  * on (hostname, volume) group_left (vm, disk)
    max by (hostname, volume, vm, disk) (
      label_replace(vcenter_vm_guest_disk_info{x.vc}, "volume", "$1", "disk_path", "([A-Za-z]:).*")
    )"""
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
{on_vm_disk_by_volume}
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
{on_vm_disk_by_volume}
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
