"""The storage-side view of a disk: what Stargate knows about a vdisk at a period second.

Pure functions of the scenario :class:`~ioparallax.simulators.scenario.trace.Trace` (plus two wall-clock
facts: *now* and when the simulated history started). The Stargate page simulator renders these
numbers; tests and the exporter's tests compare against them. Every derived value is computed from
unrounded quantities, totals are sums of their parts, and the pages round only when printing.

Windows (all end just before the current period second ``t``, i.e. the last complete seconds):

- rates (ops/s, bytes/s, read sources, write destinations, outstanding ops, qlen, busy) and the
  histograms: the last :data:`RATE_WINDOW_S` seconds (a published example page's histogram holds
  ~6,700 IOs at ~2,300 IOPS: about 3 s; docs/stargate-simulator.md, "How the numbers are derived");
- working set sizes: the last 120 s and 3,600 s of the repeating trace; the 1 hr column reads 0
  until the simulated history (``now - history_start``) covers a full hour;
- up-migration counts: the last 300 / 3,600 / 86,400 s, clipped to the simulated history;
- oplog occupancy: the state at the start of second ``t`` of a fill/drain model run to its
  periodic steady state.

The models (cache fit, ILM ramp, oplog, working set, misalignment) are heuristics chosen to match
the shapes the published port-2009 pages show; ``docs/stargate-simulator.md`` ("How the numbers are
derived") explains each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from itertools import accumulate
from typing import TypeVar

from .model import Disk, Stream
from .trace import Trace

KiB = 1024
MiB = 1024**2
GiB = 1024**3

RATE_WINDOW_S = 3  # rates and histograms: the last 3 complete seconds
WSS_WINDOWS_S = (120, 3600)  # "2 min" and "1 hr" working set columns
UPMIGRATION_WINDOWS_S = (300, 3600, 86400)
OPLOG_DRAIN_TAU_S = 20.0  # oplog content drains exponentially with this time constant
OPLOG_CAPACITY_BYTES = 6 * GiB  # per-vdisk oplog cap
OPLOG_READ_SHARE_MAX = 0.5  # reads of data still in the oplog: at most half of non-zero reads
ZERO_READ_OPLOG_SHARE = 0.08  # of zero reads, share answered by Oplog Zero (2.7 of 35.7 % published)
SSD_CACHE_FACTOR = 4.0  # DRAM + flash content cache together hold 4x the DRAM cache
LARGE_WRITE_BYTES = 64 * KiB  # sequential writes at least this large bypass the oplog
EXTENT_GROUP_BYTES = 4 * MiB  # unit ILM moves up
LOCALIZE_S = 300.0  # after a vdisk moves, remote estore reads fall to 0 over this time
MISALIGNED_SIGMA_EXTRA = 0.25  # write latency tail widens on a misaligned disk (heuristic)
RMW_BLOCK_BYTES = 4 * KiB  # a misaligned write reads the two partial 4 KiB blocks it straddles

# Canonical read sources (fine grained; the page variants fold them into their own rows).
READ_SOURCES = (
    "oplog",
    "extent_cache",
    "cache_dram",
    "cache_ssd",
    "estore_ssd",
    "estore_ssd_remote",
    "estore_hdd",
    "estore_hdd_remote",
    "block_store",
    "estore_zero",
    "oplog_zero",
)
WRITE_DESTINATIONS = ("oplog", "oplog_zero", "estore_ssd", "estore_hdd", "block_store")

LATENCY_BUCKET_EDGES_S = (0.0, 0.001, 0.002, 0.005, 0.010, 0.020, 0.050, 0.100, math.inf)
SIZE_BUCKET_EDGES_B = (0, 4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 512 * KiB, MiB, math.inf)


# --------------------------------------------------------------------------------------------
# Histograms


@dataclass(frozen=True)
class Histogram:
    """Counts of ops per bucket over the histogram window, with the mean value in each bucket.

    ``counts`` are integers summing to ``total`` (the ops in the window, rounded once);
    ``averages`` are the exact conditional means of the modelled distribution (seconds or bytes,
    0 for empty buckets); ``average`` is the count-weighted mean of ``averages`` (what the page's
    Total row shows).
    """

    counts: tuple[int, ...]
    averages: tuple[float, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def average(self) -> float:
        n = self.total
        return sum(c * a for c, a in zip(self.counts, self.averages)) / n if n else 0.0

    @property
    def percents(self) -> tuple[float, ...]:
        n = self.total
        return tuple(100.0 * c / n if n else 0.0 for c in self.counts)


def _allocate(expected: Sequence[float], total: int) -> list[int]:
    """Integer counts summing to ``total``, proportional to ``expected`` (largest remainder)."""
    s = sum(expected)
    if total <= 0 or s <= 0:
        return [0] * len(expected)
    exact = [e * total / s for e in expected]
    counts = [int(math.floor(x)) for x in exact]
    short = total - sum(counts)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:short]:
        counts[i] += 1
    return counts


def _phi(x: float) -> float:
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def lognormal_buckets(
    mean: float, sigma: float, edges: Sequence[float] = LATENCY_BUCKET_EDGES_S
) -> list[tuple[float, float]]:
    """(probability, conditional mean) per bucket of a log-normal with this mean and sigma."""
    out = []
    if sigma <= 0:
        for lo, hi in zip(edges, edges[1:]):
            out.append((1.0, mean) if lo <= mean < hi else (0.0, 0.0))
        return out
    mu = math.log(mean) - sigma * sigma / 2.0

    def z(x: float, shift: float = 0.0) -> float:
        if x <= 0:
            return -math.inf
        if x == math.inf:
            return math.inf
        return (math.log(x) - mu - shift) / sigma

    s2 = sigma * sigma
    for lo, hi in zip(edges, edges[1:]):
        p = _phi(z(hi)) - _phi(z(lo))
        if p <= 1e-15:
            out.append((0.0, 0.0))
            continue
        partial = mean * (_phi(z(hi, s2)) - _phi(z(lo, s2)))
        cm = min(max(partial / p, lo), hi if hi != math.inf else partial / p)
        out.append((p, cm))
    return out


def _histogram(parts: Iterable[tuple[float, list[tuple[float, float]]]], nbuckets: int) -> Histogram:
    """Combine (ops, [(probability, mean) per bucket]) of several streams into one histogram."""
    expected = [0.0] * nbuckets
    weighted = [0.0] * nbuckets
    ops = 0.0
    for n, buckets in parts:
        ops += n
        for i, (p, m) in enumerate(buckets):
            expected[i] += n * p
            weighted[i] += n * p * m
    counts = _allocate(expected, int(round(ops)))
    averages = tuple(weighted[i] / expected[i] if counts[i] and expected[i] else 0.0 for i in range(nbuckets))
    return Histogram(tuple(counts), averages)


def size_buckets(
    mix_parts: Sequence[tuple[int, float]], edges: Sequence[float] = SIZE_BUCKET_EDGES_B
) -> list[tuple[float, float]]:
    """(share of ops, mean size) per size bucket for a block size mix."""
    out = []
    for lo, hi in zip(edges, edges[1:]):
        inside = [(s, f) for s, f in mix_parts if lo <= s < hi]
        p = sum(f for _, f in inside)
        out.append((p, sum(s * f for s, f in inside) / p if p else 0.0))
    return out


# --------------------------------------------------------------------------------------------
# Per-stream shares


_SIGNATURE_FIELDS = tuple(f.name for f in fields(Stream) if f.name not in ("name", "fio_options", "job"))


def stream_signature(stream: Stream) -> tuple:
    """Hashable identity of a stream's behaviour (its name and fio options do not matter here)."""
    return tuple(getattr(stream, f) for f in _SIGNATURE_FIELDS)


