"""Verdicts: for each VM disk and each trap, OK / Distorted / Not measurable, from plain numbers.

Pure functions on numpy arrays (one value per report step, NaN where the rule had no value) and the
thresholds of ioparallax/mixin/config.yml: no Prometheus here, so tests/report/test_verdicts.py drives every
branch with synthetic series.

Each verdict's number is defined over the whole report range (docs/report.md, "How the numbers are
made"): ratios are ratios of the means over the steps where the disk is busy (more than
``thresholds.busy_bytes_per_second``, as the alerts gate), shares are the mean of the share rule
over those steps, the working set is its largest value in the range. Comparisons are those of the
alerts (strictly above a threshold is Distorted), so a report and the alerts agree at the edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeGuard

import numpy as np

from ioparallax.mixin.config import Thresholds


class State(str, Enum):  # noqa: UP042 - StrEnum would change str(State.OK) from "State.OK" to "OK"
    OK = "OK"
    DISTORTED = "Distorted"
    NOT_MEASURABLE = "Not measurable"


# Column id -> (title, runbook anchor). The anchors are the runbook's sections (alert names).
TRAPS: dict[str, tuple[str, str]] = {
    "views_agree": ("Views agree", "ioparallaxviewsdisagree"),
    "zero_reads": ("Zero reads", "ioparallaxzeroheavyreads"),
    "zero_writes": ("Zero writes", "ioparallaxzeroheavywrites"),
    "cache_fit": ("Cache fit", "ioparallaxbenchmarkfromcache"),
    "bursts": ("Bursts averaged away", "ioparallaxburstaveragedaway"),
    "misalignment": ("Misalignment", "ioparallaxmisalignedpartition"),
    "hygiene": ("Benchmark hygiene", "ioparallaxfiojobhygiene"),
}
BUFFERED_ANCHOR = "ioparallaxaskedqueuedepthnotreached"
MISALIGNED_IO_ANCHOR = "ioparallaxmisalignediosuspected"
SPLIT_IO_ANCHOR = "ioparallaxguestsplitio"
#: The runbook section of each tool's hygiene alert.
HYGIENE_ANCHORS = {"diskspd": "ioparallaxdiskspdtargethygiene", "vdbench": "ioparallaxvdbenchrunhygiene"}

VIEW_NAMES = {
    "guest": "guest view (fio, DiskSPD or vdbench exporter)",
    "vm": "VM view (vCenter or Prism exporter)",
    "storage": "storage view (Stargate exporter)",
    "guest_os": "guest OS view (node_exporter or windows_exporter)",
}


@dataclass(frozen=True)
class Verdict:
    trap: str  # a key of TRAPS
    state: State
    number: str  # the value as the report prints it ("" when there is none)
    threshold: str  # the rule it is judged against, as printed
    sentence: str  # one sentence of meaning
    anchor: str  # runbook section
    value: float | None = None  # the number itself, for comparisons and tests


@dataclass
class DiskInput:
    """What the verdicts of one VM disk need. Arrays: one value per report step, NaN = no value.
    ``None``: the series does not exist for this disk at all (the view or the rule is missing)."""

    missing_views: dict[str, str] = field(default_factory=dict)  # view -> why
    guest_bytes: np.ndarray | None = None  # fio read + write bytes/s (rate1m rules)
    vm_bytes: np.ndarray | None = None  # VM view (vCenter or Prism) read + write bytes/s
    storage_bytes: np.ndarray | None = None  # Stargate frontend read + write bytes/s
    storage_read_bytes: np.ndarray | None = None
    storage_write_bytes: np.ndarray | None = None
    read_zero: np.ndarray | None = None  # vdisk:ioparallax_read_zero:ratio
    write_zero: np.ndarray | None = None
    read_zero_measurable: np.ndarray | None = None
    write_zero_measurable: np.ndarray | None = None
    read_cache: np.ndarray | None = None  # vdisk:ioparallax_read_cache:ratio
    working_set_to_cache: np.ndarray | None = None
    rmw_read_to_write: np.ndarray | None = None
    iodepth: np.ndarray | None = None  # vm_disk:ioparallax_guest_iodepth:sum
    vm_outstanding: np.ndarray | None = None  # vm_disk:ioparallax_vm_outstanding_ios:rate1m
    buffered: np.ndarray | None = None  # vm_disk:ioparallax_guest_buffered_io:bool
    splitting: np.ndarray | None = None  # vm_disk:ioparallax_guest_os_to_fio_ops:ratio1m
    partitions: dict[str, float] | None = None  # partition -> start bytes; None: guest facts missing
    hygiene_problems: set[str] | None = None  # the load generator's hygiene problems seen in the range
    tool: str = ""  # the load generator that measured the guest view (fio, diskspd, vdbench; "" unknown)
    guest_os_source: str = ""  # node_exporter or windows_exporter ("" unknown)
    split_ios: np.ndarray | None = None  # vm_disk:ioparallax_guest_os_split_ios:ratio1m (Windows guests)
    # Seconds the youngest running fio job on the disk had run (fio_job_elapsed_seconds), and how long
    # the VM and storage views' windows take to fill after a job starts (data.settle_seconds):
    # views_agree and bursts leave out the steps where a job had run less than that. rate_window is
    # the config's windows.rate the rules were made with ("1m"), for the words that name the cause.
    job_elapsed: np.ndarray | None = None
    settle_seconds: float = 0.0
    # The report's step (s): the steps within the settling time after a job stopped are left out too
    # (the views' windows drain, each with its own lag); 0 = unknown, only the start is known.
    step_seconds: float = 0.0
    rate_window: str = ""
    vm_source: str = "vcenter"  # where the VM view came from: vcenter (20 s samples) or prism (30 s)
    vm_sample_seconds: float = 20.0
    # The 2 s VM view on ESXi (esxtop): its highest sample over vCenter's highest per window
    # (vm_disk:ioparallax_esxtop_peak_to_vm_sample_bytes:ratio1m), and esxtop's sample period in
    # seconds (None: no esxtop capture covers the disk). Where it has values, bursts judges it.
    esxtop_peak_ratio: np.ndarray | None = None
    esxtop_sample_seconds: float | None = None


# -- formatting -------------------------------------------------------------------------------


def pct(x: float) -> str:
    return f"{x * 100:.1f} %" if x < 0.1 and x != 0 else f"{x * 100:.0f} %"


def ratio(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def si_bytes(x: float) -> str:
    """IEC bytes: 1.5 MiB, 20 GiB."""
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= div:
            return f"{x / div:.3g} {unit}"
    return f"{x:.0f} B"


# -- helpers ------------------------------------------------------------------------------------


def _has(a: np.ndarray | None) -> TypeGuard[np.ndarray]:
    """The series exists and has a value at some step (a TypeGuard: where it holds, ``a`` is an array)."""
    return a is not None and bool(np.any(~np.isnan(a)))


def _busy(a: np.ndarray | None, t: Thresholds) -> np.ndarray:
    if a is None:
        return np.zeros(0, dtype=bool)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(a, nan=0.0) > t.busy_bytes_per_second


def _mean_where(a: np.ndarray | None, mask: np.ndarray) -> float:
    if a is None or mask.size == 0:
        return math.nan
    v = a[mask]
    v = v[~np.isnan(v)]
    return _fmean(v)


def _fmean(v: np.ndarray) -> float:
    """An exact mean (math.fsum): a constant series' mean is the constant, so edges stay edges."""
    return math.fsum(v.tolist()) / v.size if v.size else math.nan


