"""Rendered pages, parsed with BeautifulSoup: the structure and quirks of each page build, and
values that match the storage view they were rendered from."""

from __future__ import annotations

import math
import re

import pytest
from bs4 import BeautifulSoup

from ioparallax.simulators.scenario import list_scenarios
from ioparallax.simulators.stargate import pages
from ioparallax.simulators.stargate.server import StargateCluster

from .stargate_sim_helpers import EPOCH, variant

NBSP = "\xa0"


def cells(tr, tag=("td", "th")):
    return tr.find_all(tag, recursive=False)


def banners(soup):
    """Texts of the one-cell grey banner tables, as printed (with non-breaking spaces)."""
    out = []
    for t in soup.find_all("table"):
        tds = t.find_all("td")
        if t.get("bgcolor") and len(tds) == 1:
            out.append(tds[0].get_text())
    return out


def table_after_banner(soup, title):
    for t in soup.find_all("table"):
        tds = t.find_all("td")
        if t.get("bgcolor") and len(tds) == 1 and tds[0].get_text() == title.replace(" ", NBSP):
            return t.find_next_sibling("table")
    raise AssertionError(f"no banner {title!r}")


def grouped_rows(table):
    """Rows of a table with a two-row grouped header as dicts keyed `Group - Leaf` or `Group`."""
    trs = table.find_all("tr", recursive=False) or table.find_all("tr")
    top, leaf = trs[0], trs[1]
    groups = []
    for th in cells(top, "th"):
        groups += [th.get_text()] * int(th.get("colspan", 1))
    leaves = [th.get_text() for th in cells(leaf, "th")]
    assert len(groups) == len(leaves)
    keys = [f"{g} - {lf}" if lf else g for g, lf in zip(groups, leaves)]
    return [dict(zip(keys, cells(tr, "td"))) for tr in trs[2:]]


def section_table(soup, vdisk_id, section):
    text = f"VDisk {vdisk_id} {section}"
    node = soup.find(string=lambda s: s is not None and s.strip() == text)
    assert node is not None, f"no heading {text!r}"
    head = node.parent
    assert head.name in ("b", "h4")
    return head.find_next("table")


def sim(scenario, **kw):
    return StargateCluster(scenario, clock=lambda: float(EPOCH), history_start=EPOCH - 7200, **kw)


def half_up(x):
    return int(math.floor(x + 0.5))


@pytest.mark.parametrize(
    "build,title", [(2014, "Hosted Active VDisks"), (2015, "Hosted VDisks"), (2016, "Hosted VDisks")]
)
def test_main_page_structure_per_build(build, title):
    s = sim(variant("zero-heavy", page_build=build))
    soup = BeautifulSoup(s.render_main("cvm-1"), "lxml")
    assert banners(soup) == ["Overview", f"Cluster{NBSP}State", f"NFS{NBSP}Worker", title.replace(" ", NBSP)]
    table = table_after_banner(soup, title)
    trs = table.find_all("tr")
    top = [(th.get_text(), int(th.get("colspan", 1))) for th in cells(trs[0], "th")]
    assert top == [
        ("VDisk Id", 1),
        ("VDisk Name", 1),
        ("Usage (GB)", 1),
        ("Dedup (GB)", 1),
        ("Oplog", 4),
        ("Outstanding ops", 3),
        ("Ops/s", 4),
        ("KB/s", 2),
        ("Avg latency (usec)", 1),
        ("Avg op size", 1),
        ("Avg qlen", 1),
        ("% busy", 1),
    ]
    assert [th.get_text() for th in cells(trs[1], "th")] == [
        "",
        "",
        "",
        "",
        "KB",
        "Fragments",
        "Ops/s",
        "KB/s",
        "Read",
        "Write",
        "Estore",
        "Read",
        "Write",
        "Error",
        "Random",
        "Read",
        "Write",
        "",
        "",
        "",
        "",
    ]
    rows = grouped_rows(table)
    hosted = s.hosted("cvm-1")
    assert [int(r["VDisk Id"].get_text()) for r in rows] == [d.vdisk_id for d in hosted]
    for r, d in zip(rows, hosted):
        v = s.view(d)
        link = r["VDisk Id"].find("a")
        assert link["href"] == pages.detail_href(build, d.vdisk_id).replace("&amp;", "&")
        assert r["VDisk Name"].get_text() == f"{d.vdisk_name} ({d.vdisk_uuid})"
        assert r["Ops/s - Read"].get_text() == str(half_up(v.read_ops_s))
        assert r["Ops/s - Write"].get_text() == str(half_up(v.write_ops_s))
        assert r["Ops/s - Random"].get_text() == str(half_up(v.random_ops_s))
        assert r["Ops/s - Error"].get_text() == ""  # zero: blank
        assert r["Dedup (GB)"].get_text() == ""
        assert r["KB/s - Read"].get_text() == str(half_up(v.read_bytes_s / 1024))
        assert r["Avg latency (usec)"].get_text() == str(half_up(v.latency_s * 1e6))
        assert r["Avg op size"].get_text() == str(half_up(v.op_size_bytes))
        assert r["Oplog - KB"].get_text() == str(half_up(v.oplog_bytes / 1024))
        assert re.fullmatch(r"\d+, \d+KB", r["Outstanding ops - Read"].get_text())
        assert r["% busy"].get_text() == str(half_up(100 * v.busy_ratio))


