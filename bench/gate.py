"""What every bench shares: repeated runs, min / median, the load average each figure was measured
at, the verdict line and the exit code; the CPU and memory of another process and its children
(from /proc); and a CPU-bound neighbour process for the "busy laptop" figures.

A bench measures with :class:`Runs` (each value recorded with the 1-minute load average at that
moment), states its targets with :meth:`Gate.check` (the target printed beside the figure, "met"
or "MISSED"), and ends with ``return gate.verdict()``: 0 when every target was met, 1 when one was
missed, after every figure was printed. A bench that cannot measure (a tool missing, a simulator
that does not start) calls :meth:`Gate.cannot_measure`, which counts as a miss: ``make bench`` is
a check, and a figure that was not measured was not met.

The machine's load enters a figure only through a baseline measured in the same run (a ratio
checked with ``at_least`` or ``below``), never by loosening a target: the targets here are fixed
numbers, and the load printed beside each figure says how far to trust it.

Two machines of the same kind differ 2-3x in what a CPU second buys (issue 34: the same code, the
same Prometheus and the same BeautifulSoup cost 2.2-2.7x the CPU on one 2-core EPYC as on
another), so a target in CPU seconds or wall seconds holds only where it was tuned. Every bench
therefore measures a :class:`Calibration` in the same run (:meth:`Gate.calibrate`: a fixed
pure-Python kernel and a fixed numpy kernel, each the minimum of several timed runs, so a busy
neighbour inflates it little) and prints it beside its figures. Targets, in order of preference:
a ratio against a baseline run side by side; CPU seconds per unit of work in calibration units
(:meth:`Gate.check_cpu`: CPU seconds / the pure-Python kernel's seconds); and only then wall
time, printed with the load it ran at.

Benches import it as ``import gate`` (``python bench/x.py`` puts bench/ first on sys.path).
"""

from __future__ import annotations

import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CORES = os.cpu_count() or 1
CLK_TCK = os.sysconf("SC_CLK_TCK")
STATS = ("min", "median", "max")


def load() -> float:
    """The 1-minute load average now."""
    return os.getloadavg()[0]


@dataclass
class Runs:
    """Values of repeated runs of one measurement, each with the load average when it was taken."""

    values: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def add(self, value: float, at_load: float | None = None) -> float:
        self.values.append(value)
        self.loads.append(load() if at_load is None else at_load)
        return value

    def stat(self, name: str) -> float:
        if not self.values:
            raise ValueError("no runs measured")
        if name == "min":
            return min(self.values)
        if name == "max":
            return max(self.values)
        if name == "median":
            return statistics.median(self.values)
        raise ValueError(f"unknown statistic {name!r} (one of {', '.join(STATS)})")

    @property
    def min(self) -> float:
        return self.stat("min")

    @property
    def median(self) -> float:
        return self.stat("median")

    @property
    def max(self) -> float:
        return self.stat("max")

    def load_range(self) -> str:
        lo, hi = min(self.loads), max(self.loads)
        return f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}"

    def describe(self, unit: str = "", fmt: str = "") -> str:
        """``min X / median Y unit over N runs (load L on C cores)``."""
        u = _unit(unit)
        if len(self.values) == 1:
            return f"{number(self.values[0], fmt)}{u} (1 run, load {self.load_range()} on {CORES} cores)"
        return (
            f"min {number(self.min, fmt)} / median {number(self.median, fmt)}{u} over {len(self.values)} runs "
            f"(load {self.load_range()} on {CORES} cores)"
        )


def number(value: float, fmt: str = "") -> str:
    """``value`` with ``fmt``, or by default to 3 significant digits without an exponent."""
    if fmt:
        return f"{value:{fmt}}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _unit(unit: str) -> str:
    return unit if unit in ("x", "%") else f" {unit}" if unit else ""


def timed(fn: Callable[[], object], runs: int, warmup: int = 0) -> Runs:
    """Wall time in seconds of ``runs`` calls of ``fn`` (after ``warmup`` unmeasured calls)."""
    for _ in range(warmup):
        fn()
    out = Runs()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.add(time.perf_counter() - t0)
    return out


