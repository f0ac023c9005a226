"""How fast the vdbench reader is against a plain str.split parse of the same files.

Input (made at start, in a temp dir): a flatfile SYNTHESIZED from the real two-host run of
tests/vdbench/fixtures/vdbconvert-multihost: its 180 interval rows replicated into ``--rows``
rows (default 50,000, about 18 MB: a 14-hour run at 1 s intervals), grouped in runs of 60
intervals with their avg rows, plus the run's real parmfile.

Parts:
- ``full``: the exporter's read of the whole directory (LineTailer + FlatfileParser + the per-run
  integration into counters, vdbench_exporter's DirectoryState.poll) against the floor: a plain
  loop that splits every line, converts the same numeric columns with float() and sums the
  I/O rate (no validation, no bounds, no state). Target: at most ``--max-ratio`` (default 4.0) times the
  floor.
- ``incremental``: after the full read, one appended row read by the next poll, against the full
  read. Target: under 1 % of the full read (a scrape costs the new bytes, not the file).
- ``memory``: the peak of Python's traced memory during the full read (tracemalloc): lines are
  parsed a 1 MiB chunk at a time, so the peak does not grow with the file. Target: under
  ``--max-peak-mib`` (default 10).

Each figure is min / median over ``--repeat`` runs (default 5). Exits 1 when a target is missed.
Run: .venv/bin/python bench/vdbench_read.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ioparallax.exporters.vdbench.reader import NUMERIC_COLUMNS  # noqa: E402
from ioparallax.exporters.vdbench.tailer import DirectoryState  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "vdbench" / "fixtures" / "vdbconvert-multihost"


def make_input(work: Path, rows: int) -> tuple[Path, str]:
    """(directory, one more interval row to append)."""
    text = (FIXTURE / "flatfile.html").read_text()
    lines = text.splitlines(keepends=True)
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tod")) + 1
    data = [ln for ln in lines[head:] if ln.split()[2].isdigit()]
    avg = next(ln for ln in lines[head:] if "avg_" in ln)
    d = work / "vdb"
    d.mkdir()
    shutil.copy(FIXTURE / "parmfile.html", d / "parmfile.html")
    with (d / "flatfile.html").open("w") as fh:
        fh.writelines(lines[:head])
        for i in range(rows):
            fh.write(data[i % len(data)])
            if i % 60 == 59:
                fh.write(avg)
    return d, data[0]


def exporter_read(d: Path) -> float:
    state = DirectoryState(str(d))
    state.poll()
    fs = state.files["flatfile.html"]
    while fs.tailer.offset < fs.tailer.size:
        state.poll()
    return sum(r.read_ops + r.write_ops for r in fs.runs)


def plain_read(d: Path) -> float:
    """The floor: split every line, float() the same numeric columns the reader keeps, sum the
    I/O rate; no validation, no bounds, no state."""
    total = 0.0
    idx = None
    numeric: list[int] = []
    with (d / "flatfile.html").open() as fh:
        for line in fh:
            t = line.split()
            if not t or t[0][0] in "*<":
                continue
            if t[0] == "tod":
                idx = {name: i for i, name in enumerate(t)}
                numeric = [i for name, i in idx.items() if name.lower() in NUMERIC_COLUMNS]
                continue
            assert idx is not None
            if t[idx["Interval"]].isdigit():
                values = [float(t[i]) for i in numeric if t[i] != "n/a"]
                total += float(t[idx["rate"]]) if values else 0.0
    return total


def timed(fn, *args) -> tuple[float, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def min_median(values: list[float], scale: float = 1.0, unit: str = "s") -> str:
    return f"{min(values) * scale:.3f} / {statistics.median(values) * scale:.3f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000, help="interval rows in the flatfile (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (default: %(default)s)")
    parser.add_argument(
        "--max-ratio", type=float, default=4.0, help="full read target vs the floor (default: %(default)s)"
    )
    parser.add_argument(
        "--max-peak-mib", type=float, default=10.0, help="peak traced memory of the full read (default: %(default)s)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vdbench-bench-"))
    ok = True
    try:
        d, extra = make_input(work, args.rows)
        size = (d / "flatfile.html").stat().st_size
        print(f"flatfile: {args.rows} interval rows, {size / 1e6:.1f} MB (min / median of {args.repeat} runs)")
        mine, floor = [], []
        for _ in range(args.repeat):
            t, ops = timed(exporter_read, d)
            mine.append(t)
            t, rate_sum = timed(plain_read, d)
            floor.append(t)
        assert abs(ops - rate_sum) <= 1e-6 * rate_sum, (ops, rate_sum)  # both read every row (interval=1)
        ratio = min(mine) / min(floor)
        print(f"  full read: exporter reader {min_median(mine)}   plain str.split {min_median(floor)}")
        print(f"  ratio {ratio:.2f}x (target <= {args.max_ratio:g}x)   {args.rows / min(mine):,.0f} rows/s")
        if ratio > args.max_ratio:
            print("  MISSED: the reader is slower than its target against the plain parse")
            ok = False
        inc = []
        for _ in range(args.repeat):
            state = DirectoryState(str(d))
            state.poll()
            while state.files["flatfile.html"].tailer.offset < state.files["flatfile.html"].tailer.size:
                state.poll()
            with (d / "flatfile.html").open("a") as fh:
                fh.write(extra)
            t, _ = timed(state.poll)
            inc.append(t)
        share = min(inc) / min(mine)
        print(f"  one appended row: {min_median(inc, 1e3, 'ms')}   {share * 100:.3f} % of the full read (target < 1 %)")
        if share >= 0.01:
            print("  MISSED: an incremental read costs more than 1 % of a full read")
            ok = False
        tracemalloc.start()
        exporter_read(d)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"  peak traced memory of the full read: {peak:.1f} MiB (target < {args.max_peak_mib:g} MiB)")
        if peak >= args.max_peak_mib:
            print("  MISSED: the full read holds more than its target in memory")
            ok = False
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
