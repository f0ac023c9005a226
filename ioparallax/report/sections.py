"""What a section of the report is: the contract between the section builders and the page.

How to add a section (e.g. scalability)
---------------------------------------

1. Write a *section builder* in a render module: a function that takes what it shows, explicitly
   (a :class:`ioparallax.report.analysis.Side`: the side's ReportContext, its Dataset and its
   verdicts; the compare side; a result of the analysis stage such as
   :class:`ioparallax.report.scaling.Scaling`) and returns a :class:`Section`, a list of Sections
   (as the per-VM-disk pages are) or ``None`` when it has nothing to say (e.g. no ramp in the
   range). It queries nothing: everything the report reads from Prometheus is fetched once, before
   any section, by ioparallax.report.data (add a family there, one query per kind of series over
   every VM disk, never one per disk), and what is computed from it belongs to the analysis stage
   (pure functions returning data, in ioparallax.report.analysis or a module of its own).
2. Add it to ``report_builders`` in ``ioparallax/report/builders.py`` (one line, in page order).

A section carries an HTML fragment (already escaped: use :func:`esc` on every value that comes
from Prometheus), its figures (:class:`Figure`: inline SVG from
``ioparallax.report.figures.to_svg(fig)``, a caption, the PromQL and the data as CSV), extra CSV
tables and the PromQL it used. The page (``ioparallax.report.page``) lays the sections out in
order, links them from the table of contents, puts every figure's PromQL and a CSV download link
(a ``data:`` URI) in the appendix, and starts a printed page at sections with ``page_break``.

A builder that raises does not break the report: the page shows the section's title with the error
(``builders.build_sections``). A figure with no data must still have a caption that says why
(``Figure.empty(...)``).

Numbers the verdicts judge are defined over the whole report range (see docs/report.md): a side's
``start``/``end``/``step`` are the same for every section, so the figures and the verdict table
show the same time.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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


Built = Section | list[Section] | None
SectionBuilder = Callable[[], Built]  # a builder with its inputs bound (builders.report_builders)


def esc(value: Any) -> str:
    """HTML-escape a value for a fragment."""
    return html.escape(str(value), quote=True)
