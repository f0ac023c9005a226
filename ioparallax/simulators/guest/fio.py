"""fio's ``--output-format=json+ --status-interval=1`` records, computed from the trace.

A VM's fio runs one job per workload on its disks (streams of a disk that share ``job`` are one
job: phases of the same workload). The record written at wall-clock second ``T`` holds what fio
would print then: every value cumulative since the job started, over the trace seconds before
``T``.

When a job runs:

- a job whose streams cover the whole period never stops: it started at the beginning of the
  period in which the simulator started (``anchor``), so its counters only reset when the
  simulator restarts, like a restarted fio;
- a job active in ``[from, to)`` of the period (a scan that starts half-way, a VM added by a
  ramp) starts at ``from`` and ends at ``to`` in every period; it is in the records written in
  ``(start, end]`` (the one at ``end`` is its final state) and absent otherwise.

Counts are the trace's sums rounded down (``total_ios = floor(ops)``, ``io_bytes =
floor(bytes)``), so any difference of two records is within one op and one byte of the trace.
``clat_ns.mean`` is the trace's latency sum over ``N``, so ``mean x N`` (what a histogram's
``_sum`` is built from) is the trace's latency sum. The json+ ``bins`` use fio's own buckets (64
per power of two, the bucket's midpoint as key) and are drawn from each stream's log-normal
latency model: cumulative bucket counts are their expected cumulative values rounded, so
every cumulative count rises monotonically and the bins sum to ``N`` exactly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache

from ioparallax.exporters.fio.hygiene import is_direct
from ioparallax.simulators.scenario import Disk, Stream, Trace

from .periodic import IoSums, io_seconds

FIO_VERSION = "fio-3.33"

# fio's latency histogram (stat.h): 64 buckets per power of two, 29 groups.
PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_NR = 29 * PLAT_VAL

#: fio's default ``percentile_list``.
PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)

#: Latency share keys fio prints in ``latency_ns``/``latency_us`` and ``latency_ms``.
LAT_KEYS = ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000")
LAT_MS_KEYS = LAT_KEYS + ("2000", ">=2000")
IODEPTH_KEYS = ("1", "2", "4", "8", "16", "32", ">=64")

#: Spread kept of a log-normal's buckets: +- this many sigmas (the rest is below 1e-9).
SIGMAS = 6.0


def plat_val_to_idx(val: int) -> int:
    """fio's ``plat_val_to_idx``: the histogram bucket of a latency in ns."""
    if val <= 0:
        return 0
    msb = val.bit_length() - 1
    if msb <= PLAT_BITS:
        return val
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (PLAT_VAL - 1) & (val >> error_bits)
    return min(base + offset, PLAT_NR - 1)


def plat_idx_range(idx: int) -> tuple[int, int]:
    """The latencies [lo, hi) in ns that fall in bucket ``idx``."""
    if idx < (PLAT_VAL << 1):
        return idx, idx + 1
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = idx % PLAT_VAL
    return base + k * (1 << error_bits), base + (k + 1) * (1 << error_bits)


def plat_idx_to_val(idx: int) -> int:
    """fio's ``plat_idx_to_val``: the bucket's midpoint, the key of json+ ``bins``."""
    if idx < (PLAT_VAL << 1):
        return idx
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = idx % PLAT_VAL
    return int(base + (k + 0.5) * (1 << error_bits))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@lru_cache(maxsize=256)
def lognormal_bins(mean_s: float, sigma: float) -> tuple[tuple[int, float], ...]:
    """(fio bucket index, probability) of a log-normal latency with this mean, summing to 1.

    The same parametrisation as the Stargate view's histograms (``mu = ln(mean) - sigma^2/2``)."""
    mean_ns = mean_s * 1e9
    if sigma <= 0:
        return ((plat_val_to_idx(int(mean_ns)), 1.0),)
    mu = math.log(mean_ns) - sigma * sigma / 2.0
    lo_idx = plat_val_to_idx(max(1, int(math.exp(mu - SIGMAS * sigma))))
    hi_idx = plat_val_to_idx(int(math.exp(mu + SIGMAS * sigma)) + 1)
    out = []
    for idx in range(lo_idx, hi_idx + 1):
        lo, hi = plat_idx_range(idx)
        p = _phi((math.log(hi) - mu) / sigma) - _phi((math.log(lo) - mu) / sigma)
        if p > 1e-12:
            out.append((idx, p))
    total = sum(p for _, p in out)
    return tuple((i, p / total) for i, p in out)


