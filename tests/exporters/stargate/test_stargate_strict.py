"""The strict reader of the vdisk detail view (strict.py) reads what the lxml path reads.

Proved on every page the Stargate simulator renders (every scenario of the catalogue, every page
build, several moments of each scenario) and every detail view of every capture under tests/:
the strict reader reads each of them (so the fast path is the one taken) and gives the lxml
path's record. Hostile variants of a real page must fall back to lxml, and whatever the strict
reader does with a page, ``parse_vdisk_page`` answers what lxml answers (the same record, or the
same error), including for markup spliced at random into real pages.
"""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ioparallax.exporters.stargate.parse import StargatePageError, parse_vdisk_page, parse_vdisk_page_lxml
from ioparallax.exporters.stargate.strict import Unrecognised, read_vdisk_page
from ioparallax.exporters.stargate.target import DETAIL_READS
from ioparallax.simulators.scenario.model import list_scenarios
from ioparallax.simulators.stargate.server import StargateCluster
from ioparallax.simulators.stargate.synthetic import synthetic_scenario
from tests.exporters.stargate.hostile import FROZEN, real_pages
from tests.exporters.stargate.test_stargate_exporter import scenario_with_build

TESTS = Path(__file__).resolve().parent.parent.parent
#: Moments of a scenario (seconds after its start) whose pages are compared: the start, ramps,
#: and late enough for 1-hour working sets and up-migration counts.
MOMENTS = (0, 7, 61, 333, 1800, 3700)


def outcome(read, page: bytes, *args):
    """The record a reader gives, or its error's message."""
    try:
        return read(page, *args)
    except StargatePageError as exc:
        return f"StargatePageError: {exc}"


def assert_same(page: bytes) -> None:
    """parse_vdisk_page (strict, or its fallback) answers what the lxml path answers."""
    for check_headers in (True, False):
        assert outcome(parse_vdisk_page, page, check_headers) == outcome(parse_vdisk_page_lxml, page, check_headers)


def assert_strict_reads(page: bytes) -> None:
    """The strict reader reads the page, and gives the lxml path's record, which is complete."""
    got = read_vdisk_page(page)
    want = parse_vdisk_page_lxml(page, True)
    assert got == want
    assert got.unknown == () and got.read_latency is not None and got.up_migrations
    assert parse_vdisk_page(page).strict


@pytest.mark.parametrize("build", [2014, 2015, 2016])
@pytest.mark.parametrize("scenario", list_scenarios())
def test_strict_reader_reads_every_simulator_page_as_lxml_does(scenario, build):
    sim = StargateCluster(scenario_with_build(scenario, build), clock=lambda: FROZEN)
    pages = 0
    for moment in MOMENTS:
        now = sim.start_time + moment
        for cvm in sim.cvms:
            for d in sim.hosted(cvm, now):
                page = sim.render_detail(cvm, d.vdisk_id, now)
                assert page is not None
                assert_strict_reads(page.encode())
                pages += 1
            # The page of every hosted vdisk at once (no vdisk id asked): sections repeat, so
            # the strict reader leaves it to lxml.
            whole = sim.render_detail(cvm, None, now)
            if whole is not None and whole.count("Ops and Randomness") > 1:
                with pytest.raises(Unrecognised, match="repeated section"):
                    read_vdisk_page(whole.encode())
                assert_same(whole.encode())
    assert pages >= len(MOMENTS)


@pytest.mark.parametrize("build", [2014, 2015, 2016])
def test_strict_reader_reads_the_benches_synthetic_pages_as_lxml_does(build):
    """The synthetic vdisks the benches probe (stargate-simulator --synthetic-vdisks, every
    workload template, dealt over several CVMs), at several moments."""
    sim = StargateCluster(synthetic_scenario(48, page_build=build, cvm_count=4), clock=lambda: FROZEN)
    pages = 0
    for moment in (0, 13, 59, 600):
        now = sim.start_time + moment
        for cvm in sim.cvms:
            for d in sim.hosted(cvm, now):
                assert_strict_reads(sim.render_detail(cvm, d.vdisk_id, now).encode())
                pages += 1
    assert pages == 4 * 48


