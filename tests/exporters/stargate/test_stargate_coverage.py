"""Parse coverage (issue 26): what a page holds that the parser does not read (a table, a row, a
column, a cell) is reported in the parsed record, counted per probe in
``stargate_parse_unknown_fields`` and ``stargate_parse_unknown_field_pages`` and logged once per page build; never dropped silently.

The pages are the simulator's (every build) and the same pages mutated with an extra table, row
and column; the end-to-end cases run the real exporter against a fake Stargate on loopback.
"""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest

from ioparallax.exporters.stargate import target as probe_module
from ioparallax.exporters.stargate.collector import MAX_UNKNOWN_SERIES
from ioparallax.exporters.stargate.parse import parse_main_page, parse_vdisk_page
from ioparallax.exporters.stargate.parsepool import parse_details
from ioparallax.simulators.stargate.server import StargateCluster
from tests.exporters.stargate.hostile import FROZEN, HostileStargate, real_pages
from tests.exporters.stargate.test_stargate_exporter import scenario_with_build
from tests.exporters.stargate.test_stargate_faults import exporter, scrape, series, site, value  # noqa: F401 (fixture)
from tests.support import promtool_check_metrics

BASE = "http://127.0.0.1:2009/"


@pytest.fixture(scope="module")
def pages():
    return real_pages(3)


def _fresh_log():
    probe_module._LOGGED_UNKNOWN.clear()


@pytest.mark.parametrize("build", [2014, 2015, 2016])
@pytest.mark.parametrize("scenario", ["zero-heavy", "ilm-upmigration"])
def test_the_simulators_pages_hold_nothing_unknown(build, scenario):
    """Every page of every build the reference describes is read whole: no false alarm."""
    with StargateCluster(scenario_with_build(scenario, build), clock=lambda: FROZEN) as sim:
        for cvm in sim.cvms:
            main = parse_main_page(sim.render_main(cvm).encode(), BASE)
            assert main.unknown == [], (cvm, main.unknown)
            for d in sim.hosted(cvm):
                detail = parse_vdisk_page(sim.render_detail(cvm, d.vdisk_id).encode(), check_headers=True)
                assert detail.unknown == (), (cvm, d.vdisk_id, detail.unknown)


# ----------------------------------------------------------------------------------- mutations
def extra_main_column(main: str) -> str:
    """Hosted VDisks with a column 'Latency (ms)' after '% busy' (header and every row)."""
    main = main.replace("<th>% busy</th></tr>", '<th>% busy</th><th rowspan="1">Latency (ms)</th></tr>', 1)
    main = re.sub(r"(<tr><th></th><th></th><th></th><th></th><th>KB</th>.*?)</tr>", r"\1<th></th></tr>", main, count=1)
    return re.sub(r"(<tr><td><a href=\"/vdisk_stats[^\n]*?)</tr>", r"\1<td>7</td></tr>", main)


def extra_main_table(main: str) -> str:
    banner = (
        '<table width="100%" bgcolor="#d8d8d8" cellpadding="3"><tr><td align="center">'
        '<font size="+1">Erasure&nbsp;Coding</font></td></tr></table>\n'
        "<table><tr><th>Strip</th><th>Size</th></tr><tr><td>4/1</td><td>12</td></tr></table>\n"
    )
    return main.replace("</body>", banner + "</body>", 1)


def extra_overview_row(main: str) -> str:
    return main.replace(
        "<tr><td><b>SVM id</b></td>", "<tr><td><b>Hypervisor</b></td><td>AHV</td></tr>\n<tr><td><b>SVM id</b></td>", 1
    )


def extra_source_row(detail: str) -> str:
    """Read Source with a row 'Cloud Tier' before Total."""
    return re.sub(
        r"(Read Source</h4>.*?)(<tr><td>Total</td>)",
        r"\1<tr><td>Cloud Tier</td><td>3</td><td>5%</td></tr>\2",
        detail,
        count=1,
        flags=re.S,
    )


def extra_source_column(detail: str) -> str:
    """Read Source with a column 'Latency (usec)' (header and rows)."""
    head = "<tr><th>Source</th><th>Data (MB/s)</th><th>Percent</th></tr>"
    assert head in detail
    detail = detail.replace(head, head[:-5] + "<th>Latency (usec)</th></tr>", 1)
    start = detail.index("Read Source</h4>")
    end = detail.index("</table>", start)
    part = re.sub(r"(<tr><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td>)</tr>", r"\1<td>90</td></tr>", detail[start:end])
    return detail[:start] + part + detail[end:]


