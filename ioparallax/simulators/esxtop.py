"""esxtop batch CSVs and vscsiStats outputs written from the scenario trace, as an ESXi host's
tools write them (the formats of docs/esxtop.md).

Per ESXi host of a scenario (each VM's ``host``):

- :class:`EsxtopCapture` is ``esxtop -b -d <delay>``: a perfmon header (``(PDH-CSV 4.0)
  (UTC)(0)``, one ``\\\\<host>\\<Object>(<instance>)\\<Counter>`` column per counter), then one row
  per sample, every cell quoted, values ``%.2f`` as esxtop prints them. Columns: per virtual disk
  and per VM (its disks summed) ``Virtual Disk``'s seven counters, per NFS datastore (the
  Nutanix container the disks' backing files are on) ``Physical Disk NFS Volume``'s rates and
  guest latencies, and a few host columns the exporter does not read. A sample at wall time W
  holds the mean over [W - delay, W) of the trace's per-second ground truth: the same truth
  vCenter's 20 s samples average, so a 1 s burst stands out in the 2 s view and is flattened in
  the 20 s one. Per VM a ``Group Cpu(<worldGroupID>:<vm>)`` group names the VM's worldGroupID
  (what vscsiStats names it by) and its CPU from the trace's per-second truth (the same the
  vCenter simulator's ``cpu.usagemhz`` and ``cpu.ready`` average): ``% Used`` is the MHz used over
  one core's MHz x 100 (100 per busy vCPU), ``% Ready`` the ready seconds summed over the vCPUs
  over the interval x 100, ``% CoStop`` 0. The host's CVM (``NTNX-<block>-<position>-CVM``,
  ``cluster.cpu.cvm_share`` of the host's capacity, ``cvm_vcpus`` vCPUs) gets a ``Group Cpu``
  too and no ``Virtual Disk`` columns: on ESXi its data disks are passed through, not virtual.
- :func:`vscsistats_text` is ``vscsiStats -p all -c`` after collecting over a window: per disk
  the I/O length, seek distance, outstanding I/O, latency and interarrival histograms for all,
  reads and writes, built from the streams' block size mix, random share, iodepth and
  log-normal latency, each histogram's buckets adding up to its count.

``esxtop-simulator`` (:func:`main`) writes a growing capture per host in real time, or a
finished one (``--samples``) at once.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.simulators.scenario.model import Disk, Scenario, Stream, load_scenario
from ioparallax.simulators.scenario.trace import DiskSecond, Trace, compile_scenario
from ioparallax.version import add_version_arg

MB = 1048576.0

VDISK_COUNTERS = (
    "Commands/sec",
    "Reads/sec",
    "Writes/sec",
    "MBytes Read/sec",
    "MBytes Written/sec",
    "Average MilliSec/Read",
    "Average MilliSec/Write",
)
NFS_COUNTERS = (
    "Commands/sec",
    "Reads/sec",
    "Writes/sec",
    "MBytes Read/sec",
    "MBytes Written/sec",
    "Average Guest MilliSec/Command",
    "Average Guest MilliSec/Read",
    "Average Guest MilliSec/Write",
)
#: Group Cpu counters written per VM and CVM (values: :meth:`EsxtopCapture.cpu_cells`).
CPU_COUNTERS = ("% Used", "% Ready", "% CoStop")
#: Host columns a real capture has and the exporter does not read (kept: the reader must skip them).
HOST_COLUMNS = (
    "Memory\\Memory Overcommit (1 Minute Avg)",
    "Physical Cpu Load\\Cpu Load (1 Minute Avg)",
    "Physical Cpu(_Total)\\% Processor Time",
)


def datastore(disk: Disk) -> str:
    """The datastore of a disk's backing file, ``[ctr01] vm/vm.vmdk`` -> ``ctr01``."""
    f = disk.backing_file
    return f[1 : f.index("]")] if f.startswith("[") and "]" in f else "datastore"


def perfmon_time(wall: float) -> str:
    return time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(wall))


def _rates(s: DiskSecond, seconds: int) -> list[float]:
    """The seven Virtual Disk counters of a window's totals."""
    return [
        (s.read_ops + s.write_ops) / seconds,
        s.read_ops / seconds,
        s.write_ops / seconds,
        s.read_bytes / MB / seconds,
        s.write_bytes / MB / seconds,
        s.read_latency_s * 1000.0,
        s.write_latency_s * 1000.0,
    ]