def _missing(inp: DiskInput, *views: str) -> str | None:
    gone = [v for v in views if v in inp.missing_views]
    if not gone:
        return None
    return "; ".join(f"{VIEW_NAMES[v]} missing ({inp.missing_views[v]})" for v in gone)


def vm_words(inp: DiskInput) -> tuple[str, str]:
    """(the VM view's source as the verdicts name it, its samples): ("vCenter", "20 s")."""
    name = {"prism": "Prism"}.get(inp.vm_source, "vCenter")
    return name, f"{inp.vm_sample_seconds:g} s"


def _nm(trap: str, why: str, threshold: str = "", anchor: str | None = None) -> Verdict:
    return Verdict(trap, State.NOT_MEASURABLE, "", threshold, f"Not measurable: {why}.", anchor or TRAPS[trap][1])


BUSY = "busy_bytes_per_second"


# -- the verdicts ---------------------------------------------------------------------------------


def unsettled(inp: DiskInput) -> np.ndarray:
    """Steps at which a fio job on the disk had run less than the settling time: its rate per second
    of run time reads full at once, while the VM and storage views' rates over the rules' window (and
    vCenter's 20 s sample) still climb, and so does the VM view's Little's-law concurrency (a ramp
    step: a VM joins, a job starts mid-range). False where no job runs or its age is unknown."""
    if inp.job_elapsed is None or inp.settle_seconds <= 0:
        return np.zeros(0 if inp.vm_bytes is None else inp.vm_bytes.size, dtype=bool)
    with np.errstate(invalid="ignore"):
        return inp.job_elapsed < inp.settle_seconds