def extra_detail_section(detail: str, vdisk_id: int) -> str:
    section = (
        f"<br><h4>VDisk {vdisk_id} Erasure Coding</h4>\n"
        '<table border="1"><tr><th></th><th>Read</th></tr><tr><td>Strips</td><td>3</td></tr></table>\n'
        "<p>Notes</p><table><tr><td>a</td><td>b</td></tr></table>\n"
        "<br><table><tr><td>c</td><td>d</td></tr></table>\n"
    )
    return detail.replace("</body>", section + "</body>", 1)


def test_main_page_with_an_extra_table_row_and_column(pages):
    main, _ = pages
    plain = parse_main_page(main.encode(), BASE)
    mutated = parse_main_page(extra_overview_row(extra_main_table(extra_main_column(main))).encode(), BASE)
    assert set(mutated.unknown) == {
        ("hosted_vdisks", "column", "Latency (ms)"),
        ("erasure_coding", "table", "erasure coding"),
        ("overview", "row", "Hypervisor"),
    }
    # What the parser reads is read the same.
    assert mutated.vdisks == plain.vdisks


def test_main_page_with_a_table_no_banner_names(pages):
    main, _ = pages
    bare = main.replace(
        "</body>", "<br><table><tr><td>x</td><td>1</td></tr><tr><td>y</td><td>2</td></tr></table></body>"
    )
    got = parse_main_page(bare.encode(), BASE)
    assert got.unknown == [("untitled", "table", "(a table without a heading)")]
    assert got.vdisks == parse_main_page(main.encode(), BASE).vdisks


def test_detail_view_with_an_extra_table_row_and_column(pages):
    _, details = pages
    vid, html = next(iter(details.items()))
    plain = parse_vdisk_page(html.encode())
    mutated_html = extra_detail_section(extra_source_column(extra_source_row(html)), vid)
    mutated = parse_vdisk_page(mutated_html.encode())
    assert set(mutated.unknown) == {
        ("read_source", "row", "Cloud Tier"),
        ("read_source", "column", "Latency (usec)"),
        ("erasure_coding", "table", "erasure coding"),
        ("notes", "table", "Notes"),  # titled by the element before it
        ("untitled", "table", "(a table without a heading)"),
    }
    # The known rows are read as before; the unknown row is kept (as its snake_case name).
    assert {k: v for k, v in mutated.read_sources.items() if k != "cloud_tier"} == plain.read_sources
    assert mutated.read_sources["cloud_tier"] == (3 * 2**20, 0.05)
    assert dataclasses.replace(mutated, unknown=(), read_sources=plain.read_sources) == plain


def test_column_names_are_checked_on_sampled_pages_and_counts_on_every_page(pages):
    """A renamed column (same count) is named on the pages checked (one in a batch); an extra
    column changes the count and is named on every page."""
    _, details = pages
    html = next(iter(details.values()))
    renamed = html.replace("<th>Data (MB/s)</th>", "<th>Data (KB/s)</th>")
    assert ("read_source", "column", "Data (KB/s)") in parse_vdisk_page(renamed.encode(), check_headers=True).unknown
    assert parse_vdisk_page(renamed.encode(), check_headers=False).unknown == ()
    batch = parse_details([("/a", renamed.encode()), ("/b", renamed.encode())])
    assert [bool(d.unknown) for d, _, _ in batch] == [True, False]
    extra = extra_source_column(html).encode()
    assert ("read_source", "column", "Latency (usec)") in parse_vdisk_page(extra, check_headers=False).unknown


def test_a_renamed_histogram_bucket_is_reported(pages):
    _, details = pages
    html = next(iter(details.values())).replace("1 ms &lt;= x &lt; 2 ms", "1 ms &lt;= x &lt; 3 ms")
    got = parse_vdisk_page(html.encode()).unknown
    assert ("frontend_read_latency", "row", "1 ms <= x < 3 ms") in got
    assert ("frontend_write_latency", "row", "1 ms <= x < 3 ms") in got


def test_a_cell_that_is_not_a_number_is_named_with_its_column(pages):
    main, _ = pages
    bad = re.sub(r"(<tr><td><a href=\"/vdisk_stats[^\n]*?<td>)(\d+)(</td><td>\d*</td></tr>)", r"\1n/a\3", main, count=1)
    page = parse_main_page(bad.encode(), BASE)
    assert len(page.rejected) == 1
    assert page.unknown == [("hosted_vdisks", "cell", "Avg qlen")]