def _capture_detail_views() -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(TESTS.rglob("*.tar.gz")):
        with tarfile.open(path) as tar:
            try:
                manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            except (KeyError, json.JSONDecodeError):
                continue
            if manifest.get("kind") != "stargate-capture":
                continue
            for page in manifest["pages"]:
                if page["kind"] == "detail" and page.get("file"):
                    body = tar.extractfile(page["file"])
                    assert body is not None
                    out.append((f"{path.name}:{page['file']}", body.read()))
    return out


CAPTURED = _capture_detail_views()


def test_the_captures_hold_detail_views():
    assert len(CAPTURED) >= 4
    assert {name.split(":")[0] for name, _ in CAPTURED} >= {
        "simulator-zero-heavy-2016.tar.gz",
        "simulator-ilm-upmigration-2014.tar.gz",
        "mutated-extra-table-row-column.tar.gz",
    }


@pytest.mark.parametrize("name, page", CAPTURED, ids=[name for name, _ in CAPTURED])
def test_strict_reader_reads_every_captured_page_as_lxml_does(name, page):
    assert_same(page)
    if name.startswith("mutated-"):  # a page with things the parse does not read: lxml reports them
        with pytest.raises(Unrecognised):
            read_vdisk_page(page)
        assert parse_vdisk_page(page).unknown
    else:
        assert_strict_reads(page)


# --------------------------------------------------------------------------------- hostile pages
@pytest.fixture(scope="module")
def page() -> str:
    return next(iter(real_pages(1)[1].values()))