def draining(inp: DiskInput) -> np.ndarray:
    """Steps without a running fio job within the settling time after one ran: the job stopped, and
    the VM and storage views' rates over the rules' window drain, each behind by its own lag (the
    storage's 2 s counters at once, the VM view's 20 s samples published up to a sample and a probe
    later), so their ratio over those steps says when each view saw the end, not how many bytes each
    counted. False where no job ran before, or the step is unknown."""
    if inp.job_elapsed is None or inp.settle_seconds <= 0 or inp.step_seconds <= 0:
        return np.zeros(0 if inp.vm_bytes is None else inp.vm_bytes.size, dtype=bool)
    running = ~np.isnan(inp.job_elapsed)
    if not running.size:
        return running
    points = int(math.ceil(inp.settle_seconds / inp.step_seconds))
    # A job that stopped just before the range: none runs at its first step while fio's own rate
    # (the guest view, over the same window) still has its bytes.
    before = bool(not running[0] and inp.guest_bytes is not None and inp.guest_bytes.size and inp.guest_bytes[0] > 0)
    # ran[i]: a job ran at one of the `points` steps before i
    ran = np.convolve(np.concatenate(([before] * points, running)).astype(np.int64), np.ones(points, dtype=np.int64))
    return ~running & (ran[points - 1 : points - 1 + running.size] > 0)


def settling_words(
    settle: float, window: str = "", *, little: bool = False, sample: str = "a 20 s vCenter sample"
) -> str:
    """The cause, in the words of docs/report.md and the runbook. ``window``: the config's windows.rate
    (the rules' rate window), "" when unknown. ``little``: for the bursts verdict (Little's law)."""
    rules = f"the rules' {window} rate window" if window else "the rules' rate window"
    rates = f"{window} rates" if window else "rates"
    effect = (
        f"the concurrency the VM view implies (its {rates} of latency) was still climbing while the "
        "asked queue depth was there at once"
        if little
        else f"the VM and storage views' {rates} were still climbing while fio's rate per second of run "
        "time read full at once"
    )
    return f"a fio job had run less than the settling time ({settle:.0f} s: {rules}, {sample} and a step), so {effect}"


def draining_words(settle: float, window: str = "", *, sample: str = "a 20 s vCenter sample") -> str:
    """Why the steps after a job stopped are left out (:func:`draining`)."""
    rules = f"the rules' {window} rate window" if window else "the rules' rate window"
    rates = f"{window} rates" if window else "rates"
    return (
        f"a fio job had stopped less than the settling time before ({settle:.0f} s: {rules}, {sample} and "
        f"a step), so the VM and storage views' {rates} were still draining, each behind by its own lag"
    )


def _idle(trap: str, thr: str, sentence: str) -> Verdict:
    """OK, "idle": the view the trap is judged on never saw the disk busy (``sentence`` says which)."""
    return Verdict(trap, State.OK, "idle", thr, sentence, TRAPS[trap][1])


