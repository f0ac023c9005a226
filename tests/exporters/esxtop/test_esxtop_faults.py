"""Broken and hostile esxtop/vscsiStats files: one bad file never hides the others nor takes
/metrics down, garbage is counted and skipped with a reason, a file rewritten or shrunk is read
again from the start, a line being written waits for its newline, a new header mid-file (esxtop
restarted into the same file) is followed.

Every case puts the bad file beside the real NFS capture and asserts the bad file's state, its
log line, the good file still served with its own values, and an exposition that
``promtool check metrics`` accepts with no series twice.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from ioparallax.exporters.esxtop.collector import EsxtopCollector
from ioparallax.exporters.esxtop.hygiene import HygieneConfig
from ioparallax.exporters.esxtop.reader import WatchConfig, Watcher
from tests.exporters.esxtop.test_esxtop_reader import BUILT, NFS, VSCSI
from tests.support import (
    WatchScraper,
    assert_clean,
    has,
    rejected_by_reason,
    run_entry_point,
    samples,
    value,
    watched_dir,
)

NFS_READS = 418.35 * 3 + 481.29 * 4 + 352.22 * 3 + 430.02 * 3
DEVICE = "naa.6000c29a5e3b2f1d0c9b8a7f6e5d4c3b"


@pytest.fixture()
def folder(tmp_path):
    return watched_dir(tmp_path, "captures", NFS, "good.csv")


class Scraper(WatchScraper):
    def __init__(self, root: Path, clock=None, **hygiene):
        kw = {"clock": clock} if clock else {}
        watcher = Watcher(WatchConfig(paths=[str(root)], retention_s=float("inf")), **kw)
        super().__init__(watcher, EsxtopCollector(watcher, HygieneConfig(**hygiene), **kw))


def good_still_served(sm: dict, root: Path) -> None:
    assert value(sm, "esxtop_nfs_volume_read_ops_total", source=root / "good.csv") == pytest.approx(NFS_READS)
    assert value(sm, "esxtop_source_up", source=root / "good.csv") == 1


def built_lines() -> list[str]:
    return BUILT.read_text().splitlines(keepends=True)


def test_a_row_being_written_waits_for_its_newline(folder):
    lines = built_lines()
    bad = folder / "live.csv"
    cut = len(lines[2]) // 2
    bad.write_text(lines[0] + lines[1] + lines[2][:cut])  # esxtop half-way through its 2nd sample
    s = Scraper(folder)
    sm = s.scrape()
    src = folder / "live.csv"
    assert value(sm, "esxtop_source_rows_total", source=src) == 1
    assert value(sm, "esxtop_source_rejected_lines_total", source=src, reason="wrong_column_count") == 0
    assert value(sm, "esxtop_device_samples_total", device=DEVICE) == 0  # the 1st waits for an interval
    with open(bad, "a") as fh:
        fh.write(lines[2][cut:])
    sm = s.scrape()
    assert value(sm, "esxtop_source_rows_total", source=src) == 2
    assert value(sm, "esxtop_device_commands_total", device=DEVICE) == (1200 + 1500) * 2
    good_still_served(sm, folder)


def test_convert_reports_a_cut_off_last_line(tmp_path):
    cut = tmp_path / "cut.csv"
    text = BUILT.read_text()
    cut.write_text(text[: len(text) - 300])
    out = run_entry_point("esxtop-exporter", ["convert", cut])
    assert out.returncode == 1
    assert f"{cut}: truncated: its last line is cut off" in out.stderr
    sm = samples(out.stdout)
    assert value(sm, "esxtop_source_error_info", source=cut, reason="truncated") == 1
    assert value(sm, "esxtop_source_rows_total", source=cut) == 2  # the complete samples are kept
    assert_clean(out.stdout)


def test_garbage_lines_and_values_are_counted_by_reason_and_skipped(folder, caplog):
    lines = built_lines()
    cells = lines[2].rstrip("\r\n").split('","')
    # cells 11-13: Commands, Reads and Writes/sec of app-01:scsi0:0 (4-10 are the VM's own row, not read)
    nan_row = '","'.join(cells[:11] + ["nan", "-1.00", "lots"] + cells[14:]) + "\r\n"
    garbage = [
        lines[0],
        lines[1],
        lines[2][:400] + '"\n',  # a row cut short by a crash
        '"11/28/2026 10:00:01","1.00"\n',  # a row of another layout
        "not,a,csv row\n",
        '"31/31/2026 10:00:06"' + lines[3][len('"11/28/2026 10:00:04"') :],  # no such date
        lines[1],  # time going backwards
        "\x00\x00binary\x00\n",
        '"' + "x" * (17 * 2**20) + '"\n',  # over MAX_LINE_BYTES
        nan_row.replace("10:00:02", "10:00:03"),
        lines[3],
    ]
    (folder / "bad.csv").write_text("".join(garbage))
    with caplog.at_level(logging.WARNING):
        sm = Scraper(folder).scrape()
    src = folder / "bad.csv"
    rejected = rejected_by_reason(sm, "esxtop_source_rejected_lines_total", src)
    assert rejected == {
        "before_header": 0,  # a file that starts with rows is not an esxtop capture (not_esxtop)
        "bad_header": 0,
        "not_csv": 1,
        "wrong_column_count": 2,
        "bad_timestamp": 1,
        "time_not_increasing": 1,
        "too_long": 1,
        "not_text": 1,
    }
    assert value(sm, "esxtop_source_rejected_values_total", source=src, reason="not_a_number") == 1
    assert value(sm, "esxtop_source_rejected_values_total", source=src, reason="invalid_value") == 2  # nan, -1
    assert value(sm, "esxtop_source_rows_total", source=src) == 3  # 10:00:00, 10:00:03, 10:00:04
    assert value(sm, "esxtop_source_up", source=src) == 1  # garbage lines do not take the file down
    assert any(str(src) in r.getMessage() and "time_not_increasing" in r.getMessage() for r in caplog.records)
    good_still_served(sm, folder)


def test_binary_and_foreign_files_are_down_and_hide_nothing(folder, caplog):
    (folder / "random.csv").write_bytes(os.urandom(20_000))
    (folder / "perfmon.csv").write_text('"Time","\\\\h\\Memory\\Available MBytes"\n"1","2"\n')
    (folder / "empty.csv").write_text("")
    s = Scraper(folder)
    with caplog.at_level(logging.WARNING):
        sm = s.scrape()
    for name in ("random.csv", "perfmon.csv"):
        assert value(sm, "esxtop_source_error_info", source=folder / name, reason="not_esxtop") == 1
    assert value(sm, "esxtop_source_up", source=folder / "empty.csv") == 1  # nothing written yet: waits
    assert value(sm, "esxtop_up") == 0
    assert any("not_esxtop" in r.getMessage() and "perfmon.csv" in r.getMessage() for r in caplog.records)
    good_still_served(sm, folder)
    # the foreign file replaced by a capture, the empty one written: both read at the next scrape
    tmp = folder / "new.tmp"
    shutil.copy(BUILT, tmp)
    os.replace(tmp, folder / "perfmon.csv")
    shutil.copy(NFS, folder / "empty.csv")
    sm = s.scrape()
    assert value(sm, "esxtop_source_up", source=folder / "perfmon.csv") == 1
    assert value(sm, "esxtop_device_commands_total", source=folder / "perfmon.csv") == 17400
    assert value(sm, "esxtop_nfs_volume_samples_total", source=folder / "empty.csv") == 10


def test_a_new_header_mid_file_is_followed(folder, caplog):
    """esxtop restarted with >> into the same file, with a VM more: a second header line; the
    objects both layouts have go on counting, the new one starts."""
    lines = built_lines()
    second = lines[0].replace(
        '"(PDH-CSV 4.0) (UTC)(0)",', '"(PDH-CSV 4.0) (UTC)(0)","\\\\esx01.lab.local\\Memory\\Free MBytes",'
    )
    later = ['"11/28/2026 10:00:06","512.00",' + ln.split(",", 1)[1] for ln in lines[3:4]]
    later.append('"11/28/2026 10:00:08","512.00",' + lines[3].split(",", 1)[1])
    (folder / "restarted.csv").write_text("".join(lines) + second + "".join(later))
    with caplog.at_level(logging.INFO):
        sm = Scraper(folder).scrape()
    src = folder / "restarted.csv"
    assert value(sm, "esxtop_source_headers_total", source=src) == 2
    assert value(sm, "esxtop_source_columns", source=src) == 128
    assert value(sm, "esxtop_source_rows_total", source=src) == 5
    assert value(sm, "esxtop_source_rejected_lines_total", source=src, reason="wrong_column_count") == 0
    # 10:00:00-04 as before, then 6000 commands/s for 2 more samples of 2 s
    assert value(sm, "esxtop_device_commands_total", device=DEVICE, source=src) == (1200 + 1500 + 6000 * 3) * 2
    assert any("a new header line" in r.getMessage() for r in caplog.records)
    good_still_served(sm, folder)


@pytest.mark.parametrize("how", ["shrinks", "rewritten_in_place", "replaced"])
def test_a_capture_rewritten_while_followed_is_read_from_the_start(folder, how):
    bad = folder / "host.csv"
    shutil.copy(BUILT, bad)
    s = Scraper(folder)
    sm = s.scrape()
    assert value(sm, "esxtop_device_commands_total", device=DEVICE) == 17400
    new = NFS.read_text()
    if how == "shrinks":
        bad.write_text(new)  # a new capture started into the same name, shorter than what was read
    elif how == "rewritten_in_place":
        text = BUILT.read_text().replace("esx01.lab.local", "esx02.lab.local")
        with open(bad, "r+") as fh:
            fh.write(
                text
                + '"11/28/2026 10:00:06"'
                + BUILT.read_text().splitlines()[3][len('"11/28/2026 10:00:04"') :]
                + "\n"
            )
    else:
        tmp = folder / "new.tmp"
        tmp.write_text(new)
        os.replace(tmp, bad)
    sm = s.scrape()
    assert value(sm, "esxtop_source_resets_total", source=bad) == 1
    if how == "rewritten_in_place":
        assert value(sm, "esxtop_device_commands_total", device=DEVICE, host="esx02.lab.local") == 17400 + 6000 * 2
        assert not has(sm, "esxtop_device_commands_total", host="esx01.lab.local")
    else:
        assert not has(sm, "esxtop_device_commands_total")  # the old capture's counters are gone
        assert value(sm, "esxtop_nfs_volume_read_ops_total", source=bad) == pytest.approx(NFS_READS)
    good_still_served(sm, folder)


def test_unreadable_and_broken_vscsistats(folder, caplog):
    (folder / "dir.csv").mkdir()  # matches the pattern, is no file: not listed
    broken = VSCSI.read_text().replace("count,793", "count,800", 1)
    (folder / "vscsi.csv").write_text(broken)
    with caplog.at_level(logging.WARNING):
        sm = Scraper(folder).scrape()
    src = folder / "vscsi.csv"
    assert value(sm, "esxtop_source_error_info", source=src, reason="corrupt") == 1
    assert not has(sm, "vscsistats_io_length_bytes_bucket")
    assert any("count says 800" in r.getMessage() for r in caplog.records)
    good_still_served(sm, folder)


def test_host_clock_skew_and_long_delay_while_the_capture_grows(folder):
    lines = built_lines()
    live = folder / "live.csv"
    # samples 10 s apart; the file's mtime is 10:05:00 while its newest sample says 10:00:20
    rows = [f'"11/28/2026 10:00:{s:02d}",' + lines[1].split(",", 1)[1] for s in (0, 10, 20)]
    live.write_text(lines[0] + "".join(rows))
    mtime = 1795860300.0  # 2026-11-28 10:05:00 UTC
    os.utime(live, (mtime, mtime))
    s = Scraper(folder, clock=lambda: mtime + 1)
    sm = s.scrape()
    assert value(sm, "esxtop_source_clock_offset_seconds", source=live) == pytest.approx(-280)
    assert value(sm, "esxtop_source_hygiene_problem", source=live, problem="host_clock_skew") == 1
    assert value(sm, "esxtop_source_hygiene_problem", source=live, problem="long_delay") == 1
    assert not has(sm, "esxtop_source_hygiene_problem", source=live, problem="too_few_samples")  # still growing
