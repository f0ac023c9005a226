"""Hostile and broken DiskSPD result files: one bad file is down with its reason and a log line
naming it, never a 500, never hiding the other files; an exposition promtool accepts, no series
twice. Most cases use the in-process collector; the resource cases run a real diskspd-exporter."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, given, settings, strategies as st

from ioparallax.exporters.diskspd import collector as collector_module
from tests.exporters.diskspd.test_diskspd_exporter import FIXTURES, exposition, files_for, has, samples, value
from tests.support import assert_clean, free_port, venv_tool, wait_for_http

GOOD = FIXTURES / "vm-oltp-sh-z10m-utf16.xml"
UNITTEST = (FIXTURES / "diskspd-2.2-xmlresultparser-unittest.xml").read_text()
OLD = time.time() - 3600  # an mtime long settled


def _bomb() -> str:
    ents = '<!ENTITY a0 "lol">' + "".join(f'<!ENTITY a{i} "{("&a%d;" % (i - 1)) * 10}">' for i in range(1, 10))
    return f"<!DOCTYPE Results [{ents}]>" + UNITTEST.replace("testfile1.dat", "&a9;")


# name -> (bytes of the bad file, expected reason, words in the log line)
HOSTILE = {
    "truncated": (UNITTEST[:5000].encode(), "truncated", "ends before </Results>"),
    "empty": (b"", "truncated", "empty"),
    "entity_bomb": (_bomb().encode(), "forbidden_markup", "DOCTYPE"),
    "external_entity": (
        ('<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + UNITTEST.replace("testfile1.dat", "&x;")).encode(),
        "forbidden_markup",
        "DOCTYPE",
    ),
    "text_result": (
        b"Command Line: diskspd.exe -b8K -d60 D:\\t.dat\r\n\r\nInput parameters:\r\n",
        "not_diskspd",
        "-Rxml",
    ),
    "negative_count": (UNITTEST.replace("<ReadCount>6", "<ReadCount>-6").encode(), "invalid_value", "ReadCount = '-6'"),
    "count_beyond_2_64": (
        UNITTEST.replace("<IOCount>16", "<IOCount>" + "9" * 400).encode(),
        "invalid_value",
        "400-digit number",
    ),
    "nan_time": (
        UNITTEST.replace("<TestTimeSeconds>120.00", "<TestTimeSeconds>NaN").encode(),
        "invalid_value",
        "not a finite",
    ),
    "garbage": (
        b"<Results><System>" + bytes(range(1, 256)) * 20 + b"</System></Results>",
        "corrupt",
        "not well-formed",
    ),
    "binary_utf16_lookalike": (bytes(range(256)) * 20, "corrupt", "utf-16-be"),
    "utf16_bom_lie": (b"\xff\xfe" + b"\x00\xd8" * 10, "corrupt", "byte order mark"),
    "deep_nesting": (
        ("<Results><System/>" + "<a>" * 20000 + "</a>" * 20000 + "</Results>").encode(),
        "corrupt",
        "not well-formed",
    ),
}


def good_beside_bad(tmp_path: Path, data: bytes) -> Path:
    """A watched folder with the good result and, beside it, bad.xml holding ``data``, written
    long ago (settled: it is read at once)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    (d / "bad.xml").write_bytes(data)
    os.utime(d / "bad.xml", (OLD, OLD))
    return d


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_one_hostile_file_is_down_and_the_rest_is_served(case, tmp_path, caplog):
    data, reason, words = HOSTILE[case]
    d = good_beside_bad(tmp_path, data)
    bad = d / "bad.xml"
    with caplog.at_level(logging.WARNING, logger="ioparallax.exporters.diskspd"):
        text = exposition(files_for(d))
    assert_clean(text)
    sm = samples(text)
    assert value(sm, "diskspd_up") == 0.0
    assert value(sm, "diskspd_source_up", source=str(bad)) == 0.0
    assert value(sm, "diskspd_source_error_info", source=str(bad), reason=reason) == 1.0
    assert not has(sm, "diskspd_run_info", source=str(bad))
    assert value(sm, "diskspd_source_up", source=str(d / "good.xml")) == 1.0
    assert value(sm, "diskspd_target_outstanding_ios", host="SQLVM01") == 32
    lines = [r.getMessage() for r in caplog.records if str(bad) in r.getMessage()]
    assert len(lines) == 1 and reason in lines[0] and words in lines[0], lines


def test_a_copy_under_way_is_incomplete_then_truncated_then_up(tmp_path):
    f = tmp_path / "run.xml"
    f.write_bytes(GOOD.read_bytes()[:40_000])
    now = [time.time()]
    files = files_for(f, clock=lambda: now[0], settle_s=5.0)
    sm = samples(exposition(files))
    assert value(sm, "diskspd_source_up", source=str(f)) == 1.0
    assert value(sm, "diskspd_source_incomplete", source=str(f)) == 1.0
    assert value(sm, "diskspd_up") == 1.0
    now[0] += 10  # it stopped changing: it is cut off
    sm = samples(exposition(files))
    assert value(sm, "diskspd_source_error_info", source=str(f), reason="truncated") == 1.0
    f.write_bytes(GOOD.read_bytes())  # the copy is redone in full
    sm = samples(exposition(files))
    assert value(sm, "diskspd_source_up", source=str(f)) == 1.0 and has(sm, "diskspd_read_ios_total")
    assert not has(sm, "diskspd_source_incomplete")


def test_a_file_replaced_by_garbage_stops_showing_its_old_values(tmp_path):
    f = tmp_path / "run.xml"
    f.write_bytes(GOOD.read_bytes())
    files = files_for(f, settle_s=0.0)
    assert has(samples(exposition(files)), "diskspd_read_ios_total")
    f.write_bytes(b"<Results><System>" + b"x" * 100)
    sm = samples(exposition(files))
    assert not has(sm, "diskspd_read_ios_total")  # never stale values shown as fresh
    assert value(sm, "diskspd_source_error_info", reason="truncated") == 1.0