def test_overview_and_cluster_state_list_every_cvm():
    s = sim("buffered-qd")  # the library's 2015 page build
    soup = BeautifulSoup(s.render_main("cvm-2"), "lxml")
    overview = {
        tr.find_all("td")[0].get_text(): tr.find_all("td")[1].get_text()
        for tr in table_after_banner(soup, "Overview").find_all("tr")
    }
    assert overview["Stargate handle"] == s.cvms["cvm-2"].handle
    assert overview["Build version"] == pages.BUILD_VERSIONS[2015]
    state = table_after_banner(soup, "Cluster State")
    links = [a["href"] for a in state.find_all("a")]
    assert links == [f"http://{c.handle}" for c in s.cvms.values()]
    for tr in state.find_all("tr")[1:]:
        assert re.fullmatch(r"(\d+ \(\d+/\d+\) ?)+", tr.find_all("td")[2].get_text())


def test_empty_and_idle_rows():
    # bursty-1m between bursts: I/O stopped, Random and Avg op size blank, outstanding "0, 0KB".
    s = StargateCluster("bursty-1m", clock=lambda: float(EPOCH - EPOCH % 600 + 10))
    soup = BeautifulSoup(s.render_main(s.scenario.disks[0].cvm), "lxml")
    (r,) = grouped_rows(table_after_banner(soup, "Hosted VDisks"))
    assert r["Ops/s - Read"].get_text() == r["Ops/s - Write"].get_text() == ""
    assert r["Ops/s - Random"].get_text() == "" and r["Avg op size"].get_text() == ""
    assert r["Outstanding ops - Read"].get_text() == "0, 0KB"
    assert r["Outstanding ops - Write"].get_text() == "0, 0KB"
    # A CVM hosting nothing still shows the table with its header.
    soup = BeautifulSoup(s.render_main("cvm-3"), "lxml")
    assert grouped_rows(table_after_banner(soup, "Hosted VDisks")) == []


SECTIONS = (
    "Ops and Randomness",
    "Frontend Read Latency",
    "Frontend Write Latency",
    "Read Size Distribution",
    "Write Size Distribution",
    "Working Set Sizes",
    "Read Source",
    "Write Destination",
    "Extent Group Up-Migration",
)


@pytest.mark.parametrize("build", [2014, 2015, 2016])
def test_detail_sections_in_order_with_bold_headings(build):
    s = sim(variant("clean-oltp", page_build=build))
    d = s.hosted("cvm-1")[0]
    html = s.render_detail("cvm-1", d.vdisk_id)
    soup = BeautifulSoup(html, "lxml")
    tag = "h4" if build == 2016 else "b"
    headings = [h.get_text() for h in soup.find_all(tag) if h.get_text().startswith("VDisk ")]
    assert headings == [f"VDisk {d.vdisk_id} {sec}" for sec in SECTIONS]
    for sec in SECTIONS:
        assert section_table(soup, d.vdisk_id, sec).get("border") == "1"
    assert banners(soup) == [f"VDisk{NBSP}Stats"]


