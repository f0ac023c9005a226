"""A guest's SCSI disks as Linux sizes and numbers them: what the sysfs tree, udev's database and
``/proc/diskstats`` of the guest simulator share."""

from __future__ import annotations

SECTOR = 512  # bytes: sysfs sizes and diskstats' sector counts
MAX_SECTORS_KB = 512  # what vmw_pvscsi disks show in Linux guests (queue/max_sectors_kb)

#: Block major number of SCSI disks (sd); each disk takes 16 minors (whole disk + 15 partitions).
SD_MAJOR = 8


def minor_of(device: str) -> int:
    """The minor number of an ``sd`` disk (``sda`` 0, ``sdb`` 16, ``sdaa`` 416)."""
    letters = device[2:] if device.startswith("sd") else device
    n = 0
    for ch in letters:
        if not ("a" <= ch <= "z"):
            return 0
        n = n * 26 + (ord(ch) - ord("a") + 1)
    return 16 * (n - 1)
