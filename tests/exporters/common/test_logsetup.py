"""Log lines cannot be forged: logfmt values and the text format escape what clients send."""

from __future__ import annotations

import logging
import re
import sys
import unicodedata

import pytest
import requests

from ioparallax.exporters.common.logsetup import UNSAFE_CHARS, LogfmtFormatter, TextFormatter, logfmt_value
from tests.support import ManagedProcess, free_port, venv_tool, wait_for_http

_PAIR = r'([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|[^\s"=]+)'
_LOGFMT_LINE = re.compile(rf"^{_PAIR}(?: {_PAIR})*$")

HOSTILE = [
    'a\nts=2026-01-01T00:00:00 level=error logger=x msg="forged"',
    "b\r\nlevel=error msg=forged",
    'quote " and back\\slash',
    "tab\tand nul\x00 and esc\x1b[31m",
    "line\u2028sep\u2029par\x85nel",
    "bidi\u202eoverride",
    "",
    "plain",
    "a=b",
    "é ü 日本",
]


def _unescape(quoted: str) -> str:
    body = quoted[1:-1] if quoted.startswith('"') else quoted
    simple = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    return re.sub(
        r"\\(u[0-9a-f]{4}|U[0-9a-f]{8}|.)", lambda m: simple.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), body
    )


@pytest.mark.parametrize("value", HOSTILE)
def test_logfmt_value_is_one_token_that_round_trips(value):
    out = logfmt_value(value)
    assert "\n" not in out and "\r" not in out and "\u2028" not in out and "\x85" not in out
    assert re.fullmatch(r'"(?:[^"\\]|\\.)*"|[^\s"=]+', out), out
    assert _unescape(out) == value


def _record(msg: str, *args, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc else None
    return logging.LogRecord("exporters.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def _raise(text: str) -> BaseException:
    try:
        raise ValueError(text)
    except ValueError as exc:
        return exc


@pytest.mark.parametrize("value", HOSTILE)
def test_logfmt_line_is_one_parseable_line(value):
    line = LogfmtFormatter().format(_record("probe failed target=%s", value, exc=_raise(value)))
    assert len(line.splitlines()) == 1
    assert _LOGFMT_LINE.match(line), line
    pairs = dict(re.findall(_PAIR, line))
    assert list(pairs) == ["ts", "level", "logger", "msg", "exc"]
    assert _unescape(pairs["msg"]) == f"probe failed target={value}"
    assert _unescape(pairs["exc"]).endswith(f"ValueError: {value}" if value else "ValueError")


@pytest.mark.parametrize("value", HOSTILE)
def test_text_format_keeps_one_line(value):
    line = TextFormatter().format(_record("probe failed target=%s", value, exc=_raise(value)))
    assert len(line.splitlines()) == 1 and "\n" not in line and "\r" not in line
    assert "WARNING exporters.test: probe failed target=" in line
    assert "\\nValueError" in line  # the traceback follows, escaped


def test_unsafe_characters_are_the_unicode_control_format_and_separator_ones():
    rx = re.compile(f"[{UNSAFE_CHARS}]")
    wanted = {
        c
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and not 0xD800 <= c <= 0xDFFF
    }
    # Characters this Python's Unicode tables (unicodedata.unidata_version) call unsafe must be
    # in the hard-coded set; the set may hold a few more from a newer Unicode version.
    missing = [hex(c) for c in wanted if not rx.match(chr(c))]
    assert not missing, f"add to UNSAFE_CHARS (Unicode {unicodedata.unidata_version}): {missing[:20]}"
    assert not rx.match("a") and not rx.match("é") and not rx.match(" ")


@pytest.fixture
def stargate_exporter(tmp_path):
    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter",
        [
            venv_tool("stargate-exporter"),
            f"--web.listen-address=127.0.0.1:{port}",
            "--stargate.target=127.0.0.1",
            "--log.level=debug",
        ],
        tmp_path,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.stop()


def test_hostile_targets_cannot_forge_log_lines_of_a_real_exporter(stargate_exporter):
    url, proc = stargate_exporter
    forged = 'level=error logger=ioparallax.exporters.stargate msg="disk on fire"'
    targets = [
        f"10.9.9.9\n{forged}",
        f"10.9.9.9\r\n{forged}",
        f"10.9.9.9\r{forged}",
        f"127.0.0.1:1/\n{forged}",
        f"http://127.0.0.1:1/\u2028{forged}",
        f"10.9.9.9\\n{forged}",
    ]
    for target in targets:
        r = requests.get(url + "/probe", params={"target": target}, timeout=30)
        assert r.status_code in (200, 400), (target, r.status_code)
    # The same through raw %0a/%0d in the query string, as an attacker would type it.
    for raw in ("10.9.9.9%0alevel=error%20msg=forged", "10.9.9.9%0d%0alevel=error%20msg=forged"):
        requests.get(f"{url}/probe?target={raw}", timeout=30)
    proc.stop()
    lines = proc.log_path.read_text(encoding="utf-8").splitlines()
    target_lines = [line for line in lines if "10.9.9.9" in line or "127.0.0.1:1" in line]
    assert len(target_lines) >= len(targets), lines  # every probe was logged...
    for line in lines:  # ...and every line is one logfmt record
        assert _LOGFMT_LINE.match(line), line
        keys = [k for k, _ in re.findall(_PAIR, line)]
        assert keys[:4] == ["ts", "level", "logger", "msg"], line
        assert not line.startswith("level=") and "disk on fire" not in line.split(" msg=")[0]
    assert not any(line.startswith(("level=error", "ts=2026-01-01")) for line in lines)
    assert not [line for line in lines if "level=error" in line.split(" msg=")[0]], "a forged error line"


@pytest.mark.parametrize("log_format", ["logfmt", "text"])
def test_hostile_basic_auth_user_cannot_forge_log_lines(tmp_path, log_format):
    """The user name of a failed basic auth is logged (debug) as the client sent it."""
    import base64

    import bcrypt

    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b'pw', bcrypt.gensalt(4)).decode()}'\n")
    port = free_port()
    proc = ManagedProcess(
        "fio-exporter",
        [
            venv_tool("fio-exporter"),
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={web}",
            "--no-collector.guest-disk",
            "--log.level=debug",
            f"--log.format={log_format}",
        ],
        tmp_path,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
        for user in (
            'x\nts=2026-01-01T00:00:00 level=error logger=x msg="forged"',
            "x\r\n2026-01-01 00:00:00,000 ERROR x: forged",
            "x\u2028level=error msg=forged",
        ):
            token = base64.b64encode(f"{user}:pw".encode()).decode()
            r = requests.get(
                f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Basic {token}"}, timeout=10
            )
            assert r.status_code == 401
    finally:
        proc.stop()
    text = proc.log_path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    assert sum("basic auth failed for user=x" in line for line in lines) == 3, text
    assert "basic auth without tls_server_config: passwords cross the network in clear text" in text
    for line in lines:
        assert "\r" not in line and "\u2028" not in line, line
        if log_format == "logfmt":
            assert _LOGFMT_LINE.match(line), line
            assert [k for k, _ in re.findall(_PAIR, line)][:4] == ["ts", "level", "logger", "msg"], line
        else:
            assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) \S+: ", line), line
            assert not line.startswith("2026-01-01"), line
    assert not [line for line in lines if "forged" in line and "basic auth failed for user=x" not in line]
