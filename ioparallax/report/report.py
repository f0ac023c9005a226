"""Make the report: the context(s), the data, the sections, the page."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from ioparallax.mixin.config import load_config
from ioparallax.report.builders import build_sections
from ioparallax.report.data import choose_step
from ioparallax.report.page import render_parts
from ioparallax.report.promapi import DEFAULT_MAX_ANSWER_BYTES, PromAPI, PromError
from ioparallax.report.sections import ReportContext
from ioparallax.report.summary import dataset
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
    missing_views: dict[str, str] = field(default_factory=dict)
    context: ReportContext | None = None

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
    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        raise ReportError(f"config: {e}") from None
    api = PromAPI(prometheus, timeout=timeout, max_answer_bytes=max_answer_bytes)
    # The first request: an unreachable Prometheus stops here with its URL and the cause.
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
        api=api, start=start, end=end, step=step, config=cfg, match=match, label=label, shared={"buildinfo": build}
    )


def versions(ctx: ReportContext) -> dict[str, str]:
    ds = dataset(ctx)
    out = {"Prometheus": ctx.shared.get("buildinfo", {}).get("version", "not exposed by the query API")}
    fio = sorted(r["metric"].get("version", "") for r in ds.instant.get("fio_versions", []))
    out["fio (fio_job_info version)"] = ", ".join(v for v in fio if v) or "not exposed"
    builds = sorted(r["metric"].get("build_version", "") for r in ds.instant.get("stargate_builds", []))
    out["Stargate build (stargate_cvm_info)"] = ", ".join(b for b in builds if b) or "not exposed"
    out["ioparallax exporters"] = "not exposed (the exporters publish no build_info metric)"
    try:
        from importlib.metadata import version

        out["ioparallax-report"] = version("ioparallax")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
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
    steps: list | None = None,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> ReportResult:
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
    if steps:
        ctx.shared["steps"] = steps  # --steps: the scalability ramp's boundaries (ioparallax.report.ramps.Step)
    if compare is not None:
        from ioparallax.report.pairing import load_pairs, merge_matchers, pair, remap

        label, url, cstart, cend = compare[:4]
        own = compare[4] if len(compare) > 4 else None
        # The matcher form: B's matchers replace A's on the labels they name (another cluster).
        cmatch = match if own is None else merge_matchers(match, own)
        try:
            pairs = load_pairs(compare_pairs) if compare_pairs else {}
        except ConfigError as e:
            raise ReportError(f"--compare-pairs: {e}") from None
        # The same step, so both sides have points at the same spacing.
        ctx.compare = context(
            url, cstart, cend, ctx.step, cmatch, config_path, timeout, label=label, max_answer_bytes=max_answer_bytes
        )
        b_ds = dataset(ctx.compare)
        a_ds = dataset(ctx)
        b_to_a = pair(a_ds.disks(), b_ds.disks(), pairs)
        remap(b_ds, b_to_a)  # B's paired disks under A's names: every figure overlays them
        ctx.shared["pairs"] = {a: b for b, a in b_to_a.items()}
    ds = dataset(ctx)
    sections = build_sections(ctx)
    if compare is not None:
        from ioparallax.report.compare import compare_section

        sections.insert(2, compare_section(ctx))
    queries = ctx.api.queries + (ctx.compare.api.queries if ctx.compare else 0)
    parts = render_parts(ctx, title, sections, versions(ctx), queries, time.time())
    del sections
    return ReportResult(
        parts=parts,
        queries=ctx.api.queries + (ctx.compare.api.queries if ctx.compare else 0),
        seconds=time.monotonic() - t0,
        disks=len(ds.disks()),
        missing_views=dict(ctx.missing_views),
        context=ctx,
    )


__all__ = ["ReportError", "ReportResult", "make_report", "PromError"]
