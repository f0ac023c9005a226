"""How much memory and CPU esxtop-exporter takes to read a long esxtop batch capture, against
Python's csv module reading the same file.

Input (made at start, in a temp dir): an esxtop batch CSV GENERATED in the layout of
tests/exporters/esxtop/fixtures/built-lab-host.csv, the size of a long capture of a busy host: ``--columns``
columns (default 12,000: 64 VMs with 4 virtual disks each, 40 devices with 2 paths each, 4
adapters, 4 NFS volumes, the VMs' and 400 other CPU groups, and per-CPU/network columns the
exporter does not read) and rows until ``--mb`` megabytes (default 200: ~1,600 samples, an hour
at -d 2).

Parts, each run as a separate process so its memory is its own:
- ``memory``: the peak RSS of ``esxtop-exporter convert FILE`` (the whole capture read, every
  sample integrated, the exposition printed), sampled every 50 ms over the process tree. The
  file is read 1 MiB at a time and only the selected cells of a row are kept, so the peak does
  not grow with the file. Target: under 200 MB (measured 41 MB for 200 MB, 12,000 columns).
- ``throughput``: the CPU seconds of that convert against a baseline run side by side: a
  process that reads the same file with ``csv.reader`` and converts the same selected cells with
  ``float()`` (the cheapest correct CSV read in the standard library), the two alternated so both
  see the same load. Target: the median of the paired ratios ours / csv below 1.5x (measured
  0.94-0.98x at load 3.5 on 2 cores, ~50 MB/s: ours splits each row's bytes on ``","`` and
  converts only the selected cells, then integrates them and prints the exposition).

Each figure is min / median over ``--repeat`` runs (default 3), printed with the load average it
ran at and its target (bench/gate.py). The targets are fixed: the machine's load enters only
through the baseline measured in the same run. Exits 1 when a target is missed, after every figure.
Run: nice -n 10 .venv/bin/python bench/esxtop_read.py [--mb N] [--columns N] [--repeat N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import gate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ioparallax.exporters.esxtop.parse import parse_header  # noqa: E402
from ioparallax.simulators.esxtop import VDISK_COUNTERS as VDISK  # noqa: E402

HOST = "esx-bench.lab.local"
MAX_RSS_MB = 200.0
MAX_RATIO = 1.5

STORAGE = (
    ["Commands/sec", "Reads/sec", "Writes/sec", "MBytes Read/sec", "MBytes Written/sec"]
    + [
        f"Average {la} MilliSec/{op}"
        for la in ("Guest", "Kernel", "Driver", "Queue")
        for op in ("Command", "Read", "Write")
    ]
    + ["Device Q Depth", "Active Commands", "Queued Commands"]
)
CPU = ["% Used", "% Run", "% Ready", "% CoStop", "% Wait", "% Idle", "Members"]


def header_cells(columns: int) -> list[str]:
    cells = ["(PDH-CSV 4.0) (UTC)(0)"]

    def add(obj: str, counters: Sequence[str]) -> None:
        cells.extend(f"\\\\{HOST}\\{obj}\\{c}" for c in counters)

    for v in range(64):
        vm = f"bench-vm-{v:02d}"
        add(f"Virtual Disk({vm})", VDISK)
        for d in range(4):
            add(f"Virtual Disk({vm}:scsi0:{d})", VDISK)
    for n in range(40):
        dev = f"naa.6000c29{n:025x}"
        add(f"Physical Disk SCSI Device({dev})", STORAGE)
        for p in range(2):
            add(f"Physical Disk Path(vmhba{p + 1}:C0:T{n}:L0)", STORAGE)
    for a in range(4):
        add(f"Physical Disk Adapter(vmhba{a + 1})", STORAGE)
    for n in range(4):
        add(f"Physical Disk NFS Volume(ctr-{n})", STORAGE[:5] + STORAGE[5:8])
    for v in range(64):
        add(f"Group Cpu({2099000 + v}:bench-vm-{v:02d})", CPU)
    for g in range(400):
        add(f"Group Cpu({g + 1}:helper-{g})", CPU)
    i = 0
    while len(cells) < columns:  # what the exporter does not read: CPUs, ports, interrupts
        add(f"Physical Cpu({i})", ["% Processor Time", "% Util Time", "% Core Util Time"])
        add(f"Network Port(vSwitch0:{50331648 + i}:vmk{i})", ["Packets Transmitted/sec", "MBits Received/sec"])
        i += 1
    return cells[:columns]


def make_input(work: Path, megabytes: int, columns: int) -> tuple[Path, int, int]:
    """(file, rows, selected columns)."""
    cells = header_cells(columns)
    head = ",".join(f'"{c}"' for c in cells) + "\r\n"
    rng = random.Random(7)
    bodies = []
    for _ in range(16):  # 16 distinct rows, repeated with their own timestamps
        bodies.append(",".join(f'"{rng.uniform(0, 900):.2f}"' for _ in cells[1:]) + "\r\n")
    path = work / "host.csv"
    target = megabytes * 1_000_000
    rows = 0
    with path.open("w", newline="") as fh:
        fh.write(head)
        size = len(head)
        while size < target:
            s = rows * 2
            ts = f'"11/28/2026 {10 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}",'
            line = ts + bodies[rows % 16]
            fh.write(line)
            size += len(line)
            rows += 1
    return path, rows, len(parse_header(head.rstrip("\r\n").encode()).selected)


BASELINE = r"""
import csv, sys
sys.path.insert(0, sys.argv[2])
from ioparallax.exporters.esxtop.parse import parse_header
total = 0.0
with open(sys.argv[1], newline="") as fh:
    reader = csv.reader(fh)
    head = next(reader)
    hm = parse_header((",".join('"%s"' % c for c in head)).encode())
    idx = [c for c, _, _ in hm.selected]
    for row in reader:
        for i in idx:
            cell = row[i]
            if cell:
                total += float(cell)