def _cells(values: Sequence[float]) -> list[str]:
    return [f"{v:.2f}" for v in values]


@dataclass
class EsxtopCapture:
    """One host's esxtop batch capture from the trace."""

    trace: Trace
    host: str
    delay: int = 2

    def __post_init__(self) -> None:
        if self.delay < 1:
            raise ValueError(f"delay must be at least 1 s, got {self.delay}")
        self.vms = [vm for vm in self.trace.scenario.vms if vm.host == self.host]
        self.datastores = sorted({datastore(d) for vm in self.vms for d in vm.disks})
        self.cvm = next((h.cvm_vm for h in self.trace.scenario.hosts if h.name == self.host and h.cvm), "")

    def cpu_groups(self) -> list[tuple[int, str]]:
        """(worldGroupID, name) of the Group Cpu columns: the host's VMs, then its CVM (if any)."""
        groups = [(world_group_id(self.trace, vm.name), vm.name) for vm in self.vms]
        if self.cvm:
            groups.append((cvm_world_group_id(self.trace, self.host), self.cvm))
        return groups

    def cpu_cells(self, end: int) -> list[float]:
        """% Used, % Ready, % CoStop of every group of :meth:`cpu_groups` over the ``delay`` period
        seconds before ``end``: % of one core, summed over the group's vCPUs (esxtop's units)."""
        tr, n = self.trace, self.delay
        core_mhz = tr.scenario.cluster.cpu.core_mhz
        series = [tr.vm_cpu[vm.name] for vm in self.vms]
        if self.cvm:
            series.append(tr.cvm_cpu[self.host])
        out: list[float] = []
        for cs in series:
            mhz_s, ready_s = cs.window(end, n)
            out += [mhz_s / n / core_mhz * 100.0, ready_s / n * 100.0, 0.0]
        return out

    def header(self) -> str:
        cols = ["(PDH-CSV 4.0) (UTC)(0)"]
        cols += [f"\\\\{self.host}\\{c}" for c in HOST_COLUMNS]
        for vm in self.vms:
            for inst in [vm.name] + [f"{vm.name}:{d.unit}" for d in vm.disks]:
                cols += [f"\\\\{self.host}\\Virtual Disk({inst})\\{c}" for c in VDISK_COUNTERS]
        for ds in self.datastores:
            cols += [f"\\\\{self.host}\\Physical Disk NFS Volume({ds})\\{c}" for c in NFS_COUNTERS]
        for gid, name in self.cpu_groups():
            cols += [f"\\\\{self.host}\\Group Cpu({gid}:{name})\\{c}" for c in CPU_COUNTERS]
        return ",".join(f'"{c}"' for c in cols) + "\r\n"

    def row(self, wall: int) -> str:
        """The sample esxtop writes at wall-clock second ``wall``: means over [wall - delay, wall)."""
        tr, n = self.trace, self.delay
        end = tr.period_second(wall)
        cells = [perfmon_time(wall), "10.00", "0.25", "12.50"]
        per_ds: dict[str, DiskSecond] = {ds: DiskSecond() for ds in self.datastores}
        for vm in self.vms:
            windows = [tr.window(d, end, n) for d in vm.disks]
            total = DiskSecond()
            for d, w in zip(vm.disks, windows):
                total.add(w)
                per_ds[datastore(d)].add(w)
            cells += _cells(_rates(total, n))
            for w in windows:
                cells += _cells(_rates(w, n))
        for ds in self.datastores:
            s = per_ds[ds]
            ops = s.read_ops + s.write_ops
            guest = (s.read_latency_sum_s + s.write_latency_sum_s) / ops * 1000.0 if ops else 0.0
            cells += _cells(_rates(s, n)[:5] + [guest, s.read_latency_s * 1000.0, s.write_latency_s * 1000.0])
        cells += _cells(self.cpu_cells(end))
        return ",".join(f'"{c}"' for c in cells) + "\r\n"

    def write(self, path: Path, first: int, samples: int) -> None:
        """A finished capture: ``samples`` rows, the first at wall second ``first``."""
        with path.open("w", newline="") as fh:
            fh.write(self.header())
            for i in range(samples):
                fh.write(self.row(first + i * self.delay))


