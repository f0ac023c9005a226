"""The report's sections, in page order: the render stage's one list. To add a section, add a line
to :func:`report_builders` (ioparallax/report/sections.py says what a builder is).

Every builder is given its inputs explicitly (the analysed sides, the pairs, the ramp's analysis)
and runs inside :func:`build_sections`' guard: a builder that raises gives a section that shows the
error, and the others are made as usual.
"""

from __future__ import annotations

import logging
import traceback
from typing import NamedTuple

from ioparallax.report import compare, disks, scaling_section, summary
from ioparallax.report.analysis import Computed, Side
from ioparallax.report.data import Key
from ioparallax.report.scaling import Scaling
from ioparallax.report.sections import Section, SectionBuilder, esc

log = logging.getLogger(__name__)


class Builder(NamedTuple):
    name: str  # named in the log and in the error section when it raises
    build: SectionBuilder


def report_builders(a: Side, b: Side | None, pairs: dict[Key, Key], ramp: Computed[Scaling | None]) -> list[Builder]:
    """The builders of a report of side ``a`` (compared with ``b``, its disks ``pairs``: A disk ->
    B disk; ``ramp``: a's scalability analysis), in page order."""
    return [
        Builder("verdicts_section", lambda: summary.verdicts_section(a)),  # verdict table, views missing
        Builder("alerts_section", lambda: summary.alerts_section(a)),  # alerts that fired
        Builder("compare_section", lambda: compare.compare_section(a, b, pairs) if b is not None else None),
        # The ramp's plateaus and the USL fit; None without a ramp.
        Builder("scaling_section", lambda: scaling_section.scaling_section(a.ctx, ramp.get())),
        Builder("disk_sections", lambda: disks.disk_sections(a, b)),  # one page per VM disk
    ]


def build_sections(builders: list[Builder]) -> list[Section]:
    """Run every builder; a builder that raises gives a section that shows the error."""
    out: list[Section] = []
    for name, build in builders:
        try:
            got = build()
        except Exception as e:  # noqa: BLE001 - one broken section must not lose the whole report
            log.error("section %s failed: %s", name, e)
            log.debug("%s", traceback.format_exc())
            got = Section(
                id=f"error-{len(out)}",
                title=f"Section {name} failed",
                html=f'<p class="error">This section could not be made: {esc(e)}</p>',
            )
        if got is None:
            continue
        out.extend(got if isinstance(got, list) else [got])
    return out