@dataclass
class Pairs:
    """Paired runs of ours and a baseline, in turn: each side's values, and each pair's ratio
    ours / baseline (both runs of a pair at nearly the same load, so the ratio moves less than
    either side)."""

    ours: Runs = field(default_factory=Runs)
    base: Runs = field(default_factory=Runs)
    ratio: Runs = field(default_factory=Runs)


def paired(ours: Callable[[], float], base: Callable[[], float], runs: int) -> Pairs:
    """``runs`` pairs: ``ours()`` then ``base()``, each returning its cost (CPU seconds, say);
    a pair's three values are recorded with the load average at its end. An exception in either
    (a run that could not measure) ends the whole measurement."""
    out = Pairs()
    for _ in range(runs):
        mine, floor = ours(), base()
        at = load()
        out.ours.add(mine, at)
        out.base.add(floor, at)
        out.ratio.add(mine / floor, at)
    return out


class CannotMeasure(Exception):
    """Raised by a measurement that could not be taken (a tool failed); the bench reports it with
    :meth:`Gate.cannot_measure`."""


def of(values: list[float], at_load: float | None = None) -> Runs:
    """Runs from values measured elsewhere, all at one load (now unless given)."""
    level = load() if at_load is None else at_load
    return Runs(list(values), [level] * len(values))


@dataclass
class Check:
    what: str
    met: bool
    line: str