# -- vscsiStats ---------------------------------------------------------------------------------
IO_LENGTH_LIMITS = (
    512,
    1024,
    2048,
    4095,
    4096,
    8191,
    8192,
    16383,
    16384,
    32768,
    49152,
    65535,
    65536,
    81920,
    131072,
    262144,
    524288,
)
SEEK_LIMITS = (
    -500000, -100000, -50000, -10000, -5000, -1000, -500, -128, -64, -32, -16, -8, -6, -4, -2, -1, 0,
    1, 2, 4, 6, 8, 16, 32, 64, 128, 500, 1000, 5000, 10000, 50000, 100000, 500000,
)  # fmt: skip
OUTSTANDING_LIMITS = (1, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32, 64)
LATENCY_LIMITS_US = (1, 10, 100, 500, 1000, 5000, 15000, 30000, 50000, 100000)


def _spread(weights: Sequence[float], total: int) -> list[int]:
    """Integer counts proportional to ``weights`` adding up to ``total`` (largest remainder)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    exact = [w / s * total for w in weights]
    counts = [math.floor(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - counts[i], reverse=True)[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _bucket(limits: Sequence[float], value: float) -> int:
    """Index of the bucket holding ``value`` (len(limits): above the last limit)."""
    for i, lim in enumerate(limits):
        if value <= lim:
            return i
    return len(limits)


def _lognormal_weights(limits: Sequence[float], mean: float, sigma: float) -> list[float]:
    """Shares of a log-normal distribution with this mean and sigma in each bucket (and above)."""
    if mean <= 0:
        return [1.0] + [0.0] * len(limits)
    sigma = max(sigma, 1e-6)
    mu = math.log(mean) - sigma * sigma / 2

    def cdf(x: float) -> float:
        return 0.0 if x <= 0 else 0.5 * (1 + math.erf((math.log(x) - mu) / (sigma * math.sqrt(2))))

    out, prev = [], 0.0
    for lim in limits:
        c = cdf(lim)
        out.append(c - prev)
        prev = c
    out.append(1.0 - prev)
    return out


@dataclass
class _Hist:
    what: str
    limits: Sequence[float]
    counts: list[int]  # len(limits) + 1: the last is above the last limit
    mean: float
    lo: float
    hi: float

    def text(self, wgid: int, handle: int, unit: str) -> str:
        count = sum(self.counts)
        lines = [
            f"Histogram: {self.what},virtual machine worldGroupID,{wgid},virtual disk handleID,{handle} ({unit})",
            f"min,{round(self.lo) if count else 0}",
            f"max,{round(self.hi) if count else 0}",
            f"mean,{round(self.mean) if count else 0}",
            f"count,{count}",
            "Frequency,Histogram Bucket Limit",
        ]
        lines += [f"{c},{lim}" for c, lim in zip(self.counts, self.limits)]
        lines.append(f"{self.counts[-1]},{self.limits[-1]}")
        return "\n".join(lines) + "\n"


def _op_hists(streams: list[tuple[Stream, DiskSecond]], op: str) -> dict[str, _Hist]:
    """The five histogram families of one direction (``read``, ``write``) or both (``all``)."""
    ops_of = {
        "read": lambda s: s.read_ops,
        "write": lambda s: s.write_ops,
        "all": lambda s: s.read_ops + s.write_ops,
    }[op]
    total = round(sum(ops_of(w) for _, w in streams))
    length_w = [0.0] * (len(IO_LENGTH_LIMITS) + 1)
    seek_w = [0.0] * (len(SEEK_LIMITS) + 1)
    out_w = [0.0] * (len(OUTSTANDING_LIMITS) + 1)
    lat_w = [0.0] * (len(LATENCY_LIMITS_US) + 1)
    arr_w = [0.0] * (len(LATENCY_LIMITS_US) + 1)
    lat_sum = size_sum = 0.0
    sizes: list[float] = []
    lats: list[float] = []
    seconds = max(w.seconds for _, w in streams) if streams else 0
    for s, w in streams:
        dirs = [d for d in ("read", "write") if op in (d, "all")]
        for d in dirs:
            n = w.read_ops if d == "read" else w.write_ops
            if n <= 0:
                continue
            mix = s.read_size if d == "read" else s.write_size
            for size, frac in mix.parts:
                length_w[_bucket(IO_LENGTH_LIMITS, size)] += n * frac
                size_sum += n * frac * size
                sizes.append(size)
            rnd = s.read_random if d == "read" else s.write_random
            seek_w[_bucket(SEEK_LIMITS, 1)] += n * (1 - rnd)  # sequential: the next block
            seek_w[0] += n * rnd / 2  # random: far away, either side
            seek_w[-1] += n * rnd / 2
            out_w[_bucket(OUTSTANDING_LIMITS, max(s.iodepth, 1))] += n
            lat_s = s.read_latency_s if d == "read" else s.write_latency_s
            for i, share in enumerate(_lognormal_weights(LATENCY_LIMITS_US, lat_s * 1e6, s.latency_sigma)):
                lat_w[i] += n * share
            lat_sum += n * lat_s * 1e6
            lats.append(lat_s * 1e6)
            iops = n / seconds if seconds else 0.0
            arr_w[_bucket(LATENCY_LIMITS_US, 1e6 / iops if iops else math.inf)] += n
    mean_size = size_sum / total if total else 0.0
    mean_lat = lat_sum / total if total else 0.0
    return {
        "io_length": _Hist(
            "", IO_LENGTH_LIMITS, _spread(length_w, total), mean_size, min(sizes, default=0), max(sizes, default=0)
        ),
        "seek": _Hist("", SEEK_LIMITS, _spread(seek_w, total), 0.0, -1_000_000, 1_000_000),
        # the closest of the previous 16: one stream per disk here, so the same as the previous one
        "seek16": _Hist("", SEEK_LIMITS, _spread(seek_w, total), 0.0, -1_000_000, 1_000_000),
        "outstanding": _Hist("", OUTSTANDING_LIMITS, _spread(out_w, total), 0.0, 1, 64),
        "latency": _Hist(
            "", LATENCY_LIMITS_US, _spread(lat_w, total), mean_lat, min(lats, default=0), max(lats, default=0)
        ),
        "interarrival": _Hist(
            "", LATENCY_LIMITS_US, _spread(arr_w, total), seconds * 1e6 / total if total else 0.0, 0, 0
        ),
    }


#: (family, op) -> vscsiStats' title, as ``-p all -c`` prints it
TITLES = {
    ("io_length", "all"): "IO lengths of commands",
    ("io_length", "read"): "IO lengths of Read commands",
    ("io_length", "write"): "IO lengths of Write commands",
    ("seek", "all"): "distance (in LBNs) between successive commands",
    ("seek", "read"): "distance (in LBNs) between successive Read commands",
    ("seek", "write"): "distance (in LBNs) between successive Write commands",
    ("seek16", "all"): "distance (in LBNs) between each command from the closest of previous 16",
    ("outstanding", "all"): "number of outstanding IOs when a new IO is issued",
    ("outstanding", "read"): "number of outstanding Read IOs when a new Read IO is issued",
    ("outstanding", "write"): "number of outstanding Write IOs when a new Write IO is issued",
    ("latency", "all"): "latency of IOs in Microseconds (us)",
    ("latency", "read"): "latency of Read IOs in Microseconds (us)",
    ("latency", "write"): "latency of Write IOs in Microseconds (us)",
    ("interarrival", "all"): "latency of IO interarrival time in Microseconds (us)",
    ("interarrival", "read"): "latency of IO interarrival time for Reads in Microseconds (us)",
    ("interarrival", "write"): "latency of IO interarrival time for Writes in Microseconds (us)",
}
#: the families in vscsiStats' order, with the directions it prints each for
ORDER = (
    ("io_length", ("all", "read", "write")),
    ("seek", ("all", "read", "write")),
    ("seek16", ("all",)),
    ("latency", ("all", "read", "write")),
    ("outstanding", ("all", "read", "write")),
    ("interarrival", ("all", "read", "write")),
)


def world_group_id(trace: Trace, vm: str) -> int:
    """A stable worldGroupID per VM of the scenario (as ``vscsiStats -l`` lists them)."""
    names = [v.name for v in trace.scenario.vms]
    return 2099979 + 31 * names.index(vm)


def cvm_world_group_id(trace: Trace, host: str) -> int:
    """A stable worldGroupID for the CVM of ``host``, apart from the VMs' (:func:`world_group_id`)."""
    names = [h.name for h in trace.scenario.hosts]
    return 2000010 + 13 * names.index(host)