@dataclass
class Job:
    """One fio job of a VM: the streams of one disk that share a ``job`` name."""

    name: str
    disk: Disk
    streams: list[tuple[int, Stream]]  # (index on the disk, stream)
    continuous: bool  # runs across periods without stopping
    start: int  # period second it starts (windowed jobs)
    end: int  # period second it ends (windowed jobs)
    options: dict[str, str]
    iodepth: int


class GuestFio:
    """The fio status records of every VM of a scenario."""

    def __init__(self, trace: Trace, anchor: float | None = None):
        self.trace = trace
        self.period = trace.period
        # Continuous jobs started at the start of the period in which the simulator started.
        self.anchor = trace.period_start(time.time() if anchor is None else anchor)
        self._series: dict[tuple[str, int], IoSums] = {}  # (disk, stream index)
        self.jobs: dict[str, list[Job]] = {}
        for vm in trace.scenario.vms:
            jobs: list[Job] = []
            for disk in vm.disks:
                groups: dict[str, list[tuple[int, Stream]]] = {}
                for si, s in enumerate(disk.streams):
                    groups.setdefault(s.job or s.name, []).append((si, s))
                    self._series[(disk.key, si)] = IoSums.of(io_seconds(trace, disk, [si]))
                for name, members in groups.items():
                    jobs.append(self._job(name, disk, members))
            self.jobs[vm.name] = jobs

    # -- set-up -------------------------------------------------------------------------
    def _job(self, name: str, disk: Disk, members: list[tuple[int, Stream]]) -> Job:
        covered = [False] * self.period
        for _, s in members:
            for t in range(s.start, s.end):
                covered[t] = True
        start = min(s.start for _, s in members)
        end = max(s.end for _, s in members)
        first = members[0][1]
        opts = dict(first.fio_options)
        # The job names the raw device: the guest -> VM join goes through the device's serial.
        opts["filename"] = f"/dev/{disk.guest_device}"
        opts.setdefault("rw", first.rw)
        sizes = first.read_size if first.read_iops else first.write_size
        if len(sizes.parts) > 1:
            opts.setdefault("bssplit", sizes.fio_value)
        else:
            opts.setdefault("bs", sizes.fio_value)
        opts.setdefault("iodepth", str(first.iodepth))
        if not all(covered):
            opts.setdefault("runtime", str(end - start))
        options = {"name": name, **opts}
        try:
            depth = int(options["iodepth"])
        except ValueError:
            depth = first.iodepth
        return Job(
            name=name,
            disk=disk,
            streams=members,
            continuous=all(covered),
            start=start,
            end=end,
            options=options,
            iodepth=depth,
        )

    # -- records ------------------------------------------------------------------------
    def _cum(self, prefix: tuple[float, ...], a: int, b: int) -> float:
        """Sum of a per-second series over wall-clock seconds [a, b)."""
        return self.trace.periodic_sum(prefix, a, b)

    def run_window(self, job: Job, T: int) -> tuple[int, int] | None:
        """(start, end) in absolute seconds of the job's run that a record at ``T`` shows, if any."""
        if job.continuous:
            return (min(self.anchor, T), T + 10 * 365 * 86400)
        p = self.period
        t = self.trace.period_second(T)
        start = T - t + job.start if t > job.start else T - t - p + job.start
        end = start + (job.end - job.start)
        return (start, end) if start < T <= end else None

    def record(self, vm: str, T: int) -> dict:
        """The json+ status record fio in ``vm`` writes at wall-clock second ``T``."""
        jobs = []
        for job in self.jobs[vm]:
            window = self.run_window(job, T)
            if window is not None:
                jobs.append(self._job_entry(job, window[0], min(T, window[1]), window[1], T))
        return {
            "fio version": FIO_VERSION,
            "timestamp": T,
            "timestamp_ms": T * 1000,
            "time": time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(T)),
            "jobs": jobs,
        }

    def _job_entry(self, job: Job, start: int, until: int, end: int, T: int) -> dict:
        runtime_ms = (until - start) * 1000
        directions = {}
        for d in ("read", "write"):
            ops = sum(
                self._cum(getattr(self._series[(job.disk.key, si)], f"{d}_ops"), start, until) for si, _ in job.streams
            )
            nbytes = sum(
                self._cum(getattr(self._series[(job.disk.key, si)], f"{d}_bytes"), start, until)
                for si, _ in job.streams
            )
            lat = sum(
                self._cum(getattr(self._series[(job.disk.key, si)], f"{d}_latency"), start, until)
                for si, _ in job.streams
            )
            parts = []
            for si, s in job.streams:
                n = self._cum(getattr(self._series[(job.disk.key, si)], f"{d}_ops"), start, until)
                if n > 0:
                    mean = s.read_latency_s if d == "read" else s.write_latency_s
                    parts.append((n, lognormal_bins(mean, s.latency_sigma)))
            directions[d] = _direction(
                ops,
                nbytes,
                lat,
                parts,
                runtime_ms,
                any((s.read_iops if d == "read" else s.write_iops) > 0 for _, s in job.streams),
            )
        # Buffered I/O is submitted synchronously (libaio included): fio sees one I/O in flight
        # whatever iodepth asks for, and its iodepth_level says so.
        depth_key = _depth_key(job.iodepth if is_direct(job.options) else 1)
        lat_shares = _latency_shares([directions["read"]["clat_ns"], directions["write"]["clat_ns"]])
        entry = {
            "jobname": job.name,
            "groupid": 0,
            "error": 0,
            "eta": max(0, end - T) if not job.continuous else 0,
            "elapsed": T - start,
            "job options": job.options,
            "read": directions["read"],
            "write": directions["write"],
            "trim": _direction(0, 0, 0.0, [], 0, False),
            "sync": {"total_ios": 0, "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}},
            "job_runtime": runtime_ms,
            "usr_cpu": 1.5,
            "sys_cpu": 4.0,
            "ctx": directions["read"]["total_ios"] + directions["write"]["total_ios"],
            "majf": 0,
            "minf": 14,
            "iodepth_level": {k: (100.0 if k == depth_key else 0.0) for k in IODEPTH_KEYS},
            "iodepth_submit": {k: (100.0 if k == "4" else 0.0) for k in ("0", "4", "8", "16", "32", "64", ">=64")},
            "iodepth_complete": {k: (100.0 if k == "4" else 0.0) for k in ("0", "4", "8", "16", "32", "64", ">=64")},
            "latency_ns": lat_shares["ns"],
            "latency_us": lat_shares["us"],
            "latency_ms": lat_shares["ms"],
            "latency_depth": job.iodepth,
            "latency_target": 0,
            "latency_percentile": 100.0,
            "latency_window": 0,
        }
        return entry


def _depth_key(depth: int) -> str:
    if depth >= 64:
        return ">=64"
    key = "1"
    for k in IODEPTH_KEYS[:-1]:
        if depth >= int(k):
            key = k
    return key


def _bins(parts: list[tuple[float, tuple[tuple[int, float], ...]]], n: int) -> dict[int, int]:
    """Integer counts per fio bucket summing to ``n``: cumulative counts are the expected
    cumulative counts rounded (so monotone in time at every bucket edge), capped at ``n``."""
    expected: dict[int, float] = {}
    for ops, bins in parts:
        for idx, p in bins:
            expected[idx] = expected.get(idx, 0.0) + ops * p
    out: dict[int, int] = {}
    acc = 0.0
    prev = 0
    order = sorted(expected)
    for i, idx in enumerate(order):
        acc += expected[idx]
        cum = n if i == len(order) - 1 else min(n, int(math.floor(acc + 0.5)))
        if cum > prev:
            out[idx] = cum - prev
            prev = cum
    return out


def _direction(ops: float, nbytes: float, lat_s: float, parts, runtime_ms: int, does_io: bool) -> dict:
    n = int(math.floor(ops + 1e-9))
    io_bytes = int(math.floor(nbytes + 1e-6))
    runtime = runtime_ms if does_io else 0
    bins = _bins(parts, n) if n else {}
    if n:
        mean = lat_s * 1e9 / n
        vals = {idx: plat_idx_to_val(idx) for idx in bins}
        var = sum(c * (vals[i] - mean) ** 2 for i, c in bins.items()) / n
        lo = plat_idx_range(min(bins))[0]
        hi = plat_idx_range(max(bins))[1] - 1
        percentiles = {}
        cum = 0
        order = sorted(bins)
        j = 0
        for idx in order:
            cum += bins[idx]
            while j < len(PERCENTILES) and cum >= PERCENTILES[j] / 100.0 * n:
                percentiles[f"{PERCENTILES[j]:.6f}"] = vals[idx]
                j += 1
        lat: dict[str, object] = {
            "min": lo,
            "max": hi,
            "mean": round(mean, 6),
            "stddev": round(math.sqrt(var), 6),
            "N": n,
        }
        clat: dict[str, object] = {**lat, "percentile": percentiles, "bins": {str(vals[i]): bins[i] for i in order}}
    else:
        clat = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
        lat = dict(clat)
    bw = int(io_bytes * 1000 // runtime) if runtime else 0
    iops = n * 1000.0 / runtime if runtime else 0.0
    samples = runtime // 500 if runtime else 0
    return {
        "io_bytes": io_bytes,
        "io_kbytes": io_bytes // 1024,
        "bw_bytes": bw,
        "bw": bw // 1024,
        "iops": round(iops, 6),
        "runtime": runtime,
        "total_ios": n,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": clat,
        "lat_ns": lat,
        "bw_min": 0 if not samples else bw // 1024,
        "bw_max": 0 if not samples else bw // 1024,
        "bw_agg": 100.0 if samples else 0.0,
        "bw_mean": round(bw / 1024, 6) if samples else 0.0,
        "bw_dev": 0.0,
        "bw_samples": samples,
        "iops_min": 0 if not samples else int(iops),
        "iops_max": 0 if not samples else int(math.ceil(iops)),
        "iops_mean": round(iops, 6) if samples else 0.0,
        "iops_stddev": 0.0,
        "iops_samples": samples,
    }


def _latency_shares(clats: list[dict]) -> dict[str, dict[str, float]]:
    """fio's latency_ns/us/ms: percent of I/Os per latency range, from the bins."""
    counts: list[tuple[int, int]] = []
    for c in clats:
        for key, n in c.get("bins", {}).items():
            counts.append((int(key), n))
    total = sum(n for _, n in counts)

    def shares(keys: tuple[str, ...], unit: int, floor_ns: int) -> dict[str, float]:
        out = dict.fromkeys(keys, 0.0)
        if not total:
            return out
        bounds = [int(k) * unit for k in keys if not k.startswith(">=")]
        for v, n in counts:
            if v < floor_ns:
                continue
            for k, b in zip(keys, bounds):
                if v <= b:
                    out[k] += n
                    break
            else:
                if keys[-1].startswith(">="):
                    out[keys[-1]] += n
        return {k: round(100.0 * c / total, 6) for k, c in out.items()}

    return {
        "ns": shares(LAT_KEYS, 1, 0),
        "us": shares(LAT_KEYS, 1000, 1000),
        "ms": shares(LAT_MS_KEYS, 1_000_000, 1_000_000),
    }