def test_ops_and_randomness_values():
    s = sim("clean-oltp")
    d = s.hosted("cvm-1")[0]
    v = s.view(d)
    soup = BeautifulSoup(s.render_detail("cvm-1", d.vdisk_id), "lxml")
    t = section_table(soup, d.vdisk_id, "Ops and Randomness")
    rows = {
        tr.find_all("td")[0].get_text(): [c.get_text() for c in tr.find_all("td")[1:]] for tr in t.find_all("tr")[1:]
    }
    assert [th.get_text() for th in t.find_all("th")] == ["", "Read", "Write", "Total"]
    assert rows["IOPS (kIO/s)"] == ["2", "1", "3"]
    assert rows["IO Rate (MB/s)"] == [
        str(half_up(v.read_bytes_s / 2**20)),
        str(half_up(v.write_bytes_s / 2**20)),
        str(half_up((v.read_bytes_s + v.write_bytes_s) / 2**20)),
    ]
    assert rows["Random %"] == ["100%", "100%", ""]
    assert rows["Sequential %"] == ["", "", ""]  # 0 % is blank


def check_histogram_table(t, direction, size=False):
    trs = t.find_all("tr")
    head = [th.get_text() for th in trs[0].find_all("th")]
    second = "Average Bucket Size" if size else "Average Bucket Latency (usec)"
    assert head == ["Latency Range", second, f"Number of {direction} IOs", f"Percent of {direction} IOs"]
    labels = pages.SIZE_LABELS if size else pages.LATENCY_LABELS
    body = trs[1:]
    assert [tr.find("td").get_text() for tr in body] == list(labels) + ["Total"]
    counts = []
    for tr in body[:-1]:
        tds = tr.find_all("td")
        assert len(tds) == 4 + 20
        label, avg, count, percent = (td.get_text() for td in tds[:4])
        filled = sum(1 for td in tds[4:] if td.get("bgcolor"))
        assert all(td.get_text() == "" for td in tds[4:])
        if count == "":
            assert avg == percent == "" and filled == 0
            counts.append(0)
        else:
            counts.append(int(count))
            assert percent == "" or percent.endswith("%")
    total_cells = [td.get_text() for td in body[-1].find_all("td")]
    total = int(total_cells[2]) if total_cells[2] else 0
    assert sum(counts) == total
    for tr, c in zip(body[:-1], counts):
        tds = tr.find_all("td")
        filled = sum(1 for td in tds[4:] if td.get("bgcolor"))
        assert filled == (half_up(100 * c / total / 5) if total else 0)
    return counts, total_cells


def test_histogram_tables_quirks_and_values():
    s = sim("postgres")
    log = s.scenario.disks[1]
    cvm = log.cvm_at(s.period_second())
    v = s.view(log)
    soup = BeautifulSoup(s.render_detail(cvm, log.vdisk_id), "lxml")
    counts, total = check_histogram_table(section_table(soup, log.vdisk_id, "Frontend Write Latency"), "Write")
    assert tuple(counts) == v.write_latency_hist.counts
    assert total[1] == str(int(v.write_latency_hist.average * 1e6))  # truncated
    counts, _ = check_histogram_table(section_table(soup, log.vdisk_id, "Frontend Read Latency"), "Read")
    assert counts == [0] * 8  # write-only vdisk: all blank
    counts, total = check_histogram_table(
        section_table(soup, log.vdisk_id, "Write Size Distribution"), "Write", size=True
    )
    # 16k/60:32k/40 -> 60 % in 16-32 kB, 40 % in 32-64 kB
    assert counts[3] == round(0.6 * sum(counts)) and counts[4] == sum(counts) - counts[3]
    t = section_table(soup, log.vdisk_id, "Write Size Distribution")
    assert t.find_all("tr")[4].find_all("td")[1].get_text() == "16384"
    check_histogram_table(section_table(soup, log.vdisk_id, "Read Size Distribution"), "Read", size=True)


def source_rows(t):
    return [[td.get_text() for td in tr.find_all("td")] for tr in t.find_all("tr")[1:]]