def _disk_signature(disk: Disk) -> tuple:
    """What a disk's oplog and ILM series depend on: disks with the same streams share them."""
    return tuple(stream_signature(s) for s in disk.streams)


_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def _kept(cache: dict[_K, _V], key: _K, compute: Callable[[], _V]) -> _V:
    """``cache[key]``, computed on first use."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = compute()
    return value


def ilm_progress(stream: Stream, t: int) -> float:
    """0..1: how far ILM has moved the stream's cold HDD data up at period second ``t``."""
    if stream.ilm_ramp_s <= 0:
        return 0.0
    return min(1.0, max(0.0, (t - stream.start) / stream.ilm_ramp_s))


def read_placement(stream: Stream, t: int, dram_cache_bytes: int, hybrid: bool) -> dict[str, float]:
    """Where non-zero, non-oplog reads of a stream are served from at second ``t`` (shares sum to 1).

    Cache fit: the DRAM share is ``min(1, dram_cache / working_set)``, the flash content cache
    takes the next ``SSD_CACHE_FACTOR`` times that, the rest comes from the extent store tier the
    data lives in. DRAM hits of sequential reads are Extent cache hits, of random reads Cache DRAM.
    ILM (``data_tier: hdd`` on a hybrid cluster with ``ilm_ramp``): with progress p the HDD share
    of extent store reads is 1 - p and the caches are warm to p**2, so reads move HDD -> SSD ->
    cache.
    """
    ws = max(stream.working_set_bytes, 1)
    dram_fit = min(1.0, dram_cache_bytes / ws)
    flash_fit = min(1.0, SSD_CACHE_FACTOR * dram_cache_bytes / ws)
    on_hdd = hybrid and stream.data_tier == "hdd"
    if on_hdd and stream.ilm_ramp_s > 0:
        up = ilm_progress(stream, t)
        warm = up * up
    else:
        up, warm = 0.0, 1.0
    dram = dram_fit * warm
    flash = (flash_fit - dram_fit) * warm
    store = max(0.0, 1.0 - dram - flash)
    hdd = store * (1.0 - up) if on_hdd else 0.0
    seq = 1.0 - stream.read_random
    return {
        "extent_cache": dram * seq,
        "cache_dram": dram * stream.read_random,
        "cache_ssd": flash,
        "estore_ssd": store - hdd,
        "estore_hdd": hdd,
    }