def vscsistats_text(trace: Trace, host: str, end: int, seconds: int) -> str:
    """``vscsiStats -p all -c`` on ``host`` after collecting over the ``seconds`` wall seconds before
    ``end``: every disk of the host's VMs."""
    out: list[str] = []
    for vm in trace.scenario.vms:
        if vm.host != host:
            continue
        wgid = world_group_id(trace, vm.name)
        for i, d in enumerate(vm.disks):
            handle = 8192 + i
            streams = trace.stream_window(d, trace.period_second(end), seconds)  # any length: periods repeat
            hists = {op: _op_hists(streams, op) for op in ("all", "read", "write")}
            for fam, ops in ORDER:
                for op in ops:
                    h = hists[op][fam]
                    h.what = TITLES[(fam, op)]
                    out.append(h.text(wgid, handle, d.unit))
    return "".join(out)


# -- the program --------------------------------------------------------------------------------
def hosts(scenario: Scenario) -> list[str]:
    return sorted({vm.host for vm in scenario.vms})


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def follow(trace: Trace, out: Path, delay: int, stop: threading.Event, vscsi_every: int = 60) -> None:
    """Write each host's capture live: the header, then a row every ``delay`` s (aligned to
    wall-clock multiples of the delay), and its vscsiStats output every ``vscsi_every`` s."""
    caps = {h: EsxtopCapture(trace, h, delay) for h in hosts(trace.scenario)}
    started = math.floor(time.time())
    files = {}
    for h, cap in caps.items():
        path = out / f"{h}.csv"
        path.write_text(cap.header())
        files[h] = path
    nxt = (started // delay + 1) * delay
    last_vscsi = started
    while not stop.is_set():
        if stop.wait(max(0.0, nxt - time.time())):
            break
        for h, cap in caps.items():
            with files[h].open("a", newline="") as fh:
                fh.write(cap.row(nxt))
        if nxt - last_vscsi >= vscsi_every:
            for h in caps:
                _replace(out / f"{h}-vscsi.csv", vscsistats_text(trace, h, nxt, nxt - started))
            last_vscsi = nxt
        nxt += delay


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="esxtop-simulator",
        description="Write the esxtop batch CSV (esxtop -b -d DELAY) and vscsiStats output (-p all -c) "
        "of every ESXi host of a scenario, from the same ground truth as the other simulated views: "
        "live (a row every DELAY s, as esxtop over SSH) or, with --samples, a finished capture at once.",
    )
    add_version_arg(parser)
    parser.add_argument("scenario", help="library name or YAML path")
    parser.add_argument("--out", required=True, help="directory for <host>.csv and <host>-vscsi.csv")
    parser.add_argument("--delay", type=int, default=2, help="seconds between samples, esxtop's -d (default: 2)")
    parser.add_argument(
        "--samples", type=int, help="write a finished capture of this many samples ending now, and exit"
    )
    parser.add_argument("--vscsi-every", type=int, default=60, help="live: rewrite vscsiStats every N s (default: 60)")
    args = parser.parse_args(argv)
    if args.delay < 1:
        parser.error(f"--delay must be at least 1, got {args.delay}")
    trace = compile_scenario(load_scenario(args.scenario))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.samples is not None:
        if args.samples < 1:
            parser.error(f"--samples must be at least 1, got {args.samples}")
        last = math.floor(time.time()) // args.delay * args.delay
        first = last - (args.samples - 1) * args.delay
        for h in hosts(trace.scenario):
            EsxtopCapture(trace, h, args.delay).write(out / f"{h}.csv", first, args.samples)
            _replace(out / f"{h}-vscsi.csv", vscsistats_text(trace, h, last, args.samples * args.delay))
        return 0
    stop = threading.Event()
    try:
        follow(trace, out, args.delay, stop, args.vscsi_every)
    except KeyboardInterrupt:
        stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
