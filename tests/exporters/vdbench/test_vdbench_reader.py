"""The vdbench reader and exposition on real output directories and on files built from Flat.java.

Expected values come from a plain parse of the same files (str.split on the header's column
names), never from the reader under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ioparallax.exporters.vdbench.collector import VdbenchCollector
from ioparallax.exporters.vdbench.hygiene import HygieneConfig, normal_percentile_matches, parmfile_findings
from ioparallax.exporters.vdbench.parse import (
    FlatfileParser,
    InvalidLine,
    SummaryTableParser,
    number,
    parse_parmfile,
    parse_vdbench_size,
    split_parameters,
)
from ioparallax.exporters.vdbench.reader import WatchConfig, Watcher
from tests.support import exposition_of, has, promtool_check_metrics, samples, value

FIXTURES = Path(__file__).parent / "fixtures"
MULTI = FIXTURES / "vdbconvert-multihost"
SINGLE = FIXTURES / "vdbconvert-single"
MODERN = FIXTURES / "flatjava-modern"
SOLARIS = FIXTURES / "flatjava-solaris"


def plain_rows(path: Path) -> list[dict[str, str]]:
    """Flatfile rows as {column: token} by a plain split (the expected values)."""
    header: list[str] | None = None
    out = []
    for line in path.read_text().splitlines():
        tokens = line.split()
        if not tokens or tokens[0].startswith(("*", "<")):
            continue
        if tokens[0] == "tod":
            header = tokens
            continue
        assert header is not None
        out.append(dict(zip(header, tokens)))
    return out


def plain_average_lines(path: Path) -> list[list[str]]:
    """Interval lines of a host report: 'HH:MM:SS.mmm interval values...' by a plain split."""
    out = []
    for line in path.read_text().splitlines():
        t = line.split()
        if len(t) > 3 and t[0].count(":") == 2 and t[0][0].isdigit() and (t[1].isdigit() or t[1].startswith("avg_")):
            out.append(t)
    return out


def exposition(*paths: Path, cache: int | None = None, clock=None) -> str:
    w = Watcher(WatchConfig(paths=[str(p) for p in paths], retention_s=float("inf")))
    return exposition_of(VdbenchCollector(w, HygieneConfig(cache_size_bytes=cache)))


# ---------------------------------------------------------------------------------------------
# a real two-host run


def test_real_multihost_run_counters_are_the_rows_integrated():
    text = exposition(MULTI)
    sm = samples(text)
    src = str(MULTI)
    assert value(sm, "vdbench_up") == 1
    rows = plain_rows(MULTI / "flatfile.html")
    for seq, run in enumerate(("rd1", "rd2", "rd3"), start=1):
        mine = [r for r in rows if r["Run"] == run and r["Interval"].isdigit()]
        assert len(mine) == 60
        reads = sum(float(r["rate"]) * float(r["read%"]) / 100 for r in mine)  # interval=1 in the parmfile
        writes = sum(float(r["rate"]) * (1 - float(r["read%"]) / 100) for r in mine)
        nbytes = sum(float(r["MB/sec"]) * 2**20 for r in mine)
        rsum = sum(float(r["read_resp"]) / 1000 * float(r["rate"]) * float(r["read%"]) / 100 for r in mine)
        labels = {"source": src, "run": run, "seq": seq}
        assert value(sm, "vdbench_run_read_ops_total", **labels) == pytest.approx(reads, rel=1e-9)
        assert value(sm, "vdbench_run_write_ops_total", **labels) == pytest.approx(writes, rel=1e-9)
        got_bytes = value(sm, "vdbench_run_read_bytes_total", **labels) + value(
            sm, "vdbench_run_write_bytes_total", **labels
        )
        assert got_bytes == pytest.approx(nbytes, rel=1e-9)
        assert value(sm, "vdbench_run_read_response_seconds_total", **labels) == pytest.approx(rsum, rel=1e-9)
        assert value(sm, "vdbench_run_intervals_total", **labels) == 60
        avg = next(r for r in rows if r["Run"] == run and r["Interval"] == "avg_2-60")
        assert value(sm, "vdbench_run_average_iops", **labels) == float(avg["rate"])
        assert value(sm, "vdbench_run_average_response_mean_seconds", **labels) == pytest.approx(
            float(avg["resp"]) / 1000
        )
        assert value(sm, "vdbench_run_average_bandwidth_bytes_per_second", **labels) == pytest.approx(
            float(avg["MB/sec"]) * 2**20
        )
        assert value(sm, "vdbench_run_average_first_interval", **labels) == 2
        assert value(sm, "vdbench_run_average_last_interval", **labels) == 60
        assert value(sm, "vdbench_run_finished", **labels) == 1
        last = mine[-1]
        assert value(sm, "vdbench_run_interval_iops", **labels) == float(last["rate"])
        assert value(sm, "vdbench_run_interval_queue_depth", **labels) == float(last["queue_depth"])
    # rd1 asked for iorate=50, 2 threads, 4 KiB, 75 % reads, on 16 GiB
    rd1 = {"source": src, "run": "rd1", "seq": 1}
    assert value(sm, "vdbench_run_requested_iops", **rd1) == 50
    assert value(sm, "vdbench_run_threads", **rd1) == 2
    assert value(sm, "vdbench_run_lun_size_bytes", **rd1) == 16 * 2**30
    assert value(sm, "vdbench_run_info", **rd1, xfersize=4096, rdpct=75, seekpct=100) == 1
    # o_direct on the only sd, no compratio: no hygiene finding at all, and nothing undecided
    assert not has(sm, "vdbench_run_hygiene_problem")
    assert not has(sm, "vdbench_run_hygiene_cannot_tell")
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()


def test_real_host_reports_sum_to_the_run():
    sm = samples(exposition(MULTI))
    src = str(MULTI)
    for host in ("hd1", "hd2"):
        lines = plain_average_lines(MULTI / f"{host}.html")
        rd1 = [t for t in lines[:61] if t[1].isdigit()]
        reads = sum(float(t[2]) * float(t[5]) / 100 for t in rd1)
        assert value(sm, "vdbench_host_read_ops_total", source=src, run="rd1", seq=1, host=host) == pytest.approx(
            reads, rel=1e-9
        )
        avg = next(t for t in lines if t[1].startswith("avg_"))
        assert value(sm, "vdbench_host_average_iops", source=src, run="rd1", seq=1, host=host) == float(avg[2])
        assert value(sm, "vdbench_host_average_queue_depth", source=src, run="rd1", seq=1, host=host) == float(avg[11])
    for seq, run in enumerate(("rd1", "rd2", "rd3"), start=1):
        run_ops = value(sm, "vdbench_run_read_ops_total", source=src, run=run, seq=seq) + value(
            sm, "vdbench_run_write_ops_total", source=src, run=run, seq=seq
        )
        host_ops = sum(
            value(sm, f"vdbench_host_{d}_ops_total", source=src, run=run, seq=seq, host=h)
            for h in ("hd1", "hd2")
            for d in ("read", "write")
        )
        # the host reports print rates with 2 decimals, the flatfile with 4: equal to a few ops
        assert host_ops == pytest.approx(run_ops, abs=2.0)


def test_real_parmfile_as_run():
    pf = parse_parmfile((MULTI / "parmfile.html").read_text())
    assert pf.sd["sd1"] == {"host": "hd*", "lun": "/dev/sdb", "openflags": "o_direct"}
    assert len(pf.wd) == 51
    assert pf.wd["wd2"]["range"] == "(39.61,39.79)"
    assert pf.wd["wd2"]["skew"] == "0.30"
    assert pf.rd["rd3"] == {
        "wd": "wd*",
        "iorate": "5000",
        "format": "yes",
        "threads": "2",
        "elapsed": "60",
        "interval": "1",
    }
    assert pf.hd["hd2"]["system"] == "172.17.1.76"
    assert pf.hd["hd2"]["shell"] == "vdbench"  # hd=default merged in
    sm = samples(exposition(MULTI))
    assert value(sm, "vdbench_parmfile_sd_info", sd="sd1", lun="/dev/sdb", openflags="o_direct", hosts="hd*") == 1
    assert value(sm, "vdbench_parmfile_rd_info", rd="rd2", iorate="500", elapsed="60", interval="1") == 1
    assert value(sm, "vdbench_parmfile_wd_info", wd="wd51", range="(61.47,61.78)") == 1
    assert value(sm, "vdbench_parmfile_hd_info", hd="hd1", system="172.17.1.235", shell="vdbench") == 1


def test_real_single_host_flatfile_with_requested_data_reduction():
    sm = samples(exposition(SINGLE))
    src = str(SINGLE)
    rows = plain_rows(SINGLE / "flatfile.html")
    runs = [r["Run"] for r in rows if r["Interval"] == "1"]
    assert runs == ["rd1", "rd2", "rd3"]
    for seq, run in enumerate(runs, start=1):
        assert value(sm, "vdbench_run_requested_compression_ratio", source=src, run=run, seq=seq) == 1.5
        assert value(sm, "vdbench_run_requested_dedup_ratio", source=src, run=run, seq=seq) == 2.0
        problems = {
            dict(ls)["problem"] for (n, ls) in sm if n == "vdbench_run_hygiene_problem" and dict(ls)["run"] == run
        }
        # no parmfile: buffered I/O cannot be told, so it is not claimed, and said so
        assert problems == {"compratio_requested", "dedupratio_requested"}
        cannot = {
            dict(ls)["problem"] for (n, ls) in sm if n == "vdbench_run_hygiene_cannot_tell" and dict(ls)["run"] == run
        }
        assert cannot == {"buffered_io", "short_runtime"}
    # no interval= known: the tod spacing (about 1 s, vdbench's jitter) is the interval
    measured = value(sm, "vdbench_run_measured_seconds_total", source=src, run="rd1", seq=1)
    assert 58 < measured < 61
    assert value(sm, "vdbench_run_average_iops", source=src, run="rd3", seq=3) == 185.5517


# ---------------------------------------------------------------------------------------------
# files built from Flat.java


def test_modern_flatfile_with_timestamp_column_and_parmfile_interval():
    sm = samples(exposition(MODERN, cache=8 * 2**30))
    src = str(MODERN)
    labels = {"source": src, "run": "rd_oltp", "seq": 1}
    rows = [r for r in plain_rows(MODERN / "flatfile.html") if r["Interval"].isdigit()]
    # interval=5 in the parmfile: every row covers 5 s
    assert value(sm, "vdbench_run_measured_seconds_total", **labels) == 15
    reads = sum(float(r["rate"]) * 5 * float(r["read%"]) / 100 for r in rows)
    assert value(sm, "vdbench_run_read_ops_total", **labels) == pytest.approx(reads)
    assert value(sm, "vdbench_run_info", **labels, version="vdbench50407") == 1
    assert not has(sm, "vdbench_run_requested_iops")  # reqrate n/a: iorate=max
    assert value(sm, "vdbench_run_interval_cpu_used_ratio", **labels) == pytest.approx(0.245)
    problems = {dict(ls)["problem"] for (n, ls) in sm if n == "vdbench_run_hygiene_problem"}
    # no openflags; 2 x 2 GiB narrowed to range=(0,50) = 2 GiB < 8 GiB cache; 2:1 and 1.5:1 asked;
    # an HCIBench 95%tile in the directory
    assert problems == {
        "buffered_io",
        "working_set_below_cache",
        "compratio_requested",
        "dedupratio_requested",
        "percentile_from_stddev",
    }
    stated = value(sm, "vdbench_report_normal_percentile_seconds", source=src, file="hcibench-summary.txt")
    avg = next(r for r in plain_rows(MODERN / "flatfile.html") if r["Interval"] == "avg_2-3")
    assert normal_percentile_matches(stated * 1000, float(avg["resp"]), float(avg["resp_std"]))
    assert not normal_percentile_matches(stated * 1000 * 1.3, float(avg["resp"]), float(avg["resp_std"]))


def test_solaris_kstat_columns_older_layout_and_na():
    sm = samples(exposition(SOLARIS))
    labels = {"source": str(SOLARIS), "run": "rd1", "seq": 1}
    # no read_resp column: a 100 % read run's resp is its read response time
    rows = [r for r in plain_rows(SOLARIS / "flatfile.html") if r["Interval"].isdigit()]
    rsum = sum(float(r["resp"]) / 1000 * float(r["rate"]) for r in rows)
    assert value(sm, "vdbench_run_read_response_seconds_total", **labels) == pytest.approx(rsum)
    assert value(sm, "vdbench_run_write_ops_total", **labels) == 0
    assert value(sm, "vdbench_run_measured_seconds_total", **labels) == pytest.approx(3.0)  # across midnight
    assert value(sm, "vdbench_run_interval_kstat_busy_ratio", **labels) == pytest.approx(0.415)
    assert not has(sm, "vdbench_run_interval_queue_depth")  # no such column: absent, not 0
    assert not has(sm, "vdbench_run_interval_read_response_mean_seconds")


def test_older_mixed_run_without_read_resp_has_no_response_sums(tmp_path):
    rows = (SOLARIS / "flatfile.html").read_text().replace("  100.0000     7.9000", "   70.0000     7.9000")
    (tmp_path / "flatfile.html").write_text(rows)
    sm = samples(exposition(tmp_path))
    assert not has(sm, "vdbench_run_read_response_seconds_total")
    assert not has(sm, "vdbench_run_write_response_seconds_total")
    assert value(sm, "vdbench_run_write_ops_total") == pytest.approx(498 * 0.3)


# ---------------------------------------------------------------------------------------------
# pure functions


def test_number_rejects_what_vdbench_never_prints():
    assert number("n/a") is None
    assert number("12.5000") == 12.5
    for bad in ("nan", "inf", "-1.0", "1e400", "abc", "1" * 30):
        with pytest.raises(InvalidLine):
            number(bad)


def test_flatfile_parser_finds_columns_by_name_and_rejects_garbage():
    p = FlatfileParser()
    assert p.feed("* comment") is None
    with pytest.raises(InvalidLine) as e:
        p.feed("12:00:00.000 rd1 1 5.0")
    assert e.value.reason == "before_header"
    p.feed("  tod Interval Run MB/sec rate read%")
    row = p.feed("12:00:01.000 3 rdX 1.5 100 n/a")
    assert row is not None and row.run == "rdX" and row.interval == 3 and row.values["read%"] is None
    with pytest.raises(InvalidLine) as e:
        p.feed("12:00:01.000 3 rdX 1.5 100")
    assert e.value.reason == "wrong_column_count"
    with pytest.raises(InvalidLine):
        p.feed("12:00:01.000 avg_x rdX 1.5 100 1")
    with pytest.raises(InvalidLine) as e:
        p.feed("  tod Run Interval foo")
    assert e.value.reason == "bad_header"


def test_parmfile_syntax():
    assert split_parameters("sd=sd1,lun=/dev/sdb,range=(10,20),host=(a,b)") == [
        ("sd", "sd1"),
        ("lun", "/dev/sdb"),
        ("range", "(10,20)"),
        ("host", "(a,b)"),
    ]
    pf = parse_parmfile((MODERN / "parmfile.html").read_text())
    assert pf.sd["sd2"] == {"threads": "8", "lun": "/dev/sdc", "size": "2g"}  # continuation + default
    assert pf.general == {"compratio": "2", "dedupratio": "1.5", "dedupunit": "4k"}
    assert parse_vdbench_size("4k") == 4096
    assert parse_vdbench_size("2g") == 2 * 2**30
    assert parse_vdbench_size("512") == 512
    assert parse_vdbench_size("(1,2)") is None


def test_parmfile_findings_name_the_definition():
    pf = parse_parmfile((MODERN / "parmfile.html").read_text())
    found = parmfile_findings(pf, HygieneConfig(cache_size_bytes=8 * 2**30))
    assert [(f.problem, f.where) for f in found] == [
        ("buffered_io", "sd=sd1"),
        ("buffered_io", "sd=sd2"),
        ("working_set_below_cache", "rd=rd_oltp"),
        ("compratio_requested", "compratio=2"),
        ("dedupratio_requested", "dedupratio=1.5"),
    ]
    clean = parse_parmfile((MULTI / "parmfile.html").read_text())
    assert parmfile_findings(clean, HygieneConfig(cache_size_bytes=8 * 2**30)) == []
    short = parse_parmfile("sd=sd1,lun=/dev/rdsk/c0t0d0s2\nwd=w,sd=sd1\nrd=r,wd=w,elapsed=20")
    assert [f.problem for f in parmfile_findings(short, HygieneConfig())] == ["short_runtime"]  # raw: unbuffered


# ---------------------------------------------------------------------------------------------
# vdbench 5.04.07's interval table (real console output): read and write max, NaN


def test_vdbench_50407_table_with_read_write_max_and_nan():
    lines = (FIXTURES / "vdbench50407-console" / "vdbench-t.txt").read_text().splitlines()
    p = SummaryTableParser()
    rows = []
    for line in lines:
        row = p.feed(line)
        if row is not None:
            rows.append(row)
    assert [(r.run, r.interval, r.summary) for r in rows] == [
        ("SD_format", 1, None),
        ("SD_format", None, (2, 1)),
        ("rd1", 1, None),
        ("rd1", 2, None),
        ("rd1", 3, None),
        ("rd1", 4, None),
        ("rd1", 5, None),
        ("rd1", None, (2, 5)),
    ]
    fmt_avg, avg = rows[1].values, rows[-1].values
    assert fmt_avg["cpu_used"] is None and fmt_avg["cpu_kernel"] is None  # printed NaN: no data
    assert avg == {
        "rate": 104.5,
        "mb/sec": 0.10,
        "bytes/io": 1024,
        "read%": 50.72,
        "resp": 0.012,
        "read_resp": 0.010,
        "write_resp": 0.015,
        "read_max": 0.05,
        "write_max": 0.12,
        "resp_std": 0.007,
        "queue_depth": 0.0,
        "cpu_used": 4.6,
        "cpu_kernel": 0.9,
    }


def test_vdbench_50407_host_report_is_exported(tmp_path):
    """The real 5.04.07 table as a host report (its title line added): every line read, the
    format run's NaN cpu absent, read/write max exported."""
    table = (FIXTURES / "vdbench50407-console" / "vdbench-t.txt").read_text()
    (tmp_path / "localhost.html").write_text("<pre>\nHost summary report(s) for host=localhost\n\n" + table)
    (tmp_path / "parmfile.html").write_text(
        "sd=sd1,lun=/tmp/quick_vdbench_test\nwd=wd1,sd=sd1\nrd=rd1,wd=wd1,iorate=100,elapsed=5,interval=1\n"
    )
    sm = samples(exposition(tmp_path))
    labels = {"host": "localhost", "run": "rd1", "seq": 2}
    assert value(sm, "vdbench_source_rejected_lines_total", file="localhost.html", reason="invalid_value") == 0
    reads = sum(r * p / 100 for r, p in ((84, 53.57), (103, 52.43), (103, 51.46), (106, 50.94), (106, 48.11)))
    assert value(sm, "vdbench_host_read_ops_total", **labels) == pytest.approx(reads)
    assert value(sm, "vdbench_host_average_write_response_max_seconds", **labels) == pytest.approx(0.00012)
    assert value(sm, "vdbench_host_average_iops", **labels) == 104.5
    assert not has(sm, "vdbench_host_average_cpu_used_ratio", run="SD_format")
    assert value(sm, "vdbench_host_average_iops", host="localhost", run="SD_format", seq=1) == 0


