"""Ramps in per-second series: the plateaus of offered concurrency and each plateau's throughput.

A scalability ramp (X-Ray's shape: a VM or a job added every few minutes) is a staircase of
offered concurrency. Each step's throughput is measured only after the step has settled: the
report's rates are means over a window (1m rules) and vCenter reports 20 s samples, so the first
``settle`` seconds after each step mix the old and the new level; they are dropped, as are steps
too short to keep ``min_length`` seconds after that.

Two ways to find the steps:

- :func:`find_plateaus`: from the concurrency series itself (the number of running fio jobs, of VMs
  with I/O, or the outstanding I/Os by Little's law). A rolling median removes single-sample noise;
  a plateau lasts while the smoothed concurrency stays within ``rel_tol`` (or ``abs_tol``) of the
  plateau's median.
- :func:`plateaus_from_steps`: from boundaries the user gives (``--steps``), when the concurrency is
  not in the data (an X-Ray run fed from elsewhere) or the detection should be overridden.

Pure functions on numpy arrays; times are seconds (unix or relative), samples need not be evenly
spaced, NaN means "no sample" (a gap ends a plateau).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ioparallax.report.promapi import parse_seconds

#: A series of samples: a list of numbers or a 1-D numpy array (the report passes arrays).
Series = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class Plateau:
    """One step of the ramp, over its settled samples."""

    start: float  # first kept sample (after the settle time)
    end: float  # last kept sample
    concurrency: float  # mean offered concurrency over the kept samples (of the smoothed series)
    throughput: float  # mean throughput over the kept samples
    std: float  # standard deviation of the throughput samples (0 for one sample)
    q25: float  # interquartile range of the throughput samples
    q75: float
    samples: int

    @property
    def length(self) -> float:
        return self.end - self.start

    @property
    def iqr(self) -> float:
        return self.q75 - self.q25


@dataclass(frozen=True)
class Step:
    """A step boundary given by the user: seconds from the range's start, with its concurrency if given."""

    offset: float
    concurrency: float | None = None


