"""ioparallax.exporters.common.watchdir, shared by fio-exporter, diskspd-exporter and
vdbench-exporter: names as data, files that never block (issue 25), and files read only inside
the watched directory they were found in. The exporters' own fault tests prove the same end to
end (tests/exporters/fio/test_fio_faults.py, tests/exporters/diskspd/test_diskspd_faults.py)."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from ioparallax.exporters.common.linetail import LineTailer
from ioparallax.exporters.common.watchdir import (
    display_name,
    list_files,
    open_regular,
    reopened,
    watched_directory,
)


def test_open_regular_reads_a_regular_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"{}\n")
    with open_regular(str(path)) as fh:
        assert fh.read() == b"{}\n"


def _special(tmp_path, kind: str) -> str:
    if kind == "fifo":
        path = tmp_path / "f"
        os.mkfifo(path)
        return str(path)
    if kind == "directory":
        return str(tmp_path)
    if kind == "char_device":
        return "/dev/zero"
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    return str(path)


@pytest.mark.parametrize(
    "kind, words",
    [
        ("fifo", "not a regular file (a FIFO)"),
        ("char_device", "(a character device)"),
        ("directory", "(a directory)"),
        ("socket", ""),
    ],
)
def test_open_regular_refuses_anything_else_at_once(tmp_path, kind, words):
    path = _special(tmp_path, kind)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            open_regular(path).close()
        except OSError as exc:
            outcome.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(30)  # the bug blocked for ever (open() waiting for a writer); a loaded machine is slow, not stuck
    assert not t.is_alive(), "open_regular blocked"
    assert outcome and words in str(outcome[0]), outcome


def test_names_that_are_not_utf8_are_listed_and_shown_escaped(tmp_path):
    with open(os.path.join(os.fsencode(tmp_path), b"a\xff.xml"), "w"):
        pass
    found, missing = list_files([str(tmp_path)], "*.xml")
    assert missing == [] and len(found) == 1
    assert display_name(found[0]) == f"{tmp_path}/a\\xff.xml"
    assert display_name("x\ud800") == "x\\ud800"  # a lone surrogate that is not a byte: no crash
    display_name(found[0]).encode("utf-8")


@pytest.fixture
def watched(tmp_path):
    """A watched directory ``in`` holding a file and a subdirectory, beside a directory
    ``in-other`` (its name starts like the watched one's) holding a secret."""
    d, other = tmp_path / "in", tmp_path / "in-other"
    (d / "sub").mkdir(parents=True)
    other.mkdir()
    (d / "real.json").write_bytes(b"inside\n")
    (d / "sub" / "deep.json").write_bytes(b"deeper\n")
    (other / "secret").write_bytes(b"password\n")
    return d


@pytest.mark.parametrize(
    "target, content",
    [("real.json", b"inside\n"), ("sub/deep.json", b"deeper\n"), ("sub/../real.json", b"inside\n")],
)
def test_a_symlink_staying_inside_the_watched_directory_is_read(watched, target, content):
    (watched / "link.json").symlink_to(target)
    found, _ = list_files([str(watched)], "*.json")
    link = str(watched / "link.json")
    assert link in found and watched_directory(link, [str(watched)]) == str(watched)
    with open_regular(link, str(watched)) as fh:
        assert fh.read() == content


@pytest.mark.parametrize("target", ["../in-other/secret", "ABS", "/etc/hostname"])
def test_a_symlink_leading_out_of_the_watched_directory_is_refused(watched, target):
    """Relative (``..``), absolute, and into a sibling whose name starts like the watched one."""
    secret = watched.parent / "in-other" / "secret"
    (watched / "link.json").symlink_to(secret if target == "ABS" else target)
    link = str(watched / "link.json")
    with pytest.raises(OSError) as info:
        open_regular(link, str(watched))
    real = os.path.realpath(link)
    assert info.value.strerror == (
        f"a symbolic link to {real}, outside the watched directory {watched}: "
        "not followed (only files inside a watched directory are read)"
    )


def test_a_file_named_directly_is_read_wherever_it_leads(watched):
    link = watched / "named.json"
    link.symlink_to(watched.parent / "in-other" / "secret")
    assert watched_directory(str(link), [str(link), str(watched)]) is None  # named: the user chose it
    with open_regular(str(link), None) as fh:
        assert fh.read() == b"password\n"


def test_a_watched_directory_that_is_itself_a_symlink_is_resolved_first(watched, tmp_path):
    alias = tmp_path / "alias"
    alias.symlink_to(watched)
    (watched / "link.json").symlink_to("real.json")
    with open_regular(str(alias / "link.json"), str(alias)) as fh:
        assert fh.read() == b"inside\n"


def test_a_reopened_file_is_closed_whatever_ends_the_with_block(tmp_path):
    path = tmp_path / "grows.csv"
    path.write_bytes(b"a\nb\n")
    tail = LineTailer(str(path))
    with pytest.raises(RuntimeError), reopened(tail) as opened:
        assert opened is not None and opened.reset is None and opened.stat.st_size == 4
        fh = opened.file
        raise RuntimeError("the caller failed half-way")
    assert fh.closed
    assert tail.read_lines() == ([b"a", b"b"], None)
    with reopened(tail) as opened:
        assert opened is None  # unchanged since the read that reached its end: not opened
    path.write_bytes(b"c\n")  # truncated: read again from the start
    with reopened(tail) as opened:
        assert opened is not None and opened.reset == "truncated from 4 to 2 bytes" and tail.offset == 0
        fh = opened.file
    assert fh.closed


def test_lines_skipped_as_too_long_are_handed_over_once(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"ok\n" + b"x" * 11 + b"\n" + b"y" * 30)  # the second one not ended yet
    tail = LineTailer(str(path), max_line_bytes=10)
    assert tail.read_lines() == ([b"ok"], None)
    assert tail.take_too_long() == 2
    assert tail.take_too_long() == 0
    with path.open("ab") as fh:
        fh.write(b"y\nok\n" + b"z" * 12 + b"\n")
    assert tail.read_lines() == ([b"ok"], None)
    assert (tail.take_too_long(), tail.too_long) == (1, 3)
    assert tail.too_long_detail == "a line above 10 bytes was skipped"
