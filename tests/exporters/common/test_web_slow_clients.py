"""The exporters' own HTTP server against slow and silent clients (issue 25): a header read
deadline, an idle keep-alive timeout, a TLS handshake deadline and a cap on connections, as Go's
http.Server (ReadHeaderTimeout, IdleTimeout) and Prometheus' --web.max-connections have them.

Before, an idle connection, a request sent at one byte a second and an idle keep-alive were all
still open after 120 s, a silent client after a TLS handshake was held for ever, and 300
half-sent requests held 304 threads.

Most cases run the shared server in-process with short limits (the tests take seconds); the last
ones start a real fio-exporter to prove the flags reach the server. Loopback only; every socket
has a timeout, so no case can hang.
"""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.server import ExporterServer, ServerLimits
from ioparallax.exporters.common.webconfig import load_web_config
from tests.support import ManagedProcess, free_port, run_entry_point, venv_tool

LIMITS = ServerLimits(read_header_timeout=1.0, idle_timeout=1.0, max_connections=4, tls_handshake_timeout=1.0)
SLACK = 3.0  # seconds of scheduling slack on a shared, loaded 2-core machine (before: held for ever)
REQUEST = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cert")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(d / "k.pem"), "-out", str(d / "c.pem"), "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return d / "c.pem", d / "k.pem"


def _app() -> ExporterApp:
    return ExporterApp("slow-test-exporter", "Tests slow clients.", None)


@pytest.fixture(params=["http", "https"])
def server(request, cert, tmp_path):
    web = None
    if request.param == "https":
        cfg = tmp_path / "web.yml"
        cfg.write_text(f"tls_server_config: {{cert_file: {cert[0]}, key_file: {cert[1]}}}\n")
        web = load_web_config(cfg)
    srv = ExporterServer(_app(), "127.0.0.1", 0, web, LIMITS).start()
    yield srv
    srv.stop()


