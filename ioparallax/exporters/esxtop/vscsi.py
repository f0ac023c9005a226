"""Parsing vscsiStats histograms (``vscsiStats -p all -c``): a pure function, no file access.

The CSV output is one block per histogram::

    Histogram: IO lengths of commands,virtual machine worldGroupID,2099979,virtual disk handleID,8194 (scsi0:0)
    min,512
    max,65536
    mean,5332
    count,793
    Frequency,Histogram Bucket Limit
    42,512
    ...
    0,524288
    0,524288

Each bucket line is ``<count>,<upper limit>`` (counts per bucket, not cumulative); the last line
repeats the last limit and counts what lies above it. Histograms are cumulative since collection
was started (``vscsiStats -s``) and drop to zero on ``vscsiStats -r``: in Prometheus they are
histograms, and ``rate()``/``increase()`` see a reset as a reset.

Families (``what``): I/O length (bytes), seek distance between successive commands and to the
closest of the previous 16 (logical blocks), outstanding I/Os when a new one is issued, latency
and interarrival time (microseconds, converted to seconds by the collector); each for all
commands, reads and writes (``op``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A vscsiStats file larger than this is not read (a host with 100 VMs x 4 disks is ~2 MB).
MAX_VSCSI_BYTES = 32 * 1024 * 1024

_TITLE = re.compile(
    r"^Histogram: (?P<what>.*?),virtual machine worldGroupID,\s*(?P<wgid>\d+),"
    r"virtual disk handleID,\s*(?P<handle>\d+)(?: \((?P<disk>[^)]*)\))?\s*$"
)
_READ = re.compile(r"\bReads?\b")
_WRITE = re.compile(r"\bWrites?\b")

#: (what the title says, family) in the order they are tested (interarrival before latency).
FAMILIES = (
    ("interarrival", "interarrival"),
    ("closest of previous 16", "seek_distance_closest16"),
    ("distance", "seek_distance"),
    ("IO lengths", "io_length"),
    ("outstanding", "outstanding_ios"),
    ("latency", "latency"),
)


class VscsiError(ValueError):
    """A file that is not vscsiStats output, or holds a broken histogram."""


@dataclass
class Histogram:
    family: str  # io_length, seek_distance, seek_distance_closest16, outstanding_ios, latency, interarrival
    op: str  # all, read, write
    world_group_id: str
    handle_id: str
    disk: str  # scsi0:0 ("" when the title does not name it)
    title: str
    stats: dict[str, float] = field(default_factory=dict)  # min, max, mean, count
    buckets: list[tuple[float, int]] = field(default_factory=list)  # (upper limit, count in the bucket)
    overflow: int = 0  # above the last limit

    @property
    def count(self) -> int:
        return sum(c for _, c in self.buckets) + self.overflow

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper limit, observations at or below it), the last one at +Inf."""
        out: list[tuple[float, int]] = []
        acc = 0
        for limit, c in self.buckets:
            acc += c
            out.append((limit, acc))
        out.append((float("inf"), acc + self.overflow))
        return out


def classify(what: str) -> tuple[str, str] | None:
    """(family, op) of a histogram title's first part, or None for one the exporter does not know."""
    family = next((f for key, f in FAMILIES if key in what), None)
    if family is None:
        return None
    op = "read" if _READ.search(what) else "write" if _WRITE.search(what) else "all"
    return family, op


def _int(text: str, line_no: int) -> int:
    try:
        v = int(text)
    except ValueError as exc:
        raise VscsiError(f"line {line_no}: not an integer: {text[:40]!r}") from exc
    if v < 0:
        raise VscsiError(f"line {line_no}: a negative count: {v}")
    return v


def _limit(text: str, line_no: int) -> float:
    try:
        return float(int(text))
    except ValueError as exc:
        raise VscsiError(f"line {line_no}: not a bucket limit: {text[:40]!r}") from exc


def parse_vscsistats(text: str) -> tuple[list[Histogram], list[str]]:
    """(histograms, titles skipped as unknown). Raises VscsiError when the text holds no
    histogram, or a histogram is broken (a bucket that is not two integers, limits that go
    down, the bucket counts not adding up to its ``count``)."""
    hists: list[Histogram] = []
    skipped: list[str] = []
    cur: Histogram | None = None
    in_buckets = False
    unknown = False

    def close() -> None:
        if cur is None:
            return
        # the last line repeats the last limit: what lies above it
        if len(cur.buckets) >= 2 and cur.buckets[-1][0] == cur.buckets[-2][0]:
            cur.overflow = cur.buckets.pop()[1]
        stated = cur.stats.get("count")
        if stated is not None and stated != cur.count:
            raise VscsiError(f"{cur.title}: the buckets hold {cur.count} commands, its count says {stated:g}")
        hists.append(cur)

    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Histogram:"):
            close()
            cur, in_buckets, unknown = None, False, False
            m = _TITLE.match(line)
            kind = classify(m.group("what")) if m else None
            if m is None or kind is None:
                skipped.append(line[:120])
                unknown = True
                continue
            cur = Histogram(kind[0], kind[1], m.group("wgid"), m.group("handle"), m.group("disk") or "", line)
            continue
        if unknown:
            continue
        if cur is None:
            raise VscsiError(f"line {no}: data before the first 'Histogram:' title")
        if line.startswith("Frequency,"):
            in_buckets = True
            continue
        parts = line.split(",")
        if len(parts) != 2:
            raise VscsiError(f"line {no}: expected two fields, got {len(parts)}")
        if not in_buckets:
            key = parts[0].strip().lower()
            if key in ("min", "max", "mean", "count"):
                try:
                    cur.stats[key] = float(parts[1])
                except ValueError as exc:
                    raise VscsiError(f"line {no}: {key} is not a number: {parts[1][:40]!r}") from exc
            continue
        count, limit = _int(parts[0].strip(), no), _limit(parts[1].strip(), no)
        if cur.buckets and limit < cur.buckets[-1][0]:
            raise VscsiError(f"line {no}: bucket limits go down ({cur.buckets[-1][0]:g} then {limit:g})")
        cur.buckets.append((limit, count))
    close()
    if not hists:
        raise VscsiError("no vscsiStats histogram (a 'Histogram: ...,virtual machine worldGroupID,...' title)")
    return hists, skipped
