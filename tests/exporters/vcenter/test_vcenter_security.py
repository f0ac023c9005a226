"""Credentials go only to the targets the user listed (issue 13), every spelling of a target is
one target with one session, idle sessions are logged out, and hostile target strings give a 400
with a log line, never a 500 (issue 14).

The canary is a loopback TCP server that records every connection: each refused probe must leave
it untouched (no connection, so no TLS handshake and no credential). One test opts in to unlisted
targets and shows the canary does see that probe, so the canary can fail."""

from __future__ import annotations

import logging
import re
import subprocess
import time

import pytest
import requests

from ioparallax.exporters.common import multitarget
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN
from tests.support import (
    Canary,
    ShiftedClock,
    free_port,
    metric_value as value,
    parse_metrics,
    self_signed_cert,
    venv_tool,
)

from .conftest import PASSWORD, USER, insecure_config

ENV = {"VC_TEST_PASSWORD": PASSWORD}


def refused_spellings(canary: Canary, listed: str) -> list[str]:
    """Ways to name the canary, or to smuggle it behind the listed target."""
    port = canary.port
    return [
        canary.address,  # plainly unlisted
        f"HTTPS://127.0.0.1:{port}/",  # unlisted, odd spellings
        f"127.0.0.1:{port}/sdk",
        f"LOCALHOST.:{port}",
        f"[::ffff:127.0.0.1]:{port}",
        f"https://{listed}@127.0.0.1:{port}/",  # user info naming the listed one
        f"{listed}@127.0.0.1:{port}",
        f"https://127.0.0.1:{port}#@{listed}",
        f"127.0.0.1:{port}/@{listed}",
        f"127.0.0.1:{port}?{listed}",
        f"http://{listed}/",  # the listed one over plain http
        f"localhost:{listed.rsplit(':', 1)[1]}",  # the listed port under another name
        f"127.0.0.1:{port}\n{listed}",
    ]


def _refusal_logged(caplog, target: str) -> bool:
    return any(
        "probe refused" in r.getMessage() and repr(target) in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
    )


def assert_refused(exp, caplog, targets: list[str], raw_nul: str) -> None:
    """Every one of ``targets`` is answered 400 at once, with a WARNING "probe refused" line naming
    it; so are raw query strings with a NUL (``raw_nul``), invalid UTF-8 and CR/LF, as a client may
    send them. Shared with test_prism_security."""
    with caplog.at_level(logging.WARNING):
        for target in targets:
            start = time.monotonic()
            code, text = exp.probe_text(target, timeout=2.0)
            assert code == 400, (target, code, text)
            assert time.monotonic() - start < 2.0
            assert _refusal_logged(caplog, target), target
    for raw in (raw_nul, "%ff%fe", "%0a%0d"):
        r = requests.get(f"{exp.server.url}/probe?target={raw}", timeout=10)
        assert r.status_code == 400, (raw, r.text)


def one_target_for_every_spelling(exp, source: str, listed: str, upper: str) -> None:
    """``listed``, its URL spellings (``upper``: an upper-case scheme) and its FQDN with a trailing
    dot probe the one listed target: up, through one session. Shared with test_prism_security."""
    host, port = listed.split(":")
    for spelling in (listed, f"https://{listed}/", upper, f"{host}.:{port}"):
        m = exp.probe(spelling)
        assert value(m, f"{source}_up") == 1, spelling
        assert value(m, f"{source}_session_logins_total") == 1, "one session for every spelling"
    assert list(exp.targets._targets) == [listed]


def test_config_file_unlisted_targets_get_no_connection(scenario_sim, bursty_trace, exporter, canary, caplog):
    """allow_unlisted_targets defaults to false: the canary, however spelled, gets nothing; the
    listed simulator, however spelled, is one target with one session."""
    path, _ = bursty_trace
    listed, _ = scenario_sim(path, "-freeze-at", FROZEN)
    config = (
        f"defaults:\n  username: {USER}\n  password_env: VC_TEST_PASSWORD\n  insecure_skip_verify: true\n"
        f"targets:\n  {listed}: {{}}\n"
    )
    exp = exporter(config, ENV)
    with caplog.at_level(logging.WARNING):
        for target in refused_spellings(canary, listed):
            code, text = exp.probe_text(target)
            assert code == 400, (target, code, text)
            assert "target" in text
            assert _refusal_logged(caplog, target), target
    time.sleep(0.2)
    assert canary.connections() == []
    assert PASSWORD not in caplog.text

    one_target_for_every_spelling(exp, "vcenter", listed, f"HTTPS://{listed}/sdk")