def _connect(srv: ExporterServer, cert: tuple[Path, Path] | None = None) -> socket.socket:
    sock = socket.create_connection(srv.address, timeout=10)
    if srv.web.tls is not None:
        ctx = ssl.create_default_context(cafile=str(cert[0])) if cert else ssl._create_unverified_context()
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closed the connection (EOF or reset); fails after ``seconds``."""
    t0 = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, ssl.SSLError):
        pass
    except TimeoutError:
        pytest.fail(f"the server still held the connection after {seconds} s")
    return time.monotonic() - t0


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0].split(b":")[1])
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_silent_client_is_disconnected_at_the_header_deadline(server, cert):
    with _connect(server, cert) as sock:  # over TLS: the handshake done, then nothing
        assert _closed_within(sock, LIMITS.read_header_timeout + SLACK) >= LIMITS.read_header_timeout - 0.2


def test_a_request_sent_a_byte_at_a_time_is_cut_at_the_header_deadline(server, cert):
    with _connect(server, cert) as sock:
        t0 = time.monotonic()
        sent = 0
        try:
            for byte in REQUEST:  # 40 bytes at 4 per second: 10 s, ten times the deadline
                sock.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.25)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass
        took = time.monotonic() - t0 + _closed_within(sock, SLACK + 1)
        assert sent < len(REQUEST), "the whole request was taken"
        assert took < LIMITS.read_header_timeout + SLACK + 0.5, took


def test_keep_alive_serves_then_closes_when_idle(server, cert):
    with _connect(server, cert) as sock:
        for _ in range(3):  # kept alive across requests less than idle_timeout apart
            sock.sendall(REQUEST)
            assert _read_response(sock).startswith(b"HTTP/1.1 200")
            time.sleep(LIMITS.idle_timeout / 5)
        took = _closed_within(sock, LIMITS.idle_timeout + SLACK)
        assert took >= LIMITS.idle_timeout / 2


def test_connections_past_the_cap_are_refused_at_once_and_the_cap_frees(server, cert, caplog):
    caplog.set_level(logging.WARNING, logger="ioparallax.exporters.common.web.server")
    held = [socket.create_connection(server.address, timeout=10) for _ in range(LIMITS.max_connections)]
    try:
        deadline = time.monotonic() + 5
        while server.httpd.active_connections < LIMITS.max_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.httpd.active_connections == LIMITS.max_connections
        extra = socket.create_connection(server.address, timeout=10)
        t0 = time.monotonic()
        extra.settimeout(5)
        answer = b""
        try:
            while chunk := extra.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 < 2.0  # refused at once, not queued
        if server.web.tls is None:
            assert answer.startswith(b"HTTP/1.1 503 Service Unavailable"), answer
        else:
            assert answer == b""  # no plain text into a TLS port: just closed
        extra.close()
        warned = [r.getMessage() for r in caplog.records if "--web.max-connections" in r.getMessage()]
        assert len(warned) == 1 and "refused 1 connections" in warned[0], warned
    finally:
        for s in held:
            s.close()
    # the held connections gone, the server serves again
    deadline = time.monotonic() + 5
    while server.httpd.active_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    with _connect(server, cert) as sock:
        sock.sendall(REQUEST)
        assert _read_response(sock).startswith(b"HTTP/1.1 200")


def test_many_half_sent_requests_hold_at_most_the_cap_of_threads():
    srv = ExporterServer(_app(), "127.0.0.1", 0, None, LIMITS).start()
    socks = []
    try:
        before = threading.active_count()
        for _ in range(40):
            s = socket.create_connection(srv.address, timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            socks.append(s)
        time.sleep(0.3)
        assert threading.active_count() - before <= LIMITS.max_connections
        assert srv.httpd.active_connections <= LIMITS.max_connections
        deadline = time.monotonic() + LIMITS.read_header_timeout + SLACK
        while srv.httpd.active_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.httpd.active_connections == 0  # all cut at the header deadline
    finally:
        for s in socks:
            s.close()
        srv.stop()


def _client_hello() -> bytes:
    ctx = ssl._create_unverified_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize("how", ["silent", "drip"])
def test_a_tls_handshake_has_one_deadline(cert, tmp_path, how):
    cfg = tmp_path / "web.yml"
    cfg.write_text(f"tls_server_config: {{cert_file: {cert[0]}, key_file: {cert[1]}}}\n")
    srv = ExporterServer(_app(), "127.0.0.1", 0, load_web_config(cfg), LIMITS).start()
    try:
        with socket.create_connection(srv.address, timeout=10) as sock:
            t0 = time.monotonic()
            if how == "drip":  # a real ClientHello, 10 bytes a second: ~30 s to finish
                sock.sendall(_client_hello()[:1])  # the first byte says TLS
                try:
                    for byte in _client_hello()[1:]:
                        sock.sendall(bytes([byte]))
                        time.sleep(0.1)
                        if time.monotonic() - t0 > LIMITS.tls_handshake_timeout + SLACK + 1:
                            break
                except (BrokenPipeError, ConnectionResetError):
                    pass
            took = time.monotonic() - t0 + _closed_within(sock, LIMITS.tls_handshake_timeout + SLACK)
            assert took < LIMITS.tls_handshake_timeout + SLACK + 0.5, took
    finally:
        srv.stop()


# ---- the flags reach the server of a real exporter


def test_the_flags_reach_a_real_exporter(tmp_path):
    port = free_port()
    proc = ManagedProcess(
        "fio-exporter",
        [
            venv_tool("fio-exporter"),
            "serve",
            f"--web.listen-address=127.0.0.1:{port}",
            "--no-collector.guest-disk",
            "--web.read-header-timeout=1s",
            "--web.idle-timeout=1s",
            "--web.max-connections=2",
        ],
        tmp_path,
    )
    try:
        proc.wait_for_output(r"msg=\"listening on ", timeout=30)
        silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
            assert extra.recv(100).startswith(b"HTTP/1.1 503")
        for s in silent:
            assert _closed_within(s, 1 + SLACK + 1) < 1 + SLACK
            s.close()
        assert requests.get(f"http://127.0.0.1:{port}/-/healthy", timeout=5).status_code == 200
        assert "refused 1 connections" in proc.output()
    finally:
        proc.stop()


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--web.max-connections=0", "--web.max-connections: expected 1 to 65536, got 0"),
        ("--web.read-header-timeout=0s", "--web.read-header-timeout: expected a duration above 0"),
        ("--web.idle-timeout=-1s", "--web.idle-timeout: expected a duration above 0"),
    ],
)
@pytest.mark.parametrize(
    "exporter, extra",
    [
        ("fio-exporter", ["--no-collector.guest-disk"]),
        ("stargate-exporter", []),
        ("vcenter-exporter", ["--vcenter.target=127.0.0.1:1"]),
        ("diskspd-exporter", []),
        ("prism-exporter", ["--prism.target=127.0.0.1:1"]),
    ],
)
def test_bad_limit_flags_are_one_clear_line(exporter, extra, flag, message):
    """Every exporter has the flags and hands them to the server (a value the server would
    refuse, refused: the proof that it got there)."""
    res = run_entry_point(exporter, [f"--web.listen-address=127.0.0.1:{free_port()}", *extra, flag])
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out, out
    assert message in out, out