def write_split(stream: Stream) -> tuple[float, float]:
    """(oplog share, extent store share) of a stream's non-zero written bytes.

    Random writes and small sequential writes (< LARGE_WRITE_BYTES, e.g. 16-32 KiB database log
    writes) go to the oplog; large sequential writes bypass it to the extent store.
    """
    total = sum(s * f for s, f in stream.write_size.parts)
    if total <= 0:
        return 1.0, 0.0
    large = sum(s * f for s, f in stream.write_size.parts if s >= LARGE_WRITE_BYTES) / total
    estore = large * (1.0 - stream.write_random)
    return 1.0 - estore, estore


def remote_share(disk: Disk, t: int) -> float:
    """Share of extent store reads that are remote at ``t``: 1 right after the vdisk moved to another
    CVM, falling linearly to 0 over LOCALIZE_S as data localises. A vdisk whose moves leave it on
    another CVM than at second 0 also 'moves back' at the start of every period."""
    if not disk.moves:
        return 0.0
    last = None
    for at, _ in disk.moves:
        if at <= t:
            last = at
    if last is None:
        if disk.moves[-1][1] == disk.cvm:
            return 0.0
        last = 0
    return max(0.0, 1.0 - (t - last) / LOCALIZE_S)


# --------------------------------------------------------------------------------------------
# The view


