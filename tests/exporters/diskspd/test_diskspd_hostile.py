"""diskspd-exporter against hostile files, round three (issue 25; docs/hostile-input.md), beside
tests/exporters/diskspd/test_diskspd_faults.py: symlinks, names that would forge a line, and labels that
would multiply a file's size in every /metrics answer."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

import pytest

from tests.exporters.diskspd.test_diskspd_exporter import exposition, files_for, has, samples, value
from tests.exporters.diskspd.test_diskspd_faults import GOOD, OLD, UNITTEST, assert_clean, good_beside_bad
from tests.support import venv_tool


def _watch(d) -> str:
    """The exposition of directory ``d``, failing if it takes more than 5 s (a blocked open)."""
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(exposition(files_for(d))), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive() and out, "the exposition hung"
    return out[0]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "dangling", "loop"])
def test_a_symlink_to_anything_but_a_regular_file_is_skipped(kind, tmp_path):
    d, outside = tmp_path / "in", tmp_path / "outside"
    d.mkdir()
    outside.mkdir()
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    link = d / "link.xml"
    if kind == "fifo":
        os.mkfifo(outside / "f")
        link.symlink_to(outside / "f")
    elif kind == "dev-zero":
        link.symlink_to("/dev/zero")
    elif kind == "directory":
        link.symlink_to(outside)
    elif kind == "dangling":
        link.symlink_to(tmp_path / "nowhere.xml")
    else:
        link.symlink_to(link)
    text = _watch(d)
    assert_clean(text)
    sm = samples(text)
    assert not has(sm, "diskspd_source_up", source=str(link))
    assert value(sm, "diskspd_source_up", source=str(d / "good.xml")) == 1.0 and value(sm, "diskspd_up") == 1.0


def test_a_symlink_out_of_the_watched_directory_is_refused(tmp_path, caplog):
    """docs/hostile-input.md: a symlink in the watched directory is read if it stays inside it
    and refused if it leads out (down, unreadable, counted, one log line naming it and where it
    leads), even to a real DiskSPD result: whoever can write the watched directory cannot point
    the exporter at other files its user can read."""
    d, outside = tmp_path / "in", tmp_path / "outside"
    d.mkdir()
    outside.mkdir()
    (outside / "r.xml").write_bytes(GOOD.read_bytes())
    (d / "r.xml").symlink_to(outside / "r.xml")
    (outside / "secret.txt").write_text("password=" + "s" * 200 + "\n")
    (d / "secret.xml").symlink_to(outside / "secret.txt")
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    (d / "inside.xml").symlink_to("good.xml")
    sm = samples(_watch(d))
    assert value(sm, "diskspd_source_up", source=str(d / "good.xml")) == 1.0
    assert value(sm, "diskspd_source_up", source=str(d / "inside.xml")) == 1.0
    for name, target in (("r.xml", "r.xml"), ("secret.xml", "secret.txt")):
        src = str(d / name)
        assert value(sm, "diskspd_source_up", source=src) == 0.0
        assert value(sm, "diskspd_source_error_info", source=src, reason="unreadable") == 1.0
        assert value(sm, "diskspd_source_read_errors_total", source=src) == 1.0
        assert (
            f"DiskSPD result file {src} is down (unreadable): a symbolic link to {outside / target}, outside the "
            f"watched directory {d}: not followed" in caplog.text
        )
    assert "password" not in caplog.text
    assert not any("s" * 50 in str(labels) for _, labels in sm)


def _with_names(host: str = "", path: str = "") -> bytes:
    data = UNITTEST
    if host:
        data = re.sub(r"<ComputerName>[^<]*</ComputerName>", f"<ComputerName>{host}</ComputerName>", data)
    if path:
        data = data.replace("testfile1.dat", path)
    return data.encode()


@pytest.mark.parametrize(
    "data, words",
    [
        (_with_names(host="H" * 1_000_000), "ComputerName is 1000000 characters long (at most 255)"),
        (_with_names(path="P" * 1_000_000), "Path is 1000000 characters long (at most 32767)"),
        (_with_names(path="\\\\?\\D:\\" + "p" * 40_000), "characters long (at most 32767)"),
    ],
    ids=["host-1MB", "path-1MB", "path-40k"],
)
def test_a_huge_name_is_invalid_not_multiplied_into_every_series(data, words, tmp_path, caplog):
    """A 3 MB file with a 1 MB ComputerName and Path made a 50 MB /metrics answer (every series
    of the run carries them); now it is down, and the answer stays small."""
    d = good_beside_bad(tmp_path, data)
    bad = d / "bad.xml"
    text = _watch(d)
    assert len(text) < 200_000, len(text)
    sm = samples(text)
    assert value(sm, "diskspd_source_error_info", source=str(bad), reason="invalid_value") == 1.0
    assert any(words in r.getMessage() and len(r.getMessage()) < 400 for r in caplog.records), caplog.text


def test_many_long_target_paths_are_bounded_per_document(tmp_path):
    profile_target = re.search(r"<Target>\s*<Path>testfile1.dat</Path>.*?</Target>", UNITTEST, re.S)
    assert profile_target is not None
    many = "".join(profile_target.group().replace("testfile1.dat", f"D:\\{i:04d}" + "x" * 2000) for i in range(40))
    data = UNITTEST.replace(profile_target.group(), many, 1)
    f = tmp_path / "many.xml"
    f.write_text(data)
    os.utime(f, (OLD, OLD))
    sm = samples(_watch(f))
    assert value(sm, "diskspd_source_error_info", source=str(f), reason="invalid_value") == 1.0


def test_names_with_control_characters_are_labels_and_escaped_lines(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "ok\x1b[31m.xml").write_bytes(GOOD.read_bytes())
    bad = d / "cut\nTRAP forged.xml"
    bad.write_bytes(b"<Results>")
    os.utime(bad, (OLD, OLD))
    text = _watch(d)
    assert_clean(text)
    assert value(samples(text), "diskspd_source_up", source=str(d / "ok\x1b[31m.xml")) == 1.0
    out = subprocess.run(
        [venv_tool("diskspd-exporter"), "convert", str(bad), str(d / "ok\x1b[31m.xml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # each stderr line is a log line or the convert summary: the newline in the name forged one
    lines = out.stderr.splitlines()
    assert lines and all(line.startswith(("ts=", "diskspd-exporter convert: ")) for line in lines), lines
    assert "cut\\nTRAP forged.xml: truncated" in out.stderr and "\x1b" not in out.stderr


def test_an_exposition_of_a_hostile_directory_stays_fast(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(200):
        (d / f"r{i:03d}.xml").write_bytes(b"<Results>" + b"<a>" * 1000)
    t0 = time.monotonic()
    _watch(d)
    assert time.monotonic() - t0 < 5