def test_unlisted_target_refused_message_names_the_fix(exporter, canary):
    exp = exporter(insecure_config(allow_unlisted=False) + "targets:\n  127.0.0.1:1: {}\n", ENV)
    code, text = exp.probe_text(canary.address)
    assert code == 400
    assert f"target 127.0.0.1:{canary.port} is not listed" in text and "credentials" in text
    assert canary.connections() == []


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 that the exporter trusts through SSL_CERT_FILE (no config file,
    so no insecure_skip_verify)."""
    return self_signed_cert(tmp_path, "vc")


def _start_exporter(processes, name, *args, env):
    port = free_port()
    proc = processes.start(
        name, [venv_tool("vcenter-exporter"), f"--web.listen-address=127.0.0.1:{port}", *args], env=env
    )
    proc.wait_for_output(r"listening on", 30)
    return f"http://127.0.0.1:{port}", proc


def _probe(url, target):
    r = requests.get(
        f"{url}/probe", params={"target": target}, headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"}, timeout=30
    )
    return r.status_code, r.text


def test_environment_credentials_need_a_target_list(processes, stock_vcsim, tmp_path, canary):
    """No config file: VCENTER_USERNAME/VCENTER_PASSWORD go to --vcenter.target only (TLS verified);
    without a list the exporter does not start; --vcenter.allow-unlisted-targets is the explicit
    opt-in, warned about at start-up (and then the canary is reached: the canary works)."""
    cert, key = _self_signed(tmp_path)
    listed, _ = stock_vcsim("-tlscert", cert, "-tlskey", key, "-vm", "1")  # the last -vm counts
    env = {"VCENTER_USERNAME": USER, "VCENTER_PASSWORD": PASSWORD, "SSL_CERT_FILE": str(cert), "VCENTER_TARGETS": ""}

    out = subprocess.run(
        [venv_tool("vcenter-exporter"), "--web.listen-address=127.0.0.1:0"],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "no targets listed" in out.stderr and "--vcenter.target" in out.stderr

    url, proc = _start_exporter(processes, "vcenter-exporter-listed", f"--vcenter.target={listed}", env=env)
    for target in refused_spellings(canary, listed):
        code, text = _probe(url, target)
        assert code == 400, (target, text)
    code, text = _probe(url, f"https://{listed}/")
    assert code == 200
    m = parse_metrics(text)
    assert value(m, "vcenter_up") == 1, m.get("vcenter_probe_error_info")
    time.sleep(0.2)
    assert canary.connections() == []
    log_text = proc.log_path.read_text()
    assert f"probe refused target='{canary.address}'" in log_text
    assert "unlisted targets are allowed" not in log_text
    assert PASSWORD not in log_text

    url, proc = _start_exporter(processes, "vcenter-exporter-open", "--vcenter.allow-unlisted-targets", env=env)
    assert re.search(r"WARN.*unlisted targets are allowed", proc.log_path.read_text(), re.I)
    code, text = _probe(url, canary.address)
    assert code == 200 and value(parse_metrics(text), "vcenter_up") == 0
    assert len(canary.connections()) == 1, "the opted-in probe reaches the canary"


def test_vcenter_targets_environment_variable(processes, canary):
    env = {
        "VCENTER_USERNAME": USER,
        "VCENTER_PASSWORD": PASSWORD,
        "VCENTER_TARGETS": f"vc1.example.com, {canary.address}",
    }
    url, _ = _start_exporter(processes, "vcenter-exporter-env", env=env)
    assert _probe(url, "VC1.EXAMPLE.COM.:1")[0] == 400
    code, text = _probe(url, f"https://{canary.address}/")
    assert code == 200, text
    assert len(canary.connections()) == 1, "a listed target is probed"


def _trace_count(proc, element: str) -> int:
    return proc.log_path.read_text(errors="replace").count(f"<{element} xmlns=")


def idle_session_reaped(sim, clock) -> None:
    """Move the exporter's clock past the 20 s idle timeout and wait (a minute at most) until the
    reaper, which looks every 5 s, has logged the session out: once."""
    clock.offset = 40.0
    deadline = time.monotonic() + 60
    while _trace_count(sim, "Logout") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _trace_count(sim, "Logout") == 1


def test_idle_sessions_are_logged_out(stock_vcsim, exporter, monkeypatch):
    """Spellings share one session; a target not probed for session_idle_timeout is logged out by
    the exporter's idle reaper (the simulator's SOAP trace shows the Logout) and the next probe logs
    in again. The reaper's clock is moved by the test past the 20 s timeout, so how long the probes
    take on a loaded machine does not decide whether the session is idle between them."""
    clock = ShiftedClock()
    monkeypatch.setattr(multitarget, "time", clock)
    address, sim = stock_vcsim("-trace")
    exp = exporter(insecure_config() + "session_idle_timeout: 20s\n", ENV)
    for spelling in (address, f"https://{address}/sdk", f"HTTPS://{address}/"):
        assert value(exp.probe(spelling), "vcenter_up") == 1
    assert _trace_count(sim, "Login") == 1
    assert _trace_count(sim, "Logout") == 0
    idle_session_reaped(sim, clock)
    assert exp.targets._targets == {}
    assert value(exp.probe(address), "vcenter_up") == 1
    assert _trace_count(sim, "Login") == 2


def test_busy_targets_are_not_closed(scenario_sim, bursty_trace, exporter):
    """A collection still running (slow vCenter) keeps its session past the idle timeout."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, "-method-delay", "QueryPerf:2500")
    exp = exporter(insecure_config() + "session_idle_timeout: 1s\n", ENV)
    m = exp.probe(address, timeout=1.5)
    assert value(m, "vcenter_up") == 0
    target = exp.targets._targets[next(iter(exp.targets._targets))]
    assert exp.targets.close_idle(now=time.monotonic() + 5) == []
    assert target.busy()


