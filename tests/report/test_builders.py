"""The render stage's builders (issue 21): page order, compare an ordinary builder, and one guard for
all: a builder that raises, or that needs an analysis that raised, becomes a section showing the
error while the others are made as usual."""

from __future__ import annotations

import numpy as np

from ioparallax.mixin.config import load_config
from ioparallax.report.analysis import Computed, Side, compute
from ioparallax.report.builders import build_sections, report_builders
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Dataset, instant_families, range_families
from ioparallax.report.promapi import PromAPI

T0 = 1_763_900_000.0


def side(label: str, verdicts: Computed) -> Side:
    ctx = ReportContext(
        api=PromAPI("http://127.0.0.1:9"), start=T0, end=T0 + 600, step=5.0, config=load_config(), label=label
    )
    ds = Dataset(times=ctx.times, promql={**range_families(ctx), **instant_families(ctx)})
    return Side(ctx, ds, verdicts)


def titles(sections) -> list[str]:
    return [s.title for s in sections]


def test_sections_in_page_order_with_compare_after_the_alerts():
    a, b = side("A", Computed(value={})), side("B", Computed(value={}))
    got = build_sections(report_builders(a, b, {}, Computed(value=None)))
    assert titles(got) == ["Verdicts", "Alerts that fired", "Compare A with B"]  # no ramp, no disk
    assert titles(build_sections(report_builders(a, None, {}, Computed(value=None)))) == [
        "Verdicts",
        "Alerts that fired",
    ]


def test_a_failed_analysis_costs_the_sections_that_use_it_not_the_report(caplog):
    a = side("A", Computed(value={}))
    b = side("B", compute("verdicts of B", lambda: 1 / 0))  # B's verdicts raised
    ramp = compute("scalability", lambda: [][1])
    assert "analysis verdicts of B failed: division by zero" in caplog.text
    got = build_sections(report_builders(a, b, {}, ramp))
    # compare is inside the same guard as the others: its error is a section, in its place
    assert titles(got) == [
        "Verdicts",
        "Alerts that fired",
        "Section compare_section failed",
        "Section scaling_section failed",
    ]
    assert "This section could not be made: division by zero" in got[2].html
    assert "list index out of range" in got[3].html
    assert "section compare_section failed: division by zero" in caplog.text


def test_a_builder_that_raises_leaves_the_others_standing():
    a = side("A", Computed(error=ValueError("no thresholds")))  # A's verdicts raised
    a.data.series["vm_read_bytes"] = {("vm-a", "scsi0:1"): np.full(len(a.data.times), 5e6)}
    got = build_sections(report_builders(a, None, {}, Computed(value=None)))
    # the verdict table and the disk pages need A's verdicts; the alerts do not
    assert titles(got) == ["Section verdicts_section failed", "Alerts that fired", "Section disk_sections failed"]
    assert all("no thresholds" in got[i].html for i in (0, 2))
