"""Parsing esxtop batch output (``esxtop -b -d 2 -n N > host.csv``): pure functions, no file access.

The file is Windows perfmon's CSV: a header line whose first cell is ``(PDH-CSV 4.0) (UTC)(0)``
(the time zone name and its bias in minutes: local = UTC - bias; esxtop writes UTC) and then one
cell per counter, ``\\\\<host>\\<Object>(<instance>)\\<Counter>``; then one row per sample,
``"MM/DD/YYYY HH:MM:SS","<value>",...``, every cell quoted. A real host writes 7,000-20,000
columns a line (a 1-2 MB header, rows of 100-200 KB).

:class:`HeaderMap` reads the header once per file and keeps only the columns the exporter uses
(:data:`VDISK_COUNTERS`, :data:`STORAGE_COUNTERS`, :data:`CPU_COUNTERS` of the objects in
:data:`STORAGE_OBJECTS`, ``Virtual Disk`` and ``Group Cpu``); :func:`split_row` cuts a row (bytes)
into its cells and :meth:`HeaderMap.pick` takes the selected ones, so a row costs one
``bytes.split`` and a ``float()`` per selected cell, never a decode of the whole line.

Units at the edge, as esxtop writes them: rates per second, MBytes = 2^20 bytes, latencies in
milliseconds, CPU in percent of one core (summed over a group's worlds).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from operator import itemgetter

#: The first header cell: ``(PDH-CSV 4.0) (<time zone>)(<bias minutes>)``.
HEADER_MARK = b'"(PDH-CSV 4.0)'
_HEADER_CELL = re.compile(r"^\(PDH-CSV 4\.0\) \((?P<tz>[^)]*)\)\((?P<bias>-?\d+)\)$")
_TIMESTAMP = re.compile(rb"^(\d{1,2})/(\d{1,2})/(\d{4}) (\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")
#: ``vm``, ``vm:scsi0:1``, older builds ``vm (uuid)`` and ``vm (uuid):scsi0:1``.
_VDISK_INSTANCE = re.compile(
    r"^(?P<vm>.*?)(?: \((?P<uuid>[0-9A-Fa-f]{8}-[0-9A-Fa-f-]{27})\))?(?::(?P<disk>(?:scsi|sata|nvme|ide)\d+:\d+))?$"
)
_GROUP_INSTANCE = re.compile(r"^(?P<gid>\d+):(?P<name>.*)$")

#: A line longer than this is garbage: a 20,000-column header is ~2 MB.
MAX_LINE_BYTES = 16 * 1024 * 1024

#: ``Virtual Disk(<vm>:<disk>)`` counters read (field name -> esxtop counter).
VDISK_COUNTERS = {
    "commands": "Commands/sec",
    "reads": "Reads/sec",
    "writes": "Writes/sec",
    "read_mb": "MBytes Read/sec",
    "write_mb": "MBytes Written/sec",
    "read_ms": "Average MilliSec/Read",
    "write_ms": "Average MilliSec/Write",
}

#: The latency layers esxtop splits a command's time into: guest (GAVG, what the VM sees) =
#: kernel (KAVG, in the VMkernel; it includes queue, QAVG) + driver (DAVG, device and fabric).
LAYERS = ("guest", "kernel", "driver", "queue")
#: (suffix in the field name, esxtop's word): all commands, reads, writes.
OPS = (("command", "Command"), ("read", "Read"), ("write", "Write"))

#: Counters of devices, paths, adapters and NFS volumes (field name -> esxtop counter).
STORAGE_COUNTERS = {
    "commands": "Commands/sec",
    "reads": "Reads/sec",
    "writes": "Writes/sec",
    "read_mb": "MBytes Read/sec",
    "write_mb": "MBytes Written/sec",
    **{f"{layer}_{op}_ms": f"Average {layer.capitalize()} MilliSec/{word}" for layer in LAYERS for op, word in OPS},
    "queue_depth": "Device Q Depth",
    "active": "Active Commands",
    "queued": "Queued Commands",
}

#: The storage objects read: esxtop object name -> (kind, instance label).
STORAGE_OBJECTS = {
    "Physical Disk SCSI Device": ("device", "device"),
    "Physical Disk Path": ("path", "path"),
    "Physical Disk Adapter": ("adapter", "adapter"),
    "Physical Disk NFS Volume": ("nfs_volume", "datastore"),
}

#: ``Group Cpu(<gid>:<name>)`` counters read (field name -> esxtop counter), percent of a core.
CPU_COUNTERS = {"used": "% Used", "run": "% Run", "ready": "% Ready", "costop": "% CoStop"}
#: A Nutanix CVM as the installer names it (``NTNX-<block>-<position>-CVM``, the vCenter
#: exporter's default ``cvm_name_pattern``): its ``Group Cpu`` is kept even without ``Virtual
#: Disk`` columns (on ESXi the CVM's data disks are passed through, not virtual disks).
CVM_NAME = re.compile(r"^NTNX-.*-CVM$")

VDISK_FIELDS = tuple(VDISK_COUNTERS)
STORAGE_FIELDS = tuple(STORAGE_COUNTERS)
CPU_FIELDS = tuple(CPU_COUNTERS)
_VDISK_INDEX = {c: i for i, c in enumerate(VDISK_COUNTERS.values())}
_STORAGE_INDEX = {c: i for i, c in enumerate(STORAGE_COUNTERS.values())}
_CPU_INDEX = {c: i for i, c in enumerate(CPU_COUNTERS.values())}


class InvalidLine(ValueError):
    """A row or header that cannot be used; ``reason`` is the label of the rejected-lines counter."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Column:
    """One header cell: ``\\\\host\\Object(instance)\\Counter``."""

    host: str
    obj: str
    instance: str | None
    counter: str


