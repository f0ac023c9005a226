"""The exporters' own endpoint: --web.config.file (TLS, client certificates, basic auth), IPv6,
start-up errors, gzip and HEAD, proved against real exporter processes with real clients.

fio-exporter is the exporter started here (the simplest to start: no target needed); the
start-up path is ioparallax.exporters.common.web.startup.serve() for all three, and the start-up
failures are checked on all three.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import re
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests

from tests.support import ManagedProcess, ec_cert, fio_job_args, free_port, run_entry_point, venv_tool, wait_for_http

PASSWORD = "s3cret pass:word"  # a space and a colon: basic auth splits at the first colon only


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A self-signed server certificate for localhost/127.0.0.1/::1 and a self-signed client one."""
    d = tmp_path_factory.mktemp("pki")
    crt, key = ec_cert(d, "server", "localhost", "DNS:localhost,IP:127.0.0.1,IP:::1")
    ccrt, ckey = ec_cert(d, "client", "prometheus")
    other_crt, other_key = ec_cert(d, "stranger", "stranger")
    return {
        "crt": crt,
        "key": key,
        "client_crt": ccrt,
        "client_key": ckey,
        "stranger_crt": other_crt,
        "stranger_key": other_key,
    }


def _hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()


def _tls(pki: dict[str, Path], **keys: object) -> str:
    """A web config's tls_server_config serving the server certificate, with ``keys`` added."""
    more = "".join(f"  {k}: {v}\n" for k, v in keys.items())
    return f"tls_server_config:\n  cert_file: {pki['crt']}\n  key_file: {pki['key']}\n{more}"


def _web_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


class Exporter:
    def __init__(self, proc: ManagedProcess, url: str):
        self.proc, self.url = proc, url


def _wait_listening(proc: ManagedProcess) -> None:
    proc.wait_for_output(r"msg=\"listening on ", timeout=30)


@contextlib.contextmanager
def _fio_serving(
    tmp_path: Path, *extra: str, host: str = "127.0.0.1", web_config: str | None = None
) -> Iterator[tuple[int, ManagedProcess]]:
    """fio-exporter serving on a free port of ``host`` (with ``web_config`` as its
    --web.config.file), once it logs that it listens; stopped by PID at the end."""
    port = free_port()
    if web_config is not None:
        extra = (f"--web.config.file={_web_config(tmp_path / 'web.yml', web_config)}", *extra)
    proc = ManagedProcess(
        "fio-exporter",
        [
            venv_tool("fio-exporter"),
            "serve",
            f"--web.listen-address={host}:{port}",
            "--no-collector.guest-disk",
            *extra,
        ],
        tmp_path,
    )
    try:
        _wait_listening(proc)
        yield port, proc
    finally:
        proc.stop()


@pytest.fixture
def tls_auth_exporter(tmp_path, pki):
    with _fio_serving(
        tmp_path,
        web_config=_tls(pki, min_version="TLS12")
        + f"""\
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
basic_auth_users:
  prometheus: '{_hash(PASSWORD)}'
  other: '{_hash("other-password")}'
""",
    ) as (port, proc):
        yield Exporter(proc, f"https://localhost:{port}")


def test_tls_and_basic_auth_guard_every_route(tls_auth_exporter, pki):
    url, ca = tls_auth_exporter.url, str(pki["crt"])
    r = requests.get(url + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10)
    assert r.status_code == 200 and "python_info" in r.text
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    for path in ("/", "/metrics", "/-/healthy", "/probe?target=x", "/nope"):
        for auth in (None, ("prometheus", "wrong"), ("nobody", PASSWORD), ("other", PASSWORD)):
            r = requests.get(url + path, auth=auth, verify=ca, timeout=10)
            assert r.status_code == 401, (path, auth, r.status_code)
            assert r.headers["WWW-Authenticate"].startswith("Basic realm=")
            assert "python_info" not in r.text
    r = requests.get(url + "/-/healthy", auth=("other", "other-password"), verify=ca, timeout=10)
    assert r.status_code == 200 and r.text == "OK\n"
    # A broken Authorization header is a 401 too, never a 500.
    for header in ("Basic !!!notbase64", "Basic " + "QQ==", "Bearer abc", "Basic"):
        r = requests.get(url + "/metrics", headers={"Authorization": header}, verify=ca, timeout=10)
        assert r.status_code == 401, header


def test_plain_http_to_the_tls_port_is_refused(tls_auth_exporter):
    port = tls_auth_exporter.url.rsplit(":", 1)[1]
    r = requests.get(f"http://127.0.0.1:{port}/metrics", auth=("prometheus", PASSWORD), timeout=10)
    assert r.status_code == 400 and "HTTP request to an HTTPS server" in r.text
    assert "python_info" not in r.text


