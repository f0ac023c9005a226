"""The VM view from either manager: vCenter (ESXi clusters) or Prism (AHV clusters).

Both exporters integrate their manager's samples into the same per-disk counters, named alike
(``vcenter_virtual_disk_read_ops_total``, ``prism_virtual_disk_read_ops_total``), with the labels
``vm`` and ``disk`` that the three views join on. The rules and dashboards build every VM-view
expression once per source with :func:`either` and join the two with ``or``: a cluster has one
manager, so for a VM disk only one side has series, and the result is the same PromQL the
vCenter-only rules were, on whichever source the cluster has.

Prism has fewer per-disk series than vCenter (no outstanding I/Os, I/O size or seek samples, one
latency precision): :func:`either` leaves a source out where it lacks a series the expression
names, so such a panel stays vCenter's and is empty on AHV (docs/dashboards.md says which).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ioparallax.mixin.config import MixinConfig

SOURCES = ("vcenter", "prism")
# Each manager's sample period: vCenter's realtime counters are 20 s samples, Prism's stats 30 s.
SAMPLE_SECONDS = {"vcenter": 20, "prism": 30}
TITLE = {"vcenter": "vCenter", "prism": "Prism"}

# The per-disk series of prism-exporter's VM view (docs/prism.md#metrics), without the
# ``prism_virtual_disk_`` prefix.
PRISM_VIRTUAL_DISK = frozenset(
    [f"{d}_{q}_total" for d in ("read", "write") for q in ("ops", "bytes", "latency_seconds")]
    + ["samples_total", "sample_timestamp_seconds", "sample_interval_seconds", "info"]
    + [f"sample_{d}_{q}" for d in ("read", "write") for q in ("ops_per_second", "bytes_per_second", "latency_seconds")]
)
# vCenter series whose Prism counterpart has another name: Prism's latency is in microseconds,
# so its one latency sample is as precise as vCenter's microsecond counter.
_PRISM_NAME = {
    "sample_read_latency_precise_seconds": "sample_read_latency_seconds",
    "sample_write_latency_precise_seconds": "sample_write_latency_seconds",
}


class Missing(LookupError):
    """The source has no such series."""


def metric(source: str, suffix: str) -> str:
    """The name of ``<source>_virtual_disk_<suffix>`` (``suffix`` as vCenter names it)."""
    if source == "vcenter":
        return f"vcenter_virtual_disk_{suffix}"
    name = _PRISM_NAME.get(suffix, suffix)
    if name not in PRISM_VIRTUAL_DISK:
        raise Missing(suffix)
    return f"prism_virtual_disk_{name}"


def has(source: str, suffix: str) -> bool:
    try:
        metric(source, suffix)
    except Missing:
        return False
    return True


class Source:
    """One manager's series with its selector (and extra matchers) bound: ``s("read_ops_total")``."""

    def __init__(self, cfg: MixinConfig, name: str, *extra: str) -> None:
        self.name, self.cfg, self.extra = name, cfg, extra

    def __call__(self, suffix: str, *extra: str) -> str:
        return metric(self.name, suffix) + self.cfg.sel(self.name, *self.extra, *extra)

    def sel(self, *extra: str) -> str:
        return self.cfg.sel(self.name, *self.extra, *extra)


def either(cfg: MixinConfig, build: Callable[[Source], str], *extra: str) -> str:
    """``build`` for vCenter ``or`` for Prism (each where the source has every series named)."""
    parts = []
    for name in SOURCES:
        try:
            parts.append(build(Source(cfg, name, *extra)))
        except Missing:
            continue
    if len(parts) == 1:
        return parts[0]
    return "(\n  " + "\n  or\n  ".join(p.replace("\n", "\n  ") for p in parts) + "\n)"


_VCENTER_NAME = re.compile(r"\bvcenter_virtual_disk_([a-z_]+)")


# esxtop-exporter's series (esxtop_*) and the rules made of them (vm_disk:ioparallax_esxtop_*): the
# ESXi hosts' own view, which no AHV cluster has.
_ESXTOP_NAME = re.compile(r"\besxtop_|_esxtop_")


def vcenter_only(expr: str) -> bool:
    """A query that reads a vCenter per-disk series Prism has no counterpart of (outstanding I/Os,
    I/O size samples, seeks), or the ESXi hosts' esxtop series, and no Prism series: empty on an AHV
    cluster by design."""
    suffixes = _VCENTER_NAME.findall(expr)
    esxi = any(not has("prism", s) for s in suffixes) or bool(_ESXTOP_NAME.search(expr))
    return esxi and "prism_" not in expr