class Gate:
    """The targets of one bench and its verdict."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.checks: list[Check] = []
        self.calibration: Calibration | None = None

    def calibrate(self, runs: int = 7) -> Calibration:
        """Measure the machine's speed now and print it (every bench calls this first); the
        verdict prints it again, measured anew, so a bench's figures sit between two calibrations."""
        self.calibration = calibrate(runs)
        print(f"{self.name}: {self.calibration.line()}", flush=True)
        return self.calibration

    def check_cpu(
        self,
        what: str,
        cpu_seconds: Runs | float,
        *,
        below: float,
        per: float = 1.0,
        per_what: str = "",
        kind: str = "python",
        stat: str = "median",
    ) -> bool:
        """A CPU-seconds figure normalised by the calibration (:meth:`calibrate` first): ``stat``
        of ``cpu_seconds / per`` in calibration units strictly below ``below``. The seconds are
        printed beside the units, so a reader sees both."""
        if self.calibration is None:
            raise RuntimeError("check_cpu needs the calibration: call Gate.calibrate() first")
        if not isinstance(cpu_seconds, Runs):
            cpu_seconds = of([float(cpu_seconds)])
        cal = self.calibration
        units = Runs([cal.units(v / per, kind) for v in cpu_seconds.values], list(cpu_seconds.loads))
        secs = cpu_seconds.stat(stat) / per
        label = f"{what}, CPU{' per ' + per_what if per_what else ''} in calibration units ({kind} kernel)"
        ok = self.check(label, units, below=below, stat=stat)
        print(f"    = {number(secs * 1000)} ms CPU{' per ' + per_what if per_what else ''} ({stat})", flush=True)
        return ok

    def check(
        self,
        what: str,
        runs: Runs | float,
        *,
        below: float | None = None,
        at_least: float | None = None,
        unit: str = "",
        stat: str = "median",
        fmt: str = "",
    ) -> bool:
        """Print a figure with its target and whether it was met: ``stat`` of ``runs`` strictly
        below ``below`` (times, memory) or at least ``at_least`` (ratios of a baseline to ours)."""
        if (below is None) == (at_least is None):
            raise ValueError("a check has exactly one of below= and at_least=")
        if not isinstance(runs, Runs):
            runs = of([float(runs)])
        value = runs.stat(stat)
        met = value < below if below is not None else value >= at_least  # type: ignore[operator]
        u = _unit(unit)
        target = f"{stat} < {below:g}{u}" if below is not None else f"{stat} >= {at_least:g}{u}"
        shown = runs.describe(unit, fmt)
        if stat == "max" and len(runs.values) > 1:
            shown += f", max {number(value, fmt)}{u}"
        line = f"  {what}: {shown}  [target {target}: {'met' if met else 'MISSED'}]"
        print(line, flush=True)
        self.checks.append(Check(what, met, line))
        return met

    def check_ratio(
        self,
        what: str,
        num: Runs,
        den: Runs,
        *,
        below: float | None = None,
        at_least: float | None = None,
        unit: str = "s",
        fmt: str = ".2f",
    ) -> bool:
        """The ratio of the medians of two sides measured in turn in the same run (``num`` over
        ``den``, each of several runs), checked like :meth:`check`: printed with both medians, how
        many runs each has and the load range over both, so that it is not read as one pair."""
        if (below is None) == (at_least is None):
            raise ValueError("a check has exactly one of below= and at_least=")
        ratio = num.median / den.median if den.median else float("inf")
        met = ratio < below if below is not None else ratio >= at_least  # type: ignore[operator]
        both = Runs(num.values + den.values, num.loads + den.loads)
        target = f"< {below:g}x" if below is not None else f">= {at_least:g}x"
        line = (
            f"  {what}: {number(ratio, fmt)}x = {number(num.median)}{_unit(unit)} / {number(den.median)}{_unit(unit)}, "
            f"medians of {len(num.values)} and {len(den.values)} runs (load {both.load_range()} on {CORES} cores)"
            f"  [target {target}: {'met' if met else 'MISSED'}]"
        )
        print(line, flush=True)
        self.checks.append(Check(what, met, line))
        return met

    def require(self, what: str, ok: bool, detail: str = "") -> bool:
        """A yes/no target (the same query count, every probe answered)."""
        line = f"  {what}{': ' + detail if detail else ''}  [target: {'met' if ok else 'MISSED'}]"
        print(line, flush=True)
        self.checks.append(Check(what, ok, line))
        return ok

    def cannot_measure(self, why: str) -> int:
        """The bench could not measure its figures: a miss (exit 1), with the reason."""
        self.require("measured", False, why)
        return self.verdict()

    @property
    def missed(self) -> list[Check]:
        return [c for c in self.checks if not c.met]

    def verdict(self) -> int:
        """The last line of a bench and its exit code: 0 if every target was met, else 1. A bench
        that calibrated has the calibration measured again and printed before it."""
        if self.calibration is not None:
            print(f"{self.name}: at the end, {calibrate(self.calibration.runs).line()}", flush=True)
        if not self.checks:
            print(f"{self.name}: no targets checked: MISSED", flush=True)
            return 1
        missed = self.missed
        if not missed:
            print(f"{self.name}: all {len(self.checks)} targets met (load now {load():.1f} on {CORES} cores)")
            return 0
        print(
            f"{self.name}: MISSED {len(missed)} of {len(self.checks)} targets: "
            f"{'; '.join(c.what for c in missed)} (load now {load():.1f} on {CORES} cores)",
            flush=True,
        )
        return 1


# ---- the machine's speed, measured in the same run


#: Kernels of the calibration: fixed work, so their times compare machines (not code versions).
PY_KERNEL_N = 200_000
NP_KERNEL_N = 1_000_000


def _py_kernel() -> int:
    """Pure-Python work of the kind the exporters and readers do: dict and str operations, integer
    arithmetic, a loop in the interpreter (~20-60 ms on a 2-core EPYC)."""
    d: dict[str, int] = {}
    acc = 0
    for i in range(PY_KERNEL_N):
        k = "k" + str(i & 1023)
        d[k] = d.get(k, 0) + (i * 7) % 13
        acc ^= len(k) + d[k]
    return acc


def _np_kernel() -> float:
    """numpy work of the kind the report does, single-threaded (no BLAS, whose threads would make
    the figure depend on the machine's BLAS build): sorting, element-wise functions, cumulative
    sums and reductions on float64 arrays."""
    import numpy as np

    a = np.random.default_rng(34).random(NP_KERNEL_N)
    s = np.sort(a)
    c = np.cumsum(np.sin(a) * s)
    return float(c.max() + np.abs(np.diff(s)).sum() + np.median(a))