def test_the_certificate_is_the_configured_one(tls_auth_exporter, pki):
    with pytest.raises(requests.exceptions.SSLError):  # not trusted without its CA
        requests.get(tls_auth_exporter.url + "/metrics", auth=("prometheus", PASSWORD), timeout=10)
    port = int(tls_auth_exporter.url.rsplit(":", 1)[1])
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    assert pem.strip() == pki["crt"].read_text().strip()


def test_a_stalled_handshake_does_not_block_other_clients(tls_auth_exporter, pki):
    port = int(tls_auth_exporter.url.rsplit(":", 1)[1])
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]  # connect, say nothing
    try:
        start = time.monotonic()
        r = requests.get(
            tls_auth_exporter.url + "/-/healthy", auth=("prometheus", PASSWORD), verify=str(pki["crt"]), timeout=5
        )
        assert r.status_code == 200
        assert time.monotonic() - start < 3.0
    finally:
        for s in stalled:
            s.close()


def test_client_certificates_required_and_verified(tmp_path, pki):
    web_config = _tls(pki, client_auth_type="RequireAndVerifyClientCert", client_ca_file=pki["client_crt"])
    with _fio_serving(tmp_path, web_config=web_config) as (port, _):
        url, ca = f"https://localhost:{port}/metrics", str(pki["crt"])
        r = requests.get(url, verify=ca, cert=(str(pki["client_crt"]), str(pki["client_key"])), timeout=10)
        assert r.status_code == 200 and "python_info" in r.text
        for cert in (None, (str(pki["stranger_crt"]), str(pki["stranger_key"]))):
            with pytest.raises(requests.exceptions.ConnectionError):
                requests.get(url, verify=ca, cert=cert, timeout=10)


#: What each exporter needs on its command line to get as far as listening.
_MINIMAL_ARGS = {
    "fio-exporter": ["--no-collector.guest-disk"],
    "stargate-exporter": [],
    "vcenter-exporter": ["--vcenter.target=127.0.0.1:1"],
    "prism-exporter": ["--prism.target=127.0.0.1:1"],
}


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _one_error_line(res: subprocess.CompletedProcess) -> str:
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if "level=error" in line]
    assert len(errors) == 1, out
    return errors[0]


@pytest.mark.parametrize("exporter", ["fio-exporter", "stargate-exporter", "vcenter-exporter", "prism-exporter"])
def test_port_taken_exits_1_with_one_clear_line(exporter):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = _run([venv_tool(exporter), f"--web.listen-address=127.0.0.1:{port}", *_MINIMAL_ARGS[exporter]])
    assert res.returncode == 1, res.stderr
    line = _one_error_line(res)
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in line


@pytest.mark.parametrize(
    "listen, code, message",
    [
        ("192.0.2.1:9", 1, "the address is not one of this machine's"),  # TEST-NET-1: never local
        ("no-such-host.invalid:9", 1, "cannot resolve 'no-such-host.invalid'"),
        ("localhost", 2, "expected [host]:port"),
        ("127.0.0.1:99999", 2, "port 0-65535"),
        ("::1:9761", 2, "needs brackets"),
    ],
)
def test_bad_listen_address_is_one_clear_line(listen, code, message):
    res = run_entry_point("fio-exporter", [f"--web.listen-address={listen}", "--no-collector.guest-disk"])
    assert res.returncode == code, res.stderr
    assert message in _one_error_line(res)


@pytest.mark.parametrize("exporter", ["fio-exporter", "stargate-exporter", "vcenter-exporter", "prism-exporter"])
def test_bad_web_config_names_file_and_key(tmp_path, exporter):
    cfg = _web_config(tmp_path / "web.yml", "basic_auth_users:\n  prom: '$2y$10$x'\ntls_server_confg: {}\n")
    res = run_entry_point(
        exporter,
        [f"--web.listen-address=127.0.0.1:{free_port()}", f"--web.config.file={cfg}", *_MINIMAL_ARGS[exporter]],
    )
    assert res.returncode == 2, res.stderr
    line = _one_error_line(res)
    assert f"{cfg}: basic_auth_users.prom: expected a bcrypt hash" in line
    assert "$2y$10$x" not in line  # the configured value may be a secret: never echoed