def _arrays(times: Series, concurrency: Series, throughput: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(times, dtype=float).ravel()
    c = np.asarray(concurrency, dtype=float).ravel()
    x = np.asarray(throughput, dtype=float).ravel()
    if not (t.size == c.size == x.size):
        raise ValueError(f"series of different lengths: {t.size} times, {c.size} concurrency, {x.size} throughput")
    if t.size > 1 and np.any(np.diff(t) <= 0):
        raise ValueError("times must increase")
    return t, c, x


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median over ``window`` samples, ignoring NaN; NaN where the sample itself is NaN."""
    if window <= 1 or values.size == 0:
        return values.copy()
    half = window // 2
    padded = np.pad(values, half, mode="constant", constant_values=np.nan)
    view = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    with np.errstate(all="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows
            out = np.nanmedian(view, axis=1)
    out[np.isnan(values)] = np.nan
    return out


def _stats(t: np.ndarray, c: np.ndarray, x: np.ndarray, concurrency: float | None = None) -> Plateau | None:
    keep = np.isfinite(x) & np.isfinite(t)
    if concurrency is None:
        keep &= np.isfinite(c)
    if not keep.any():
        return None
    tk, xk = t[keep], x[keep]
    q25, q75 = np.percentile(xk, [25, 75])
    n = float(np.mean(c[keep])) if concurrency is None else float(concurrency)
    return Plateau(
        start=float(tk[0]),
        end=float(tk[-1]),
        concurrency=n,
        throughput=float(np.mean(xk)),
        std=float(np.std(xk, ddof=1)) if xk.size > 1 else 0.0,
        q25=float(q25),
        q75=float(q75),
        samples=int(xk.size),
    )


def find_plateaus(
    times: Series,
    concurrency: Series,
    throughput: Series,
    *,
    settle: float,
    min_length: float,
    rel_tol: float = 0.1,
    abs_tol: float = 0.5,
    smooth: int = 5,
    min_concurrency: float = 0.0,
) -> list[Plateau]:
    """The plateaus of ``concurrency`` with their throughput, in time order.

    ``settle``: seconds dropped after each change of level (the rate window plus the slowest sample
    interval); ``min_length``: seconds a plateau must keep after that, or it is a transient.
    ``rel_tol``/``abs_tol``: how far the smoothed concurrency may stray from the plateau's median
    (the larger of ``rel_tol * level`` and ``abs_tol``); ``smooth``: the rolling median's samples.
    Plateaus at or below ``min_concurrency`` (idle) are left out. Samples closer than ``smooth // 2``
    samples to a change or to the series' end are dropped too, since the rolling median blurs a
    change by that much.
    """
    t, c, x = _arrays(times, concurrency, throughput)
    if t.size == 0:
        return []
    m = rolling_median(c, smooth)
    dt = float(np.median(np.diff(t))) if t.size > 1 else 1.0
    edge = (smooth // 2 + 1) * dt
    out: list[Plateau] = []

    def close(lo: int, hi: int) -> None:  # samples lo .. hi - 1 form one level
        if hi <= lo:
            return
        level = float(np.median(m[lo:hi]))
        if not math.isfinite(level) or level <= min_concurrency:
            return
        # The end is trimmed at the range's end too: a step in the last samples moves the centred
        # median (a shorter window there) by less than the tolerance, so they would join the level.
        first, last = t[lo] + settle, t[hi - 1] - edge
        sel = slice(lo, hi)
        inside = (t[sel] >= first) & (t[sel] <= last)
        if not inside.any():
            return
        # The level is the mean of the smoothed series: a spike of the raw one must not move it.
        p = _stats(t[sel][inside], m[sel][inside], x[sel][inside])
        if p is not None and p.length >= min_length:
            out.append(p)

    lo = 0
    values: list[float] = []
    for i in range(t.size):
        v = m[i]
        gap = i > 0 and t[i] - t[i - 1] > 2.5 * dt
        if not math.isfinite(v) or gap:
            close(lo, i)
            lo, values = (i + 1, []) if not math.isfinite(v) else (i, [v])
            continue
        if values:
            level = float(np.median(values))
            if abs(v - level) > max(abs_tol, rel_tol * abs(level)):
                close(lo, i)
                lo, values = i, []
        values.append(v)
    close(lo, t.size)
    return out


def plateaus_from_steps(
    times: Series,
    concurrency: Series | None,
    throughput: Series,
    steps: Sequence[Step],
    *,
    range_start: float,
    range_end: float,
    settle: float,
    min_length: float = 0.0,
) -> list[Plateau]:
    """Plateaus from user-given step boundaries: step k runs from its offset to the next one's (the
    last to ``range_end``), minus ``settle`` seconds at its start. Its concurrency is the step's own
    (``offset=N``) or else the mean of ``concurrency`` over the kept samples."""
    xs = np.asarray(throughput, dtype=float).ravel()
    cs = np.full(xs.shape, np.nan) if concurrency is None else np.asarray(concurrency, dtype=float).ravel()
    t, c, x = _arrays(times, cs, xs)
    out: list[Plateau] = []
    ordered = sorted(steps, key=lambda s: s.offset)
    for k, step in enumerate(ordered):
        begin = range_start + step.offset
        stop = range_start + ordered[k + 1].offset if k + 1 < len(ordered) else range_end
        inside = (t >= begin + settle) & (t < stop if k + 1 < len(ordered) else t <= stop)
        if not inside.any():
            continue
        p = _stats(t[inside], c[inside], x[inside], concurrency=step.concurrency)
        if p is None or not math.isfinite(p.concurrency) or p.length < min_length:
            continue
        out.append(p)
    return out


_STEP = re.compile(r"\s*([0-9.]+(?:ms|s|m|h)?(?:[0-9.]+(?:ms|s|m|h))*)\s*(?:=\s*([0-9.]+)\s*)?")


def parse_steps(text: str) -> list[Step]:
    """``--steps``: comma-separated offsets from the range's start (``0,3m,6m,9m`` or seconds), each
    optionally with its concurrency (``0=1,3m=2,6m=4``). Raises ValueError naming the bad item."""
    steps: list[Step] = []
    for item in text.split(","):
        if not item.strip():
            continue
        match = _STEP.fullmatch(item)
        if not match:
            raise ValueError(f"--steps: expected OFFSET or OFFSET=CONCURRENCY (e.g. 3m=2), got {item.strip()!r}")
        when, n = match.groups()
        try:
            offset = float(when) if re.fullmatch(r"[0-9.]+", when) else parse_seconds(when)
        except ValueError:
            raise ValueError(f"--steps: {when!r} is not an offset such as 90, 90s or 3m") from None
        conc = None
        if n is not None:
            conc = float(n)
            if conc <= 0:
                raise ValueError(f"--steps: concurrency must be > 0, got {item.strip()!r}")
        steps.append(Step(offset, conc))
    if len(steps) < 1:
        raise ValueError("--steps: no step given")
    offsets = [s.offset for s in steps]
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"--steps: an offset is given twice ({text.strip()})")
    return sorted(steps, key=lambda s: s.offset)
