"""A guest's disk facts as a sysfs tree (what ``fio-exporter --collector.sysfs`` reads).

Per scenario disk of a VM, ``<root>/block/<dev>/`` holds what a Linux guest on VMware with
``disk.EnableUUID=TRUE`` shows: ``size`` in 512-byte sectors, ``device/vpd_pg80`` (SCSI unit
serial page: the virtual disk's UUID without dashes, lower case), ``device/{vendor,model}``,
``device/wwid``, ``queue/{logical,physical}_block_size`` and ``queue/max_sectors_kb``, and the
data partition ``<dev>1/`` with ``partition``, ``start`` (the scenario's ``partition_start`` in
512-byte sectors: 1536 bytes is ``3``, misaligned) and ``size``. :func:`write_udev` writes the
matching udev database entries (for node_exporter's ``node_disk_info``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ioparallax.simulators.scenario import Disk, Vm

from .devices import MAX_SECTORS_KB, SD_MAJOR, SECTOR, minor_of


def serial(disk: Disk) -> str:
    """The guest's view of the virtual disk UUID: 32 hex digits, no dashes, lower case."""
    return disk.uuid.replace("-", "").lower()


def vpd_pg80(text: str) -> bytes:
    """SCSI VPD page 0x80 (unit serial number): 4-byte header, then the ASCII serial."""
    data = text.encode("ascii")
    return bytes([0x00, 0x80]) + len(data).to_bytes(2, "big") + data


def _write(path: Path, content: str | bytes) -> None:
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
        _write(dev / "size", str(sectors))
        _write(dev / "ro", "0")
        _write(dev / "removable", "0")
        _write(dev / "device" / "vpd_pg80", vpd_pg80(serial(d)))
        _write(dev / "device" / "vendor", "VMware  ")
        _write(dev / "device" / "model", "Virtual disk    ")
        _write(dev / "device" / "wwid", f"naa.{serial(d)}")
        _write(dev / "queue" / "logical_block_size", "512")
        _write(dev / "queue" / "physical_block_size", "512")
        _write(dev / "queue" / "max_sectors_kb", str(MAX_SECTORS_KB))
        _write(dev / "queue" / "rotational", "0")
        if d.partition_start_bytes % SECTOR:
            raise ValueError(f"{d.key}: partition_start {d.partition_start_bytes} is not a multiple of 512")
        start = d.partition_start_bytes // SECTOR
        part = dev / f"{d.guest_device}1"
        _write(part / "partition", "1")
        _write(part / "start", str(start))
        _write(part / "size", str(max(0, sectors - start)))
    return root


def write_udev(vm: Vm, root: str | os.PathLike[str]) -> Path:
    """Write (afresh) udev's database entries of ``vm``'s disks under ``root`` (what
    ``/run/udev/data`` holds: ``b<major>:<minor>`` files of ``E:KEY=value`` lines), for
    node_exporter's ``--path.udev.data``: its ``node_disk_info`` takes the model, serial and WWN
    from them. The serial is the sysfs tree's (the disk UUID, ``disk.EnableUUID=TRUE``)."""
    root = Path(root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for d in vm.disks:
        minor = minor_of(d.guest_device)
        props = {
            "ID_VENDOR": "VMware",
            "ID_MODEL": "Virtual_disk",
            "ID_REVISION": "2.0",
            "ID_SERIAL_SHORT": serial(d),
            "ID_WWN": f"0x{serial(d)[:16]}",
            "ID_TYPE": "disk",
        }
        _write(root / f"b{SD_MAJOR}:{minor}", "\n".join(f"E:{k}={v}" for k, v in props.items()))
    return root
