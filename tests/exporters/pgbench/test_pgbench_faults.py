"""pgbench-exporter on hostile and broken input: garbage lines, cut-off lines, files that shrink
or are replaced while followed, NUL bytes, huge lines, files that are not pgbench output,
unreadable files. One file's trouble must never cost another file its series, nor take
/metrics down; a file that is down never shows stale values as fresh."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ioparallax.exporters.pgbench import reader as tailer_module
from ioparallax.exporters.pgbench.collector import PgbenchCollector
from ioparallax.exporters.pgbench.parse import InvalidLine, Summary, classify
from ioparallax.exporters.pgbench.reader import WatchConfig, Watcher
from tests.exporters.pgbench.test_pgbench_reader import PG14, PG15
from tests.support import (
    WatchScraper,
    exposition_of,
    has,
    promtool_check_metrics,
    rejected_by_reason,
    samples,
    value,
    venv_tool,
    watched_dir,
)


@pytest.fixture()
def tree(tmp_path):
    """A watched directory with a real finished run (pgbench-good.out) beside the file under test."""
    return watched_dir(tmp_path, "results", PG15, "pgbench-good.out")


class Scraper(WatchScraper):
    def __init__(self, root: Path, extra: list[str] | None = None):
        watcher = Watcher(WatchConfig(paths=[str(root), *(extra or [])], retention_s=float("inf")))
        super().__init__(watcher, PgbenchCollector(watcher))


def good_still_served(sm: dict, root: Path) -> None:
    good = root / "pgbench-good.out"
    assert value(sm, "pgbench_transactions_total", source=good, run=1) == 12221
    assert value(sm, "pgbench_source_up", source=good) == 1


def test_partial_last_line_waits_for_its_newline(tree):
    lines = PG15.read_text().splitlines(keepends=True)
    bad = tree / "pgbench-bad.out"
    bad.write_text("".join(lines[:3]) + lines[3][:25])  # pgbench half-way through a progress line
    s = Scraper(tree)
    sm = s.scrape()
    assert value(sm, "pgbench_intervals_total", source=bad, run=1) == 1
    assert value(sm, "pgbench_source_rejected_lines_total", source=bad, reason="bad_progress") == 0
    with open(bad, "a") as fh:
        fh.write(lines[3][25:])
    sm = s.scrape()
    assert value(sm, "pgbench_intervals_total", source=bad, run=1) == 2
    assert value(sm, "pgbench_transactions_total", source=bad, run=1) == 4443 + 2949
    good_still_served(sm, tree)


def test_convert_reports_a_cut_off_last_line(tmp_path):
    cut = tmp_path / "pgbench.out"
    text = PG15.read_text()
    cut.write_text(text[: text.index("tps = ") + len("tps = 406.26")])  # killed while writing the summary
    out = subprocess.run(
        [venv_tool("pgbench-exporter"), "convert", str(cut)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1
    assert f"{cut}: truncated: its last line is cut off" in out.stderr
    assert 'pgbench_source_error_info{reason="truncated"' in out.stdout
    # what was read before the cut is still the run's: its progress, not the summary's total
    sm = samples(out.stdout)
    assert value(sm, "pgbench_transactions_total", source=cut, run=1) == 4443 + 2949 + 4779
    assert value(sm, "pgbench_run_finished", source=cut, run=1) == 1  # the file ended (convert)
    assert not has(sm, "pgbench_run_reported_tps", source=cut)
    assert promtool_check_metrics(out.stdout).returncode == 0


def test_convert_of_a_file_without_pgbench_data_fails(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("starting vacuum...end.\nsomething else\n")
    out = subprocess.run(
        [venv_tool("pgbench-exporter"), "convert", str(other)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1
    assert f"{other}: no pgbench data" in out.stderr


def test_garbage_lines_are_counted_by_reason_and_skipped(tree, caplog):
    lines = PG15.read_text().splitlines(keepends=True)
    garbage = [
        "progress: 40.0 s, nan tps, lat 1.0 ms stddev 0.1, 0 failed\n",
        "progress: 40.0 s, -3.0 tps, lat 1.0 ms stddev 0.1, 0 failed\n",
        "progress: 40.0 s, 47\n",  # a line cut by a crash, then more output
        "number of failed transactions: many (0.000%)\n",
        "1650260552 5178 26171317 177284491527 1136 44462" + " 1" * 11 + "\n",  # 17 fields
        "\x00\x00\x00binary\n",
        "x" * 100_000 + "\n",  # over MAX_LINE_BYTES
    ]
    bad = tree / "pgbench-bad.out"
    bad.write_text("".join(lines[:3]) + "".join(garbage) + "".join(lines[3:]))
    with caplog.at_level(logging.WARNING):
        sm = Scraper(tree).scrape()
    rejected = rejected_by_reason(sm, "pgbench_source_rejected_lines_total", bad)
    assert rejected == {
        "bad_progress": 1,
        "bad_summary": 0,
        "bad_log_line": 0,
        "wrong_field_count": 1,
        "not_a_number": 1,  # "many"
        "invalid_value": 2,  # nan, -3.0
        "too_long": 1,
        "not_text": 1,
    }
    # the real lines around the garbage are all there: the run is the real one
    assert value(sm, "pgbench_transactions_total", source=bad, run=1) == 12221
    assert value(sm, "pgbench_intervals_total", source=bad, run=1) == 3
    assert value(sm, "pgbench_source_up", source=bad) == 1  # garbage lines do not take the file down
    assert any(str(bad) in r.getMessage() and "invalid_value" in r.getMessage() for r in caplog.records)
    good_still_served(sm, tree)


def test_a_file_that_shrinks_is_read_again_as_a_new_run(tree):
    """pgbench > out truncates the file when the next run starts: the counters start over (a
    reset Prometheus' rate() handles), never a mix of the two runs."""
    live = tree / "pgbench-live.out"
    live.write_text(PG14.read_text())
    s = Scraper(tree)
    sm = s.scrape()
    assert value(sm, "pgbench_transactions_total", source=live, run=1) == 148071
    live.write_text("\n".join(PG15.read_text().splitlines()[:4]) + "\n")  # shorter: truncated
    sm = s.scrape()
    assert value(sm, "pgbench_source_resets_total", source=live) == 1
    assert value(sm, "pgbench_transactions_total", source=live, run=1) == 4443 + 2949
    assert value(sm, "pgbench_source_up", source=live) == 1
    good_still_served(sm, tree)


def test_a_file_replaced_by_another_is_read_from_the_start(tree):
    live = tree / "pgbench-live.out"
    live.write_text(PG15.read_text())
    s = Scraper(tree)
    s.scrape()
    replacement = tree / "next.tmp"
    replacement.write_text(PG14.read_text())
    os.replace(replacement, live)
    sm = s.scrape()
    assert value(sm, "pgbench_source_resets_total", source=live) == 1
    assert value(sm, "pgbench_transactions_total", source=live, run=1) == 148071
    assert not has(sm, "pgbench_transactions_total", source=live, run=2)


def test_a_large_file_of_something_else_is_not_pgbench(tree):
    other = tree / "pgbench-notes.txt"
    other.write_text("a line that is not pgbench output\n" * 10_000)
    sm = Scraper(tree).scrape()
    assert value(sm, "pgbench_source_up", source=other) == 0
    assert value(sm, "pgbench_source_error_info", source=other, reason="not_pgbench") == 1
    assert value(sm, "pgbench_up") == 0
    good_still_served(sm, tree)


def test_an_unreadable_file_is_down_and_its_data_hidden(tree, tmp_path):
    """A followed file replaced by something that cannot be read as a file (here a FIFO, which
    would block a plain open() for ever; unreadable for root as for anyone): down, its data
    hidden, the other files served."""
    locked = tmp_path / "pgbench-locked.out"
    locked.write_text(PG14.read_text())
    s = Scraper(tree, extra=[str(locked)])
    sm = s.scrape()
    assert value(sm, "pgbench_transactions_total", source=locked, run=1) == 148071
    locked.unlink()
    os.mkfifo(locked)
    sm = s.scrape()
    assert value(sm, "pgbench_source_up", source=locked) == 0
    assert value(sm, "pgbench_source_error_info", source=locked, reason="unreadable") == 1
    assert value(sm, "pgbench_source_read_errors_total", source=locked) == 1
    assert not has(sm, "pgbench_transactions_total", source=locked)
    assert value(sm, "pgbench_up") == 0
    good_still_served(sm, tree)


def test_a_bug_on_one_file_costs_only_that_file(tree, monkeypatch):
    broken = tree / "pgbench-broken.out"
    broken.write_text(PG14.read_text())
    real = tailer_module.FileState.feed

    def feed(self, raw):
        if self.path == str(broken):
            raise RuntimeError("a bug")
        return real(self, raw)

    monkeypatch.setattr(tailer_module.FileState, "feed", feed)
    sm = Scraper(tree).scrape()
    assert value(sm, "pgbench_source_error_info", source=broken, reason="internal_error") == 1
    assert not has(sm, "pgbench_transactions_total", source=broken)
    assert value(sm, "pgbench_up") == 0
    good_still_served(sm, tree)


def test_a_missing_watched_path_is_reported_not_raised(tmp_path):
    w = Watcher(WatchConfig(paths=[str(tmp_path / "nope")]))
    sm = samples(exposition_of(PgbenchCollector(w)))
    assert value(sm, "pgbench_up") == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_the_parser_raises_nothing_but_invalid_line(lines):
    s = Summary()
    for line in lines:
        try:
            classify(line.strip(), s)
        except InvalidLine:
            pass


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(PG15.read_text().splitlines() + ["progress: 1.0 s, ", "1650260552 5", "", "tps = "]),
        max_size=30,
    )
)
def test_any_mix_of_real_lines_gives_a_valid_exposition(tmp_path_factory, lines):
    d = tmp_path_factory.mktemp("mix")
    (d / "pgbench.out").write_text("\n".join(lines) + "\n")
    w = Watcher(WatchConfig(paths=[str(d)], retention_s=float("inf")))
    text = exposition_of(PgbenchCollector(w))
    totals = [v for (n, _), v in samples(text).items() if n == "pgbench_transactions_total"]
    assert all(v >= 0 for v in totals)
