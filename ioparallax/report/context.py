"""Where the report reads and over which range: the input of the fetch stage (ioparallax.report.data).

The report is a one-way pipeline: **fetch** (ioparallax.report.data: one Dataset per side, every
kind of series queried once) -> **analysis** (ioparallax.report.analysis, verdicts, scaling, ramps,
usl: pure functions from the Dataset to verdicts and fits) -> **render** (the sections of
ioparallax.report.builders, figures, ioparallax.report.page). A module imports only from its own
stage or the ones before it; tests/report/test_report_imports.py checks that the package has no
import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ioparallax.mixin.config import MixinConfig
from ioparallax.report.promapi import PromAPI


@dataclass
class ReportContext:
    """One side of the report: where to query, over which range, with which config. Every query of
    the side goes through it (whole rule families, one query per kind of series, never one per VM
    disk: :meth:`range_arrays`, :meth:`instant`; :meth:`rule` and :meth:`sel` add the ``--match``
    matchers)."""

    api: PromAPI
    start: float  # unix seconds
    end: float
    step: float  # seconds between points of every range query
    config: MixinConfig
    match: str = ""  # extra label matchers without braces, e.g. 'cluster="poc-a"'
    label: str = ""  # name of this side in a comparison ("A", "B"); "" alone
    build: dict[str, Any] = field(default_factory=dict)  # the query API's /status/buildinfo ({} if none)

    @property
    def times(self) -> np.ndarray:
        """The timestamps of every range query's points (start + k * step)."""
        n = int(math.floor((self.end - self.start) / self.step + 1e-9)) + 1
        return self.start + self.step * np.arange(n)

    def rule(self, name: str, *extra: str) -> str:
        """A recording rule's (or any metric's) selector with the --match matchers."""
        parts = [p for p in (self.match, *extra) if p]
        return f"{name}{{{','.join(parts)}}}" if parts else name

    def sel(self, source: str, *extra: str) -> str:
        """``{job="fio",<match>,extra...}``: a source's selector from ioparallax/mixin/config.yml."""
        return self.config.sel(source, self.match, *extra)

    def range_arrays(self, expr: str) -> list[tuple[dict[str, str], np.ndarray]]:
        """:meth:`range` as ``(labels, points)``, points a float array of (time, value) rows."""
        return self.api.query_range_arrays(expr, self.start, self.end, self.step)

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return self.api.query(expr, self.end if at is None else at)

    @property
    def range_seconds(self) -> int:
        return max(1, int(round(self.end - self.start)))
