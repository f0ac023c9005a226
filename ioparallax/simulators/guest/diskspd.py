"""DiskSPD's ``-Rxml`` results of the Windows VMs whose load generator is DiskSPD, from the trace.

DiskSPD writes nothing while it runs and one XML document when it ends, so a live guest view of
DiskSPD is a sequence of finished runs. The simulated guest runs DiskSPD back to back: run ``k``
of a VM starts at ``anchor + k x (warm-up + run)`` (the anchor is the guest's "boot", as for fio),
warms up for ``diskspd.warmup`` seconds (not measured, as DiskSPD's ``-W``), measures for
``diskspd.run`` seconds (``-d``), and its document is written when it ends, as DiskSPD's copied off
the VM would be: ``<dir>/<HOSTNAME>-<run start>.xml`` in one results directory shared by the VMs
(the collector host's directory that ``diskspd-exporter --diskspd.watch`` reads). The newest
:data:`KEEP` documents per VM are kept; the exporter's ``--diskspd.retention`` drops older runs.

One DiskSPD process per VM, one target per stream of its disks (``Path`` = the stream's
``diskspd.target``, default ``<volume>\\diskspd\\testfile.dat``), ``-L`` and ``-D1000`` on:

- counts and bytes: the trace's sums over the measured seconds, rounded down, split evenly over
  the ``-t`` threads (``RequestCount`` per thread = iodepth / threads, at least 1);
- latency (``-L``): the trace's op-weighted means; standard deviations and the time span's
  percentiles from each stream's log-normal model (``latency_sigma``), the total's percentiles
  from the mixture of reads and writes;
- ``-D`` buckets: the I/Os of each measured second (``IoBucketDuration`` 1000), with the
  second's mean latency (DiskSPD 2.0.20+ attributes);
- the profile: ``BlockSize`` (the stream's mean read size), ``WriteRatio`` (percent of I/Os),
  ``Random`` for random streams (``StrideSize`` for sequential ones), ``DisableOSCache`` and
  ``WriteThrough`` for ``-Sh``, ``WriteBufferContent/Pattern`` (``sequential``: DiskSPD's default
  0x00..0xFF pattern, ``zero``: ``-Z``, ``random``: ``-Z<size>``), ``FileSize`` (``-c``: the
  stream's ``diskspd.file_size``, else its working set), ``Warmup``, ``Duration``;
- ``System/ComputerName``: the VM's ``hostname`` (what vCenter shows as ``guest.hostName``, the key
  of the guest-to-VM join).

The documents are the diskspd exporter's own writer's (:func:`ioparallax.exporters.diskspd.document.write_document`),
so they parse back to these numbers.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from ioparallax.exporters.diskspd import parse as results
from ioparallax.exporters.diskspd.document import XML_PERCENTILES, write_document
from ioparallax.simulators.scenario import Disk, DiskspdOptions, Stream, Trace, Vm

from .fio import GuestFio

log = logging.getLogger("ioparallax.guest.diskspd")

DISKSPD_VERSION = "2.2.0"
DISKSPD_VERSION_DATE = "2024/6/3"
KEEP = 3  # result documents kept per VM
_Z = NormalDist()


@dataclass(frozen=True)
class _Target:
    disk: Disk
    stream_index: int
    stream: Stream
    opts: DiskspdOptions
    path: str


def run_length(vm: Vm) -> tuple[int, int]:
    """(warm-up, measured) seconds of the VM's DiskSPD runs: its first stream's ``diskspd`` options."""
    for disk in vm.disks:
        for s in disk.streams:
            opts = s.diskspd or DiskspdOptions()
            return opts.warmup_seconds, opts.run_seconds
    o = DiskspdOptions()
    return o.warmup_seconds, o.run_seconds


def _lognormal_quantile(mean: float, sigma: float, p: float) -> float:
    if mean <= 0:
        return 0.0
    if p <= 0:
        p = 0.0001
    if p >= 1:
        p = 0.999999999
    median = mean / math.exp(sigma * sigma / 2)
    return median * math.exp(sigma * _Z.inv_cdf(p))


def _lognormal_cdf(x: float, mean: float, sigma: float) -> float:
    if mean <= 0 or x <= 0:
        return 0.0
    median = mean / math.exp(sigma * sigma / 2)
    return _Z.cdf((math.log(x) - math.log(median)) / sigma) if sigma > 0 else float(x >= median)


def _lognormal_stdev(mean: float, sigma: float) -> float:
    return mean * math.sqrt(math.exp(sigma * sigma) - 1)


def _mixture_quantile(parts: list[tuple[float, float, float]], p: float) -> float:
    """Quantile ``p`` of a mixture of log-normals given as (weight, mean, sigma)."""
    parts = [x for x in parts if x[0] > 0 and x[1] > 0]
    if not parts:
        return 0.0
    total = sum(w for w, _, _ in parts)
    lo = min(_lognormal_quantile(m, s, 0.0001) for _, m, s in parts) / 10
    hi = max(_lognormal_quantile(m, s, 0.999999999) for _, m, s in parts) * 10
    target = min(max(p, 0.0001), 0.999999999)
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        cdf = sum(w * _lognormal_cdf(mid, m, s) for w, m, s in parts) / total
        if cdf < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def _stdev(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


class GuestDiskspd:
    """The DiskSPD result documents of every Windows VM of a scenario that runs DiskSPD."""

    def __init__(self, trace: Trace, anchor: float | None = None, fio: GuestFio | None = None):
        self.trace = trace
        self.period = trace.period
        self.anchor = int((fio or GuestFio(trace, anchor=anchor)).anchor)
        self.vms: dict[str, Vm] = {vm.name: vm for vm in trace.scenario.vms if vm.load_generator == "diskspd"}
        self._targets = {name: self._vm_targets(vm) for name, vm in self.vms.items()}

    @staticmethod
    def _vm_targets(vm: Vm) -> list[_Target]:
        out = []
        for disk in vm.disks:
            for si, s in enumerate(disk.streams):
                opts = s.diskspd or DiskspdOptions()
                out.append(_Target(disk, si, s, opts, opts.target or f"{disk.volume}\\diskspd\\testfile.dat"))
        return out

    def runs_ended(self, vm_name: str, after: int, until: int) -> list[int]:
        """Start times of the VM's runs that end in (after, until]."""
        warm, run = run_length(self.vms[vm_name])
        length = warm + run
        k0 = max(0, (after - self.anchor) // length)
        out: list[int] = []
        k = k0
        while True:
            start = self.anchor + k * length
            end = start + length
            if end > until:
                return out
            if end > after:
                out.append(start)
            k += 1

    def result(self, vm_name: str, start: int) -> results.DiskspdResult:
        """The run of ``vm_name`` that started at wall-clock second ``start``."""
        vm = self.vms[vm_name]
        warm, run = run_length(vm)
        t0 = start + warm  # measurement starts after the warm-up
        targets = self._targets[vm_name]
        profiles: list[results.TargetProfile] = []
        thread_targets: list[results.ThreadTarget] = []
        span_read: list[float] = [0.0] * run
        span_write: list[float] = [0.0] * run
        lat_parts_r: list[tuple[float, float, float]] = []
        lat_parts_w: list[tuple[float, float, float]] = []
        sums = {"r": 0.0, "w": 0.0, "rl": 0.0, "wl": 0.0, "rv": 0.0, "wv": 0.0}
        thread_id = 0
        for tg in targets:
            s, opts = tg.stream, tg.opts
            act = self.trace.activity[tg.disk.key][tg.stream_index]
            per_second = [act[self.trace.period_second(t0 + i)] for i in range(run)]
            reads = [s.read_iops * a for a in per_second]
            writes = [s.write_iops * a for a in per_second]
            n_r, n_w = sum(reads), sum(writes)
            threads = opts.threads
            depth = max(1, math.ceil(s.iodepth / threads))
            total_ops = s.read_iops + s.write_iops
            rand = (s.read_random if s.read_iops else s.write_random) >= 0.5
            block = int(round(s.read_size.mean_bytes if s.read_iops else s.write_size.mean_bytes))
            profiles.append(
                results.TargetProfile(
                    path=tg.path,
                    block_size=block,
                    file_size=opts.file_size_bytes or s.working_set_bytes,
                    disable_os_cache=opts.disable_os_cache,
                    write_through=opts.disable_os_cache,
                    write_pattern=opts.write_buffer,
                    random_data_size=1024 * 1024 if opts.write_buffer == "random" else None,
                    random_alignment=block if rand else None,
                    stride_size=None if rand else block,
                    request_count=depth,
                    write_ratio=int(round(100 * s.write_iops / total_ops)) if total_ops else 0,
                    threads_per_file=threads,
                )
            )
            r_sd = _lognormal_stdev(s.read_latency_s, s.latency_sigma)
            w_sd = _lognormal_stdev(s.write_latency_s, s.latency_sigma)
            lat_parts_r.append((n_r, s.read_latency_s * 1000, s.latency_sigma))
            lat_parts_w.append((n_w, s.write_latency_s * 1000, s.latency_sigma))
            sums["r"] += n_r
            sums["w"] += n_w
            sums["rl"] += n_r * s.read_latency_s
            sums["wl"] += n_w * s.write_latency_s
            sums["rv"] += n_r * (r_sd**2 + s.read_latency_s**2)
            sums["wv"] += n_w * (w_sd**2 + s.write_latency_s**2)
            for i in range(run):
                span_read[i] += reads[i]
                span_write[i] += writes[i]
            for th in range(threads):
                share = 1.0 / threads
                rc = int(math.floor(n_r * share + 1e-6))
                wc = int(math.floor(n_w * share + 1e-6))
                rb = int(math.floor(n_r * share * s.read_size.mean_bytes + 1e-6))
                wb = int(math.floor(n_w * share * s.write_size.mean_bytes + 1e-6))
                buckets = tuple(
                    results.IopsBucket(
                        sample_ms=(i + 1) * 1000,
                        read=reads[i] * share,
                        write=writes[i] * share,
                        total=(reads[i] + writes[i]) * share,
                        read_latency_avg_ms=s.read_latency_s * 1000 if reads[i] else 0.0,
                        write_latency_avg_ms=s.write_latency_s * 1000 if writes[i] else 0.0,
                    )
                    for i in range(run)
                )
                all_ms = (rc * s.read_latency_s + wc * s.write_latency_s) * 1000 / (rc + wc) if rc + wc else 0.0
                all_sd = (
                    math.sqrt(
                        max(
                            0.0,
                            (rc * (r_sd**2 + s.read_latency_s**2) + wc * (w_sd**2 + s.write_latency_s**2)) / (rc + wc)
                            - (all_ms / 1000) ** 2,
                        )
                    )
                    * 1000
                    if rc + wc
                    else 0.0
                )
                thread_targets.append(
                    results.ThreadTarget(
                        thread_id=thread_id + th,
                        position=0,
                        path=tg.path,
                        bytes_count=rb + wb,
                        file_size=opts.file_size_bytes or s.working_set_bytes,
                        io_count=rc + wc,
                        read_bytes=rb,
                        read_count=rc,
                        write_bytes=wb,
                        write_count=wc,
                        latency=results.LatencyStats(
                            read_avg_ms=s.read_latency_s * 1000 if rc else None,
                            read_stdev_ms=r_sd * 1000 if rc else None,
                            write_avg_ms=s.write_latency_s * 1000 if wc else None,
                            write_stdev_ms=w_sd * 1000 if wc else None,
                            total_avg_ms=all_ms,
                            total_stdev_ms=all_sd,
                        ),
                        iops=results.IopsSeries(
                            read_stddev=_stdev([b.read for b in buckets]),
                            write_stddev=_stdev([b.write for b in buckets]),
                            total_stddev=_stdev([b.total for b in buckets]),
                            buckets=buckets,
                        ),
                    )
                )
            thread_id += threads
        percentiles = []
        for p in XML_PERCENTILES:
            q = p / 100.0
            percentiles.append(
                results.LatencyPercentile(
                    percentile=p,
                    read_ms=_mixture_quantile(lat_parts_r, q) if sums["r"] else None,
                    write_ms=_mixture_quantile(lat_parts_w, q) if sums["w"] else None,
                    total_ms=_mixture_quantile(lat_parts_r + lat_parts_w, q),
                )
            )
        n_all = sums["r"] + sums["w"]

        def mean_sd(n: float, lat: float, var: float) -> tuple[float | None, float | None]:
            if not n:
                return None, None
            m = lat / n
            return m * 1000, math.sqrt(max(0.0, var / n - m * m)) * 1000

        r_m, r_s = mean_sd(sums["r"], sums["rl"], sums["rv"])
        w_m, w_s = mean_sd(sums["w"], sums["wl"], sums["wv"])
        a_m, a_s = mean_sd(n_all, sums["rl"] + sums["wl"], sums["rv"] + sums["wv"])
        span_buckets = tuple(
            results.IopsBucket(
                sample_ms=(i + 1) * 1000,
                read=span_read[i],
                write=span_write[i],
                total=span_read[i] + span_write[i],
            )
            for i in range(run)
        )
        span = results.TimeSpanResult(
            test_time_s=float(run),
            thread_count=thread_id,
            request_count=0,
            proc_count=4,
            cpu=results.CpuAverage(usage_percent=12.5, user_percent=2.5, kernel_percent=10.0, idle_percent=87.5),
            latency_percentiles=tuple(percentiles),
            latency=results.LatencyStats(r_m, r_s, w_m, w_s, a_m, a_s),
            iops=results.IopsSeries(
                read_stddev=_stdev(span_read),
                write_stddev=_stdev(span_write),
                total_stddev=_stdev([b.total for b in span_buckets]),
                buckets=span_buckets,
            ),
            threads=tuple(thread_targets),
        )
        profile = results.TimeSpanProfile(
            duration_s=float(run),
            warmup_s=float(warm),
            cooldown_s=0.0,
            measure_latency=True,
            calculate_iops_stddev=True,
            io_bucket_duration_ms=1000,
            thread_count=0,
            request_count=0,
            rand_seed=0,
            targets=tuple(profiles),
        )
        return results.DiskspdResult(
            computer_name=vm.hostname,
            version=DISKSPD_VERSION,
            version_date=DISKSPD_VERSION_DATE,
            run_time=float(start),
            profiles=[profile],
            spans=[span],
        )

    def document(self, vm_name: str, start: int) -> str:
        return write_document(self.result(vm_name, start))


def result_path(out_dir: Path, vm: Vm, start: int) -> Path:
    return out_dir / f"{vm.hostname}-{start}.xml"


def write_finished_runs(sim: GuestDiskspd, out_dir: Path, after: int, until: int) -> list[Path]:
    """Write the documents of the runs that ended in (after, until] (at most :data:`KEEP` per VM:
    a simulator that was suspended does not write a backlog) and drop each VM's older documents."""
    written = []
    for name, vm in sim.vms.items():
        for start in sim.runs_ended(name, after, until)[-KEEP:]:
            path = result_path(out_dir, vm, start)
            tmp = path.with_name(path.name + ".part")
            tmp.write_text(sim.document(name, start), encoding="utf-8")
            os.replace(tmp, path)  # the exporter sees no half-written document
            written.append(path)
            log.debug("wrote DiskSPD result %s", path)
        mine = sorted(out_dir.glob(f"{vm.hostname}-*.xml"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        for old in mine[:-KEEP]:
            old.unlink(missing_ok=True)
    return written