def _cpu_min(fn: Callable[[], object], runs: int) -> float:
    """The least thread CPU time of ``runs`` calls (a process' CPU clock would count other threads)."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


@dataclass(frozen=True)
class Calibration:
    """The machine's speed now: CPU seconds of a fixed pure-Python kernel and a fixed numpy
    kernel, each the minimum of ``runs`` runs, with the load they were measured at."""

    python_s: float
    numpy_s: float
    runs: int
    load: float

    def units(self, cpu_seconds: float, kind: str = "python") -> float:
        """``cpu_seconds`` in calibration units: how many runs of the ``kind`` kernel it is worth."""
        return cpu_seconds / (self.python_s if kind == "python" else self.numpy_s)

    def line(self) -> str:
        return (
            f"calibration: pure-Python kernel {self.python_s * 1000:.1f} ms, numpy kernel "
            f"{self.numpy_s * 1000:.1f} ms (CPU, min of {self.runs}, load {self.load:.1f} on {CORES} cores); "
            f"1 unit = one pure-Python kernel unless said"
        )


def calibrate(runs: int = 7) -> Calibration:
    """Time the two kernels now (one warm-up call each, then ``runs`` timed; ~1 s in all)."""
    at = load()
    _py_kernel()
    _np_kernel()
    return Calibration(_cpu_min(_py_kernel, runs), _cpu_min(_np_kernel, runs), runs, at)


# ---- another process and its children, from /proc


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants alive now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return out


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_cpu(pid: int) -> float:
    """CPU seconds of the live processes of the tree (a child that exited is not counted)."""
    total = 0.0
    for p in tree(pid):
        try:
            total += cpu_seconds(p)
        except OSError:
            pass
    return total


def tree_peak_rss_mb(pid: int) -> float:
    """Sum of each live process' peak RSS (VmHWM) in MB."""
    return sum(_status_kb(p, "VmHWM:") for p in tree(pid)) / 1024


def tree_rss_mb(pid: int) -> float:
    """Sum of the RSS of the tree's processes now, in MB (shared pages counted in each)."""
    return sum(_status_kb(p, "VmRSS:") for p in tree(pid)) / 1024


def tree_pss_mb(pid: int) -> float:
    """Sum of the proportional set size of the tree's processes now, in MB: a page shared by n
    processes (a forked worker's inherited pages) counted 1/n in each, so the sum is the memory
    the tree holds."""
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            pass
    return total / 1024


@dataclass
class Finished:
    """A command run to its end by :func:`run_sampling_memory`."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float  # the highest sum of RSS over the tree (shared pages counted in each process)
    peak_pss_mb: float  # the highest sum of PSS over the tree (shared pages counted once)
    cpu_seconds: float  # user + system CPU of the command and every child it waited for


def run_sampling_memory(cmd: list[str], timeout: float, interval: float = 0.05) -> Finished:
    """Run ``cmd`` to its end, sampling the sums of RSS and PSS over its process tree every
    ``interval`` seconds. Worker processes that come and go are counted while they live, which a
    VmHWM read at the end would miss."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = 0.0
    deadline = time.monotonic() + timeout
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for t in readers:
        t.start()
    try:
        while proc.poll() is None:
            peak_rss = max(peak_rss, tree_rss_mb(proc.pid))
            peak_pss = max(peak_pss, tree_pss_mb(proc.pid))
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(cmd, timeout)
            time.sleep(interval)
        for t in readers:
            t.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Finished(proc.returncode, "".join(out), "".join(err), peak_rss, peak_pss, cpu)


# ---- a CPU-bound neighbour


@contextmanager
def neighbour() -> Iterator[int]:
    """A process that spins on one core for as long as the block runs (what a user's busy laptop
    adds); yields its pid. It inherits this process' niceness."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