def parse_column(cell: str) -> Column | None:
    """A header cell (without its quotes) as a Column, or None when it has not that shape. The
    counter is what follows the last backslash (counter names hold ``/``, never ``\\``); the
    instance is between the object's first ``(`` and the last ``)`` (VM names hold parentheses)."""
    if not cell.startswith("\\\\"):
        return None
    rest = cell[2:]
    host, sep, rest = rest.partition("\\")
    if not sep:
        return None
    path, sep, counter = rest.rpartition("\\")
    if not sep or not path or not counter:
        return None
    open_at = path.find("(")
    if open_at < 0:
        return Column(host, path, None, counter)
    if not path.endswith(")"):
        return None
    return Column(host, path[:open_at], path[open_at + 1 : -1], counter)


@dataclass(frozen=True)
class VdiskName:
    vm: str
    disk: str  # "" for the VM's own row (the sum of its disks)
    uuid: str  # "" unless an older build wrote it


def parse_vdisk_instance(instance: str) -> VdiskName:
    m = _VDISK_INSTANCE.match(instance)
    assert m is not None  # the pattern matches any text
    return VdiskName(m.group("vm"), m.group("disk") or "", (m.group("uuid") or "").lower())


def parse_group_instance(instance: str) -> tuple[str, str] | None:
    """(gid, name) of a ``Group Cpu`` instance, or None."""
    m = _GROUP_INSTANCE.match(instance)
    return (m.group("gid"), m.group("name")) if m else None


def split_row(line: bytes) -> list[bytes]:
    """The cells of a row, their quotes removed. Data cells are numbers and a timestamp (no comma,
    no quote), so ``","`` separates them; a line that does not start and end with a quote is not
    an esxtop row."""
    if len(line) < 2 or line[:1] != b'"' or line[-1:] != b'"':
        raise InvalidLine("not_csv", "a line that is not a quoted CSV row")
    return line[1:-1].split(b'","')


def split_header(line: bytes) -> list[str]:
    """The cells of a header line. Names may hold commas (a VM named ``a,b``), so the header is
    split on quotes: ``"a","b,c"`` -> ``a``, ``b,c`` (esxtop doubles no quote: names cannot hold
    one)."""
    text = line.decode("utf-8", "replace")
    if not (text.startswith('"') and text.endswith('"')):
        raise InvalidLine("bad_header", "a header line that is not a quoted CSV row")
    cells = text[1:-1].split('","')
    return cells


def parse_timestamp(cell: bytes, bias_minutes: int = 0) -> float:
    """Seconds since the epoch (UTC) of ``MM/DD/YYYY HH:MM:SS[.ffffff]`` in the header's zone."""
    m = _TIMESTAMP.match(cell)
    if m is None:
        raise InvalidLine("bad_timestamp", f"not a perfmon timestamp: {cell[:40]!r}")
    mon, day, year, hh, mm, ss, frac = m.groups()
    try:
        t = calendar.timegm((int(year), int(mon), int(day), int(hh), int(mm), int(ss), 0, 0, 0))
    except (ValueError, OverflowError) as exc:
        raise InvalidLine("bad_timestamp", f"not a date: {cell[:40]!r}") from exc
    if not (1 <= int(mon) <= 12 and 1 <= int(day) <= 31 and int(hh) < 24 and int(mm) < 60 and int(ss) < 61):
        raise InvalidLine("bad_timestamp", f"not a date: {cell[:40]!r}")
    if frac:
        t += int(frac) / 10 ** len(frac)
    return t + bias_minutes * 60.0


@dataclass
class Target:
    """The columns of one object: ``slots[i]`` is the field index a selected column fills."""

    kind: str  # vdisk, device, path, adapter, nfs_volume, cpu
    key: tuple[str, ...]  # identity: (vm, disk) / (name,) / (vm,) for cpu
    fields: tuple[str, ...]
    uuid: str = ""
    gid: str = ""
    present: set[int] = field(default_factory=set)  # the fields the header has a column for


