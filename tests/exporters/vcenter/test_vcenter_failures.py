"""Failure paths: each gives vcenter_up 0 with a clear cause inside the scrape timeout and one
log line naming the target and the cause, never the password."""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from pyVmomi import vim

from ioparallax.exporters.vcenter.client import DEFAULT_MAX_QUERY_METRICS, read_max_query_metrics
from ioparallax.exporters.vcenter.config import load_config
from ioparallax.yamlconf import ConfigError
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN
from tests.support import Listener, free_port, metric_value as value

from .conftest import PASSWORD, USER, insecure_config

ENV = {"VC_TEST_PASSWORD": PASSWORD}


def _failure_logs(caplog, target):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and target in r.getMessage()]


def _assert_down(m, kind, fragment):
    assert value(m, "vcenter_up") == 0
    info = next(iter(m["vcenter_probe_error_info"]))
    labels = dict(info)
    assert labels["kind"] == kind, labels
    assert fragment in labels["cause"], labels
    assert "vcenter_virtual_disk_write_bytes_total" not in m, "no stale values"
    assert value(m, "vcenter_probe_errors_total", kind=kind) >= 1


def test_wrong_password(scenario_sim, bursty_trace, exporter, caplog):
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    wrong = "not-the-Pa55word"
    exp = exporter(insecure_config(), {"VC_TEST_PASSWORD": wrong})
    with caplog.at_level(logging.DEBUG):
        code, text = exp.probe_text(address)
    assert code == 200
    from tests.support import parse_metrics

    _assert_down(parse_metrics(text), "login", "invalid user name or password")
    (line,) = _failure_logs(caplog, address)
    assert "invalid user name or password" in line
    everything = caplog.text + text + exp.server.app.landing_page().decode()
    assert wrong not in everything and PASSWORD not in everything


def test_vcenter_down(exporter, caplog):
    address = f"127.0.0.1:{free_port()}"
    exp = exporter(insecure_config(), ENV)
    with caplog.at_level(logging.WARNING):
        m = exp.probe(address)
    _assert_down(m, "connect", "connection refused")
    assert len(_failure_logs(caplog, address)) == 1


def test_tls_is_verified_by_default(scenario_sim, bursty_trace, exporter):
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(
        f"defaults:\n  username: {USER}\n  password_env: VC_TEST_PASSWORD\ntargets:\n  {address}: {{}}\n", ENV
    )
    _assert_down(exp.probe(address), "tls", "certificate verification failed")


def _when_a_probe_waits(target, then):
    """Call ``then()`` once a probe has joined the target's running collection, just before it
    waits for it: the event the test releases the held vCenter on, where a sleep would guess."""
    running = target._inflight
    assert running is not None, "the collection goes on in the background"
    result = running.result

    def joined(timeout=None):
        then()
        return result(timeout)

    running.result = joined


def _timed_probe(exp, address, timeout=10.0):
    start = time.monotonic()
    m = exp.probe(address, timeout=timeout)
    return m, time.monotonic() - start


def test_slow_vcenter_answers_up_0_inside_the_scrape_timeout(scenario_sim, bursty_trace, exporter, caplog):
    """vCenter stops answering QueryPerf (the simulator holds every call until the test releases
    them): the probe answers vcenter_up 0, kind timeout, at its deadline while the call is still
    unanswered; the collection goes on, and the next probe joins it and shows its new sample."""
    path, _ = bursty_trace
    address, sim = scenario_sim(path, "-freeze-at", FROZEN, control=True)
    exp = exporter(insecure_config(), ENV)
    # The first collection (inventory, counters) ends first: an overrun after it is a slow vCenter,
    # not a first collection still warming up. The second probe, which has nothing to wait for,
    # is what a probe costs on this machine now (the margin below scales with it).
    assert value(exp.probe(address), "vcenter_up") == 1
    m, quick = _timed_probe(exp, address)
    assert value(m, "vcenter_up") == 1
    before = value(m, "vcenter_virtual_disk_samples_total", vm="burst-01", disk="scsi0:1")
    sim.control.advance_clock(20)  # one more 20 s sample, which only the held collection reads
    sim.control.hold_query_perf()
    with caplog.at_level(logging.WARNING):
        m, elapsed = _timed_probe(exp, address, timeout=2.0)  # Prometheus' timeout 2 s -> our deadline 1.5 s
    assert sim.control.query_perf_held() >= 1, "the probe answered while vCenter had not"
    _assert_down(m, "timeout", "did not answer within the scrape timeout")
    # At its deadline, not before, and then at once: 0.5 s on a quiet machine, as many times a
    # whole probe's cost as a loaded one takes.
    assert 1.5 <= elapsed < 1.5 + max(0.5, 3 * quick), (elapsed, quick)
    assert len(_failure_logs(caplog, address)) == 1
    # The collection went on in the background: the next probe joins it and gets its samples.
    _when_a_probe_waits(exp.targets.get(address), sim.control.release_query_perf)
    m = exp.probe(address, timeout=10.0)
    assert value(m, "vcenter_up") == 1
    assert value(m, "vcenter_probe_shared_collection") == 1
    assert value(m, "vcenter_virtual_disk_samples_total", vm="burst-01", disk="scsi0:1") == before + 1


