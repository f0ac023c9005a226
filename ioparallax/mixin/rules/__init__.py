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

The modules: recording.py assembles the recording rule groups, one module per view (joins.py: who
is who; guest.py, vm.py, storage.py; compare.py: the views compared) from the PromQL pieces of
exprs.py; alerts.py holds the alerts; model.py the Rule and Group they are built as; files.py
``rule_files(cfg)`` and ``write_rule_files(cfg, outdir)``, the generated alerts/*.rules.yml.
"""