def _vm_idle(trap: str, thr: str, t: Thresholds, when: str) -> Verdict:
    return _idle(trap, thr, f"The VM view never saw the disk busy (above {si_bytes(t.busy_bytes_per_second)}/s){when}.")


def _settled(
    inp: DiskInput, busy: np.ndarray, trap: str, thr: str, little: bool = False
) -> tuple[np.ndarray, str] | Verdict:
    """The busy steps after the fio jobs settled (:func:`unsettled`) and before a stopped job's
    windows drained (:func:`draining`), and a note of how many were left out ('' for none); Not
    measurable when no busy step is settled."""
    young, drained = unsettled(inp), draining(inp)
    young = young & busy if young.size else np.zeros_like(busy)
    drained = drained & busy if drained.size else np.zeros_like(busy)
    if not (young.any() or drained.any()):
        return busy, ""
    left = young | drained
    left_out = int(left.sum())
    name, period = vm_words(inp)
    causes = []
    if young.any():
        causes.append(
            settling_words(inp.settle_seconds, inp.rate_window, little=little, sample=f"a {period} {name} sample")
        )
    if drained.any():
        causes.append(draining_words(inp.settle_seconds, inp.rate_window, sample=f"a {period} {name} sample"))
    words = "; ".join(causes)
    if not (busy & ~left).any():
        return _nm(
            trap,
            f"no settled step: at each of the {left_out} steps at which the VM view saw the disk busy, {words}",
            thr,
        )
    return busy & ~left, f"{left_out} of {int(busy.sum())} busy steps left out: {words}"


def views_agree(inp: DiskInput, t: Thresholds, bursting: bool = False) -> Verdict:
    """Guest and storage bytes against the VM's, as ratios of the mean byte rates while busy, over the
    settled steps (:func:`unsettled`)."""
    trap, x = "views_agree", t.views_bytes_ratio
    thr = f"{1 / x:.2f} - {x:.2f}"
    if (why := _missing(inp, "vm")) or not _has(inp.vm_bytes):
        return _nm(trap, why or "the VM view has no bytes for this disk", thr)
    busy = _busy(inp.vm_bytes, t)
    if not busy.any():
        return _vm_idle(trap, thr, t, ": nothing to compare")
    settled = _settled(inp, busy, trap, thr)
    if isinstance(settled, Verdict):
        return settled
    busy, left_out = settled
    notes: list[str] = [left_out] if left_out else []
    ratios: dict[str, float] = {}
    for name, series in (("guest", inp.guest_bytes), ("storage", inp.storage_bytes)):
        if name in inp.missing_views or not _has(series):
            notes.append(f"{name} view missing")
            continue
        if name == "storage" and bursting:
            notes.append("storage not judged while the disk bursts (the page catches a burst or not)")
            continue
        both = busy & ~np.isnan(series) & ~np.isnan(inp.vm_bytes)
        if both.any() and np.nansum(inp.vm_bytes[both]) > 0:
            ratios[name] = math.fsum(series[both].tolist()) / math.fsum(inp.vm_bytes[both].tolist())
    if not ratios:
        return _nm(
            trap,
            "neither the guest nor the storage view has bytes for this disk"
            + (f" ({'; '.join(notes)})" if notes else ""),
            thr,
        )
    worst = max(ratios, key=lambda k: abs(math.log(ratios[k])) if ratios[k] > 0 else math.inf)
    number = ", ".join(f"{k}/VM {ratio(v)}" for k, v in ratios.items())
    tail = f" ({'; '.join(notes)})" if notes else ""
    off = {k: v for k, v in ratios.items() if not (1 / x <= v <= x)}
    if off:
        k = worst if worst in off else next(iter(off))
        return Verdict(
            trap,
            State.DISTORTED,
            number,
            thr,
            f"The {k} moved {ratio(off[k])} times the bytes {vm_words(inp)[0]} counted: the views do not "
            f"describe the same I/O{tail}.",
            TRAPS[trap][1],
            off[k],
        )
    return Verdict(
        trap,
        State.OK,
        number,
        thr,
        f"Guest, VM and storage count the same bytes within {(x - 1) * 100:.0f} %{tail}.",
        TRAPS[trap][1],
        ratios[worst],
    )