@dataclass
class HeaderMap:
    """The selected columns of one header: built once per file (and again if a new header line
    appears), then applied to every row."""

    host: str
    bias_minutes: int
    columns: int  # cells in the header, the time column included
    targets: list[Target] = field(default_factory=list)
    #: per selected column: (index in the row, target index, field index)
    selected: list[tuple[int, int, int]] = field(default_factory=list)
    vms: dict[str, str] = field(default_factory=dict)  # vm -> uuid ("" when not written)
    _getter: itemgetter | None = None

    def select(self, column: int, target: int, field_index: int) -> None:
        self.selected.append((column, target, field_index))
        self.targets[target].present.add(field_index)

    def pick(self, cells: list[bytes]) -> tuple[bytes, ...]:
        """The selected cells of a row, in :attr:`selected` order."""
        if self._getter is None:
            idx = [c for c, _, _ in self.selected]
            if not idx:
                return ()
            g = itemgetter(*idx)
            self._getter = (lambda row: (g(row),)) if len(idx) == 1 else g  # type: ignore[assignment]
        return self._getter(cells)  # type: ignore[misc]


def parse_header(line: bytes) -> HeaderMap:
    """The HeaderMap of a header line (bytes, without its newline). Raises InvalidLine when it is
    not a perfmon header."""
    cells = split_header(line)
    m = _HEADER_CELL.match(cells[0])
    if m is None:
        raise InvalidLine(
            "bad_header", f"the first header cell is not '(PDH-CSV 4.0) (<zone>)(<bias>)': {cells[0][:60]!r}"
        )
    hm = HeaderMap(host="", bias_minutes=int(m.group("bias")), columns=len(cells))
    index: dict[tuple[str, tuple[str, ...]], int] = {}
    vdisk_cols: list[tuple[int, Column, VdiskName]] = []
    cpu_cols: list[tuple[int, Column, str, str]] = []

    def target(kind: str, key: tuple[str, ...], fields: tuple[str, ...], uuid: str = "", gid: str = "") -> int:
        t = index.get((kind, key))
        if t is None:
            t = index[(kind, key)] = len(hm.targets)
            hm.targets.append(Target(kind, key, fields, uuid=uuid, gid=gid))
        return t

    for i, cell in enumerate(cells[1:], start=1):
        col = parse_column(cell)
        if col is None or col.instance is None:
            continue
        if not hm.host:
            hm.host = col.host
        if col.obj == "Virtual Disk":
            if col.counter in _VDISK_INDEX:
                name = parse_vdisk_instance(col.instance)
                vdisk_cols.append((i, col, name))
                hm.vms.setdefault(name.vm, name.uuid)
        elif col.obj == "Group Cpu":
            if col.counter in _CPU_INDEX:
                g = parse_group_instance(col.instance)
                if g is not None:
                    cpu_cols.append((i, col, g[0], g[1]))
        else:
            obj = STORAGE_OBJECTS.get(col.obj)
            if obj is not None and col.counter in _STORAGE_INDEX:
                t = target(obj[0], (col.instance,), STORAGE_FIELDS)
                hm.select(i, t, _STORAGE_INDEX[col.counter])
    for i, col, name in vdisk_cols:
        if not name.disk:
            continue  # the VM's row: the sum of its disks (sum by (vm) gives it)
        t = target("vdisk", (name.vm, name.disk), VDISK_FIELDS, uuid=name.uuid)
        hm.select(i, t, _VDISK_INDEX[col.counter])
    for i, col, gid, group in cpu_cols:
        if group not in hm.vms and not CVM_NAME.match(group):
            continue  # not a VM (system, idle, helper, vmotion... groups)
        hm.vms.setdefault(group, "")  # a CVM without virtual disks is a VM of the capture too
        t = target("cpu", (group,), CPU_FIELDS, uuid=hm.vms.get(group, ""), gid=gid)
        hm.select(i, t, _CPU_INDEX[col.counter])
    hm.selected.sort()
    return hm


def number(cell: bytes) -> float | None:
    """A value cell: None when empty (esxtop leaves a counter it has no value for empty); raises
    InvalidLine for text, NaN, infinity or a negative value (every counter read is a rate, a
    time or a depth)."""
    if not cell:
        return None
    try:
        v = float(cell)
    except ValueError as exc:
        raise InvalidLine("not_a_number", f"not a number: {cell[:40]!r}") from exc
    if not (0.0 <= v < 1e300):  # also false for NaN
        raise InvalidLine("invalid_value", f"not a rate, time or depth: {cell[:40]!r}")
    return v