@pytest.mark.parametrize("build", [2014, 2015, 2016])
def test_read_source_and_write_destination_labels(build):
    s = sim(variant("zero-heavy", page_build=build))
    d = s.hosted("cvm-1")[0]
    v = s.view(d)
    soup = BeautifulSoup(s.render_detail("cvm-1", d.vdisk_id), "lxml")
    rs = section_table(soup, d.vdisk_id, "Read Source")
    assert [th.get_text() for th in rs.find_all("th")] == ["Source", "Data (MB/s)", "Percent"]
    rows = source_rows(rs)
    expected = {
        2016: [
            "Cache DRAM",
            "Estore SSD Local",
            "Estore SSD Remote",
            "Estore HDD",
            "Oplog",
            "Estore Zero",
            "Oplog Zero",
            "Total",
        ]
    }.get(
        build,
        [
            "Oplog",
            "Extent cache",
            "Cache DRAM",
            "Cache SSD",
            "Estore SSD",
            "Estore HDD",
            "Block Store",
            "Zeroes",
            "Total",
        ],
    )
    assert [r[0] for r in rows] == expected
    by = {r[0]: r for r in rows}
    total = v.read_source_total
    for label, b in fold_rows(v, build, "read"):
        assert by[label][1] == (str(half_up(b / 2**20)) if half_up(b / 2**20) else "")
        p = half_up(100 * b / total)
        assert by[label][2] == (f"{p}%" if p else "")
    assert by["Total"][2] == "100%"
    if build == 2016:
        assert by["Estore Zero"][2] == "33%" and by["Oplog Zero"][2] == "3%"
    else:
        assert by["Zeroes"][2] == "36%"
        assert by["Block Store"][1:] == ["", ""]
    wd = section_table(soup, d.vdisk_id, "Write Destination")
    assert [th.get_text() for th in wd.find_all("th")] == ["Destination", "Data (MB/s)", "Percent"]
    rows = {r[0]: r for r in source_rows(wd)}
    if build == 2016:
        assert list(rows) == ["Oplog", "Oplog Zero", "Estore SSD", "Estore HDD", "Total"]
        assert rows["Oplog Zero"][2] == "40%" and rows["Oplog"][2] == "60%"
    else:
        assert list(rows) == ["Oplog", "Estore", "Block Store", "Total"]
        assert rows["Oplog"][2] == "100%"  # 2015 has no Oplog Zero row: zero writes count as Oplog


def fold_rows(v, build, kind):
    from ioparallax.simulators.scenario.storage import READ_SOURCE_ROWS, WRITE_DESTINATION_ROWS, fold

    if kind == "read":
        return fold(v.read_sources, READ_SOURCE_ROWS[build])
    return fold(v.write_destinations, WRITE_DESTINATION_ROWS[build])


def test_working_sets_and_upmigration_tables():
    s = StargateCluster("ilm-upmigration", clock=lambda: float(EPOCH), history_start=EPOCH - 1000)
    d = s.scenario.disks[0]
    cvm = d.cvm_at(s.period_second())
    v = s.view(d)
    soup = BeautifulSoup(s.render_detail(cvm, d.vdisk_id), "lxml")
    t = section_table(soup, d.vdisk_id, "Working Set Sizes")
    assert [th.get_text() for th in t.find_all("th")] == ["", "2 min", "1 hr"]
    rows = source_rows(t)
    assert [r[0] for r in rows] == ["Read WSS (MB)", "Write WSS (MB)", "Union WSS (MB)"]
    assert rows[0][1] == str(half_up(v.wss[("read", 120)] / 2**20))
    assert [r[2] for r in rows] == ["0", "0", "0"]  # less than an hour of history
    assert rows[1][1] == "0"  # no writes
    t = section_table(soup, d.vdisk_id, "Extent Group Up-Migration")
    assert t.find_all("th") == []
    rows = [[td.get_text() for td in tr.find_all("td")] for tr in t.find_all("tr")]
    assert [r[0] for r in rows] == ["Last 300 seconds", "Last 3600 seconds", "Last 86400 seconds"]
    assert [r[1] for r in rows] == [str(v.upmigrations[n]) for n in (300, 3600, 86400)]
    assert int(rows[2][1]) > int(rows[0][1]) > 0


