"""The analysis stage: from a side's Dataset (ioparallax.report.data) to what the sections show.

Pure functions returning data: each VM disk's verdict input and verdicts (ioparallax.report.verdicts
judges), the alerts' firing episodes, the words for where the VM view came from. The scalability
analysis (the ramp's plateaus and the USL fits) is ioparallax.report.scaling. Nothing here queries
Prometheus or writes HTML.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from ioparallax.mixin.config import Thresholds
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Dataset, Key
from ioparallax.report.verdicts import DiskInput, Verdict, judge

log = logging.getLogger(__name__)

T = TypeVar("T")
VerdictTable = dict[Key, dict[str, Verdict]]  # VM disk -> trap -> verdict


@dataclass(frozen=True)
class Computed(Generic[T]):
    """An analysis' result, or the exception it raised. :meth:`get` raises it again where a section
    uses the result, inside the builders' guard (builders.build_sections): a failed analysis costs
    the sections that need it, not the report."""

    value: T | None = None
    error: Exception | None = None

    def get(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # None only when T admits it


def compute(what: str, fn: Callable[[], T]) -> Computed[T]:
    """Run one analysis; an exception is logged (one line) and kept for the sections that need it."""
    try:
        return Computed(value=fn())
    except Exception as e:  # noqa: BLE001 - one failed analysis must not lose the whole report
        log.error("analysis %s failed: %s", what, e)
        return Computed(error=e)


@dataclass(frozen=True)
class Side:
    """One side of the report after the analysis: where it was read, what was read, the verdicts."""

    ctx: ReportContext
    data: Dataset
    verdicts: Computed[VerdictTable]


def analyse(ctx: ReportContext, data: Dataset) -> Side:
    """A side after the analysis: its verdicts judged from its data (a failure kept, :class:`Computed`)."""
    return Side(
        ctx,
        data,
        compute(f"verdicts{f' of {ctx.label}' if ctx.label else ''}", lambda: judge_all(data, ctx.config.thresholds)),
    )


def _sum(*arrays: np.ndarray | None) -> np.ndarray | None:
    present = [a for a in arrays if a is not None]
    if not present:
        return None
    stacked = np.vstack(present)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    return out


def guest_devices(ds: Dataset, key: Key) -> list[tuple[str, str]]:
    """(instance, device) of the guest block devices that are this VM disk."""
    return sorted(
        {
            (r["metric"].get("instance", ""), r["metric"].get("device", ""))
            for r in ds.instant.get("guest_disk_info", [])
            if (r["metric"].get("vm"), r["metric"].get("disk")) == key
        }
    )


def partitions(ds: Dataset, key: Key) -> dict[str, float] | None:
    """The start offset of each guest partition of the VM disk; {} for a raw device, None when no
    guest device is known to be this VM disk."""
    devices = guest_devices(ds, key)
    if not devices:
        return None
    out = {}
    for r in ds.instant.get("partitions", []):
        m = r["metric"]
        if (m.get("instance", ""), m.get("disk", "")) in devices:
            out[m.get("partition", "?")] = float(r["value"][1])
    return out


#: The fields of :class:`DiskInput` that are the dataset's family of the same name, as it is.
DISK_SERIES = (
    "storage_read_bytes",
    "storage_write_bytes",
    "read_zero",
    "write_zero",
    "read_zero_measurable",
    "write_zero_measurable",
    "read_cache",
    "working_set_to_cache",
    "rmw_read_to_write",
    "iodepth",
    "vm_outstanding",
    "buffered",
    "splitting",
    "split_ios",
    "job_elapsed",
    "esxtop_peak_ratio",
)


def disk_input(ds: Dataset, key: Key) -> DiskInput:
    g = lambda fam: ds.get(fam, key)  # noqa: E731
    inp = DiskInput(
        missing_views={v: why for v, why in ds.missing_views.items() if v != "guest_os"},
        guest_bytes=_sum(g("guest_read_bytes"), g("guest_write_bytes")),
        vm_bytes=_sum(g("vm_read_bytes"), g("vm_write_bytes")),
        storage_bytes=_sum(g("storage_read_bytes"), g("storage_write_bytes")),
        partitions=partitions(ds, key),
        settle_seconds=ds.settle_seconds,
        rate_window=ds.rate_window,
        step_seconds=float(ds.times[1] - ds.times[0]) if ds.times.size > 1 else 0.0,
    )
    for name in DISK_SERIES:
        setattr(inp, name, g(name))
    if key in ds.vm_source_of:
        inp.vm_source, inp.vm_sample_seconds = ds.vm_source_of[key]
    inp.esxtop_sample_seconds = ds.esxtop_period_of.get(key)
    for fam, attr, label in (("guest_tool", "tool", "tool"), ("guest_os_source", "guest_os_source", "source")):
        seen = sorted(
            m.get(label, "")
            for m, v in ds.labelled.get(fam, [])
            if (m.get("vm"), m.get("disk")) == key and np.any(~np.isnan(v))
        )
        setattr(inp, attr, "+".join(seen))
    runs_tool = any(a is not None and np.any(~np.isnan(a)) for a in (inp.guest_bytes, inp.iodepth))
    if runs_tool:
        inp.hygiene_problems = {
            m.get("problem", "?")
            for m, v in ds.labelled.get("hygiene", [])
            if (m.get("vm"), m.get("disk")) == key and np.nanmax(v, initial=0) >= 1
        }
        sources = {
            m.get("source") for m, v in ds.labelled.get("vdbench_disks", []) if (m.get("vm"), m.get("disk")) == key
        }
        inp.hygiene_problems |= {
            m.get("problem", "?")
            for m, v in ds.labelled.get("vdbench_hygiene", [])
            if m.get("source") in sources and np.nanmax(v, initial=0) >= 1
        }
    return inp


def judge_all(ds: Dataset, thresholds: Thresholds) -> VerdictTable:
    """Every VM disk's verdicts (:meth:`Dataset.disks`: the disks with I/O in the range)."""
    return {key: judge(disk_input(ds, key), thresholds) for key in ds.disks()}


def fired_alerts(ds: Dataset, step: float) -> list[tuple[str, dict[str, str], float, float, bool]]:
    """(alertname, labels, first firing, last firing, still firing at the end) per alert series and
    per firing episode in the range."""
    out = []
    times = ds.times
    for m, values in ds.labelled.get("alerts", []):
        on = ~np.isnan(values)
        i = 0
        while i < len(on):
            if not on[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(on) and on[j + 1]:
                j += 1
            labels = {k: v for k, v in m.items() if k not in ("__name__", "alertstate", "alertname")}
            out.append((m.get("alertname", "?"), labels, float(times[i]), float(times[j]), j == len(on) - 1))
            i = j + 1
    return sorted(out, key=lambda a: (a[2], a[0]))


def vm_view_words(ds: Dataset) -> str:
    """``vCenter (20 s samples)``, ``Prism (30 s samples)``, both, or ``unknown`` for a dataset."""
    names = {"vcenter": "vCenter", "prism": "Prism"}
    seen = sorted({(names.get(src, src), period) for src, period in ds.vm_source_of.values()})
    return ", ".join(f"{n} ({p:g} s samples)" for n, p in seen) or "unknown (no VM view)"
