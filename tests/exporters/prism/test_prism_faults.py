"""A Prism that fails in any way gives prism_up 0, prism_probe_error_info{kind,cause} and one log
line naming the target and the cause, inside the probe's deadline, never an HTTP 500; and the
next probe after the fault is cleared is up again."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from tests.support import free_port, late_allowance, metric_value as value, parse_metrics, self_signed_cert

from .conftest import FROZEN, PASSWORD, USER, config_yaml

# The scrape timeout of a probe whose fault is a slow Prism (its 6 s answer outlives it), and of
# every other faulty probe: long enough that a loaded machine's probe ends by the fault, not by
# the deadline (at load 21 a lying page's probe took 4 s and its deadline of 2.4 s made it
# kind=timeout, not protocol).
PROBE_TIMEOUT = 3.0
FAULT_PROBE_TIMEOUT = 15.0


def _failed(exp, target, caplog, kind: str, cause_part: str, timeout: float = FAULT_PROBE_TIMEOUT) -> dict:
    with caplog.at_level(logging.WARNING, logger="ioparallax.exporters.prism"):
        start = time.monotonic()
        code, text = exp.probe_text(target, timeout=timeout)
        took = time.monotonic() - start
    assert code == 200, text
    assert took < timeout, f"answered after {took:.1f}s"
    m = parse_metrics(text)
    assert value(m, "prism_up") == 0
    info = [dict(k) for k in m["prism_probe_error_info"]]
    assert len(info) == 1 and info[0]["kind"] == kind, info
    assert cause_part in info[0]["cause"], info
    assert value(m, "prism_probe_errors_total", kind=kind) >= 1
    assert not any(n.startswith("prism_virtual_disk") for n in m), "no per-disk series on a failed probe"
    lines = [r.getMessage() for r in caplog.records if "probe failed" in r.getMessage()]
    assert any(f"target={target}" in line and f"kind={kind}" in line and cause_part in line for line in lines), lines
    assert PASSWORD not in caplog.text
    return m


@pytest.mark.parametrize(
    "mode, kw, kind, cause",
    [
        ("http_500", {}, "protocol", "HTTP 500"),
        ("garbage", {}, "protocol", "not JSON"),
        ("truncated", {}, "protocol", "not JSON"),
        ("refused", {}, "connect", "connection"),
        ("slow", {"delay": 6}, "timeout", "scrape timeout"),
    ],
)
def test_faulty_prism(prism_sim, exporter, caplog, mode, kw, kind, cause):
    sim = prism_sim(clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]))
    assert value(exp.probe(sim.address), "prism_up") == 1
    sim.set_fault(mode, **kw)
    _failed(exp, sim.address, caplog, kind, cause, timeout=PROBE_TIMEOUT if mode == "slow" else FAULT_PROBE_TIMEOUT)
    sim.clear_faults()
    if mode == "slow":
        time.sleep(kw["delay"])  # the read that outlived the probe ends, then the next one is fresh
    m = exp.probe(sim.address)
    assert value(m, "prism_up") == 1 and "prism_probe_error_info" not in {n for n in m if m[n]}


def test_prism_down(exporter, caplog):
    target = f"127.0.0.1:{free_port()}"  # nothing listens there
    exp = exporter(config_yaml([target]))
    _failed(exp, target, caplog, "connect", "connection refused")


def test_wrong_password(prism_sim, exporter, caplog):
    sim = prism_sim(clock=lambda: FROZEN, auth=(USER, "another"))
    exp = exporter(config_yaml([sim.address]))
    _failed(exp, sim.address, caplog, "login", "HTTP 401")


def test_untrusted_certificate(prism_sim, exporter, caplog, tmp_path):
    cert, key = self_signed_cert(tmp_path, "prism")
    sim = prism_sim(clock=lambda: FROZEN, tls=(str(cert), str(key)))
    exp = exporter(config_yaml([sim.address], scheme="https"))
    _failed(exp, sim.address, caplog, "tls", "certificate verify failed")
    # The same Prism with its CA given, and with verification turned off on purpose:
    ok = exporter(config_yaml([sim.address], scheme="https", ca_file=str(cert)))
    assert value(ok.probe(sim.address), "prism_up") == 1
    for opt_out in ({"insecure_skip_verify": "true"}, {"tls_verify": "false"}):  # the key and its alias
        off = exporter(config_yaml([sim.address], scheme="https", **opt_out))
        assert value(off.probe(sim.address), "prism_up") == 1, opt_out


def test_vm_list_failure_fails_the_probe(prism_sim, exporter, caplog):
    sim = prism_sim(clock=lambda: FROZEN)
    sim.set_fault("http_500", only="vms")
    exp = exporter(config_yaml([sim.address]))
    _failed(exp, sim.address, caplog, "protocol", "HTTP 500 from /PrismGateway/services/rest/v2.0/vms/")


class RawServer:
    """A loopback server that answers every connection with ``respond(conn)`` (hostile answers);
    each connection is served in its own thread by ``_one`` (test_prism_hostile's server
    overrides it to parse the request)."""

    def __init__(self, respond):
        import socket
        import threading

        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.respond = respond
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            conn.recv(65536)
            self.respond(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.listener.close()


def _client(address: str, timeout: float = 1.0):
    from ioparallax.exporters.prism.client import client_for
    from ioparallax.exporters.prism.config import TargetConfig

    return client_for(address, TargetConfig(username=USER, password=PASSWORD, scheme="http", timeout=timeout))


def test_a_trickling_answer_ends_at_the_request_timeout():
    """A space every 0.1 s, each well inside the socket timeout, until the test ends: the one
    deadline over the whole request (1 s) ends it, late by no more than what a whole request
    with nothing to wait for costs on this machine now."""
    done = threading.Event()

    def trickle(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not done.wait(0.1):
            conn.sendall(b" ")

    def quick_answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

    quick_srv, srv = RawServer(quick_answer), RawServer(trickle)
    try:
        from ioparallax.exporters.common.prismclient import TargetError

        start = time.monotonic()
        _client(quick_srv.address, timeout=1.0).get("/x")
        quick = time.monotonic() - start
        start = time.monotonic()
        with pytest.raises(TargetError) as err:
            _client(srv.address, timeout=1.0).get("/x")
        took = time.monotonic() - start
        assert err.value.kind == "timeout" and took < 1.0 + late_allowance(quick, quiet=1.5), (took, quick)
    finally:
        done.set()
        quick_srv.close()
        srv.close()


def test_an_endless_chunked_answer_is_cut_at_the_size_limit(monkeypatch):
    from ioparallax.exporters.common import prismclient as client_module

    monkeypatch.setattr(client_module, "MAX_BODY_BYTES", 1_000_000)

    def endless(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"[" * 65536
        for _ in range(100):
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    srv = RawServer(endless)
    try:
        with pytest.raises(client_module.TargetError, match="larger than 1000000 bytes") as err:
            _client(srv.address, timeout=10).get("/x")
        assert err.value.kind == "protocol"
    finally:
        srv.close()