@dataclass
class VDiskStorageView:
    """Everything the Stargate pages show about one vdisk, unrounded."""

    disk: Disk
    t: int  # period second
    window_s: int
    read_ops_s: float = 0.0
    write_ops_s: float = 0.0
    read_bytes_s: float = 0.0
    write_bytes_s: float = 0.0
    read_random_ops_s: float = 0.0
    write_random_ops_s: float = 0.0
    read_zero_bytes_s: float = 0.0
    write_zero_bytes_s: float = 0.0
    read_latency_s: float = 0.0  # op-weighted mean
    write_latency_s: float = 0.0
    read_outstanding: float = 0.0  # time-average ops in flight (Little)
    write_outstanding: float = 0.0
    read_sources: dict[str, float] = field(default_factory=dict)  # bytes/s, canonical
    write_destinations: dict[str, float] = field(default_factory=dict)  # bytes/s, canonical
    rmw_read_bytes_s: float = 0.0  # back-end read-modify-write reads (misaligned heuristic)
    estore_outstanding: float = 0.0
    read_latency_hist: Histogram = field(default_factory=lambda: Histogram((0,) * 8, (0.0,) * 8))
    write_latency_hist: Histogram = field(default_factory=lambda: Histogram((0,) * 8, (0.0,) * 8))
    read_size_hist: Histogram = field(default_factory=lambda: Histogram((0,) * 8, (0.0,) * 8))
    write_size_hist: Histogram = field(default_factory=lambda: Histogram((0,) * 8, (0.0,) * 8))
    wss: dict[tuple[str, int], float] = field(default_factory=dict)  # (read|write|union, seconds) -> bytes
    oplog_bytes: float = 0.0
    oplog_fragments: float = 0.0
    oplog_drain_bytes_s: float = 0.0
    oplog_drain_ops_s: float = 0.0
    upmigrations: dict[int, int] = field(default_factory=dict)  # window seconds -> extent groups
    usage_bytes: int = 0
    dedup_bytes: int = 0

    # Derived, from unrounded values.
    @property
    def ops_s(self) -> float:
        return self.read_ops_s + self.write_ops_s

    @property
    def random_ops_s(self) -> float:
        return self.read_random_ops_s + self.write_random_ops_s

    @property
    def latency_s(self) -> float:
        n = self.ops_s
        return (self.read_ops_s * self.read_latency_s + self.write_ops_s * self.write_latency_s) / n if n else 0.0

    @property
    def op_size_bytes(self) -> float:
        n = self.ops_s
        return (self.read_bytes_s + self.write_bytes_s) / n if n else 0.0

    @property
    def read_op_size_bytes(self) -> float:
        return self.read_bytes_s / self.read_ops_s if self.read_ops_s else 0.0

    @property
    def write_op_size_bytes(self) -> float:
        return self.write_bytes_s / self.write_ops_s if self.write_ops_s else 0.0

    @property
    def qlen(self) -> float:
        return self.read_outstanding + self.write_outstanding

    @property
    def busy_ratio(self) -> float:
        """Share of time with at least one op in flight (ops arriving at random: 1 - e^-qlen)."""
        return 1.0 - math.exp(-self.qlen)

    @property
    def read_random_ratio(self) -> float | None:
        return self.read_random_ops_s / self.read_ops_s if self.read_ops_s else None

    @property
    def write_random_ratio(self) -> float | None:
        return self.write_random_ops_s / self.write_ops_s if self.write_ops_s else None

    @property
    def read_source_total(self) -> float:
        return sum(self.read_sources.values())

    @property
    def write_destination_total(self) -> float:
        return sum(self.write_destinations.values())

    @property
    def hosted_by(self) -> str:
        return self.disk.cvm_at(self.t)


# --------------------------------------------------------------------------------------------
# Page variants: how each build folds the canonical buckets into its rows.

READ_SOURCE_ROWS: dict[int, tuple[tuple[str, tuple[str, ...]], ...]] = {
    2015: (
        ("Oplog", ("oplog",)),
        ("Extent cache", ("extent_cache",)),
        ("Cache DRAM", ("cache_dram",)),
        ("Cache SSD", ("cache_ssd",)),
        ("Estore SSD", ("estore_ssd", "estore_ssd_remote")),
        ("Estore HDD", ("estore_hdd", "estore_hdd_remote")),
        ("Block Store", ("block_store",)),
        ("Zeroes", ("estore_zero", "oplog_zero")),
    ),
    2016: (
        ("Cache DRAM", ("cache_dram", "extent_cache")),
        ("Estore SSD Local", ("estore_ssd", "cache_ssd")),
        ("Estore SSD Remote", ("estore_ssd_remote",)),
        ("Estore HDD", ("estore_hdd", "estore_hdd_remote")),
        ("Oplog", ("oplog",)),
        ("Estore Zero", ("estore_zero",)),
        ("Oplog Zero", ("oplog_zero",)),
    ),
}
READ_SOURCE_ROWS[2014] = READ_SOURCE_ROWS[2015]

