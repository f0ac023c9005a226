"""The report's sections, in page order: to add a section, add its builder to SECTION_BUILDERS.

See ioparallax/report/sections.py for the contract (a builder takes the ReportContext and returns a
Section, a list of Sections, or None).
"""

from __future__ import annotations

import logging
import traceback

from ioparallax.report.sections import ReportContext, Section, SectionBuilder, esc

log = logging.getLogger(__name__)


def _builders() -> list[SectionBuilder]:
    # Imported here so that a section module that fails to import breaks only its own section.
    from ioparallax.report import disks, scaling, summary

    builders: list[SectionBuilder] = [
        summary.verdicts_section,  # verdict table, views missing, alerts that fired
        summary.alerts_section,
        scaling.scaling_section,  # the ramp's plateaus and the USL fit (issue 12); None without a ramp
        disks.disk_sections,  # one page per VM disk
    ]
    return builders


def build_sections(ctx: ReportContext, builders: list[SectionBuilder] | None = None) -> list[Section]:
    """Run every builder; a builder that raises gives a section that shows the error."""
    out: list[Section] = []
    for build in builders if builders is not None else _builders():
        name = getattr(build, "__qualname__", repr(build))
        try:
            got = build(ctx)
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
