"""The real vdbench-exporter process: serve over HTTP (and HTTPS), follow a run live, convert,
--help/--version, configuration errors."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import requests

from ioparallax.simulators.guest.vdbench import HostInterval, RunDefinition, VdbenchOutput
from tests.exporters.vdbench.test_vdbench_reader import MULTI, samples, value
from tests.support import (
    first_scrape,
    free_port,
    promtool_check_metrics,
    run_entry_point,
    self_signed_cert,
    start_exporter,
    venv_tool,
)

EXPORTER = "vdbench-exporter"


def test_serve_follows_a_run_live(tmp_path, processes):
    results = tmp_path / "results"
    shutil.copytree(MULTI, results / "multi")
    sim = VdbenchOutput(results / "live", [RunDefinition("rd1", interval=1, elapsed=600)])
    sim.start()
    t0 = time.time()
    sim.begin_run("rd1", t0)
    sim.interval("rd1", HostInterval(1000, 3.90625, 50, 1.0, 2.0, 9.0, 0.5, 1.5), t0 + 1)
    port, proc = start_exporter(processes, EXPORTER, "--vdbench.watch", results)
    landing, text, sm = first_scrape(port, proc, "vdbench-exporter")
    assert "9766" not in landing.url
    assert value(sm, "vdbench_exporter_build_info") == 1
    live = str(results / "live")
    assert value(sm, "vdbench_run_read_ops_total", source=live, run="rd1") == 500
    assert value(sm, "vdbench_run_finished", source=live, run="rd1") == 0
    assert value(sm, "vdbench_run_average_iops", source=str(results / "multi"), run="rd2") == 212.4237
    # vdbench appends two more intervals and ends the run: the next scrape has them
    sim.interval("rd1", HostInterval(1200, 4.6875, 50, 1.0, 2.0, 9.0, 0.5, 1.5), t0 + 2)
    sim.interval("rd1", HostInterval(800, 3.125, 50, 1.0, 2.0, 9.0, 0.5, 1.5), t0 + 3)
    sim.end_run("rd1", t0 + 4)
    sm = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    assert value(sm, "vdbench_run_read_ops_total", source=live, run="rd1") == 1500
    assert value(sm, "vdbench_run_interval_iops", source=live, run="rd1") == 800
    assert value(sm, "vdbench_run_finished", source=live, run="rd1") == 1
    assert value(sm, "vdbench_run_average_iops", source=live, run="rd1") == 1000
    assert requests.get(f"http://127.0.0.1:{port}/probe?target=x", timeout=5).status_code == 404
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stderr.decode()


def test_serve_over_tls_with_web_config(tmp_path, processes):
    cert, key = self_signed_cert(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    port = free_port()
    proc = processes.start(
        EXPORTER,
        [
            venv_tool(EXPORTER),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--web.config.file",
            web,
            "--vdbench.watch",
            MULTI,
        ],
    )
    url = f"https://127.0.0.1:{port}/metrics"
    deadline = time.time() + 20
    while True:
        try:
            r = requests.get(url, timeout=5, verify=str(cert))
            break
        except requests.ConnectionError:
            assert proc.popen.poll() is None and time.time() < deadline, proc.log_path.read_text()
            time.sleep(0.2)
    assert r.status_code == 200 and "vdbench_run_read_ops_total" in r.text
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)  # verified by default: an unknown CA is refused


def test_convert_cli(tmp_path):
    ok = subprocess.run([venv_tool(EXPORTER), "convert", str(MULTI)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert promtool_check_metrics(ok.stdout).returncode == 0
    assert 'vdbench_host_average_iops{host="hd2",run="rd3",seq="3"' in ok.stdout
    missing = subprocess.run(
        [venv_tool(EXPORTER), "convert", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert f"vdbench-exporter convert: {tmp_path / 'nope'}: no such file or directory" in missing.stderr


@pytest.mark.parametrize("sub", [[], ["serve"], ["convert"]])
def test_help_and_version(sub):
    out = run_entry_point(EXPORTER, [*sub, "--help"])
    assert out.returncode == 0 and "vdbench" in out.stdout
    if sub == ["serve"]:
        assert "--vdbench.watch" in out.stdout and "--web.config.file" in out.stdout
    if sub == []:
        assert "{serve,convert}" in out.stdout
    ver = run_entry_point(EXPORTER, [*sub, "--version"])
    assert ver.returncode == 0 and ver.stdout.startswith("vdbench-exporter ")


def test_config_errors_name_file_and_key(tmp_path):
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("watch: [/x]\nretention: soon\n")
    out = run_entry_point(EXPORTER, ["--config.file", str(cfg)])
    assert out.returncode == 2
    assert str(cfg) in out.stderr and "retention" in out.stderr
    cfg.write_text("watchh: [/x]\n")
    out = run_entry_point(EXPORTER, ["--config.file", str(cfg)])
    assert out.returncode == 2 and "watchh" in out.stderr
    out = run_entry_point(EXPORTER, ["--vdbench.cache-size", "lots"])
    assert out.returncode == 2 and "--vdbench.cache-size" in out.stderr