def test_real_run_totals_match_vdbench_totals_report():
    """totals.html (vdbench's run totals over all hosts, 2-decimal table) and the flatfile's avg
    rows the exporter reads agree: the runs parse to vdbench's own totals."""
    p = SummaryTableParser()
    totals = {}
    for line in (MULTI / "totals.html").read_text().splitlines():
        row = p.feed(line)
        if row is not None:
            totals[row.run] = row
    assert sorted(totals) == ["rd1", "rd2", "rd3"] and all(r.summary == (2, 60) for r in totals.values())
    sm = samples(exposition(MULTI))
    for seq, run in enumerate(("rd1", "rd2", "rd3"), start=1):
        t = totals[run].values
        labels = {"source": str(MULTI), "run": run, "seq": seq}
        assert value(sm, "vdbench_run_average_iops", **labels) == pytest.approx(t["rate"], abs=0.005)
        assert value(sm, "vdbench_run_average_bandwidth_bytes_per_second", **labels) == pytest.approx(
            t["mb/sec"] * 2**20, abs=0.005 * 2**20
        )
        assert value(sm, "vdbench_run_average_read_ratio", **labels) == pytest.approx(t["read%"] / 100, abs=5e-5)
        for col, metric in (
            ("resp", "response_mean"),
            ("read_resp", "read_response_mean"),
            ("write_resp", "write_response_mean"),
            ("resp_max", "response_max"),
            ("resp_std", "response_stddev"),
        ):
            got = value(sm, f"vdbench_run_average_{metric}_seconds", **labels)
            assert got == pytest.approx(t[col] / 1000, abs=0.0005 / 1000), (run, col)
        assert value(sm, "vdbench_run_average_queue_depth", **labels) == pytest.approx(t["queue_depth"], abs=0.05)