def test_non_utf8_file_name_is_data(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    name = os.fsencode(str(d)) + b"/run-\xff\xfe.xml"
    with open(name, "wb") as fh:
        fh.write(GOOD.read_bytes())
    text = exposition(files_for(d))
    assert_clean(text)
    sm = samples(text)
    assert value(sm, "diskspd_source_up", source=str(d) + "/run-\\xff\\xfe.xml") == 1.0
    assert value(sm, "diskspd_up") == 1.0


def test_unreadable_file_and_missing_path(tmp_path, caplog):
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    locked = d / "locked.xml"
    locked.write_bytes(GOOD.read_bytes())
    locked.chmod(0)
    missing = tmp_path / "nowhere"
    with caplog.at_level(logging.WARNING):
        sm = samples(exposition(files_for(d, missing)))
    assert value(sm, "diskspd_up") == 0.0  # the missing path
    assert any(str(missing) in r.getMessage() for r in caplog.records)
    assert value(sm, "diskspd_target_outstanding_ios", source=str(d / "good.xml")) == 32
    if os.geteuid() != 0:  # root reads a mode-0 file
        assert value(sm, "diskspd_source_error_info", source=str(locked), reason="unreadable") == 1.0


def test_a_fifo_named_as_a_file_is_not_opened(tmp_path):
    fifo = tmp_path / "run.xml"
    os.mkfifo(fifo)
    sm = samples(exposition(files_for(fifo, GOOD)))  # would block forever if opened
    assert value(sm, "diskspd_source_error_info", source=str(fifo), reason="unreadable") == 1.0
    assert value(sm, "diskspd_source_up", source=str(GOOD)) == 1.0


def test_a_bug_while_exposing_one_file_costs_only_that_file(tmp_path, monkeypatch, caplog):
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    (d / "seed.xml").write_bytes((FIXTURES / "vm-seed-default-pattern.xml").read_bytes())
    real = collector_module.targets_of

    def buggy(prof, span):
        out = real(prof, span)
        if out and "scratch" in out[0].path:
            raise ZeroDivisionError("a bug")
        return out

    monkeypatch.setattr(collector_module, "targets_of", buggy)
    files = files_for(d)
    with caplog.at_level(logging.ERROR):
        text = exposition(files)
    assert_clean(text)
    sm = samples(text)
    assert value(sm, "diskspd_source_error_info", source=str(d / "seed.xml"), reason="internal_error") == 1.0
    assert not has(sm, "diskspd_run_info", source=str(d / "seed.xml"))  # nothing half-built
    assert value(sm, "diskspd_target_outstanding_ios", source=str(d / "good.xml")) == 32
    assert any("seed.xml" in r.getMessage() for r in caplog.records)


def test_convert_names_each_bad_file_and_exits_1(tmp_path):
    bad = tmp_path / "cut.xml"
    bad.write_text(UNITTEST[:3000])
    out = subprocess.run(
        [venv_tool("diskspd-exporter"), "convert", str(GOOD), str(bad), str(tmp_path / "none.xml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert 'host="SQLVM01"' in out.stdout
    assert f"{bad}: truncated:" in out.stderr and "none.xml: no such file" in out.stderr
    assert "Traceback" not in out.stderr


def test_huge_file_and_odd_names_through_a_real_exporter(tmp_path, processes):
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.xml").write_bytes(GOOD.read_bytes())
    with open(d / "huge.xml", "wb") as fh:  # 80 MB: above the 64 MiB bound, never read
        fh.write(b"<Results>" + b" " * (80 * 2**20))
    with open(os.fsencode(str(d)) + b"/\xff.xml", "wb") as fh:
        fh.write(UNITTEST.encode())
    port = free_port()
    p = processes.start(
        "diskspd-exporter",
        [venv_tool("diskspd-exporter"), f"--web.listen-address=127.0.0.1:{port}", "--diskspd.watch", str(d)],
    )
    wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=p)
    t0 = time.monotonic()
    r = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    assert r.status_code == 200 and time.monotonic() - t0 < 5
    sm = samples(r.text)
    assert value(sm, "diskspd_source_error_info", source=str(d / "huge.xml"), reason="too_large") == 1.0
    assert value(sm, "diskspd_source_up", source=str(d) + "/\\xff.xml") == 1.0
    assert value(sm, "diskspd_target_outstanding_ios", source=str(d / "good.xml")) == 32
    status = Path(f"/proc/{p.popen.pid}/status").read_text()
    hwm_kb = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
    assert hwm_kb < 150 * 1024, f"peak RSS {hwm_kb} kB"


_NUMERIC = re.compile(
    r"<(BytesCount|FileSize|IOCount|ReadBytes|ReadCount|WriteBytes|WriteCount|TestTimeSeconds|ThreadCount|BlockSize|RequestCount|WriteRatio|Duration|Warmup)>([^<]*)<"
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(min_value=0, max_value=40),
    st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(alphabet="0123456789.-+eE xX,", max_size=30),
    ),
)
def test_any_value_in_any_number_gives_a_clean_exposition(tmp_path, which, raw):
    matches = list(_NUMERIC.finditer(UNITTEST))
    m = matches[which % len(matches)]
    text = UNITTEST[: m.start(2)] + raw.replace("<", "") + UNITTEST[m.end(2) :]
    f = tmp_path / f"v{which}.xml"
    f.write_text(text)
    out = exposition(files_for(f))
    assert_clean(out)
    sm = samples(out)
    assert value(sm, "diskspd_source_up", source=str(f)) in (0.0, 1.0)