WRITE_DESTINATION_ROWS: dict[int, tuple[tuple[str, tuple[str, ...]], ...]] = {
    2015: (
        ("Oplog", ("oplog", "oplog_zero")),
        ("Estore", ("estore_ssd", "estore_hdd")),
        ("Block Store", ("block_store",)),
    ),
    2016: (
        ("Oplog", ("oplog",)),
        ("Oplog Zero", ("oplog_zero",)),
        ("Estore SSD", ("estore_ssd",)),
        ("Estore HDD", ("estore_hdd",)),
    ),
}
WRITE_DESTINATION_ROWS[2014] = WRITE_DESTINATION_ROWS[2015]


def fold(values: dict[str, float], rows: Sequence[tuple[str, tuple[str, ...]]]) -> list[tuple[str, float]]:
    """Page rows (label, bytes/s) from canonical buckets."""
    return [(label, sum(values.get(k, 0.0) for k in keys)) for label, keys in rows]


# --------------------------------------------------------------------------------------------
# The model: precomputed per-disk series, cached views.


def _wss(nbytes: float, random: float, ws: float) -> float:
    """Distinct bytes touched by ``nbytes`` of I/O over a working set ``ws``: random I/O covers it
    as 1 - e^(-n/ws) (uniform random offsets), sequential I/O covers it linearly."""
    if nbytes <= 0 or ws <= 0:
        return 0.0
    rnd = ws * (1.0 - math.exp(-random * nbytes / ws))
    seq = min(ws, (1.0 - random) * nbytes)
    return min(ws, rnd + seq)


_HistogramParts = list[tuple[float, list[tuple[float, float]]]]


@dataclass
class _WindowSums:
    """What the rate window of one vdisk adds up before it becomes per-second rates: bytes per read
    source and write destination, op-seconds in flight at the extent store, and each stream's ops
    with its latency and size buckets (the histograms' parts)."""

    read_sources: dict[str, float] = field(default_factory=lambda: dict.fromkeys(READ_SOURCES, 0.0))
    write_destinations: dict[str, float] = field(default_factory=lambda: dict.fromkeys(WRITE_DESTINATIONS, 0.0))
    estore_op_seconds: float = 0.0
    read_latency: _HistogramParts = field(default_factory=list)
    write_latency: _HistogramParts = field(default_factory=list)
    read_size: _HistogramParts = field(default_factory=list)
    write_size: _HistogramParts = field(default_factory=list)


def _write_destinations_second(
    v: VDiskStorageView, sums: _WindowSums, s: Stream, wr: float, split: tuple[float, float], misaligned: bool
) -> None:
    """The ``wr`` writes of one second of a stream, split by write destination (Oplog Zero, the oplog,
    the extent store's SSD tier: ``split`` is the stream's write_split), with the read-modify-write
    reads of a misaligned disk."""
    wd = sums.write_destinations
    oplog_share, estore_share = split
    wb = wr * s.write_size.mean_bytes
    zero = wb * s.zero_writes
    wd["oplog_zero"] += zero
    wd["oplog"] += (wb - zero) * oplog_share
    to_estore = (wb - zero) * estore_share
    # New data lands on the SSD tier; ILM moves it down later (Estore HDD stays 0).
    wd["estore_ssd"] += to_estore
    sums.estore_op_seconds += wr * estore_share * s.write_latency_s
    if misaligned:
        # Heuristic: each write straddles two partial 4 KiB blocks the extent store
        # must read first (read-modify-write), on the write's critical path.
        rmw = wr * 2 * RMW_BLOCK_BYTES
        v.rmw_read_bytes_s += rmw
        sums.read_sources["estore_ssd"] += rmw
        sums.estore_op_seconds += wr * 2 * s.write_latency_s


def _add_stream_totals(
    v: VDiskStorageView, sums: _WindowSums, s: Stream, ops_r: float, ops_w: float, misaligned: bool
) -> None:
    """Totals of one stream in the window (the trace's own numbers) and its histograms' parts."""
    v.read_ops_s += ops_r
    v.write_ops_s += ops_w
    v.read_bytes_s += ops_r * s.read_size.mean_bytes
    v.write_bytes_s += ops_w * s.write_size.mean_bytes
    v.read_zero_bytes_s += ops_r * s.read_size.mean_bytes * s.zero_reads
    v.write_zero_bytes_s += ops_w * s.write_size.mean_bytes * s.zero_writes
    v.read_random_ops_s += ops_r * s.read_random
    v.write_random_ops_s += ops_w * s.write_random
    v.read_latency_s += ops_r * s.read_latency_s
    v.write_latency_s += ops_w * s.write_latency_s
    if ops_r:
        sums.read_latency.append((ops_r, lognormal_buckets(s.read_latency_s, s.latency_sigma)))
        sums.read_size.append((ops_r, size_buckets(s.read_size.parts)))
    if ops_w:
        sigma = s.latency_sigma + (MISALIGNED_SIGMA_EXTRA if misaligned else 0.0)
        sums.write_latency.append((ops_w, lognormal_buckets(s.write_latency_s, sigma)))
        sums.write_size.append((ops_w, size_buckets(s.write_size.parts)))