def _zero(inp: DiskInput, t: Thresholds, direction: str) -> Verdict:
    trap = f"zero_{direction}s"
    limit = t.zero_read_ratio if direction == "read" else t.zero_write_ratio
    thr = f"> {pct(limit)}"
    share = inp.read_zero if direction == "read" else inp.write_zero
    measurable = inp.read_zero_measurable if direction == "read" else inp.write_zero_measurable
    traffic = inp.storage_read_bytes if direction == "read" else inp.storage_write_bytes
    if why := _missing(inp, "storage"):
        return _nm(trap, why, thr)
    if not _has(traffic) and not _has(measurable):
        return _nm(trap, f"the storage view has no {direction} data for this disk's vdisk", thr)
    if _has(measurable) and np.nanmax(measurable) < 1:
        what = (
            "the page build has no Oplog Zero write destination, so zero writes cannot be seen on storage"
            if direction == "write"
            else "the page has no zero read source"
        )
        return _nm(trap, what, thr)
    busy = _busy(traffic, t)
    if not busy.any():
        return _idle(
            trap,
            thr,
            f"The vdisk was never busy {direction}ing (above "
            f"{si_bytes(t.busy_bytes_per_second)}/s): no {direction} was inflated.",
        )
    if not _has(measurable) and not _has(share):
        what = "the page lists no write destinations" if direction == "write" else "the page lists no read sources"
        return _nm(trap, what, thr)
    value = _mean_where(share, busy)
    if math.isnan(value):
        return _nm(trap, f"no zero share while the vdisk was busy {direction}ing", thr)
    if value > limit:
        what = (
            "came from zero buckets: no disk read them, IOPS and latency are inflated"
            if direction == "read"
            else "were all-zero blocks (Oplog Zero): stored as metadata only, throughput is inflated"
        )
        done = "read" if direction == "read" else "written"
        return Verdict(
            trap, State.DISTORTED, pct(value), thr, f"{pct(value)} of the bytes {done} {what}.", TRAPS[trap][1], value
        )
    return Verdict(
        trap,
        State.OK,
        pct(value),
        thr,
        f"{pct(value)} of the {direction} bytes were zero blocks: the media did the work.",
        TRAPS[trap][1],
        value,
    )


def zero_reads(inp: DiskInput, t: Thresholds) -> Verdict:
    return _zero(inp, t, "read")


def zero_writes(inp: DiskInput, t: Thresholds) -> Verdict:
    return _zero(inp, t, "write")


def cache_fit(inp: DiskInput, t: Thresholds) -> Verdict:
    trap = "cache_fit"
    thr = f"> {pct(t.cache_read_ratio)} from cache, WSS < {t.working_set_to_cache_ratio:g} x cache"
    if why := _missing(inp, "storage"):
        return _nm(trap, why, thr)
    busy = _busy(inp.storage_read_bytes, t)
    if not _has(inp.storage_read_bytes):
        return _nm(trap, "the storage view has no read data for this disk's vdisk", thr)
    if not busy.any():
        return _idle(
            trap,
            thr,
            f"The vdisk was never busy reading (above {si_bytes(t.busy_bytes_per_second)}/s): no read came from cache.",
        )
    share = _mean_where(inp.read_cache, busy)
    if math.isnan(share):
        return _nm(trap, "the page lists no read sources", thr)
    if not _has(inp.working_set_to_cache):
        return _nm(trap, "the page shows no working set (2 min union)", thr)
    wss = float(np.nanmax(inp.working_set_to_cache))
    number = f"{pct(share)} cache, WSS {ratio(wss)} x"
    if share > t.cache_read_ratio and wss < t.working_set_to_cache_ratio:
        return Verdict(
            trap,
            State.DISTORTED,
            number,
            thr,
            f"{pct(share)} of the bytes read came from the "
            f"CVM's memory and the working set fits in its cache: hero numbers that describe DRAM, "
            f"not the storage.",
            TRAPS[trap][1],
            share,
        )
    why = (
        "the working set is larger than the cache"
        if wss >= t.working_set_to_cache_ratio
        else "most reads came from the media"
    )
    return Verdict(trap, State.OK, number, thr, f"Reads describe the storage: {why}.", TRAPS[trap][1], share)


