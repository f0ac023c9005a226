"""The vdisk detail view's records and the vocabulary both of its readers share: the strict
reader (:mod:`.strict`, the fast path) and the lxml parse (:mod:`.parse`, the fallback and
the main page). Apart from both so that neither imports the other's module for them."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

KIB = 1024
MIB = 1024 * 1024


class StargatePageError(ValueError):
    """The page is not a Stargate page we can read (truncated, garbage, missing table).
    ``item``: the column of a cell that is not a number (empty otherwise)."""

    item = ""


#: (table, kind, item): something on a page that the parse does not read. ``table`` is the
#: table's title in snake case, ``kind`` one of ``table``, ``row``, ``column``, ``cell``, ``item``
#: the row label, column name or table title as the page writes it (at most ITEM_CHARS).
Unknown = tuple[str, str, str]


# Canonical names of read sources and write destinations across builds.
SOURCE_NAMES = {
    "oplog": "oplog",
    "extent cache": "extent_cache",
    "cache dram": "cache_dram",
    "cache ssd": "cache_ssd",
    "estore ssd": "estore_ssd",
    "estore ssd local": "estore_ssd_local",
    "estore ssd remote": "estore_ssd_remote",
    "estore hdd": "estore_hdd",
    "estore hdd local": "estore_hdd_local",
    "estore hdd remote": "estore_hdd_remote",
    "estore": "estore",
    "block store": "block_store",
    "zeroes": "zero",
    "zeros": "zero",
    "estore zero": "estore_zero",
    "oplog zero": "oplog_zero",
}


#: Larger raw cell values are garbage, not data (10^15 KB/s, GB or ops/s is beyond any cluster).
MAX_VALUE = 1e15


def _num(text: str, where: str, key: str = "") -> float:
    if not text:
        return 0.0
    try:
        value = float(text)  # the common case: a plain number
    except ValueError:
        t = text.strip().rstrip("%").strip()
        if not t:
            return 0.0
        try:
            value = float(t.replace(",", ""))
        except ValueError:
            where = f"{where}, {key}" if key else where
            raise _cell_error(f"{where}: expected a number, got {text[:40]!r}", key) from None
    if not 0.0 <= value <= MAX_VALUE:  # also false for nan
        where = f"{where}, {key}" if key else where
        what = "not finite" if not math.isfinite(value) else "negative" if value < 0 else "absurdly large"
        raise _cell_error(f"{where}: {text[:40]!r} is {what}", key)
    return value


def _cell_error(message: str, key: str) -> StargatePageError:
    err = StargatePageError(message)
    err.item = key  # an attribute, not an argument: the error pickles back from a parse worker
    return err


# ----------------------------------------------------------------------------------- vdisk view
#: Upper bounds of the latency buckets (seconds) and size buckets (bytes), in page order.
LATENCY_BOUNDS = (0.001, 0.002, 0.005, 0.010, 0.020, 0.050, 0.100, float("inf"))


SIZE_BOUNDS = (4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 512 * KIB, MIB, float("inf"))


@dataclass
class Histogram:
    """A recent-window histogram: per bucket (upper bound) the count and the average value."""

    bounds: tuple[float, ...]
    counts: list[float]
    averages: list[float]  # base units (seconds or bytes)

    @property
    def count(self) -> float:
        return sum(self.counts)

    @property
    def sum(self) -> float:
        return sum(c * a for c, a in zip(self.counts, self.averages))


@dataclass
class VDiskDetail:
    vdisk_id: str
    read_ops_per_second: float | None = None
    write_ops_per_second: float | None = None
    read_bytes_per_second: float | None = None
    write_bytes_per_second: float | None = None
    read_random_ratio: float | None = None
    write_random_ratio: float | None = None
    read_sequential_ratio: float | None = None
    write_sequential_ratio: float | None = None
    read_latency: Histogram | None = None
    write_latency: Histogram | None = None
    read_size: Histogram | None = None
    write_size: Histogram | None = None
    working_set_bytes: dict[tuple[str, str], float] = field(default_factory=dict)  # (kind, window)
    read_sources: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (bytes/s, ratio)
    write_destinations: dict[str, tuple[float, float]] = field(default_factory=dict)
    up_migrations: dict[str, float] = field(default_factory=dict)  # window -> count
    unknown: tuple[Unknown, ...] = ()  # what the parse does not read (module docstring)
    #: Read by the strict reader (strict.py), not lxml: how, not what (left out of ==).
    strict: bool = field(default=False, compare=False)


#: The detail view's sections (headings ``VDisk <id> <section>``, lowercased), all read.
DETAIL_SECTIONS = frozenset(
    {
        "ops and randomness",
        "frontend read latency",
        "frontend write latency",
        "read size distribution",
        "write size distribution",
        "working set sizes",
        "read source",
        "write destination",
        "extent group up-migration",
    }
)


#: Bucket labels of the histograms, in page order (text as the parse reads it: whitespace
#: collapsed, entities decoded): a bucket is read by its position, so another label is reported.
LATENCY_LABELS = (
    "0 <= x < 1 ms",
    "1 ms <= x < 2 ms",
    "2 ms <= x < 5 ms",
    "5 ms <= x < 10 ms",
    "10 ms <= x < 20 ms",
    "20 ms <= x < 50 ms",
    "50 ms <= x < 100 ms",
    "100 ms <= x < inf",
)


SIZE_LABELS = (
    "0 <= x < 4 kB",
    "4 kB <= x < 8 kB",
    "8 kB <= x < 16 kB",
    "16 kB <= x < 32 kB",
    "32 kB <= x < 64 kB",
    "64 kB <= x < 512 kB",
    "512 kB <= x < 1 MB",
    "1 MB <= x < inf",
)


#: Column names (lowercased) of the tables whose values the parse reads by position, and how many
#: columns their header has: an extra, moved or renamed column would be read wrong, silently.
_OPS_COLUMNS = (frozenset({"", "read", "write", "total"}), 4)


_LATENCY_COLUMNS = (
    frozenset(
        {
            "latency range",
            "average bucket latency (usec)",
            "number of read ios",
            "percent of read ios",
            "number of write ios",
            "percent of write ios",
        }
    ),
    4,
)


_SIZE_COLUMNS = (
    frozenset(
        {
            "latency range",  # sic: the size tables' first header (a quirk of the page)
            "average bucket size",
            "number of read ios",
            "percent of read ios",
            "number of write ios",
            "percent of write ios",
        }
    ),
    4,
)


_SOURCE_COLUMNS = (frozenset({"source", "destination", "data (mb/s)", "percent"}), 3)


_WINDOWS = {"2 min": "2m", "1 hr": "1h"}


_WSS_KINDS = frozenset({"read", "write", "union"})


_TD_END = b"</td>"


def _empty_cells(t: bytes, raw: bytes | None = None) -> bool:
    """``t`` is nothing but ``<td ...></td>`` cells: it starts with ``<td``, each ``</td>`` is
    right after its cell's ``<td ...>`` and right before the next ``<td`` (or the end), and every
    ``<`` and ``>`` in it is one of those tags' own (so no text, no other tag, no ``>`` in an
    attribute). ``raw``: the text before whitespace was taken out of ``t``, whose ``<td`` and
    ``</td>`` must all be there already (``< td>`` is text, not a tag)."""
    n = t.count(b"></td><td") + 1
    return (
        t.startswith(b"<td")
        and t.endswith(b"></td>")
        and t.count(b"<") == 2 * n
        and t.count(b">") == 2 * n
        and (raw is None or (raw.count(b"<td") == n and raw.count(_TD_END) == n))
    )


_SECTION = re.compile(r"^VDisk (\d+) (.+)$")


#: The vdisk view's histogram sections: (section, VDiskDetail attribute, bucket bounds, bucket
#: labels, columns, unit of the values in base units).
_HISTOGRAMS = (
    ("frontend read latency", "read_latency", LATENCY_BOUNDS, LATENCY_LABELS, _LATENCY_COLUMNS, 1e-6),
    ("frontend write latency", "write_latency", LATENCY_BOUNDS, LATENCY_LABELS, _LATENCY_COLUMNS, 1e-6),
    ("read size distribution", "read_size", SIZE_BOUNDS, SIZE_LABELS, _SIZE_COLUMNS, 1.0),
    ("write size distribution", "write_size", SIZE_BOUNDS, SIZE_LABELS, _SIZE_COLUMNS, 1.0),
)


#: The vdisk view's tables of rates by source: (section, title in errors, VDiskDetail attribute).
_SOURCE_TABLES = (
    ("read source", "Read Source", "read_sources"),
    ("write destination", "Write Destination", "write_destinations"),
)


def _wss_row(d: VDiskDetail, windows: list[str], cells: Sequence[str]) -> str | None:
    """Set the bytes a row of the Working Set Sizes table gives per window (a missing cell is a
    blank one: 0). None, or the row's label when its kind (Read / Write / Union) is not known
    (its values are set under the kind as read). Raises StargatePageError for a bad value."""
    cells = [*cells, *[""] * (len(windows) + 1 - len(cells))]
    kind = (cells[0].split() or ["unknown"])[0].lower()
    for w, v in zip(windows, cells[1:]):
        d.working_set_bytes[(kind, w)] = _num(v, f"VDisk {d.vdisk_id} Working Set Sizes, {cells[0]}") * MIB
    return None if kind in _WSS_KINDS else cells[0]


def _ops_row(d: VDiskDetail, cells: Sequence[str]) -> bool:
    """Set what a row of the Ops and Randomness table (label, read, write) gives, in base units;
    False for a row of another label (nothing set). Raises StargatePageError for a bad value."""
    label = cells[0].lower()
    where = f"VDisk {d.vdisk_id} Ops and Randomness, {cells[0]}"
    rd, wr = _num(cells[1], where), _num(cells[2], where)
    if label.startswith("iops"):
        d.read_ops_per_second, d.write_ops_per_second = rd * 1000, wr * 1000
    elif label.startswith("io rate"):
        d.read_bytes_per_second, d.write_bytes_per_second = rd * MIB, wr * MIB
    elif label.startswith("random"):
        d.read_random_ratio, d.write_random_ratio = rd / 100, wr / 100
    elif label.startswith("sequential"):
        d.read_sequential_ratio, d.write_sequential_ratio = rd / 100, wr / 100
    else:
        return False
    return True


def _histogram_rows(
    rows: Iterable[Sequence[str]], bounds: tuple[float, ...], labels: tuple[str, ...], unit: float, where: str
) -> tuple[Histogram, list[str]]:
    """The histogram of a bucket table's (label, average, count) rows, each bucket read by its
    position, and the labels that are not the expected ones. Raises StargatePageError for more
    or fewer buckets than ``bounds``, or a bad value."""
    counts = [0.0] * len(bounds)
    avgs = [0.0] * len(bounds)
    odd = []
    i = 0
    for label, avg, count in rows:
        if i >= len(bounds):
            raise StargatePageError(f"{where}: more than {len(bounds)} buckets")
        if label != labels[i]:
            odd.append(label)
        avgs[i] = _num(avg, where, label) * unit
        counts[i] = _num(count, where, label)
        i += 1
    if i != len(bounds):
        raise StargatePageError(f"{where}: {i} buckets, expected {len(bounds)} (page cut off?)")
    return Histogram(bounds, counts, avgs), odd