def test_ipv6_loopback_listen_address(tmp_path):
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine: {exc}")
    with _fio_serving(tmp_path, host="[::1]") as (port, proc):
        assert f"listening on [::1]:{port}" in proc.output()
        r = requests.get(f"http://[::1]:{port}/metrics", timeout=10)
        assert r.status_code == 200 and "python_info" in r.text
        with pytest.raises(requests.exceptions.ConnectionError):  # IPv6 only: not on 127.0.0.1
            requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_metrics_gzip_when_asked(tmp_path):
    with _fio_serving(tmp_path) as (port, _):
        url = f"http://127.0.0.1:{port}/metrics"
        r = requests.get(url, timeout=10)  # requests asks for gzip, deflate by default
        assert r.headers["Content-Encoding"] == "gzip" and "python_info" in r.text
        assert r.headers["Vary"] == "Accept-Encoding"
        streamed = requests.get(url, timeout=10, stream=True)
        raw = streamed.raw.read(decode_content=False)
        assert b"python_info" in gzip.decompress(raw) and int(streamed.headers["Content-Length"]) == len(raw)
        for accept in ("identity", "gzip;q=0", ""):
            r = requests.get(url, headers={"Accept-Encoding": accept}, timeout=10)
            assert "Content-Encoding" not in r.headers and "python_info" in r.text, accept


class _Canary(http.server.BaseHTTPRequestHandler):
    """A target that counts every request it gets."""

    hits = 0

    def do_GET(self):
        type(self).hits += 1
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def stargate_any(tmp_path):
    """stargate-exporter allowed to probe any target, and a canary target on loopback."""
    _Canary.hits = 0
    canary = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    threading.Thread(target=canary.serve_forever, daemon=True).start()
    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter",
        [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{port}", "--stargate.allow-unlisted-targets"],
        tmp_path,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
        yield f"http://127.0.0.1:{port}", f"127.0.0.1:{canary.server_address[1]}", proc
    finally:
        proc.stop()
        canary.shutdown()
        canary.server_close()


def test_head_probe_runs_no_probe(stargate_any):
    url, target, _ = stargate_any
    r = requests.head(url + "/probe", params={"target": target}, timeout=10)
    assert r.status_code == 200 and r.content == b""
    assert _Canary.hits == 0
    r = requests.get(url + "/probe", params={"target": target}, timeout=10)
    assert r.status_code == 200 and "stargate_up 0" in r.text
    assert _Canary.hits >= 1
    assert requests.head(url + "/probe", timeout=10).status_code == 400  # no target: as GET


@pytest.fixture(scope="module")
def probe_exporters(tmp_path_factory):
    """stargate- and vcenter-exporter, each with one listed target that refuses connections:
    a probe is a fast `<source>_up 0`, so the HTTP layer's own answer is what is tested."""
    d = tmp_path_factory.mktemp("probers")
    closed = free_port()
    sg, vc = free_port(), free_port()
    procs = [
        ManagedProcess(
            "stargate-exporter",
            [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{sg}", "--stargate.target=127.0.0.1"],
            d,
        ),
        ManagedProcess(
            "vcenter-exporter",
            [
                venv_tool("vcenter-exporter"),
                f"--web.listen-address=127.0.0.1:{vc}",
                f"--vcenter.target=127.0.0.1:{closed}",
            ],
            d,
            env={"VCENTER_USERNAME": "monitor", "VCENTER_PASSWORD": "not-used"},
        ),
    ]
    try:
        for p, port in zip(procs, (sg, vc)):
            wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=p)
        yield {
            "stargate": (f"http://127.0.0.1:{sg}", f"127.0.0.1:{closed}"),
            "vcenter": (f"http://127.0.0.1:{vc}", f"127.0.0.1:{closed}"),
        }
    finally:
        for p in procs:
            p.stop()


@pytest.mark.parametrize("source", ["stargate", "vcenter"])
@pytest.mark.parametrize(
    "header", ["inf", "-inf", "1e300", "1e400", "nan", "-5", "0", "abc", "", "3\u00e9", "0x10", "1_0", "2 "]
)
def test_odd_scrape_timeout_headers_never_500(probe_exporters, source, header):
    url, target = probe_exporters[source]
    start = time.monotonic()
    r = requests.get(
        url + "/probe",
        params={"target": target},
        timeout=30,
        headers={"X-Prometheus-Scrape-Timeout-Seconds": header.encode("utf-8")},
    )
    assert r.status_code == 200, (header, r.status_code, r.text[:200])
    assert f"{source}_up 0" in r.text
    assert time.monotonic() - start < 15


_RAW_REQUESTS = [
    (b"GET //[::1/metrics HTTP/1.1", (400, 404)),
    (b"GET http://[x/probe HTTP/1.1", (400,)),
    (b"GET /probe?target=%00 HTTP/1.1", (200, 400)),
    (b"GET /probe?target=a%0d%0ab HTTP/1.1", (200, 400)),
    (b"GET /probe?target=%ff%fe HTTP/1.1", (200, 400)),
    (b"GET /probe?%zz=%zz&target HTTP/1.1", (400,)),
    (b"GET /probe?" + b"&".join(b"a%d=1" % i for i in range(500)) + b" HTTP/1.1", (400,)),
    (b"GET /\xc3\xa9\xff HTTP/1.1", (404,)),
    (b"GET /metrics\x00 HTTP/1.1", (400, 404)),
    (b"GET * HTTP/1.1", (404,)),
    (b"GET /probe?target=" + b"9" * 5000 + b" HTTP/1.1", (200, 400)),
    (b"BREW /metrics HTTP/1.1", (501,)),
    (b"GET /metrics HTTP/9.9", (505,)),
    (b"garbage", (400,)),
]


@pytest.mark.parametrize("request_line, allowed", _RAW_REQUESTS, ids=[str(i) for i in range(len(_RAW_REQUESTS))])
def test_no_input_to_the_http_layer_gives_500(stargate_any, request_line, allowed):
    url, _, proc = stargate_any
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    # http.server answers a request line it cannot parse as HTTP/0.9 would: the body only.
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer) or re.search(rb"Error code: (\d{3})", answer)
    assert m, answer[:300]
    status = int(m.group(1))
    assert status in allowed, (request_line[:80], answer[:300])
    assert "Traceback" not in proc.output()