def test_expired_session_is_re_established(scenario_sim, bursty_trace, exporter):
    """vCenter ends the exporter's session (the simulator expires it on command, as an idle
    timeout does): the next probe logs in again and answers."""
    path, _ = bursty_trace
    address, sim = scenario_sim(path, "-freeze-at", FROZEN, control=True)
    exp = exporter(insecure_config(), ENV)
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1 and value(m, "vcenter_session_logins_total") == 1
    assert sim.control.expire_sessions() == 1  # the exporter's one session
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1
    assert value(m, "vcenter_session_logins_total") == 2


def test_unlisted_target_refused_when_configured(exporter):
    exp = exporter(insecure_config(allow_unlisted=False) + "targets:\n  vc1.example.com: {}\n", ENV)
    code, text = exp.probe_text("vc2.example.com")
    assert code == 400 and "unknown target" in text


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("defaults:\n  password_env: NOPE_NOT_SET\n", "defaults.password_env", "is not set"),
        ("defaults:\n  pasword: x\n", "defaults.pasword", "unknown key"),
        ("targets:\n  vc1:\n    timeout: soon\n", "targets.vc1.timeout", "duration"),
        ("targets:\n  vc1:\n    perf_format: xml\n", "targets.vc1.perf_format", "csv"),
        ("targets:\n  vc1:\n    password: a\n    password_env: B\n", "targets.vc1.password", "not both"),
    ],
)
def test_config_errors_name_file_and_key(tmp_path, text, key, message):
    path = tmp_path / "vcenter.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(str(path), env={})
    assert str(path) in str(err.value) and key in str(err.value) and message in str(err.value)


def test_expired_session_with_queries_in_flight_logs_in_once(scenario_sim, postgres_trace, exporter):
    """16 QueryPerf calls, two in flight at once, all on an expired session: the session is
    re-established once and every VM is still collected."""
    path, _ = postgres_trace
    address, sim = scenario_sim(path, "-freeze-at", FROZEN, "-max-query-metrics", "15", "-vms", "15", control=True)
    exp = exporter(insecure_config(), ENV)
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1 and value(m, "vcenter_perf_queries") == 16
    assert value(m, "vcenter_session_logins_total") == 1
    assert sim.control.expire_sessions() == 1
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1
    assert value(m, "vcenter_perf_queries") == 16
    assert value(m, "vcenter_session_logins_total") == 2
    assert len(m["vcenter_virtual_disk_samples_total"]) == 2 + 15 * 2


class DroppingProxy(Listener):
    """A TCP relay to the simulator that can drop every open connection at once, as vCenter's
    reverse proxy does with kept-alive connections that sat idle."""

    def __init__(self, upstream: str):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        with self.lock:
            self.conns += [conn, server]
        threading.Thread(target=self._pipe, args=(server, conn), daemon=True).start()
        self._pipe(conn, server)

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop_all(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        super().close()
        self.drop_all()


def test_connections_closed_by_the_server_while_idle_are_reopened(scenario_sim, postgres_trace, exporter):
    """The server closes kept-alive connections between probes: the next probe reconnects with
    the same session (no failed probe, no new login), for QueryPerf and pyvmomi calls alike."""
    path, _ = postgres_trace
    upstream, _ = scenario_sim(path, "-freeze-at", FROZEN, "-max-query-metrics", "15", "-vms", "15")
    proxy = DroppingProxy(upstream)
    try:
        exp = exporter(insecure_config(), ENV)
        assert value(exp.probe(proxy.address), "vcenter_up") == 1
        for _ in range(2):
            proxy.drop_all()
            m = exp.probe(proxy.address)
            assert value(m, "vcenter_up") == 1, m.get("vcenter_probe_error_info")
            assert value(m, "vcenter_perf_queries") == 16
        exp.targets.get(proxy.address).inventory_at = 0.0  # the next probe starts with pyvmomi calls
        proxy.drop_all()
        m = exp.probe(proxy.address)
        assert value(m, "vcenter_up") == 1, m.get("vcenter_probe_error_info")
        assert value(m, "vcenter_session_logins_total") == 1
    finally:
        proxy.close()


def _options(answer):
    """A service instance whose OptionManager answers QueryOptions with ``answer`` (raised if an exception)."""

    def query(name):
        assert name == "config.vpxd.stats.maxQueryMetrics"
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return SimpleNamespace(content=SimpleNamespace(setting=SimpleNamespace(QueryOptions=query)))


def test_max_query_metrics_defaults_only_when_the_option_is_absent_or_unreadable():
    """An expired session while the limit is read is raised (the client logs in again and retries),
    not taken as the 256 default: the answer is kept for the target's life, and a default taken on a
    transient error made every later QueryPerf too large for a limit of 15 (a CI run at load 13)."""
    assert read_max_query_metrics(_options([SimpleNamespace(key="x", value="15")])) == 15
    assert read_max_query_metrics(_options(vim.fault.InvalidName(name="x"))) == DEFAULT_MAX_QUERY_METRICS
    assert read_max_query_metrics(_options([])) == DEFAULT_MAX_QUERY_METRICS
    assert read_max_query_metrics(_options([SimpleNamespace(key="x", value="many")])) == DEFAULT_MAX_QUERY_METRICS
    assert read_max_query_metrics(_options([SimpleNamespace(key="x", value="0")])) == DEFAULT_MAX_QUERY_METRICS
    with pytest.raises(vim.fault.NotAuthenticated):
        read_max_query_metrics(_options(vim.fault.NotAuthenticated()))
    with pytest.raises(ConnectionResetError):
        read_max_query_metrics(_options(ConnectionResetError()))
