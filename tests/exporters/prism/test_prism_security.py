"""Credentials go only to the targets the user listed; every spelling of a listed target is one
target with one session; hostile target strings give 400 with a log line, never a 500 and never
a connection; passwords never reach a log. The console scripts are run as users run them."""

from __future__ import annotations

import subprocess
import time

import requests

from tests.exporters.vcenter.test_vcenter_security import HOSTILE_TARGETS, assert_refused, one_target_for_every_spelling
from tests.support import Canary, free_port, metric_value as value, parse_metrics, self_signed_cert, venv_tool

from .conftest import FROZEN, PASSWORD, USER, config_yaml


def refused_spellings(canary: Canary, listed: str) -> list[str]:
    """Ways to name the canary, or to smuggle it behind the listed target."""
    port = canary.port
    lhost, lport = listed.rsplit(":", 1)
    return [
        canary.address,
        f"HTTPS://127.0.0.1:{port}/",
        f"127.0.0.1:{port}/PrismGateway/services/rest/v2.0/",
        f"LOCALHOST.:{port}",
        f"[::ffff:127.0.0.1]:{port}",
        f"https://{listed}@127.0.0.1:{port}/",
        f"{listed}@127.0.0.1:{port}",
        f"https://127.0.0.1:{port}#@{listed}",
        f"127.0.0.1:{port}/@{listed}",
        f"127.0.0.1:{port}?{listed}",
        f"http://{listed}/",
        f"localhost:{lport}",
        f"127.0.0.1:{port}\n{listed}",
        f"{lhost}",  # the listed host on Prism's default port 9440: another target
        f"{listed}/api/",
    ]


def test_unlisted_targets_get_no_connection(prism_sim, exporter, canary, caplog):
    sim = prism_sim(clock=lambda: FROZEN)
    listed = sim.address
    exp = exporter(config_yaml([listed]))
    spellings = refused_spellings(canary, listed) + HOSTILE_TARGETS
    assert len(spellings) >= 27
    assert_refused(exp, caplog, spellings, "p1%00")
    time.sleep(0.2)
    assert canary.connections() == []
    assert sim.requests == {}, "not even the listed Prism was contacted"
    assert all("\n" not in r.getMessage() for r in caplog.records)
    one_target_for_every_spelling(exp, "prism", listed, f"HTTPS://{listed}")
    assert PASSWORD not in caplog.text


def test_opt_in_reaches_the_canary(exporter, canary):
    exp = exporter(config_yaml())  # allow_unlisted_targets: true
    m = exp.probe(canary.address, timeout=3)
    assert value(m, "prism_up") == 0
    assert canary.connections(), "the canary does see a probe that is allowed"


def test_idle_targets_are_dropped(prism_sim, exporter):
    sim = prism_sim(clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]))
    exp.probe(sim.address)
    assert exp.targets.close_idle(now=time.monotonic() + 3600) == [sim.address]
    assert exp.targets._targets == {}


def _start(processes, name: str, argv: list, env: dict, pattern: str):
    proc = processes.start(name, argv, env=env)
    proc.wait_for_output(pattern, 30)
    return proc


def test_console_scripts_with_tls_and_environment_credentials(processes, tmp_path, canary):
    """prism-simulator over TLS with basic auth; prism-exporter with PRISM_USERNAME/PRISM_PASSWORD
    for --prism.target only, the CA from the config file; no list: exit 2; --version."""
    cert, key = self_signed_cert(tmp_path, "prism")
    port = free_port()
    base = {"PATH": "/usr/bin:/bin", "SIM_PASSWORD": PASSWORD}
    _start(
        processes,
        "prism-simulator",
        [
            venv_tool("prism-simulator"),
            "clean-oltp",
            f"--listen=127.0.0.1:{port}",
            f"--username={USER}",
            "--password-env=SIM_PASSWORD",
            f"--tls-cert={cert}",
            f"--tls-key={key}",
        ],
        base,
        r"prism https://127\.0\.0\.1:",
    )
    listed = f"127.0.0.1:{port}"
    env = {"PATH": "/usr/bin:/bin", "PRISM_USERNAME": USER, "PRISM_PASSWORD": PASSWORD}
    out = subprocess.run(
        [venv_tool("prism-exporter"), "--web.listen-address=127.0.0.1:0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "no targets listed" in out.stderr and "--prism.target" in out.stderr
    out = subprocess.run([venv_tool("prism-exporter"), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("prism-exporter ")
    cfg = tmp_path / "prism.yml"
    cfg.write_text(f"defaults:\n  ca_file: {cert}\n")
    eport = free_port()
    proc = _start(
        processes,
        "prism-exporter",
        [
            venv_tool("prism-exporter"),
            f"--web.listen-address=127.0.0.1:{eport}",
            f"--config.file={cfg}",
            f"--prism.target={listed}",
        ],
        env,
        r"listening on",
    )
    url = f"http://127.0.0.1:{eport}"
    r = requests.get(f"{url}/probe", params={"target": f"https://{listed}/"}, timeout=30)
    m = parse_metrics(r.text)
    assert value(m, "prism_up") == 1, m.get("prism_probe_error_info")
    assert m["prism_virtual_disk_read_ops_total"]
    assert requests.get(f"{url}/probe", params={"target": canary.address}, timeout=30).status_code == 400
    landing = requests.get(url + "/", timeout=10).text
    assert "prism-exporter" in landing and PASSWORD not in landing
    metrics = requests.get(url + "/metrics", timeout=10).text
    assert "prism_exporter_build_info{" in metrics
    time.sleep(0.2)
    assert canary.connections() == []
    assert PASSWORD not in proc.log_path.read_text()