# ----------------------------------------------------------------------------- end to end
def mutated_site(pages):
    main, details = pages
    main = extra_main_table(extra_main_column(main))
    details = {vid: extra_detail_section(extra_source_row(html), vid) for vid, html in details.items()}
    return site(main, details)


def test_probe_counts_unknown_fields_and_logs_each_once(pages, exporter, caplog):  # noqa: F811
    _fresh_log()
    caplog.set_level(logging.WARNING)
    srv = exporter()
    with HostileStargate(mutated_site(pages)) as fake:
        status, text, _ = scrape(srv, fake.target)
        assert status == 200 and value(text, "stargate_up") == 1
        assert value(text, "stargate_parse_unknown_fields") == 6
        unknown = {
            tuple(dict(labels)[k] for k in ("page", "table", "kind", "item")): value(text, name, **dict(labels))
            for name, labels in series(text)
            if name == "stargate_parse_unknown_field_pages"
        }
        assert unknown == {
            ("main", "hosted_vdisks", "column", "Latency (ms)"): 1,
            ("main", "erasure_coding", "table", "erasure coding"): 1,
            ("vdisk", "read_source", "row", "Cloud Tier"): 3,  # on each of the 3 detail views
            ("vdisk", "erasure_coding", "table", "erasure coding"): 3,
            ("vdisk", "notes", "table", "Notes"): 3,
            ("vdisk", "untitled", "table", "(a table without a heading)"): 3,
        }
        # The values the parser reads are exported as before.
        assert value(text, "stargate_vdisk_detail_up", vdisk_id="1000") == 1
        assert value(text, "stargate_vdisk_read_source_bytes_per_second", vdisk_id="1000", source="cloud_tier") == (
            3 * 2**20
        )
        promtool_check_metrics(text)
        lines = [r.getMessage() for r in caplog.records if "does not read" in r.getMessage()]
        assert len(lines) == 6, lines
        assert any(
            "vdisk detail page of build 'el7.3-release-euphrates-5.0.2-stable-5d92a1c6b8e4'" in m
            and "'Cloud Tier'" in m
            for m in lines
        ), lines
        assert all(fake.target in m and "Reporting a page" in m for m in lines)
        caplog.clear()
        status, text, _ = scrape(srv, fake.target)
        assert value(text, "stargate_parse_unknown_field_pages", page="vdisk", table="read_source", kind="row") == 3
        assert not [r for r in caplog.records if "does not read" in r.getMessage()], "logged once per build"


def test_clean_pages_export_no_unknown_series(pages, exporter):  # noqa: F811
    main, details = pages
    with HostileStargate(site(main, details)) as fake:
        _, text, _ = scrape(exporter(), fake.target)
    assert value(text, "stargate_up") == 1
    assert value(text, "stargate_parse_unknown_fields") == 0
    assert "# TYPE stargate_parse_unknown_field_pages gauge" in text
    assert not [s for s in series(text) if s[0] == "stargate_parse_unknown_field_pages"]


def test_unknown_series_are_bounded_per_probe(pages, exporter):  # noqa: F811
    """A page in a dialect we never saw (here 30 extra Hosted VDisks columns) gives at most
    MAX_UNKNOWN_SERIES series; the rest are summed into table="_other"."""
    _fresh_log()
    main, details = pages
    extra = "".join(f"<th>Extra {i}</th>" for i in range(30))
    main = main.replace("<th>% busy</th></tr>", f"<th>% busy</th>{extra}</tr>", 1)
    main = re.sub(
        r"(<tr><td><a href=\"/vdisk_stats[^\n]*?)</tr>", lambda m: m.group(1) + "<td>1</td>" * 30 + "</tr>", main
    )
    with HostileStargate(site(main, details)) as fake:
        _, text, _ = scrape(exporter(), fake.target)
    got = [dict(labels) for name, labels in series(text) if name == "stargate_parse_unknown_field_pages"]
    assert len(got) == MAX_UNKNOWN_SERIES
    assert value(text, "stargate_parse_unknown_field_pages", table="_other") == 30 - (MAX_UNKNOWN_SERIES - 1)
    assert value(text, "stargate_vdisk_detail_up", vdisk_id="1000") == 1
    promtool_check_metrics(text)
    # The response is made of stable strings: the page's own column names, cut to 60 characters.
    assert all(len(labels["item"]) <= 60 for labels in got)
