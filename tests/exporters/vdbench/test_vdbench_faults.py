"""Hostile and broken vdbench output (issue 23): one bad file never hides the others nor takes
/metrics down, garbage is counted and skipped with a reason, rewritten files are read again from
the start, names are data, memory and per-scrape work stay bounded.

Every case puts a bad directory beside a real one (the two-host run of the fixtures) and asserts
the bad file's state and log line, the good directory still served with its own values, and an
exposition that ``promtool check metrics`` accepts with no series twice.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings, strategies as st

from ioparallax.exporters.common import linetail as linetail_module
from ioparallax.exporters.vdbench import collector as collector_module, reader as tailer_module
from ioparallax.exporters.vdbench.collector import VdbenchCollector
from ioparallax.exporters.vdbench.parse import FlatfileParser, InvalidLine, SummaryTableParser, parse_parmfile
from ioparallax.exporters.vdbench.reader import WatchConfig, Watcher
from tests.exporters.vdbench.test_vdbench_reader import MULTI, SOLARIS, has, samples, value
from tests.support import (
    WatchScraper,
    exposition_of,
    free_port,
    promtool_check_metrics,
    rejected_by_reason,
    venv_tool,
    wait_for_http,
)

GOOD_RD2_AVG = 212.4237  # vdbconvert-multihost, rd2's avg_2-60 rate


@pytest.fixture()
def tree(tmp_path):
    """A watched directory with the real two-host run (good/) and an empty bad/ to fill."""
    root = tmp_path / "results"
    shutil.copytree(MULTI, root / "good")
    (root / "bad").mkdir()
    return root


class Scraper(WatchScraper):
    def __init__(self, root: Path):
        watcher = Watcher(WatchConfig(paths=[str(root)], retention_s=float("inf")))
        super().__init__(watcher, VdbenchCollector(watcher))


def good_still_served(sm: dict, root: Path) -> None:
    assert value(sm, "vdbench_run_average_iops", source=root / "good", run="rd2") == GOOD_RD2_AVG
    assert value(sm, "vdbench_source_up", source=root / "good") == 1


def flat_lines() -> list[str]:
    return (SOLARIS / "flatfile.html").read_text().splitlines(keepends=True)


def test_partial_last_line_waits_for_its_newline(tree):
    lines = flat_lines()
    data_start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tod")) + 1
    bad = tree / "bad" / "flatfile.html"
    row = lines[data_start + 1]
    bad.write_text("".join(lines[: data_start + 1]) + row[:40])  # vdbench half-way through a row
    s = Scraper(tree)
    sm = s.scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_run_intervals_total", source=src) == 1
    assert value(sm, "vdbench_source_up", source=src) == 1
    assert value(sm, "vdbench_source_rejected_lines_total", source=src, reason="wrong_column_count") == 0
    with open(bad, "a") as fh:
        fh.write(row[40:])
    sm = s.scrape()
    assert value(sm, "vdbench_run_intervals_total", source=src) == 2
    good_still_served(sm, tree)


def test_convert_reports_a_cut_off_last_line(tmp_path):
    d = tmp_path / "cut"
    d.mkdir()
    text = (SOLARIS / "flatfile.html").read_text()
    (d / "flatfile.html").write_text(text[: len(text) - 200])
    out = subprocess.run([venv_tool("vdbench-exporter"), "convert", str(d)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"{d / 'flatfile.html'}: truncated: its last line is cut off" in out.stderr
    assert 'vdbench_source_error_info{file="flatfile.html",reason="truncated"' in out.stdout
    assert promtool_check_metrics(out.stdout).returncode == 0


def test_garbage_lines_are_counted_by_reason_and_skipped(tree, caplog):
    lines = flat_lines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tod")) + 1
    good_row = lines[head + 1]
    tokens = good_row.split()
    garbage = [
        " ".join(["nan" if i == 4 else t for i, t in enumerate(tokens)]) + "\n",  # rate NaN
        " ".join(["-5" if i == 4 else t for i, t in enumerate(tokens)]) + "\n",  # negative
        " ".join(["lots" if i == 5 else t for i, t in enumerate(tokens)]) + "\n",  # text
        " ".join(tokens[:10]) + "\n",  # a row cut short by a crash
        "\x00\x00\x00binary\n",
        "x" * 100_000 + "\n",  # over MAX_LINE_BYTES
    ]
    (tree / "bad" / "flatfile.html").write_text("".join(lines[:head]) + "".join(garbage) + good_row)
    with caplog.at_level(logging.WARNING):
        sm = Scraper(tree).scrape()
    src = tree / "bad"
    rejected = rejected_by_reason(sm, "vdbench_source_rejected_lines_total", src)
    assert rejected == {
        "not_a_number": 1,
        "invalid_value": 2,  # nan, -5
        "wrong_column_count": 1,
        "before_header": 0,
        "bad_header": 0,
        "too_long": 1,
        "not_text": 1,
    }
    assert value(sm, "vdbench_run_intervals_total", source=src) == 1  # the one good row
    assert value(sm, "vdbench_source_up", source=src) == 1  # garbage lines do not take the file down
    assert any(
        str(src / "flatfile.html") in r.getMessage() and "invalid_value" in r.getMessage() for r in caplog.records
    )
    good_still_served(sm, tree)


def test_binary_file_is_not_vdbench(tree, caplog):
    (tree / "bad" / "flatfile.html").write_bytes(os.urandom(300_000))
    with caplog.at_level(logging.WARNING):
        sm = Scraper(tree).scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_source_up", source=src) == 0
    assert value(sm, "vdbench_source_error_info", source=src, file="flatfile.html", reason="not_vdbench") == 1
    assert value(sm, "vdbench_up") == 0
    assert not has(sm, "vdbench_run_read_ops_total", source=src)
    assert any("not_vdbench" in r.getMessage() and str(src) in r.getMessage() for r in caplog.records)
    good_still_served(sm, tree)


@pytest.mark.parametrize("how", ["truncated", "rewritten_in_place", "replaced"])
def test_flatfile_rewritten_while_tailed_is_read_from_the_start(tree, how):
    bad = tree / "bad" / "flatfile.html"
    shutil.copy(tree / "good" / "flatfile.html", bad)
    s = Scraper(tree)
    sm = s.scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_run_intervals_total", source=src, run="rd3") == 60
    new = (SOLARIS / "flatfile.html").read_text()
    if how == "truncated":
        bad.write_text(new)  # shorter than what was read
    elif how == "rewritten_in_place":
        # same inode, longer than before, different first bytes
        with open(bad, "r+") as fh:
            fh.write(new + "*" * (bad.stat().st_size - len(new) + 10) + "\n")
    else:
        tmp = bad.with_name("new.tmp")
        tmp.write_text(new)
        os.replace(tmp, bad)
    sm = s.scrape()
    assert value(sm, "vdbench_source_resets_total", source=src) == 1
    assert not has(sm, "vdbench_run_intervals_total", source=src, run="rd3")
    assert value(sm, "vdbench_run_intervals_total", source=src, run="rd1", seq=1) == 3
    assert value(sm, "vdbench_run_read_ops_total", source=src, run="rd1") == 1500  # the new file's only
    good_still_served(sm, tree)


def test_non_utf8_names_are_data(tree):
    raw = os.fsencode(str(tree)) + b"/run-\xff\xfe"
    os.mkdir(raw)
    shutil.copy(SOLARIS / "flatfile.html", os.fsdecode(raw + b"/flatfile.html"))
    report = (MULTI / "hd1.html").read_text().replace("host=hd1", "host=h\u00f6st-\u2603")
    (tree / "good" / "hd1.html").write_text(report)
    text = Scraper(tree).exposition()
    sm = samples(text)
    assert value(sm, "vdbench_run_read_ops_total", source=f"{tree}/run-\ufffd\ufffd") == 1500
    assert value(sm, "vdbench_host_average_iops", source=tree / "good", host="h\u00f6st-\u2603", run="rd1") == 25.05
    good_still_served(sm, tree)


def test_unreadable_flatfile_and_oversized_parmfile(tree, caplog):
    (tree / "bad" / "flatfile.html").mkdir()  # listed, cannot be opened (root reads any mode bits)
    (tree / "bad" / "parmfile.html").write_text("sd=sd1,lun=/dev/sdb\n" + "*" * (5 * 2**20))
    with caplog.at_level(logging.WARNING):
        sm = Scraper(tree).scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_source_error_info", source=src, file="flatfile.html", reason="unreadable") == 1
    assert value(sm, "vdbench_source_error_info", source=src, file="parmfile.html", reason="too_large") == 1
    assert value(sm, "vdbench_source_read_errors_total", source=src, file="flatfile.html") == 1
    assert not has(sm, "vdbench_parmfile_sd_info", source=src)  # never guessed from a file not read
    assert value(sm, "vdbench_up") == 0
    assert any("flatfile.html" in r.getMessage() and "down (unreadable)" in r.getMessage() for r in caplog.records)
    good_still_served(sm, tree)


def test_a_symlink_out_of_the_watched_directory_is_refused(tree, tmp_path, caplog):
    """A file of an output directory that is a symlink leading out of the watched directory is
    refused (down, unreadable, counted, one log line naming it and where it leads); a symlink to
    another output directory inside the watched one is read."""
    outside = tmp_path / "outside"
    shutil.copytree(MULTI, outside)
    for name in ("flatfile.html", "parmfile.html"):
        (tree / "bad" / name).symlink_to(outside / name)
    (tree / "bad" / "hd1.html").symlink_to(outside / "hd1.html")  # a host report is sniffed first
    (tree / "linked").mkdir()
    for name in ("flatfile.html", "parmfile.html"):
        (tree / "linked" / name).symlink_to(f"../good/{name}")
    scraper = Scraper(tree)
    with caplog.at_level(logging.WARNING):
        sm = scraper.scrape()
        scraper.scrape()
    refused = [r.getMessage() for r in caplog.records if "hd1.html" in r.getMessage()]
    assert refused == [
        f"vdbench file {tree / 'bad' / 'hd1.html'} is not read: a symbolic link to {outside / 'hd1.html'}, "
        f"outside the watched directory {tree}: not followed (only files inside a watched directory are read)"
    ]
    assert not has(sm, "vdbench_host_average_iops", source=tree / "bad", host="hd1")  # not read
    assert has(sm, "vdbench_host_average_iops", source=tree / "good", host="hd1")
    src = tree / "bad"
    for name in ("flatfile.html", "parmfile.html"):
        assert value(sm, "vdbench_source_error_info", source=src, file=name, reason="unreadable") == 1
        assert (
            f"vdbench file {src / name} is down (unreadable): a symbolic link to {outside / name}, outside the "
            f"watched directory {tree}: not followed" in caplog.text
        )
    assert value(sm, "vdbench_source_read_errors_total", source=src, file="flatfile.html") == 1
    assert not has(sm, "vdbench_run_average_iops", source=src)
    assert not has(sm, "vdbench_parmfile_sd_info", source=src)
    assert value(sm, "vdbench_run_average_iops", source=tree / "linked", run="rd2") == GOOD_RD2_AVG
    assert value(sm, "vdbench_source_up", source=tree / "linked") == 1
    good_still_served(sm, tree)


def test_missing_watched_path_gives_up_0(tmp_path, caplog):
    w = Watcher(WatchConfig(paths=[str(tmp_path / "gone")]))
    with caplog.at_level(logging.WARNING):
        text = exposition_of(VdbenchCollector(w))
    assert value(samples(text), "vdbench_up") == 0
    assert any(str(tmp_path / "gone") in r.getMessage() for r in caplog.records)


def test_a_bug_in_one_directory_costs_only_that_directory(tree, monkeypatch):
    shutil.copy(SOLARIS / "flatfile.html", tree / "bad" / "flatfile.html")
    real = collector_module.VdbenchCollector._run_facts

    def boom(self, fams, d, labels, run):
        if d.path.endswith("bad"):
            raise RuntimeError("a bug")
        return real(self, fams, d, labels, run)

    monkeypatch.setattr(collector_module.VdbenchCollector, "_run_facts", boom)
    sm = Scraper(tree).scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_source_error_info", source=src, reason="internal_error") == 1
    assert not has(sm, "vdbench_run_read_ops_total", source=src)  # nothing half-built
    assert value(sm, "vdbench_up") == 0
    good_still_served(sm, tree)


def test_large_backlog_is_read_in_bounded_polls(tree, monkeypatch):
    """A flatfile bigger than the per-poll budget is read over several polls to the same values."""
    lines = (tree / "good" / "flatfile.html").read_text()
    (tree / "bad" / "flatfile.html").write_text(lines)
    shutil.copy(tree / "good" / "parmfile.html", tree / "bad")  # the same interval=1
    monkeypatch.setattr(linetail_module, "MAX_READ_BYTES", 4096)  # LineTailer lives in common/linetail.py
    monkeypatch.setattr(tailer_module.LineTailer.read_chunks, "__defaults__", (4096,))
    s = Scraper(tree)
    polls = 0
    while True:
        sm = s.scrape()
        polls += 1
        d = s.watcher.dirs[str(tree / "bad")]
        if d.files["flatfile.html"].tailer.offset >= d.files["flatfile.html"].tailer.size:
            break
    assert polls > 10
    for run in ("rd1", "rd2", "rd3"):
        assert value(sm, "vdbench_run_read_ops_total", source=tree / "bad", run=run) == value(
            sm, "vdbench_run_read_ops_total", source=tree / "good", run=run
        )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_parsers_raise_nothing_but_invalid_line(lines):
    flat, table = FlatfileParser(), SummaryTableParser()
    flat.feed("  tod Run Interval reqrate rate MB/sec read% resp")
    for line in lines:
        for p in (flat, table):
            try:
                p.feed(line)
            except InvalidLine:
                pass
    parse_parmfile("\n".join(lines))


def test_old_results_copied_in_stay_visible_for_the_retention(tmp_path):
    """Results copied with their 2016 mtimes are shown for the retention from when they were found,
    then only their health series remain."""
    shutil.copytree(MULTI, tmp_path / "old")  # copy2: the files keep their old times
    now = [1_800_000_000.0]
    w = Watcher(WatchConfig(paths=[str(tmp_path)], retention_s=900), clock=lambda: now[0])
    collector = VdbenchCollector(w)
    sm = samples(exposition_of(collector))
    assert value(sm, "vdbench_run_average_iops", run="rd2") == GOOD_RD2_AVG
    assert value(sm, "vdbench_source_finished") == 1
    now[0] += 901
    sm = samples(exposition_of(collector))
    assert not has(sm, "vdbench_run_average_iops")
    assert value(sm, "vdbench_source_up") == 1


def test_a_directory_that_cannot_be_listed_hides_its_runs(tree, monkeypatch, caplog):
    shutil.copy(SOLARIS / "flatfile.html", tree / "bad" / "flatfile.html")
    s = Scraper(tree)
    sm = s.scrape()
    assert value(sm, "vdbench_run_read_ops_total", source=tree / "bad") == 1500
    real = tailer_module.DirectoryState.poll

    def denied(self, deadline=None):
        if self.path.endswith("bad"):
            raise PermissionError(13, "Permission denied")
        return real(self, deadline)

    monkeypatch.setattr(tailer_module.DirectoryState, "poll", denied)
    with caplog.at_level(logging.WARNING):
        sm = s.scrape()
    src = tree / "bad"
    assert value(sm, "vdbench_source_up", source=src) == 0
    assert value(sm, "vdbench_source_error_info", source=src, file="", reason="unreadable") == 1
    assert not has(sm, "vdbench_run_read_ops_total", source=src)  # never stale values as fresh
    assert any(str(src) in r.getMessage() and "Permission denied" in r.getMessage() for r in caplog.records)
    good_still_served(sm, tree)
    monkeypatch.setattr(tailer_module.DirectoryState, "poll", real)
    sm = s.scrape()
    assert value(sm, "vdbench_source_up", source=src) == 1
    assert value(sm, "vdbench_run_read_ops_total", source=src) == 1500


# ------------------------------------------------------------------------- issue 33: big files
def repeated_row_flatfile(path: Path, megabytes: int) -> int:
    """The real flatfile's header, then its first interval row repeated to ``megabytes`` (the
    hostile audit's file: every row interval 1 of rd1, so each starts a new run). Written a block
    at a time (seconds for 200 MB); the number of rows."""
    lines = (MULTI / "flatfile.html").read_text().splitlines(keepends=True)
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tod")) + 1
    row = next(ln for ln in lines[head:] if ln.split()[2].isdigit())
    block = row * 10_000
    rows, written = 0, 0
    with path.open("w") as fh:
        fh.writelines(lines[:head])
        while written < megabytes * 2**20:
            fh.write(block)
            written += len(block)
            rows += 10_000
    return rows


def test_runs_kept_per_file_are_bounded_and_the_rest_counted(tree, caplog):
    """1,100 runs of one row each (the same interval number over and over): the newest 1,024
    are shown, numbered 77..1100, the 76 others counted as dropped, one warning."""
    lines = (MULTI / "flatfile.html").read_text().splitlines(keepends=True)
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tod")) + 1
    row = next(ln for ln in lines[head:] if ln.split()[2].isdigit())
    (tree / "bad" / "flatfile.html").write_text("".join(lines[:head]) + row * 1100)
    with caplog.at_level(logging.WARNING):
        sm = Scraper(tree).scrape()
    bad = tree / "bad"
    assert value(sm, "vdbench_source_rows_total", source=bad, file="flatfile.html") == 1100
    assert value(sm, "vdbench_source_runs_dropped_total", source=bad, file="flatfile.html") == 76
    seqs = sorted(
        int(dict(k)["seq"])
        for (name, k) in sm
        if name == "vdbench_run_intervals_total" and dict(k)["source"] == str(bad)
    )
    assert seqs == list(range(77, 1101))
    assert value(sm, "vdbench_source_runs_dropped_total", source=tree / "good", file="flatfile.html") == 0
    assert sum("only the newest 1024 are kept" in r.getMessage() for r in caplog.records) == 1


def test_a_200_mb_flatfile_is_served_in_bounded_memory(tmp_path, processes):
    """A 200 MB flatfile of one row repeated (660,000 one-row runs) through a real exporter:
    every scrape answers (each reads at most READ_SECONDS_PER_POLL of the backlog; the timing
    is in bench/vdbench_read.py), the file is read to its end over several scrapes, and the
    peak RSS stays under 500 MB (it passed 3.3 GB: every run kept)."""
    d = tmp_path / "big"
    d.mkdir()
    rows = repeated_row_flatfile(d / "flatfile.html", 200)
    port = free_port()
    proc = processes.start(
        "vdbench-exporter",
        [venv_tool("vdbench-exporter"), "--web.listen-address", f"127.0.0.1:{port}", "--vdbench.watch", str(d)],
    )
    wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
    scrapes = 0
    while True:  # each scrape reads a part of the backlog; the file is bounded, so this ends
        r = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=120)
        assert r.status_code == 200
        scrapes += 1
        sm = samples(r.text)
        read = value(sm, "vdbench_source_rows_total", source=d, file="flatfile.html")
        if read == rows:
            break
        assert scrapes < 200, f"{read} of {rows} rows after {scrapes} scrapes"
    assert scrapes > 1, "a 200 MB backlog is read over several scrapes"
    assert value(sm, "vdbench_source_runs_dropped_total", source=d, file="flatfile.html") == rows - 1024
    status = Path(f"/proc/{proc.popen.pid}/status").read_text()
    hwm_kb = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
    assert hwm_kb < 500 * 1024, f"peak RSS {hwm_kb} kB"
