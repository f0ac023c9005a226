"""The metric families of one scrape of a watch exporter (fio, DiskSPD, vdbench, esxtop,
pgbench), built as the collector walks its sources.

A family is created when its first sample is added, so a scrape shows only the metric names it
has samples for. Samples are staged per source (:meth:`MetricFamilies.stage`) and added only once
the whole source was built (:meth:`~MetricFamilies.commit`): a file whose exposition fails half-way
shows none of its series, never a partial set. Values are converted to float when staged, so a
number no float can hold fails there, inside the source's isolation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ioparallax.exporters.common.exposition import printable
from ioparallax.exporters.common.labels import MAX_LABEL_VALUE_CHARS, cap


def finite(name: str, value: float) -> float:
    """``value`` as a float; ValueError naming the metric when it is NaN or infinite (the last
    guard before the exposition: the readers have validated every number already)."""
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} would be {v}")
    return v


def scrape_health(prefix: str, ok: bool, up_help: str, duration_help: str, start: float) -> Iterator[Metric]:
    """A scrape's last two families: ``<prefix>_up`` (1 if ``ok``, else 0) and
    ``<prefix>_scrape_duration_seconds`` (since ``start``, a time.monotonic() reading)."""
    up = GaugeMetricFamily(f"{prefix}_up", up_help)
    up.add_metric([], 1.0 if ok else 0.0)
    yield up
    dur = GaugeMetricFamily(f"{prefix}_scrape_duration_seconds", duration_help)
    dur.add_metric([], time.monotonic() - start)
    yield dur


class MetricFamilies:
    """Lazily created families, staged per source and committed whole (see the module)."""

    def __init__(self) -> None:
        self._fams: dict[str, Metric] = {}
        self._staged: list[tuple[type, str, str, list[str], list[str], tuple[Any, ...]]] | None = None

    def stage(self) -> None:
        """Hold what is added from now on until :meth:`commit` (or :meth:`discard`)."""
        self._staged = []

    def commit(self) -> None:
        staged, self._staged = self._staged or [], None
        for kind, name, doc, labels, values, value in staged:
            self.get(kind, name, doc, labels).add_metric(values, *value)

    def discard(self) -> None:
        self._staged = None

    def get(self, kind: type, name: str, doc: str, labels: list[str]) -> Any:
        """The family of type ``kind`` (Gauge-, Counter- or HistogramMetricFamily, whose
        ``add_metric`` signatures differ: hence ``Any``)."""
        fam = self._fams.get(name)
        if fam is None:
            fam = self._fams[name] = kind(name, doc, labels=labels)
        return fam

    def add(self, kind: type, name: str, doc: str, labels: list[str], values: list[str], *value: Any) -> None:
        """A sample of a family of type ``kind``; ``value`` is what its ``add_metric`` takes after
        the label values."""
        # A file name (or a job name from the data) is data: one that UTF-8 cannot encode must not
        # fail the whole exposition (see printable()).
        # A name longer than the shared limit is cut, counted (labels.cap).
        values = [
            (v if v.isascii() else printable(v)) if len(v) <= MAX_LABEL_VALUE_CHARS else printable(cap(v))
            for v in values
        ]
        if self._staged is not None:
            self._staged.append((kind, name, doc, labels, values, value))
        else:
            self.get(kind, name, doc, labels).add_metric(values, *value)

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], value: float) -> None:
        self.add(GaugeMetricFamily, name, doc, labels, values, finite(name, value))

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], value: float) -> None:
        # CounterMetricFamily takes the name without _total and adds it back in the exposition.
        self.add(CounterMetricFamily, name.removesuffix("_total"), doc, labels, values, finite(name, value))

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._fams.values())
