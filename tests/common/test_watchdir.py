"""ioparallax.exporters.common.watchdir, shared by fio-exporter and diskspd-exporter: names as
data and files that never block (issue 25). The exporters' own fault tests prove the same end to
end (tests/fio/test_fio_faults.py, tests/diskspd/test_diskspd_faults.py)."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from ioparallax.exporters.common.watchdir import display_name, list_files, open_regular


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

    t0 = time.monotonic()
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "open_regular blocked"
    assert time.monotonic() - t0 < 1
    assert outcome and words in str(outcome[0]), outcome


def test_names_that_are_not_utf8_are_listed_and_shown_escaped(tmp_path):
    with open(os.path.join(os.fsencode(tmp_path), b"a\xff.xml"), "w"):
        pass
    found, missing = list_files([str(tmp_path)], "*.xml")
    assert missing == [] and len(found) == 1
    assert display_name(found[0]) == f"{tmp_path}/a\\xff.xml"
    assert display_name("x\ud800") == "x\\ud800"  # a lone surrogate that is not a byte: no crash
    display_name(found[0]).encode("utf-8")