_BAR = '<td bgcolor="#3b6fb6" width="6"></td>'
HOSTILE = {
    "upper-case tags": lambda p: p.replace("<td>", "<TD>"),
    "tbody": lambda p: p.replace('<table border="1" cellpadding="2">\n', '<table border="1" cellpadding="2"><tbody>'),
    "comment": lambda p: p.replace("<td>398</td>", "<td>3<!-- x -->98</td>"),
    "numeric entity": lambda p: p.replace("&lt;", "&#60;"),
    "entity without semicolon": lambda p: p.replace("&lt;", "&lt"),
    "non-ascii": lambda p: p.replace("Read Source", "Read Sourcé"),
    "nul byte": lambda p: p.replace("<td>398</td>", "<td>3\x0098</td>"),
    "doctype": lambda p: "<!DOCTYPE html>\n" + p,
    "another tag for the banner": lambda p: p.replace('<table width="100%"', '<tablet width="100%"', 1),
    "extra table": lambda p: p.replace("</body>", "<table><tr><td>1</td></tr></table></body>"),
    "unknown section": lambda p: p.replace("Working Set Sizes", "Working Set Estimates"),
    "repeated section": lambda p: p.replace("Write Destination", "Read Source"),
    "unknown read source": lambda p: p.replace("<td>Cache DRAM</td>", "<td>Cloud Tier</td>"),
    "unknown ops row": lambda p: p.replace("<td>IO Rate (MB/s)</td>", "<td>Queue (ops)</td>"),
    "extra column": lambda p: p.replace("<th>Percent</th></tr>", "<th>Percent</th><th>Trend</th></tr>"),
    "renamed column": lambda p: p.replace("<th>Data (MB/s)</th>", "<th>Data (KB/s)</th>"),
    "colspan header": lambda p: p.replace("<th>2 min</th>", '<th colspan="1">2 min</th>'),
    "two header rows": lambda p: p.replace(
        "<tr><th></th><th>2 min</th>", "<tr><th></th></tr><tr><th></th><th>2 min</th>"
    ),
    "no header": lambda p: p.replace("<tr><th></th><th>Read</th><th>Write</th><th>Total</th></tr>", ""),
    "text in a bar cell": lambda p: p.replace(_BAR, '<td bgcolor="#3b6fb6" width="6">7</td>', 1),
    "gt in an attribute": lambda p: p.replace(_BAR, '<td title="a>b"></td>', 1),
    "tag in a cell": lambda p: p.replace("<td>398</td>", "<td><b>398</b></td>"),
    "attribute on a value cell": lambda p: p.replace("<td>398</td>", '<td align="right">398</td>'),
    "nan": lambda p: p.replace("<td>398</td>", "<td>nan</td>"),
    "negative": lambda p: p.replace("<td>398</td>", "<td>-5</td>"),
    "huge": lambda p: p.replace("<td>398</td>", "<td>" + "9" * 400 + "</td>"),
    "bucket renamed": lambda p: p.replace("1 ms &lt;= x &lt; 2 ms", "1 ms &lt;= x &lt; 3 ms"),
    "bucket missing": lambda p: p.replace("<tr><td>2 ms &lt;= x &lt; 5 ms</td>", "<tr><td>Total</td>", 1),
    "up-migration row": lambda p: p.replace("Last 300 seconds", "Last 5 minutes"),
    "wss row": lambda p: p.replace("Union WSS (MB)", "Shared WSS (MB)"),
    "wss window": lambda p: p.replace("<th>1 hr</th>", "<th>24 hr</th>"),
    "text between tables": lambda p: p.replace("</table>\n<br>", "</table>\nnote<br>", 1),
    "p between heading and table": lambda p: p.replace("</h4>\n<table", "</h4>\n<p>x</p><table", 1),
    "heading elsewhere": lambda p: p.replace(
        "<h4>VDisk 1000 Read Source</h4>", "<h4>VDisk 1000 Read Source</h4><h4>VDisk 1000 Read Source</h4>"
    ),
    "no end": lambda p: p.replace("</body></html>", ""),
    "not hosted": lambda p: p[: p.index("<br>")] + "<p>VDisk 1000 is not hosted by this Stargate</p>\n</body></html>\n",
    "empty": lambda p: "",
    "title as a heading": lambda p: p.replace("<title>VDisk Stats</title>", "<title>VDisk 1000 Read Source</title>"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_pages_fall_back_to_lxml(page, name):
    """Each variant is not the strict reader's to read; the answer is lxml's (record or error)."""
    assert "<h4>VDisk 1000 Read Source</h4>" in page and "<td>398</td>" in page and _BAR in page
    hostile = HOSTILE[name](page).encode("utf-8")
    assert hostile != page.encode()
    with pytest.raises(Unrecognised):
        read_vdisk_page(hostile)
    assert_same(hostile)


@pytest.mark.parametrize(
    "name, change",
    [
        ("spaces in cells", lambda p: p.replace("<td>398</td>", "<td>  398 \n</td>")),
        ("nbsp in a label", lambda p: p.replace("<td>Cache DRAM</td>", "<td>Cache&nbsp;DRAM</td>")),
        ("crlf", lambda p: p.replace("\n", "\r\n")),
        ("b headings", lambda p: p.replace("<h4>", "<br><b>").replace("</h4>", "</b><br>")),
        ("no bar graphs", lambda p: p.replace(_BAR, "").replace('<td width="6"></td>', "")),
        ("thousands separator", lambda p: p.replace("<td>5984</td>", "<td>5,984</td>")),
        ("blank bar cells", lambda p: p.replace(_BAR, "<td></td>")),
    ],
)
def test_variants_the_strict_reader_reads_give_the_lxml_record(page, name, change):
    variant = change(page).encode()
    assert variant != page.encode()
    assert_strict_reads(variant)


@pytest.mark.parametrize("cut", [0, 1, 50, 200, 2000, 5000, 9000, 12000, 18000, -30, -14, -2])
def test_truncated_pages_fall_back(page, cut):
    body = page.encode()[:cut]
    with pytest.raises(Unrecognised):
        read_vdisk_page(body)
    assert_same(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    at=st.integers(min_value=0, max_value=10**6),
    text=st.sampled_from(
        ["<", ">", "&", "&lt;", "&amp;", "&nbsp;", "&#60;", " ", "\n", "\t", "\r", "\x00", "é", "\x0b", "\xa0", '"']
        + ["<td>", "</td>", "<th>", "</th>", "<tr>", "</tr>", "<b>", "</b>", "<br>", "<table>", "</table>"]
        + ["<!-- -->", "<p>", "Total", "1", "%", "-", ",", ".", "x", "VDisk 1000 Read Source", "<td width=6></td>"]
    )
    | st.text(alphabet='<>/tdhr "=x&;\n5%', min_size=1, max_size=8),
    times=st.integers(min_value=1, max_value=3),
)
def test_markup_spliced_into_a_real_page_reads_as_lxml_reads_it(page, at, text, times):
    """Whatever is spliced anywhere into a real page, the answer is lxml's: the strict reader
    either reads the page the same way or leaves it to lxml."""
    body = page
    for i in range(times):
        k = (at * (i + 7919)) % (len(body) + 1)
        body = body[:k] + text + body[k:]
    assert_same(body.encode("utf-8"))


def test_the_reads_are_counted_by_reader(page):
    from ioparallax.exporters.stargate.parse import VDiskDetail

    strict = parse_vdisk_page(page.encode())
    fallback = parse_vdisk_page(page.replace("<td>", "<TD>").encode())
    assert strict == fallback and strict.strict and not fallback.strict
    before = (DETAIL_READS.strict, DETAIL_READS.lxml)
    assert DETAIL_READS.add({"1": strict, "2": fallback, "3": None, "4": dataclasses.replace(strict)}) == (2, 1)
    assert (DETAIL_READS.strict, DETAIL_READS.lxml) == (before[0] + 2, before[1] + 1)
    [family] = DETAIL_READS.collect()
    assert {s.labels["reader"]: s.value for s in family.samples} == {
        "strict": float(before[0] + 2),
        "lxml": float(before[1] + 1),
    }
    assert isinstance(strict, VDiskDetail)


def test_the_memos_stay_bounded_whatever_the_pages(page, monkeypatch):
    """Rows, bar graphs and cell texts are memoised by their bytes, but never a huge one, and
    never more than the caps: a hostile page cannot grow the exporter's memory through them."""
    from ioparallax.exporters.stargate import strict

    texts, rows, bars = dict(strict._TEXTS), dict(strict._ROWS), set(strict._BAR_GRAPHS)
    try:
        strict._TEXTS.clear()
        strict._ROWS.clear()
        strict._BAR_GRAPHS.clear()
        huge_bar = '<td width="6"></td>' * 5000  # ~95 kB of empty cells after a row's values
        huge_label = "Last 300 seconds" + " " * 5000
        hostile = page.replace('<td width="6"></td></tr>', huge_bar + "</tr>", 1).replace(
            "Last 300 seconds", huge_label, 1
        )
        assert read_vdisk_page(hostile.encode()) == parse_vdisk_page_lxml(hostile.encode())
        assert max(len(k) for k in strict._ROWS) <= strict._MEMO_ROW
        assert max(len(k) for k in strict._BAR_GRAPHS) <= strict._MEMO_ROW
        assert max(len(k) for k in strict._TEXTS) <= strict._MEMO_CELL
        monkeypatch.setattr(strict, "_MEMO_ROWS", len(strict._ROWS))
        monkeypatch.setattr(strict, "_MEMO", len(strict._TEXTS))
        before = (len(strict._ROWS), len(strict._TEXTS), len(strict._BAR_GRAPHS))
        for n in range(20):  # other labels, other rows: nothing more is kept
            other = page.replace("<td>Cache DRAM</td>", f"<td>Cache&nbsp; DRAM{' ' * n}</td>")
            assert read_vdisk_page(other.encode()) == parse_vdisk_page_lxml(other.encode())
        assert (len(strict._ROWS), len(strict._TEXTS)) == before[:2]
    finally:
        strict._TEXTS.clear()
        strict._TEXTS.update(texts)
        strict._ROWS.clear()
        strict._ROWS.update(rows)
        strict._BAR_GRAPHS.clear()
        strict._BAR_GRAPHS.update(bars)
