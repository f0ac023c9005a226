"""Make the report, one stage after the other: connect (a ReportContext per side), fetch (a Dataset
per side, ioparallax.report.data), pair B's disks with A's, analyse (verdicts and the ramp,
ioparallax.report.analysis and ioparallax.report.scaling), render (the sections of
ioparallax.report.builders and the page of ioparallax.report.page)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ioparallax.mixin.config import load_config
from ioparallax.report.analysis import Computed, Side, analyse, compute
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Key, choose_step, fetch
from ioparallax.report.pairing import load_pairs, merge_matchers, pair, remap
from ioparallax.report.promapi import DEFAULT_MAX_ANSWER_BYTES, PromAPI, PromError
from ioparallax.report.ramps import Step
from ioparallax.report.scaling import Scaling, scaling
from ioparallax.yamlconf import ConfigError

log = logging.getLogger(__name__)


class ReportError(RuntimeError):
    pass


@dataclass
class ReportResult:
    parts: list[str]  # the page, piece by piece (write them in order)
    queries: int
    seconds: float
    disks: int
    a: Side  # the report's side: where it read, what it read, its verdicts
    b: Side | None = None  # the --compare side
    pairs: dict[Key, Key] = field(default_factory=dict)  # A disk -> the B disk paired with it
    ramp: Computed[Scaling | None] = field(default_factory=Computed)  # A's scalability analysis

    @property
    def missing_views(self) -> dict[str, str]:
        """A's views missing in the range, and why."""
        return dict(self.a.data.missing_views)

    @property
    def html(self) -> str:
        return "".join(self.parts)

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.parts)

    def write(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(self.parts)


def context(
    prometheus: str,
    start: float,
    end: float,
    step: float | None,
    match: str,
    config_path: Path | None,
    timeout: float = 30.0,
    label: str = "",
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> ReportContext:
    """One side's context, after its first request (the query API's build info): an unreachable
    Prometheus stops the report here with its URL and the cause."""
    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        raise ReportError(f"config: {e}") from None
    api = PromAPI(prometheus, timeout=timeout, max_answer_bytes=max_answer_bytes)
    build = api.buildinfo()
    if not build:
        api.query("vector(1)")
    if step is None:
        step = choose_step(end - start, api.scrape_interval())
    if (end - start) / step > 11000:
        raise ReportError(
            f"range {end - start:.0f} s at a step of {step:g} s is more than 11,000 points "
            "(Prometheus' limit): give a larger --step"
        )
    return ReportContext(
        api=api, start=start, end=end, step=step, config=cfg, match=match, label=label, build=build or {}
    )


def versions(a: Side) -> dict[str, str]:
    """The versions the appendix lists: the query API's, and those the data names."""
    ds = a.data
    out = {"Prometheus": a.ctx.build.get("version", "not exposed by the query API")}
    fio = sorted(r["metric"].get("version", "") for r in ds.instant.get("fio_versions", []))
    out["fio (fio_job_info version)"] = ", ".join(v for v in fio if v) or "not exposed"
    builds = sorted(r["metric"].get("build_version", "") for r in ds.instant.get("stargate_builds", []))
    out["Stargate build (stargate_cvm_info)"] = ", ".join(b for b in builds if b) or "not exposed"
    exporters = sorted(
        {
            f"{m.get('job', '?')} {m.get('version', '?')}" + (f" ({m['revision']})" if m.get("revision") else "")
            for m in (r["metric"] for r in ds.instant.get("exporter_builds", []))
        }
    )
    out["ioparallax exporters (<name>_exporter_build_info)"] = ", ".join(exporters) or (
        "not exposed (no exporter's own /metrics is scraped in the range)"
    )
    try:
        out["ioparallax-report"] = version("ioparallax")
    except PackageNotFoundError:  # a source checkout without metadata
        out["ioparallax-report"] = "unknown"
    return out


def make_report(
    prometheus: str,
    start: float,
    end: float,
    step: float | None = None,
    match: str = "",
    config_path: Path | None = None,
    compare: tuple[str, str, float, float] | tuple[str, str, float, float, str | None] | None = None,
    compare_pairs: Path | None = None,
    title: str = "Storage PoC report",
    timeout: float = 30.0,
    steps: list[Step] | None = None,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> ReportResult:
    """The report of ``prometheus`` over ``start``..``end`` (``compare``: label, URL, start, end and
    optionally B's own matchers; ``steps``: --steps, the ramp's boundaries)."""
    t0 = time.monotonic()
    ctx = context(
        prometheus,
        start,
        end,
        step,
        match,
        config_path,
        timeout,
        label="A" if compare else "",
        max_answer_bytes=max_answer_bytes,
    )
    b_ctx: ReportContext | None = None
    given: dict[Key, Key] = {}
    if compare is not None:
        label, url, cstart, cend = compare[:4]
        own = compare[4] if len(compare) > 4 else None
        # The matcher form: B's matchers replace A's on the labels they name (another cluster).
        cmatch = match if own is None else merge_matchers(match, own)
        try:
            given = load_pairs(compare_pairs) if compare_pairs else {}
        except ConfigError as e:
            raise ReportError(f"--compare-pairs: {e}") from None
        # The same step, so both sides have points at the same spacing.
        b_ctx = context(
            url, cstart, cend, ctx.step, cmatch, config_path, timeout, label=label, max_answer_bytes=max_answer_bytes
        )

    # Fetch: every kind of series once per side.
    a_data = fetch(ctx)
    b_data = fetch(b_ctx) if b_ctx is not None else None
    pairs: dict[Key, Key] = {}
    if b_data is not None:
        b_to_a = pair(a_data.disks(), b_data.disks(), given)
        remap(b_data, b_to_a)  # B's paired disks under A's names: every figure overlays them
        pairs = {a_key: b_key for b_key, a_key in b_to_a.items()}

    # Analysis: verdicts of each side, A's ramp.
    a = analyse(ctx, a_data)
    b = analyse(b_ctx, b_data) if b_ctx is not None and b_data is not None else None
    ramp = compute("scalability", lambda: scaling(ctx, a_data, steps))

    # Render. Its modules are imported here, not at the top: matplotlib takes a second or more to
    # import, and an unreachable or hostile Prometheus (the first request, in context()) is named
    # without waiting for it (tests/report/test_report_faults.py times the command).
    from ioparallax.report.builders import build_sections, report_builders
    from ioparallax.report.page import render_parts

    sections = build_sections(report_builders(a, b, pairs, ramp))
    queries = ctx.api.queries + (b_ctx.api.queries if b_ctx else 0)
    parts = render_parts(a, b, title, sections, versions(a), queries, time.time())
    del sections
    return ReportResult(
        parts=parts,
        queries=queries,
        seconds=time.monotonic() - t0,
        disks=len(a_data.disks()),
        a=a,
        b=b,
        pairs=pairs,
        ramp=ramp,
    )


__all__ = ["ReportError", "ReportResult", "make_report", "PromError"]
