"""The report is a list of sections; this module is the contract between the sections and the page.

How to add a section (e.g. scalability, issue 12)
-------------------------------------------------

1. Write a *section builder*: a function ``build(ctx: ReportContext) -> Section | None`` (or a
   list of sections, as the per-VM-disk pages are).
   It reads Prometheus only through ``ctx`` (``ctx.range(expr)``, ``ctx.instant(expr)``: whole
   rule families, one query per kind of series, never one per VM disk; ``ctx.rule(name)`` adds the
   user's ``--match`` matchers to a recording rule's name, ``ctx.sel(source)`` gives a source's
   selector from ioparallax/mixin/config.yml with them). It returns ``None`` when it has nothing to say
   (e.g. no ramp in the range), or a :class:`Section`.
2. Add it to ``SECTION_BUILDERS`` in ``ioparallax/report/builders.py`` (one line).

A section carries an HTML fragment (already escaped: use ``html.escape`` on every value that
comes from Prometheus), its figures (:class:`Figure`: inline SVG from
``ioparallax.report.figures.to_svg(fig)``, a caption, the PromQL and the data as CSV), extra CSV
tables and the PromQL it used. The page (``ioparallax.report.html``) lays the sections out in
order, links them from the table of contents, puts every figure's PromQL and a CSV download link
(a ``data:`` URI) in the appendix, and starts a printed page at sections with ``page_break``.

A builder that raises does not break the report: the page shows the section's title with the error
(``builders.build_sections``). A figure with no data must still have a caption that says why
(``Figure.empty(...)``).

Numbers the verdicts judge are defined over the whole report range (see docs/report.md): the
context's ``start``/``end``/``step`` are the same for every section, so the figures and the verdict
table show the same time.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ioparallax.mixin.config import MixinConfig
from ioparallax.report.promapi import PromAPI


@dataclass
class Figure:
    id: str  # unique in the report, used for anchors and CSV file names
    caption: str  # what it shows; for an empty figure: why it is empty
    svg: str = ""  # inline <svg>...</svg>; "" when there is nothing to draw
    promql: list[str] = field(default_factory=list)
    csv: str = ""  # the data behind the figure (header line + rows)

    @classmethod
    def empty(cls, id: str, why: str, promql: list[str] | None = None) -> Figure:
        return cls(id=id, caption=why, svg="", promql=list(promql or []), csv="")


@dataclass
class Section:
    id: str  # HTML id (anchor), unique in the report
    title: str
    html: str = ""  # an HTML fragment, values escaped
    figures: list[Figure] = field(default_factory=list)
    csv: dict[str, str] = field(default_factory=dict)  # extra tables: file name -> CSV text
    promql: list[str] = field(default_factory=list)  # queries of the section's tables
    page_break: bool = False  # start a printed page (one per VM disk)
    toc: bool = True  # listed in the table of contents


@dataclass
class ReportContext:
    """What every section builder gets: where to query, over which range, with which config."""

    api: PromAPI
    start: float  # unix seconds
    end: float
    step: float  # seconds between points of every range query
    config: MixinConfig
    match: str = ""  # extra label matchers without braces, e.g. 'cluster="poc-a"'
    label: str = ""  # name of this side in a comparison ("A", "B"); "" alone
    # Filled by the report before the builders run (ioparallax.report.data):
    missing_views: dict[str, str] = field(default_factory=dict)  # view -> why it is missing
    shared: dict[str, Any] = field(default_factory=dict)  # cache shared by builders
    compare: ReportContext | None = None  # the --compare side, if any

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

    def range(self, expr: str) -> list[dict[str, Any]]:
        return self.api.query_range(expr, self.start, self.end, self.step)

    def range_arrays(self, expr: str) -> list[tuple[dict[str, str], np.ndarray]]:
        """:meth:`range` as ``(labels, points)``, points a float array of (time, value) rows."""
        return self.api.query_range_arrays(expr, self.start, self.end, self.step)

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return self.api.query(expr, self.end if at is None else at)

    @property
    def range_seconds(self) -> int:
        return max(1, int(round(self.end - self.start)))


SectionBuilder = Callable[[ReportContext], "Section | list[Section] | None"]


def esc(value: Any) -> str:
    """HTML-escape a value for a fragment."""
    return html.escape(str(value), quote=True)
