"""A guest's disk facts as a sysfs tree (what ``fio-exporter --collector.sysfs`` reads).

Per scenario disk of a VM, ``<root>/block/<dev>/`` holds what a Linux guest shows: ``size`` in
512-byte sectors, ``device/vpd_pg80`` (SCSI unit serial page), ``device/{vendor,model}``,
``device/wwid``, ``queue/{logical,physical}_block_size`` and ``queue/max_sectors_kb``, and the
data partition ``<dev>1/`` with ``partition``, ``start`` (the scenario's ``partition_start`` in
512-byte sectors: 1536 bytes is ``3``, misaligned) and ``size``. :func:`write_udev` writes the
matching udev database entries (for node_exporter's ``node_disk_info``).

The disk's identity depends on the hypervisor (:func:`identity`):

- ESXi with ``disk.EnableUUID=TRUE``: ``VMware``/``Virtual disk``, serial = the virtual disk's
  UUID without dashes, lower case; WWID ``naa.<serial>``.
- AHV: ``NUTANIX``/``VDISK``, serial = ``NFS_<container id>_0_<n>_<vmdisk UUID with
  underscores>`` (the vdisk's name ``NFS:<container id>:0:<n>`` with underscores, then the UUID);
  WWID ``t10.NUTANIX <serial>`` (a T10 vendor designator, udev's ``1NUTANIX_<serial>``). An
  assumption from public sources, see docs/prism.md#the-guests-disk-on-ahv.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ioparallax.simulators.scenario import Disk, Vm
from ioparallax.simulators.scenario.model import AHV_CONTAINER_ID

from .devices import MAX_SECTORS_KB, SD_MAJOR, SECTOR, minor_of

_AHV_VDISK_NAME = re.compile(r"NFS:(\d+):(\d+):(\d+)")


def serial(disk: Disk) -> str:
    """The guest's view of the virtual disk UUID: 32 hex digits, no dashes, lower case."""
    return disk.uuid.replace("-", "").lower()


def ahv_serial(disk: Disk) -> str:
    """What an AHV guest reads as the disk's serial: ``NFS_1_0_30001000_<uuid with underscores>``."""
    m = _AHV_VDISK_NAME.fullmatch(disk.vdisk_name)
    name = "_".join(m.groups()) if m else f"{AHV_CONTAINER_ID}_0_{disk.vdisk_id + 30000000}"
    return f"NFS_{name}_{disk.uuid.lower().replace('-', '_')}"


@dataclass(frozen=True)
class Identity:
    """What the guest's SCSI inquiry gives for a disk (sysfs) and what udev makes of it."""

    vendor: str  # 8 characters, as INQUIRY pads it
    model: str  # 16 characters
    serial: str  # VPD page 0x80
    wwid: str  # sysfs device/wwid (from VPD page 0x83)
    udev: dict[str, str]


def identity(vm: Vm, disk: Disk) -> Identity:
    if vm.hypervisor == "ahv":
        sn = ahv_serial(disk)
        udev = {
            "ID_VENDOR": "NUTANIX",
            "ID_MODEL": "VDISK",
            "ID_REVISION": "0",
            "ID_SERIAL": f"1NUTANIX_{sn}",
            "ID_SERIAL_SHORT": sn,
            "ID_TYPE": "disk",
        }
        return Identity("NUTANIX ", "VDISK           ", sn, f"t10.NUTANIX {sn}", udev)
    sn = serial(disk)
    udev = {
        "ID_VENDOR": "VMware",
        "ID_MODEL": "Virtual_disk",
        "ID_REVISION": "2.0",
        "ID_SERIAL_SHORT": sn,
        "ID_WWN": f"0x{sn[:16]}",
        "ID_TYPE": "disk",
    }
    return Identity("VMware  ", "Virtual disk    ", sn, f"naa.{sn}", udev)


def vpd_pg80(text: str) -> bytes:
    """SCSI VPD page 0x80 (unit serial number): 4-byte header, then the ASCII serial."""
    data = text.encode("ascii")
    return bytes([0x00, 0x80]) + len(data).to_bytes(2, "big") + data


def write_attribute(path: Path, content: str | bytes) -> None:
    """One sysfs attribute file, its directories made: text as the kernel shows it (a newline at
    the end), bytes as they are (binary attributes such as VPD pages)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content + "\n")


def write_tree(vm: Vm, root: str | os.PathLike[str]) -> Path:
    """Write (afresh) the sysfs tree of ``vm`` under ``root``; returns ``root``."""
    root = Path(root)
    block = root / "block"
    shutil.rmtree(block, ignore_errors=True)
    for d in vm.disks:
        dev = block / d.guest_device
        sectors = d.capacity_bytes // SECTOR
        write_attribute(dev / "size", str(sectors))
        write_attribute(dev / "ro", "0")
        write_attribute(dev / "removable", "0")
        ident = identity(vm, d)
        write_attribute(dev / "device" / "vpd_pg80", vpd_pg80(ident.serial))
        write_attribute(dev / "device" / "vendor", ident.vendor)
        write_attribute(dev / "device" / "model", ident.model)
        write_attribute(dev / "device" / "wwid", ident.wwid)
        write_attribute(dev / "queue" / "logical_block_size", "512")
        write_attribute(dev / "queue" / "physical_block_size", "512")
        write_attribute(dev / "queue" / "max_sectors_kb", str(MAX_SECTORS_KB))
        write_attribute(dev / "queue" / "rotational", "0")
        if d.partition_start_bytes % SECTOR:
            raise ValueError(f"{d.key}: partition_start {d.partition_start_bytes} is not a multiple of 512")
        start = d.partition_start_bytes // SECTOR
        part = dev / f"{d.guest_device}1"
        write_attribute(part / "partition", "1")
        write_attribute(part / "start", str(start))
        write_attribute(part / "size", str(max(0, sectors - start)))
    return root


def write_udev(vm: Vm, root: str | os.PathLike[str]) -> Path:
    """Write (afresh) udev's database entries of ``vm``'s disks under ``root`` (what
    ``/run/udev/data`` holds: ``b<major>:<minor>`` files of ``E:KEY=value`` lines), for
    node_exporter's ``--path.udev.data``: its ``node_disk_info`` takes the model, serial and WWN
    from them. The serial is the sysfs tree's (:func:`identity`)."""
    root = Path(root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for d in vm.disks:
        minor = minor_of(d.guest_device)
        props = identity(vm, d).udev
        write_attribute(root / f"b{SD_MAJOR}:{minor}", "\n".join(f"E:{k}={v}" for k, v in props.items()))
    return root