def _window_rates(v: VDiskStorageView, sums: _WindowSums, w: int) -> None:
    """The window's sums as per-second rates, op-weighted mean latencies and histograms."""
    # Latency sums -> op-weighted means; outstanding by Little's law over the window.
    v.read_outstanding = v.read_latency_s / w
    v.write_outstanding = v.write_latency_s / w
    v.read_latency_s = v.read_latency_s / v.read_ops_s if v.read_ops_s else 0.0
    v.write_latency_s = v.write_latency_s / v.write_ops_s if v.write_ops_s else 0.0
    v.estore_outstanding = sums.estore_op_seconds / w
    v.read_latency_hist = _histogram(sums.read_latency, 8)
    v.write_latency_hist = _histogram(sums.write_latency, 8)
    v.read_size_hist = _histogram(sums.read_size, 8)
    v.write_size_hist = _histogram(sums.write_size, 8)
    for name in (
        "read_ops_s",
        "write_ops_s",
        "read_bytes_s",
        "write_bytes_s",
        "read_random_ops_s",
        "write_random_ops_s",
        "read_zero_bytes_s",
        "write_zero_bytes_s",
        "rmw_read_bytes_s",
    ):
        setattr(v, name, getattr(v, name) / w)
    v.read_sources = {k: b / w for k, b in sums.read_sources.items()}
    v.write_destinations = {k: b / w for k, b in sums.write_destinations.items()}


def _oplog_now(
    v: VDiskStorageView, level: Sequence[float], drained: Sequence[float], frag: float, t: int, seconds: Sequence[int]
) -> None:
    """Oplog: its level now (bytes and fragments), its drain over the window's ``seconds``."""
    v.oplog_bytes = level[t]
    v.oplog_fragments = level[t] / frag if frag else 0.0
    v.oplog_drain_bytes_s = sum(drained[sec] for sec in seconds) / len(seconds)
    v.oplog_drain_ops_s = v.oplog_drain_bytes_s / frag if frag else 0.0