def bursts(inp: DiskInput, t: Thresholds) -> Verdict:
    """Where an esxtop capture covers the disk, its 2 s samples against vCenter's 20 s ones
    (:func:`_bursts_esxtop`), as IoparallaxBurstAveragedAway judges; elsewhere Little's law over the
    range: the asked queue depth over the VM-implied concurrency, over the
    settled steps (:func:`unsettled`): the asked depth is there from a job's first step, while the VM
    view's concurrency (latency integrated over the rules' rate window, from 20 s samples) climbs
    from 0 over the settling time, so a joining job's first steps read as bursts."""
    trap = "bursts"
    if (esxtop := _bursts_esxtop(inp, t)) is not None:
        return esxtop
    thr = f"asked / implied QD > {t.burstiness_ratio:g}"
    if why := _missing(inp, "guest", "vm"):
        return _nm(trap, why, thr)
    if not _has(inp.iodepth):
        return _nm(trap, "no fio job with an iodepth runs on this disk", thr)
    if not _has(inp.vm_outstanding) or not _has(inp.vm_bytes):
        return _nm(trap, "the VM view has no latency or bytes for this disk", thr)
    busy = _busy(inp.vm_bytes, t) & ~np.isnan(inp.iodepth) & ~np.isnan(inp.vm_outstanding)
    if not busy.any():
        return _vm_idle(trap, thr, t, " while a fio job ran")
    settled = _settled(inp, busy, trap, thr, little=True)
    if isinstance(settled, Verdict):
        return settled
    busy, left_out = settled
    tail = f" ({left_out})" if left_out else ""
    implied = _fmean(inp.vm_outstanding[busy])
    asked = _fmean(inp.iodepth[busy])
    value = asked / implied if implied > 0 else math.inf
    buffered = inp.buffered is not None and bool(np.nan_to_num(inp.buffered[busy], nan=0.0).max(initial=0) >= 1)
    if buffered:
        return Verdict(
            trap,
            State.NOT_MEASURABLE,
            ratio(value),
            thr,
            f"Not measurable: asked queue depth not reached (buffered I/O): the fio job runs with "
            f"direct=0, so libaio submits synchronously and QD {asked:.0f} was never in flight "
            f"(VM view: {implied:.1f}); the ratio says nothing about bursts{tail}.",
            BUFFERED_ANCHOR,
            value,
        )
    return _burst_verdict(
        value,
        thr,
        t,
        distorted=f"The guest asks QD {asked:.0f} but the VM view implies {implied:.1f} in flight: the I/O "
        f"comes in bursts that {vm_words(inp)[0]}'s {vm_words(inp)[1]} samples average away (high "
        f'latency, "low" throughput){tail}.',
        ok=f"The VM view's throughput x latency accounts for the "
        f"asked queue depth ({asked:.0f} asked, {implied:.1f} implied): steady I/O{tail}.",
    )


def _burst_verdict(value: float, thr: str, t: Thresholds, distorted: str, ok: str) -> Verdict:
    """The bursts verdict on ``value`` (a burstiness ratio): DISTORTED saying ``distorted`` above
    the threshold, OK saying ``ok`` at or below it."""
    bursty = value > t.burstiness_ratio
    return Verdict(
        "bursts",
        State.DISTORTED if bursty else State.OK,
        ratio(value),
        thr,
        distorted if bursty else ok,
        TRAPS["bursts"][1],
        value,
    )