@pytest.mark.parametrize("exporter", ["stargate-exporter", "vcenter-exporter", "prism-exporter"])
@pytest.mark.parametrize(
    "flag, message",
    [
        ("--probe.default-timeout=inf", "--probe.default-timeout: expected seconds > 0"),
        ("--web.timeout-offset=-1", "--web.timeout-offset: expected seconds >= 0"),
        ("--web.timeout-offset=nan", "--web.timeout-offset: expected seconds >= 0"),
    ],
)
def test_bad_timeout_flags_are_one_clear_line(exporter, flag, message):
    res = run_entry_point(exporter, [f"--web.listen-address=127.0.0.1:{free_port()}", flag, *_MINIMAL_ARGS[exporter]])
    assert res.returncode == 2, res.stderr
    assert message in _one_error_line(res)


OPENMETRICS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)  # what Prometheus 2.x sends


def _samples(families) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families
        for s in f.samples
        if s.name.startswith("fio_") and "scrape_duration" not in s.name
    }


def test_metrics_openmetrics_when_asked_with_the_same_samples(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
    from prometheus_client.parser import text_string_to_metric_families as parse_text

    result = tmp_path / "result.json"
    subprocess.run(
        [
            "fio",
            *fio_job_args(
                "om",
                tmp_path,
                size="4m",
                rw="randrw",
                runtime=1,
                filename=tmp_path / "data",
                extra=("--output-format=json+", f"--output={result}"),
            ),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    with _fio_serving(tmp_path, f"--fio.watch={result}") as (port, proc):
        url = f"http://127.0.0.1:{port}/metrics"
        om = requests.get(url, headers={"Accept": OPENMETRICS_ACCEPT}, timeout=10)
        assert om.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        assert om.text.endswith("# EOF\n") and om.text.count("# EOF") == 1
        text = requests.get(url, timeout=10)
        assert text.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        om_samples, text_samples = _samples(parse_openmetrics(om.text)), _samples(parse_text(text.text))
        assert any(name == "fio_read_ios_total" for name, _ in text_samples)
        assert any(name == "fio_read_clat_seconds_bucket" for name, _ in text_samples)
        assert om_samples == text_samples
        assert "OpenMetrics exposition failed" not in proc.output()


@pytest.mark.parametrize("exporter", ["fio-exporter", "stargate-exporter", "vcenter-exporter", "prism-exporter"])
def test_each_exporter_serves_tls_and_basic_auth(tmp_path, pki, exporter):
    port = free_port()
    cfg = _web_config(
        tmp_path / "web.yml",
        _tls(pki) + f"basic_auth_users:\n  prometheus: '{_hash(PASSWORD)}'\n",
    )
    proc = ManagedProcess(
        exporter,
        [
            venv_tool(exporter),
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={cfg}",
            *_MINIMAL_ARGS[exporter],
        ],
        tmp_path,
        env={"VCENTER_USERNAME": "monitor", "VCENTER_PASSWORD": "not-used"},
    )
    try:
        _wait_listening(proc)
        url, ca = f"https://localhost:{port}", str(pki["crt"])
        r = requests.get(url + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10)
        assert r.status_code == 200 and "process_start_time_seconds" in r.text
        assert requests.get(url + "/metrics", auth=("prometheus", "nope"), verify=ca, timeout=10).status_code == 401
        assert requests.get(url + "/", verify=ca, timeout=10).status_code == 401
        assert requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 400
    finally:
        proc.stop()
