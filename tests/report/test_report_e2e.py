"""The report end to end: a real stack (zero-heavy: simulators, exporters, a real Prometheus with the
generated rules), the real console script writing HTML and PDF, the HTML opened in real headless
Chromium and the PDF rendered by poppler's pdftoppm.

Screenshots of the summary and of one VM disk page, the HTML, the PDF and its page images are kept in
.run/report-artifacts/ (printed at the end) for a person to look at.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from ioparallax.report import chromium
from tests.support import drawn_data_paths, require_tool, venv_tool

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".run" / "report-artifacts"
WARMUP_S = 60
RANGE_S = 75


def needs_chromium(test):
    """The test uses headless Chromium and pdftoppm (Debian chromium, poppler-utils): it fails when
    they are missing (`make deps` installs them), never skips."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        require_tool("chromium")
        require_tool("pdftoppm")
        return test(*args, **kwargs)

    return wrapper


@pytest.fixture(scope="module")
def stack(demo_stack):
    """`make demo`'s stack (zero-heavy, the shipped rules), pooled with the e2e stacks and started
    with the session: old enough by now, else waited for until the report's range is full."""
    wait = demo_stack.started_at + WARMUP_S + RANGE_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    return demo_stack


def run_report(stack, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            venv_tool("ioparallax-report"),
            "--prometheus",
            stack.urls["prometheus"],
            "--start",
            f"-{RANGE_S}s",
            "-o",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def report(stack):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    html, pdf = ARTIFACTS / "report.html", ARTIFACTS / "report.pdf"
    done = run_report(stack, html, "--pdf", str(pdf))
    assert done.returncode == 0, done.stderr
    return html, pdf, done.stdout


def cells(html: str) -> dict[tuple[str, str], list[str]]:
    """(vm, disk) -> the states of its row in the summary's verdict table."""
    soup = BeautifulSoup(html, "lxml")
    out = {}
    for tr in soup.select("section#verdicts table.verdicts tbody tr"):
        vm, disk = tr.th.a.get_text("\n").split("\n")
        out[(vm, disk)] = [td.select_one(".state").get_text() for td in tr.select("td.v")]
    return out


def test_report_of_a_real_stack_gives_the_scenarios_verdicts(report):
    html_path, _, stdout = report
    html = html_path.read_text()
    assert re.search(r"wrote .*report.html .* 2 VM disks, \d+ Prometheus queries", stdout)
    got = cells(html)
    # zero-heavy: zero reads and writes and the fio hygiene (zero_buffers) distorted, the rest OK.
    expected = ["OK", "Distorted", "Distorted", "OK", "OK", "OK", "Distorted"]
    assert got == {("bench-01", "scsi0:1"): expected, ("bench-02", "scsi0:1"): expected}
    assert "Views missing" not in html
    # One page per VM disk, each with its four figures; the appendix has every figure's PromQL and CSV.
    soup = BeautifulSoup(html, "lxml")
    assert len(soup.select("section.disk")) == 2
    assert len(soup.select("section.disk figure")) == 8
    assert len(soup.select("#appendix a[download]")) >= 8
    assert "vm_disk:ioparallax_guest_read_bytes:rate1m" in soup.select_one("#appendix").get_text()


def test_compare_puts_a_second_range_on_the_same_figures(stack, tmp_path):
    out = tmp_path / "c.html"
    done = run_report(stack, out, "--compare", f"B=-{RANGE_S // 2}s..now")
    assert done.returncode == 0, done.stderr
    soup = BeautifulSoup(out.read_text(), "lxml")
    table = soup.select_one("section#compare table.compare")
    rows = table.select("tbody tr")
    assert [r.th.get_text(" ") for r in rows] == ["bench-01 scsi0:1", "bench-02 scsi0:1"]
    # Same stack, steady load: both ranges read about the same guest bytes/s (delta within 15 %).
    guest = rows[0].select("td")[0].get_text("|").split("|")
    assert guest[2].endswith("%") and abs(int(guest[2].split()[0])) <= 15, guest
    caption = soup.select_one("#disk-bench-01-scsi0-1-three-views figcaption").get_text()
    assert "Dashed: B" in caption


def net_requests_of_the_page(netlog: Path) -> list[str]:
    """URLs of the network requests the page made (Chromium's own, "not an origin", go to a dead proxy)."""
    data = json.loads(netlog.read_text())
    names = {v: k for k, v in data["constants"]["logEventTypes"].items()}
    out = []
    for e in data["events"]:
        p = e.get("params", {})
        if names.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in p and p.get("initiator") != "not an origin":
            out.append(p.get("url", "?"))
    return out


@needs_chromium
def test_html_in_headless_chromium_and_pdf_pages(report):
    html_path, pdf_path, _ = report
    netlog = ARTIFACTS / "netlog.json"
    done = chromium.run(
        html_path.resolve().as_uri(), "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", "--dump-dom"
    )
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    assert net_requests_of_the_page(netlog) == []
    # The DOM as Chromium built it: every figure has an SVG with drawn data paths, or says why not.
    soup = BeautifulSoup(done.stdout, "lxml")
    figures = soup.select("figure")
    assert len(figures) == 8
    for f in figures:
        assert f.figcaption and len(f.figcaption.get_text()) > 40
        if "empty" in (f.get("class") or []):
            continue
        data = drawn_data_paths(f)
        assert len(data) >= (6 if f.get("id", "").endswith("three-views") else 1), f.get("id")
    assert not soup.select("script") and not soup.select("[src^=http]") and not soup.select("link[href]")

    summary, disk = ARTIFACTS / "summary.png", ARTIFACTS / "disk-page.png"
    chromium.screenshot(html_path.resolve().as_uri(), summary, 1400, 1100)
    # One VM disk page alone (headless Chromium paints a #fragment's page unreliably): the same HTML
    # with every other section removed.
    page = BeautifulSoup(html_path.read_text(), "lxml")
    for section in page.select("section"):
        if section.get("id") != "disk-bench-01-scsi0-1":
            section.decompose()
    page.select_one("nav.toc").decompose()
    one = ARTIFACTS / "disk-page.html"
    one.write_text(str(page))
    chromium.screenshot(one.resolve().as_uri(), disk, 1400, 2200)
    for png in (summary, disk):
        assert png.stat().st_size > 20_000

    for old in ARTIFACTS.glob("page-*.png"):
        old.unlink()
    subprocess.run(["pdftoppm", "-png", "-r", "40", str(pdf_path), str(ARTIFACTS / "page")], check=True, timeout=120)
    pages = sorted(ARTIFACTS.glob("page-*.png"))
    assert len(pages) >= 3  # the summary, then at least a page per VM disk
    import matplotlib.image as mpimg

    for page in pages:
        img = mpimg.imread(page)[:, :, :3]
        ink = float((img < 0.9).any(axis=2).mean())
        assert ink > 0.01, f"{page.name} is blank ({ink:.4f} of its pixels have ink)"
    print(f"\nreport artifacts (screenshots, HTML, PDF, page images): {ARTIFACTS}", file=sys.stderr)


def test_no_vcenter_the_view_is_named_missing_and_its_cells_are_not_measurable(no_vcenter_stack, tmp_path):
    """A stack whose vCenter exporter was stopped once it had been scraped (with the session: the
    VM rules' 1m windows have emptied since), reported on a range after its series ended."""
    stack = no_vcenter_stack
    wait = stack.vcenter_stopped_at + 75 - time.monotonic()  # the VM rules' 1m windows empty,
    if wait > 0:  # `up` of the vCenter target reads 0
        time.sleep(wait)
    out = tmp_path / "r.html"
    done = run_report(stack, out, "--start=-10s")
    assert done.returncode == 0, done.stderr
    assert re.search(
        r'view missing: vm: every target of up\{job="vcenter"\} or up\{job="prism"\} was down in the whole range',
        done.stdout,
    ), done.stdout
    html = out.read_text()
    assert "Views missing" in html and "VM view (vCenter or Prism exporter)" in html
    row = cells(html)[("bench-01", "scsi0:1")]
    # Views agree and bursts need the VM view; zero shares and cache fit (storage) do not. The guest's
    # partitions are matched to VM disks through vCenter's disk UUID: misalignment is not measurable.
    assert row[:6] == ["Not measurable", "Distorted", "Distorted", "OK", "Not measurable", "Not measurable"]
    soup = BeautifulSoup(html, "lxml")
    cell = soup.select("section#verdicts table.verdicts tbody tr")[0].select("td.v")[5].get_text()
    assert "matched to VM disks by vCenter's (or Prism's) disk UUID" in cell, cell