print(total)
"""


def run(cmd: list[str], what: str) -> gate.Finished:
    """``cmd`` run to its end with its memory sampled; :class:`gate.CannotMeasure` if it failed."""
    done = gate.run_sampling_memory(cmd, timeout=1800)
    if done.returncode != 0:
        raise gate.CannotMeasure(f"{what} failed: {done.stderr.strip()[-500:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the capture in MB (default: %(default)s)")
    parser.add_argument("--columns", type=int, default=12_000, help="columns a line (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (default: %(default)s)")
    args = parser.parse_args()
    g = gate.Gate("bench/esxtop_read.py")
    g.calibrate()
    work = Path(tempfile.mkdtemp(prefix="esxtop-bench-"))
    try:
        path, rows, selected = make_input(work, args.mb, args.columns)
        size = path.stat().st_size
        print(f"capture: {size / 1e6:.0f} MB, {args.columns:,} columns, {rows:,} samples, {selected:,} columns read")
        exporter = [gate.sys.executable, "-m", "ioparallax.exporters.esxtop.cli", "convert", str(path)]
        baseline = [gate.sys.executable, "-c", BASELINE, str(path), str(ROOT)]
        rss = gate.Runs()

        def convert() -> float:
            ours = run(exporter, "convert")
            rss.add(ours.peak_rss_mb)
            return ours.cpu_seconds

        try:
            runs = gate.paired(convert, lambda: run(baseline, "the csv baseline").cpu_seconds, args.repeat)
        except gate.CannotMeasure as e:
            return g.cannot_measure(str(e))
        mine, floor, ratio = runs.ours, runs.base, runs.ratio
        print(f"  convert, CPU: {mine.describe('s')}; {size / 1e6 / mine.median:.0f} MB/s")
        print(f"  csv.reader + float() of the same cells, CPU: {floor.describe('s')}")
        g.check("convert: peak RSS", rss, below=MAX_RSS_MB, unit="MB", stat="max")
        g.check("convert / csv.reader, CPU (paired runs)", ratio, below=MAX_RATIO, unit="x", fmt=".2f")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