def _bursts_esxtop(inp: DiskInput, t: Thresholds) -> Verdict | None:
    """The bursts measured in the VM view itself: the mean, over the busy settled steps, of esxtop's
    highest sample in each window over vCenter's highest (the rule the alert judges). None where no
    esxtop capture covers the disk (or it has no value while the disk is busy): Little's law judges."""
    if not _has(inp.esxtop_peak_ratio) or not _has(inp.vm_bytes) or "vm" in inp.missing_views:
        return None
    trap = "bursts"
    period = f"{inp.esxtop_sample_seconds:g} s" if inp.esxtop_sample_seconds else "2 s"
    name, vm_period = vm_words(inp)
    thr = f"esxtop {period} peak / {name} {vm_period} peak > {t.burstiness_ratio:g}"
    busy = _busy(inp.vm_bytes, t) & ~np.isnan(inp.esxtop_peak_ratio)
    if not busy.any():
        return None
    settled = _settled(inp, busy, trap, thr)
    if isinstance(settled, Verdict):
        return settled
    busy, left_out = settled
    tail = f" ({left_out})" if left_out else ""
    value = _fmean(inp.esxtop_peak_ratio[busy])
    if inp.buffered is not None and bool(np.nan_to_num(inp.buffered[busy], nan=0.0).max(initial=0) >= 1):
        # The 2 s view judges bursts on a buffered disk too; its asked depth is another matter.
        tail += (
            ". A fio job on the disk runs buffered (direct=0): its asked queue depth was never in flight "
            "(IoparallaxAskedQueueDepthNotReached)"
        )
    peaks = f"The VM view's {period} samples (esxtop) peak at {ratio(value)} times {name}'s {vm_period} ones: "
    return _burst_verdict(
        value,
        thr,
        t,
        distorted=peaks + f"the I/O comes in bursts that {name}'s {vm_period} samples average away (high "
        f'latency, "low" throughput); judge throughput on the esxtop samples{tail}.',
        ok=peaks + f"no burst that the {vm_period} samples average away{tail}.",
    )


def misalignment(inp: DiskInput, t: Thresholds) -> Verdict:
    trap = "misalignment"
    thr = (
        f"start % 4096 != 0, or RMW reads > {pct(t.misaligned_read_to_write_ratio)} of writes, "
        f"or Windows split I/Os > {pct(t.split_io_ratio)}"
    )
    split = ""
    if _has(inp.splitting):
        s = float(np.nanmedian(inp.splitting))
        if s > 1.05:
            split = f" The guest block layer splits each fio I/O into {s:.1f} requests (compare bytes, not IOPS)."
    if inp.partitions:
        bad = {p: s for p, s in sorted(inp.partitions.items()) if s % 4096 != 0}
        if bad:
            p, s = next(iter(bad.items()))
            return Verdict(
                trap,
                State.DISTORTED,
                f"{p} at {s:,.0f} B",
                thr,
                f"Partition {p} starts at {s:,.0f} bytes, off the 4 KiB grid: every write straddles "
                f"two storage blocks and needs a read-modify-write.{split}",
                TRAPS[trap][1],
                s,
            )
    split_share: float | None = None
    if _has(inp.split_ios) and not np.all(np.isnan(inp.split_ios)):
        split_share = float(np.nanmedian(inp.split_ios))
        if split_share > t.split_io_ratio:
            return Verdict(
                trap,
                State.DISTORTED,
                f"split {pct(split_share)}",
                thr,
                f"Windows split {pct(split_share)} of the disk's I/Os (windows_exporter split_ios_total): a "
                "partition off the 4 KiB grid is suspected (a hint: check the partition offset).",
                SPLIT_IO_ANCHOR,
                split_share,
            )
    heuristic: float | None = None
    if "storage" not in inp.missing_views and _has(inp.storage_write_bytes) and _has(inp.rmw_read_to_write):
        reads = np.nan_to_num(inp.storage_read_bytes, nan=0.0) if inp.storage_read_bytes is not None else 0.0
        writes = np.nan_to_num(inp.storage_write_bytes, nan=0.0)
        write_only = _busy(inp.storage_write_bytes, t) & (reads < t.misaligned_frontend_read_to_write_ratio * writes)
        value = _mean_where(inp.rmw_read_to_write, write_only)
        if not math.isnan(value):
            heuristic = value
            if value > t.misaligned_read_to_write_ratio:
                return Verdict(
                    trap,
                    State.DISTORTED,
                    f"RMW {pct(value)}",
                    thr,
                    f"The storage reads {pct(value)} of the bytes written on a write-only disk: "
                    f"read-modify-write of misaligned writes suspected (a heuristic; confirm with "
                    f"the guest's partition offsets).{split}",
                    MISALIGNED_IO_ANCHOR,
                    value,
                )
    if inp.partitions is None and heuristic is None and split_share is not None:
        return Verdict(
            trap,
            State.OK,
            f"split {pct(split_share)}",
            thr,
            f"Windows split {pct(split_share)} of the disk's I/Os (windows_exporter split_ios_total; the "
            f"hint of a misaligned partition is above {pct(t.split_io_ratio)}).{split}",
            SPLIT_IO_ANCHOR,
            split_share,
        )
    if inp.partitions is None and heuristic is None:
        why = _missing(inp, "guest", "storage")
        if not why and (vm_why := _missing(inp, "vm")):
            why = f"the guest's devices are matched to VM disks by {vm_words(inp)[0]}'s disk UUID, and the " + vm_why
        return _nm(trap, why or "no partition offsets from the guest and no write-only load on storage", thr)
    parts = (
        "Partitions on the 4 KiB grid"
        if inp.partitions
        else "Raw device (no partition)"
        if inp.partitions is not None
        else "Guest partition offsets unknown"
    )
    extra = f"; storage RMW {pct(heuristic)} of writes" if heuristic is not None else ""
    return Verdict(
        trap,
        State.OK,
        "aligned" if inp.partitions else ("raw" if inp.partitions is not None else ""),
        thr,
        f"{parts}{extra}.{split}",
        TRAPS[trap][1],
        heuristic,
    )


