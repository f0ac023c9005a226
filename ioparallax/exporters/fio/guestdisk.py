"""Guest disk facts from sysfs: what the guest's block layer does to fio's I/O before the VM sees it.

For each disk under ``<sysfs>/block``: identity (serial, WWID, model, vendor: on VMware with
``disk.EnableUUID`` the serial carries the virtual disk's UUID, which joins the guest view to
vCenter's disk), logical/physical block size, the largest request the block layer sends
(``max_sectors_kb``: larger fio blocks are split) and, for each partition, its start offset and
whether it sits on the 4 KiB grid (``start`` is in 512-byte units whatever the block size).

:func:`read_disks` is pure over a directory tree, so it is tested on fixture trees as well as on
the real ``/sys`` with loop devices.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

SECTOR_BYTES = 512  # unit of sysfs 'start' and 'size', independent of the logical block size
ALIGNMENT_BYTES = 4096
DEFAULT_EXCLUDE = r"^(ram|zram|fd|sr|md|dm-)\d*"


@dataclass
class Partition:
    name: str
    number: int | None
    start_bytes: int
    size_bytes: int | None

    @property
    def aligned(self) -> bool:
        return self.start_bytes % ALIGNMENT_BYTES == 0


@dataclass
class Disk:
    name: str
    size_bytes: int | None
    logical_block_size: int | None
    physical_block_size: int | None
    max_request_bytes: int | None
    serial: str = ""
    wwid: str = ""
    model: str = ""
    vendor: str = ""
    partitions: list[Partition] = field(default_factory=list)

    @property
    def disk_uuid(self) -> str:
        """The serial as a UUID (8-4-4-4-12, lower case) when it is one, else "".

        On VMware with ``disk.EnableUUID=TRUE`` the guest's serial is the virtual disk's UUID
        without dashes (``6000c29...``); vCenter shows the same UUID with dashes. The vCenter
        exporter's ``disk_uuid`` label uses the same form, so the two join without regexes."""
        return uuid_label(self.serial)


def uuid_label(text: str) -> str:
    """``text`` as a lower-case dashed UUID if it is 32 hex digits (dashes and case ignored)."""
    h = text.strip().replace("-", "").lower()
    if len(h) != 32 or any(c not in "0123456789abcdef" for c in h):
        return ""
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace").strip("\x00 \t\r\n")