def test_detail_without_id_lists_every_hosted_vdisk_and_unknown_id_is_none():
    s = sim("zero-heavy")
    cvm = "cvm-1"
    soup = BeautifulSoup(s.render_detail(cvm, None), "lxml")
    ids = {
        int(m.group(1)) for m in (re.match(r"VDisk (\d+) Read Source", h.get_text()) for h in soup.find_all("h4")) if m
    }
    assert ids == {d.vdisk_id for d in s.hosted(cvm)}
    other = next(d for d in s.scenario.disks if d.cvm_at(s.period_second()) != cvm)
    assert s.render_detail(cvm, other.vdisk_id) is None


def test_misaligned_write_only_vdisk_shows_read_source_without_reads():
    s = sim("misaligned")
    d = s.scenario.disks[1]
    cvm = d.cvm_at(s.period_second())
    soup = BeautifulSoup(s.render_detail(cvm, d.vdisk_id), "lxml")
    ops = {
        tr.find_all("td")[0].get_text(): tr.find_all("td")[1].get_text()
        for tr in section_table(soup, d.vdisk_id, "Ops and Randomness").find_all("tr")[1:]
    }
    assert ops["IOPS (kIO/s)"] == "" and ops["IO Rate (MB/s)"] == ""
    rows = {r[0]: r for r in source_rows(section_table(soup, d.vdisk_id, "Read Source"))}
    assert rows["Estore SSD Local"][1:] == ["1", "100%"]
    main = BeautifulSoup(s.render_main(cvm), "lxml")
    (r,) = [
        r
        for r in grouped_rows(table_after_banner(main, "Hosted VDisks"))
        if r["VDisk Id"].get_text() == str(d.vdisk_id)
    ]
    assert int(r["Outstanding ops - Estore"].get_text()) == 12


def test_vars_and_prism():
    s = sim("postgres")
    lines = dict(s.vars_lines("cvm-1"))
    hosted = s.hosted("cvm-1")
    assert lines["stargate/vdisk/total/hosted_vdisks"] == len(hosted)
    assert lines["stargate/vdisk/total/oplog_bytes"] == round(sum(s.view(d).oplog_bytes for d in hosted))
    assert lines["stargate/vdisk/total/write_ops"] > 0  # two hours of history
    doc = s.prism_virtual_disks()
    assert doc["metadata"]["total_entities"] == len(s.scenario.disks) == len(doc["entities"])
    for e, d in zip(doc["entities"], s.scenario.disks):
        assert e["uuid"] == d.vdisk_uuid
        assert e["virtual_disk_id"].split("::")[1] == str(d.vdisk_id)
        assert e["attached_vmname"] == d.vm
        assert e["device_uuid"] == d.uuid
        assert e["disk_capacity_in_bytes"] == d.capacity_bytes
    assert [e["disk_address"] for e in doc["entities"]] == ["scsi.1", "scsi.2"]
    assert doc["entities"][0]["nutanix_nfsfile_path"] == "/ctr01/pg-01/pg-01-flat.vmdk"
    assert doc["entities"][1]["nutanix_nfsfile_path"] == "/ctr01/pg-01/pg-01_1-flat.vmdk"


@pytest.mark.parametrize("name", list_scenarios())
def test_every_library_scenario_renders_every_vdisk(name):
    s = sim(name)
    seen = set()
    for cvm in s.cvms:
        soup = BeautifulSoup(s.render_main(cvm), "lxml")
        rows = grouped_rows(table_after_banner(soup, pages.MAIN_TITLE[s.build]))
        for r in rows:
            vid = int(r["VDisk Id"].get_text())
            seen.add(vid)
            detail = BeautifulSoup(s.render_detail(cvm, vid), "lxml")
            for sec in SECTIONS:
                section_table(detail, vid, sec)
            for sec in ("Read Source", "Write Destination"):
                body = source_rows(section_table(detail, vid, sec))
                percents = [int(p[2].rstrip("%")) for p in body[:-1] if p[2]]
                if body[-1][2]:
                    assert abs(sum(percents) - 100) <= len(body) // 2  # rounded parts of 100 %
                else:
                    assert percents == []
    assert seen == {d.vdisk_id for d in s.scenario.disks}