def hygiene(inp: DiskInput, t: Thresholds) -> Verdict:
    trap = "hygiene"
    tool = {"diskspd": "DiskSPD", "vdbench": "vdbench"}.get(inp.tool, "fio")
    anchor = HYGIENE_ANCHORS.get(inp.tool, TRAPS[trap][1])
    thr = f"any {tool} hygiene problem"
    if why := _missing(inp, "guest"):
        return _nm(trap, why, thr)
    if inp.hygiene_problems is None:
        busy = _busy(inp.vm_bytes, t)
        if busy.any():
            # Judged over every step of the range: no step had a fio job (guest bytes or iodepth).
            return _nm(
                trap,
                f"no fio job, DiskSPD run or vdbench host measured this disk at any step of the range, while the VM view saw "
                f"it busy (above {si_bytes(t.busy_bytes_per_second)}/s) at {int(busy.sum())} of "
                f"{busy.size} steps: I/O that no load generator in the guest explains",
                thr,
            )
        return _nm(trap, "no fio job, DiskSPD run or vdbench host on this disk", thr)
    problems = set(inp.hygiene_problems)
    if inp.buffered is not None and np.nan_to_num(inp.buffered, nan=0.0).max(initial=0) >= 1:
        problems.add("buffered_io")
    if problems:
        names = ", ".join(sorted(problems))
        return Verdict(
            trap,
            State.DISTORTED,
            names,
            thr,
            f"The {tool} {'result' if inp.tool in ('diskspd', 'vdbench') else 'job'}'s options make its numbers "
            f"unrepresentative ({names}: see docs/hygiene.md).",
            anchor,
            float(len(problems)),
        )
    return Verdict(
        trap,
        State.OK,
        "none",
        thr,
        f"The {tool} {'result' if inp.tool in ('diskspd', 'vdbench') else 'job'}'s options describe the "
        "application, not a benchmark trap.",
        anchor,
        0.0,
    )


def judge(inp: DiskInput, t: Thresholds) -> dict[str, Verdict]:
    """Every verdict of one VM disk, keyed by trap, in TRAPS order."""
    b = bursts(inp, t)
    return {
        "views_agree": views_agree(inp, t, bursting=b.state is State.DISTORTED),
        "zero_reads": zero_reads(inp, t),
        "zero_writes": zero_writes(inp, t),
        "cache_fit": cache_fit(inp, t),
        "bursts": b,
        "misalignment": misalignment(inp, t),
        "hygiene": hygiene(inp, t),
    }