def _read_int(path: str) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _vpd_serial(path: str) -> str:
    """Unit serial number from a SCSI VPD page 0x80 (4-byte header, then ASCII)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return ""
    if len(raw) < 4 or raw[1] != 0x80:
        return ""
    length = int.from_bytes(raw[2:4], "big")
    return raw[4 : 4 + length].decode("ascii", errors="replace").strip("\x00 ")


def _first(*values: str | None) -> str:
    for v in values:
        if v:
            return v
    return ""


def read_disk(block_dir: str, name: str) -> Disk:
    d = os.path.join(block_dir, name)
    q = os.path.join(d, "queue")
    sectors = _read_int(os.path.join(d, "size"))
    max_kb = _read_int(os.path.join(q, "max_sectors_kb"))
    disk = Disk(
        name=name,
        size_bytes=sectors * SECTOR_BYTES if sectors is not None else None,
        logical_block_size=_read_int(os.path.join(q, "logical_block_size")),
        physical_block_size=_read_int(os.path.join(q, "physical_block_size")),
        max_request_bytes=max_kb * 1024 if max_kb is not None else None,
        serial=_first(
            _read(os.path.join(d, "serial")),
            _read(os.path.join(d, "device", "serial")),
            _vpd_serial(os.path.join(d, "device", "vpd_pg80")),
        ),
        wwid=_first(_read(os.path.join(d, "wwid")), _read(os.path.join(d, "device", "wwid"))),
        model=_first(_read(os.path.join(d, "device", "model"))),
        vendor=_first(_read(os.path.join(d, "device", "vendor"))),
    )
    try:
        entries = sorted(os.listdir(d))
    except OSError:
        entries = []
    for entry in entries:
        pdir = os.path.join(d, entry)
        if not entry.startswith(name) or not os.path.isfile(os.path.join(pdir, "partition")):
            continue
        start = _read_int(os.path.join(pdir, "start"))
        if start is None:
            continue
        psize = _read_int(os.path.join(pdir, "size"))
        disk.partitions.append(
            Partition(
                name=entry,
                number=_read_int(os.path.join(pdir, "partition")),
                start_bytes=start * SECTOR_BYTES,
                size_bytes=psize * SECTOR_BYTES if psize is not None else None,
            )
        )
    return disk


def read_disks(sysfs: str = "/sys", exclude: str = DEFAULT_EXCLUDE) -> list[Disk]:
    """Every disk under ``<sysfs>/block`` not matching ``exclude`` and not empty (unbound loop
    devices have size 0). Raises OSError if ``<sysfs>/block`` cannot be listed."""
    block_dir = os.path.join(sysfs, "block")
    pattern = re.compile(exclude) if exclude else None
    disks = []
    for name in sorted(os.listdir(block_dir)):
        if pattern is not None and pattern.match(name):
            continue
        disk = read_disk(block_dir, name)
        if not disk.size_bytes:
            continue
        disks.append(disk)
    return disks


class GuestDiskCollector(Collector):
    """Guest disk facts, read from sysfs on every scrape (cheap: a few small files per disk)."""

    def __init__(self, sysfs: str = "/sys", exclude: str = DEFAULT_EXCLUDE):
        self.sysfs = sysfs
        self.exclude = exclude
        self._last_error: str | None = None

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        start = time.monotonic()
        up = GaugeMetricFamily("fio_guest_sysfs_up", "1 if <sysfs>/block could be read on this scrape.")
        try:
            disks = read_disks(self.sysfs, self.exclude)
        except OSError as exc:
            cause = f"{os.path.join(self.sysfs, 'block')}: {exc.strerror or exc}"
            if cause != self._last_error:
                log.warning("cannot read guest disk facts from %s", cause)
            self._last_error = cause
            up.add_metric([], 0.0)
            yield up
            return
        self._last_error = None
        up.add_metric([], 1.0)
        info = GaugeMetricFamily(
            "fio_guest_disk_info",
            "Identity of a guest disk: serial (on VMware with "
            "disk.EnableUUID, the virtual disk's UUID), "
            "disk_uuid (the serial as a lower-case dashed UUID, as vcenter_virtual_disk_info "
            "has it; empty when the serial is not a UUID), WWID, model, vendor. Value 1.",
            labels=["disk", "serial", "disk_uuid", "wwid", "model", "vendor"],
        )
        size = GaugeMetricFamily("fio_guest_disk_size_bytes", "Size of the disk (sysfs size x 512).", labels=["disk"])
        lbs = GaugeMetricFamily(
            "fio_guest_disk_logical_block_size_bytes", "Logical block size (queue/logical_block_size).", labels=["disk"]
        )
        pbs = GaugeMetricFamily(
            "fio_guest_disk_physical_block_size_bytes",
            "Physical block size (queue/physical_block_size).",
            labels=["disk"],
        )
        maxreq = GaugeMetricFamily(
            "fio_guest_disk_max_request_bytes",
            "Largest request the guest block layer sends (queue/max_sectors_kb x 1024); larger I/Os are split.",
            labels=["disk"],
        )
        pstart = GaugeMetricFamily(
            "fio_guest_partition_start_bytes",
            "Start offset of the partition (sysfs start x 512).",
            labels=["disk", "partition"],
        )
        psize = GaugeMetricFamily(
            "fio_guest_partition_size_bytes", "Size of the partition (sysfs size x 512).", labels=["disk", "partition"]
        )
        paligned = GaugeMetricFamily(
            "fio_guest_partition_aligned",
            "1 if the partition starts on a "
            "4096-byte boundary, 0 if misaligned (every 4 KiB write then "
            "straddles two storage blocks).",
            labels=["disk", "partition"],
        )
        for d in disks:
            info.add_metric([d.name, d.serial, d.disk_uuid, d.wwid, d.model, d.vendor], 1.0)
            if d.size_bytes is not None:
                size.add_metric([d.name], d.size_bytes)
            if d.logical_block_size is not None:
                lbs.add_metric([d.name], d.logical_block_size)
            if d.physical_block_size is not None:
                pbs.add_metric([d.name], d.physical_block_size)
            if d.max_request_bytes is not None:
                maxreq.add_metric([d.name], d.max_request_bytes)
            for p in d.partitions:
                pstart.add_metric([d.name, p.name], p.start_bytes)
                if p.size_bytes is not None:
                    psize.add_metric([d.name, p.name], p.size_bytes)
                paligned.add_metric([d.name, p.name], 1.0 if p.aligned else 0.0)
        yield up
        yield from (info, size, lbs, pbs, maxreq, pstart, psize, paligned)
        dur = GaugeMetricFamily(
            "fio_guest_sysfs_scrape_duration_seconds", "Seconds spent reading guest disk facts from sysfs."
        )
        dur.add_metric([], time.monotonic() - start)
        yield dur