class StorageModel:
    """The storage view of every disk of a trace, with per-second results cached.

    ``history_start`` (epoch seconds) is when the simulated Stargate started collecting: the 1 hr
    working set column reads 0 and up-migration counts are clipped until enough history exists.
    """

    def __init__(self, trace: Trace, history_start: float):
        self.trace = trace
        self.scenario = trace.scenario
        self.period = trace.period
        self.history_start = int(math.floor(history_start))
        cl = self.scenario.cluster
        self.dram_cache_bytes = cl.dram_cache_bytes
        self.hybrid = cl.hybrid
        self._oplog: dict[tuple, tuple[list[float], list[float], float]] = {}
        self._active_cum: dict[tuple, list[int]] = {}
        self._upmig_cum: dict[tuple, list[float]] = {}
        self._views: dict[tuple[str, int], VDiskStorageView] = {}
        self._views_second: int | None = None

    # -- precomputed series ------------------------------------------------------------------
    def _activity_key(self, disk: Disk, si: int) -> tuple:
        s = disk.streams[si]
        return (s.start, s.end, s.burst)

    def _active_prefix(self, disk: Disk, si: int) -> list[int]:
        """cum[x] = active seconds of the stream in period seconds [0, x)."""
        return _kept(
            self._active_cum,
            self._activity_key(disk, si),
            lambda: list(accumulate((1 if a > 0 else 0 for a in self.trace.activity[disk.key][si]), initial=0)),
        )

    def _count(self, cum: Sequence[float], a: int, b: int) -> float:
        """Sum over wall-clock seconds [a, b) of a periodic per-second series given by its prefix."""
        if b <= a:
            return 0.0
        return self.trace.periodic_sum(cum, a, b)

    def active_seconds(self, disk: Disk, si: int, end_abs: int, seconds: int) -> float:
        """Seconds the stream was active in the ``seconds`` wall-clock seconds before ``end_abs``."""
        return self._count(self._active_prefix(disk, si), end_abs - seconds, end_abs)

    def _oplog_series(self, disk: Disk) -> tuple[list[float], list[float], float]:
        """Per period second: oplog bytes at the start of the second and bytes drained during it,
        plus the mean size of an oplog write (a fragment). Fill/drain: dO/dt = in - O / tau,
        capped at OPLOG_CAPACITY_BYTES, run to its periodic steady state. Kept per stream signature."""
        return _kept(self._oplog, _disk_signature(disk), lambda: self._oplog_series_of(disk))

    def _oplog_series_of(self, disk: Disk) -> tuple[list[float], list[float], float]:
        p = self.period
        inflow = [0.0] * p
        op_bytes = op_count = 0.0
        for si, s in enumerate(disk.streams):
            if not s.write_iops:
                continue
            oplog_share, _ = write_split(s)
            per_s = s.write_iops * s.write_size.mean_bytes * (1.0 - s.zero_writes) * oplog_share
            if per_s <= 0:
                continue
            act = self.trace.activity[disk.key][si]
            for t in range(p):
                if act[t] > 0:
                    inflow[t] += per_s * act[t]
            op_bytes += per_s
            op_count += per_s / s.write_size.mean_bytes
        frag = op_bytes / op_count if op_count else 4 * KiB
        level = [0.0] * p
        drained = [0.0] * p
        if any(inflow):
            decay = math.exp(-1.0 / OPLOG_DRAIN_TAU_S)
            o = 0.0
            for _round in range(4):
                for t in range(p):
                    level[t] = o
                    new = o * decay + inflow[t] * OPLOG_DRAIN_TAU_S * (1.0 - decay)
                    new = min(new, OPLOG_CAPACITY_BYTES)
                    drained[t] = max(0.0, o + inflow[t] - new)
                    o = new
        return level, drained, frag

    def _upmigration_prefix(self, disk: Disk) -> list[float]:
        """cum[x] = extent groups ILM moved up for this disk in period seconds [0, x) (kept per stream
        signature)."""
        return _kept(self._upmig_cum, _disk_signature(disk), lambda: self._upmigration_prefix_of(disk))

    def _upmigration_prefix_of(self, disk: Disk) -> list[float]:
        p = self.period
        rate = [0.0] * p
        if self.hybrid:
            for s in disk.streams:
                if s.data_tier == "hdd" and s.ilm_ramp_s > 0:
                    per_s = s.working_set_bytes / EXTENT_GROUP_BYTES / s.ilm_ramp_s
                    for t in range(s.start, min(p, s.start + s.ilm_ramp_s)):
                        rate[t] += per_s
        return list(accumulate(rate, initial=0.0))

    # -- the view ---------------------------------------------------------------------------
    def view(self, disk: Disk, now: float) -> VDiskStorageView:
        """The storage view of ``disk`` at wall-clock ``now`` (cached per whole second)."""
        now_i = int(math.floor(now))
        if self._views_second != now_i:
            self._views.clear()
            self._views_second = now_i
        return _kept(self._views, (disk.key, now_i), lambda: self._compute(disk, now_i))

    def _compute(self, disk: Disk, now_i: int) -> VDiskStorageView:
        t = self.trace.period_second(now_i)
        w = RATE_WINDOW_S
        v = VDiskStorageView(disk=disk, t=t, window_s=w)
        level, drained, frag = self._oplog_series(disk)
        seconds = [(t - w + i) % self.period for i in range(w)]
        sums = _WindowSums()
        for si, s in enumerate(disk.streams):
            ops_r, ops_w = self._stream_window(v, sums, disk, si, seconds, level)
            _add_stream_totals(v, sums, s, ops_r, ops_w, misaligned=not disk.aligned)
        _window_rates(v, sums, w)
        _oplog_now(v, level, drained, frag, t, seconds)
        self._working_sets(v, disk, now_i)
        self._upmigrations(v, disk, now_i)
        v.usage_bytes = int(min(float(disk.capacity_bytes), sum(s.working_set_bytes for s in disk.streams)))
        v.dedup_bytes = 0
        return v

    def _stream_window(
        self,
        v: VDiskStorageView,
        sums: _WindowSums,
        disk: Disk,
        si: int,
        seconds: Sequence[int],
        level: Sequence[float],
    ) -> tuple[float, float]:
        """Adds where one stream's bytes of the window came from and went to; returns its read and
        write ops in the window."""
        s = disk.streams[si]
        act = self.trace.activity[disk.key][si]
        split = write_split(s)
        ops_r = ops_w = 0.0
        for sec in seconds:
            a = act[sec]
            if a <= 0:
                continue
            r = s.read_iops * a
            wr = s.write_iops * a
            ops_r += r
            ops_w += wr
            if r:
                self._read_sources_second(sums, disk, s, sec, r, level[sec])
            if wr:
                _write_destinations_second(v, sums, s, wr, split, misaligned=not disk.aligned)
        return ops_r, ops_w

    def _read_sources_second(
        self, sums: _WindowSums, disk: Disk, s: Stream, sec: int, r: float, oplog_level: float
    ) -> None:
        """The ``r`` reads of one second of a stream, split by read source: zero buckets, the data still
        in the oplog, then the caches and extent store tiers (local or remote after a move)."""
        rs = sums.read_sources
        rb = r * s.read_size.mean_bytes
        zero = rb * s.zero_reads
        rs["estore_zero"] += zero * (1.0 - ZERO_READ_OPLOG_SHARE)
        rs["oplog_zero"] += zero * ZERO_READ_OPLOG_SHARE
        nz = rb - zero
        o = min(OPLOG_READ_SHARE_MAX, oplog_level / max(s.working_set_bytes, 1)) if oplog_level else 0.0
        rs["oplog"] += nz * o
        rest = nz * (1.0 - o)
        remote = remote_share(disk, sec)
        for k, share in read_placement(s, sec, self.dram_cache_bytes, self.hybrid).items():
            b = rest * share
            if k in ("estore_ssd", "estore_hdd"):
                rs[k] += b * (1.0 - remote)
                rs[k + "_remote"] += b * remote
                sums.estore_op_seconds += r * (b / rb) * s.read_latency_s
            else:
                rs[k] += b

    def _working_sets(self, v: VDiskStorageView, disk: Disk, now_i: int) -> None:
        """Distinct bytes read, written and both over each working set column's span."""
        history = now_i - self.history_start
        cap = float(disk.capacity_bytes)
        for span in WSS_WINDOWS_S:
            rd = wr_ = un = 0.0
            # 2 min is always available (Stargate ran before the simulation started); 1 hr needs
            # a full hour of simulated history.
            if span <= WSS_WINDOWS_S[0] or history >= span:
                for si, s in enumerate(disk.streams):
                    n = self.active_seconds(disk, si, now_i, span)
                    br = n * s.read_iops * s.read_size.mean_bytes
                    bw = n * s.write_iops * s.write_size.mean_bytes
                    ws = float(s.working_set_bytes)
                    r1 = _wss(br, s.read_random, ws)
                    w1 = _wss(bw, s.write_random, ws)
                    mix = (br * s.read_random + bw * s.write_random) / (br + bw) if br + bw else 0.0
                    u1 = min(r1 + w1, max(_wss(br + bw, mix, ws), r1, w1))
                    rd += r1
                    wr_ += w1
                    un += u1
            v.wss[("read", span)] = min(rd, cap)
            v.wss[("write", span)] = min(wr_, cap)
            v.wss[("union", span)] = min(un, cap)

    def _upmigrations(self, v: VDiskStorageView, disk: Disk, now_i: int) -> None:
        """Extent groups ILM moved up over the last 300/3600/86400 s of simulated history."""
        cum = self._upmigration_prefix(disk)
        for span in UPMIGRATION_WINDOWS_S:
            start = max(now_i - span, self.history_start)
            v.upmigrations[span] = int(round(self._count(cum, start, now_i)))
