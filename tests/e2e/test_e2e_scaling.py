"""The scalability section end to end: the scaling-ramp stack (real simulators, exporters and
Prometheus with the generated rules) ramps VMs along a stated Universal Scalability Law; the report
finds the plateaus and fits sigma and kappa back within 10 %, in every view; the section renders in
headless Chromium (a screenshot is kept in .run/report-artifacts/scalability.png).

The library ramp adds a VM every 120 s; the e2e stack runs it with its times multiplied by 0.875
and its first level 40 s longer (tests/e2e/stacks.py TIME_SCALED_SCENARIOS: a VM every 105 s, the
law unchanged), which every check here reads from the stack's trace. The pool starts the stack
ahead of its tests with the scenario's period second 0 at the stack's start (``from_start``,
docs/scenarios.md "Time"), so the ramp begins at one VM and the four levels the fit needs (1 to 4
VMs, part of the rise) have settled plateaus about 8 minutes after the start, every time: the test
waits for the fourth VM and then polls until the report finds them.

The 1-VM level is 40 s longer than the others (tests/e2e/stacks.py): Prometheus' history starts
15-40 s after the period, and a plateau needs 92 s of it; without the lead the fit took levels 2 to
5, about 525 s after the start, the e2e session's longest wait. Each view's first settling time is
dropped by the report too (ioparallax.report.scaling): the VM view's first rates, over vCenter's
first samples, read a first plateau 1 % low, which four levels turn into a sigma 35 % off.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from bs4 import BeautifulSoup

from ioparallax.report import chromium, scaling
from ioparallax.report.data import fetch
from ioparallax.report.report import context
from tests.e2e.stacks import joined_at
from tests.e2e.test_e2e_scenarios import prometheus_start, wait_running
from tests.support import drawn_data_paths, require_tool, venv_tool

pytestmark = pytest.mark.e2e

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".run" / "report-artifacts"
# Four levels, the fewest the fit accepts, are enough here: the simulated views give every plateau's
# total exactly (the spread of the settled points is 0), and on exact points four levels pin sigma and
# kappa to 0.5 %. (With 0.1 % noise per plateau it would take six or more: they trade off.) The levels
# must include some of the rise: 5, 6, 7 and 8 alone are flat within 5 % and refused.
LEVELS = 4


def _fit_when_ready(stack, timeout: float) -> tuple[scaling.Scaling, float, float]:
    """Poll until the stack's history holds settled plateaus at LEVELS levels that the guest view can
    fit. The stack's period second 0 is ``stack.origin`` (from_start): nothing can be ready before the
    LEVELS-th VM has joined (by the trace); from then a poll every 10 s."""
    assert stack.origin is not None, "the scaling-ramp stack starts its period with the stack (from_start)"
    deadline = time.time() + timeout
    time.sleep(max(0.0, stack.origin + joined_at(stack.trace, LEVELS) - time.time()))
    while True:
        # The last seconds are left out: the rules of the newest scrapes may not be evaluated yet.
        start, end = prometheus_start(stack), time.time() - 10
        ctx = context(stack.urls["prometheus"], start, end, None, "", None)
        s = scaling.scaling(ctx, fetch(ctx))
        levels = {round(p.concurrency) for p in s.plateaus} if s else set()
        fitted = s is not None and "guest" in s.views and s.views["guest"].fit is not None and s.views["guest"].fit.ok
        log.info(
            "scaling-ramp at %.0f s of its period: plateaus at %s VMs, guest fit %s",
            time.time() - stack.origin,
            sorted(levels),
            "ok" if fitted else "not yet",
        )
        if (len(levels) >= LEVELS and fitted) or time.time() > deadline:
            return s, start, end
        time.sleep(10)


@pytest.mark.parametrize("scenario_stack", ["scaling-ramp"], indirect=True)
def test_report_recovers_the_scenarios_usl_coefficients(scenario_stack, tmp_path):
    stack = scenario_stack
    law = stack.trace.scenario.expect["usl"]
    step = float(str(law["step"]).rstrip("s"))
    assert stack.trace.origin == stack.origin  # the test's trace is the one the simulators read
    wait_running(stack, 0)
    # The fourth level settles in under a step after it joins (rate windows, vCenter's sample); failing
    # takes two more steps of grace.
    s, start, end = _fit_when_ready(
        stack, timeout=max(0.0, stack.origin + joined_at(stack.trace, LEVELS) + 3 * step - time.time())
    )
    assert s is not None and s.what == "VMs", s
    levels = sorted({round(p.concurrency) for p in s.plateaus})
    assert len(levels) >= LEVELS, levels
    assert all(abs(p.concurrency - round(p.concurrency)) < 0.05 for p in s.plateaus), s.plateaus
    # Every plateau's total is the law's: within 0.1 % for the guest and storage views; within 1 % for
    # the VM view, whose recorded rate1m over counters that grow in 20 s vCenter samples saws at some
    # evaluation instants even on a flat plateau (a CI run's data at 1 s resolution: 15957, 13080,
    # 13996 among 14388s, as a 1m window holds two or three samples), so a plateau's mean of ~30
    # points came out 0.34 % low once (14338.95 against 14388).
    for view, rel in (("guest", 1e-3), ("vm", 1e-2), ("storage", 1e-3)):
        for p, x in zip(s.plateaus, s.views[view].throughput):
            n = round(p.concurrency)
            per_vm = round(law["gamma"] / (1 + law["sigma"] * (n - 1) + law["kappa"] * n * (n - 1)))
            assert x == pytest.approx(n * per_vm, rel=rel), (view, n, x)
    for view in ("guest", "vm", "storage"):
        f = s.views[view].fit
        assert f is not None and f.ok, (view, f and f.statement)
        assert f.sigma.value == pytest.approx(law["sigma"], rel=0.10), (view, f.sigma, s.plateaus)
        assert f.kappa.value == pytest.approx(law["kappa"], rel=0.10), (view, f.kappa)
        assert f.gamma.value == pytest.approx(law["gamma"], rel=0.02), (view, f.gamma)
        peak = np.sqrt((1 - law["sigma"]) / law["kappa"])
        assert f.peak_n == pytest.approx(peak, rel=0.10), (view, f.peak_n)

    # The report the user gets: the section, its sentence and a figure with data, in headless Chromium.
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    html_path = ARTIFACTS / "scaling-ramp-report.html"
    done = subprocess.run(
        [
            venv_tool("ioparallax-report"),
            "--prometheus",
            stack.urls["prometheus"],
            "--start",
            f"{start:.0f}",
            "--end",
            f"{end:.0f}",
            "-o",
            str(html_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    soup = BeautifulSoup(html_path.read_text(), "lxml")
    section = soup.select_one("section#scalability")
    assert section is not None
    lead = section.select_one("p.lead").get_text(" ", strip=True)
    assert lead.startswith("guest (fio): Throughput at ") and "coherency" in lead and "peak" in lead
    svg = section.select_one("figure#scalability-usl svg")
    figure = section.select_one("figure#scalability-usl")
    assert svg is not None and len(drawn_data_paths(figure)) >= 2  # the USL curve, the linear line
    if require_tool("chromium"):
        # The section cut out of the report with the report's own head (CSS, content policy): headless
        # Chromium screenshots of a fragment (#scalability) of a multi-megabyte page come out blank.
        # The text of every figure is drawn with glyphs the page defines once (svg.glyphs): the cut
        # takes them too, and every glyph the section uses must be there (without them the screenshot
        # had the curve and no tick label, axis title or legend text).
        glyphs = soup.select_one("svg.glyphs")
        assert glyphs is not None
        alone = ARTIFACTS / "scalability.html"
        alone.write_text(f"<!DOCTYPE html><html>{soup.head}<body>{glyphs}{section}</body></html>", encoding="utf-8")
        cut = BeautifulSoup(alone.read_text(), "lxml")
        defined = {el["id"] for el in cut.select("[id]")}
        used = {u.get("xlink:href", u.get("href", ""))[1:] for u in cut.select("figure#scalability-usl use")}
        assert any(g.startswith("DejaVu") for g in used)  # the figure has text
        assert used <= defined, sorted(used - defined)[:10]
        png = ARTIFACTS / "scalability.png"
        chromium.screenshot(alone.resolve().as_uri(), png, 1400, 1400)
        from PIL import Image

        with Image.open(png) as im:
            colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
        # Not blank: the figure's view colour (guest green) and many shades (text, lines) are drawn.
        assert colours is None or len(colours) > 50, colours and len(colours)
        assert colours is None or any(rgb == (0x2E, 0x7D, 0x32) for _, rgb in colours)