HOSTILE_TARGETS = [
    "h\u00e9st.example",
    "vc1%00",
    "vc1\nforged=1",
    "vc1:abc",
    "a" * 70 + ".example",
    "[::1]:abc",
    "http://[::1]:abc/",
    "vc1:99999",
    "vc1:0",
    "::1",
    "[::1",
    "[zz]:1",
    "https://",
    "a b",
    "vc1:\uff11\uff12",
    "\u202evc1",
    "2130706433",
    "127.1",
    "x" * 300,
    "gopher://127.0.0.1:1/",
    "vc1/../x",
    "vc1\\@127.0.0.1",
]


@pytest.mark.parametrize("allow_unlisted", [True, False])
def test_hostile_targets_give_400_never_500(exporter, caplog, allow_unlisted):
    exp = exporter(insecure_config(allow_unlisted=allow_unlisted) + "targets:\n  127.0.0.1:1: {}\n", ENV)
    assert_refused(exp, caplog, HOSTILE_TARGETS, "vc1%00")
    assert all("\n" not in r.getMessage() for r in caplog.records)


def test_deployed_prometheus_targets_are_listed_in_the_exporter_config():
    """The compose stack's Prometheus probes only vCenters its exporter config lists (else 400)."""
    import yaml

    from ioparallax.exporters.vcenter.address import target_key
    from ioparallax.exporters.vcenter.config import load_config
    from tests.support import REPO

    config = load_config(
        str(REPO / "deploy/exporters/vcenter.yml"), env={"VCENTER_USERNAME": USER, "VCENTER_PASSWORD": PASSWORD}
    )
    assert not config.allow_unlisted
    groups = yaml.safe_load((REPO / "deploy/prometheus/targets/vcenter.yml").read_text())
    targets = [t for g in groups for t in g["targets"]]
    assert targets
    for t in targets:
        assert config.target(target_key(t)) is not None, t
