"""A real Prometheus scrapes exporters protected by TLS and basic auth, with the scrape configs
of deploy/README.md ("TLS and basic auth on the exporters"), read from the README itself."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import bcrypt
import pytest
import requests
import yaml

from tests.support import REPO, ManagedProcess, ec_cert, free_port, require_tool, venv_tool, wait_for_http

pytestmark = pytest.mark.e2e

PASSWORD = "scrape-me"


def _readme_scrape_configs() -> list[dict]:
    text = (REPO / "deploy" / "README.md").read_text()
    section = text.split("## TLS and basic auth on the exporters", 1)[1]
    block = re.search(r"```yaml\n(scrape_configs:.*?)```", section, re.S).group(1)
    return yaml.safe_load(block)["scrape_configs"]


def test_prometheus_scrapes_tls_and_basic_auth_exporters_as_documented(tmp_path):
    require_tool("prometheus")
    crt, key = ec_cert(tmp_path, "tls", "localhost", "DNS:localhost,IP:127.0.0.1")
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\nbasic_auth_users:\n"
        f"  prometheus: '{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}'\n"
    )
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ioparallax-exporter-password").write_text(PASSWORD)
    (secrets / "wrong-password").write_text("not-it")
    shutil.copy(crt, secrets / "ioparallax-ca.crt")
    targets = tmp_path / "targets"
    targets.mkdir()
    closed_port = free_port()  # a CVM that does not answer: stargate_up 0, but the scrape is up
    (targets / "stargate.yml").write_text(yaml.safe_dump([{"targets": [f"127.0.0.1:{closed_port}"]}]))

    procs: list[ManagedProcess] = []
    try:
        sg_port, fio_port, prom_port = free_port(), free_port(), free_port()
        procs.append(
            ManagedProcess(
                "stargate-exporter",
                [
                    venv_tool("stargate-exporter"),
                    f"--web.listen-address=127.0.0.1:{sg_port}",
                    f"--web.config.file={web}",
                    "--stargate.target=127.0.0.1",
                ],
                tmp_path,
            )
        )
        procs.append(
            ManagedProcess(
                "fio-exporter",
                [
                    venv_tool("fio-exporter"),
                    f"--web.listen-address=127.0.0.1:{fio_port}",
                    f"--web.config.file={web}",
                    "--no-collector.guest-disk",
                ],
                tmp_path,
            )
        )
        for p in procs:
            p.wait_for_output(r"msg=\"listening on ")
        (targets / "fio.yml").write_text(yaml.safe_dump([{"targets": [f"localhost:{fio_port}"]}]))

        scrape = _readme_scrape_configs()
        assert [job["job_name"] for job in scrape] == ["stargate", "fio"]
        text = yaml.safe_dump(scrape).replace("/etc/prometheus/secrets", str(secrets))
        text = text.replace("targets/", f"{targets}/").replace(
            "stargate-exporter.example.net:9761", f"localhost:{sg_port}"
        )
        scrape = yaml.safe_load(text)
        wrong = {
            **scrape[1],
            "job_name": "fio-wrong-password",
            "basic_auth": {"username": "prometheus", "password_file": str(secrets / "wrong-password")},
        }
        plain = {"job_name": "fio-plain-http", "static_configs": [{"targets": [f"127.0.0.1:{fio_port}"]}]}
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            yaml.safe_dump(
                {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": scrape + [wrong, plain]}
            )
        )
        check = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        prom = ManagedProcess(
            "prometheus",
            [
                "prometheus",
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            tmp_path,
        )
        procs.append(prom)
        api = f"http://127.0.0.1:{prom_port}"
        wait_for_http(api + "/-/ready", proc=prom, status=200)  # 503 while the TSDB opens

        deadline = time.monotonic() + 60
        health: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            active = requests.get(api + "/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
            health = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in active}
            if len(health) == 4 and all(h != "unknown" for h, _ in health.values()):
                break
            time.sleep(0.5)
        assert health["stargate"] == ("up", ""), health
        assert health["fio"] == ("up", ""), health
        assert health["fio-wrong-password"][0] == "down" and "401" in health["fio-wrong-password"][1], health
        assert health["fio-plain-http"][0] == "down" and "400" in health["fio-plain-http"][1], health

        def query(promql: str) -> list[dict]:
            return requests.get(api + "/api/v1/query", params={"query": promql}, timeout=10).json()["data"]["result"]

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (query("stargate_up") and query('python_info{job="fio"}')):
            time.sleep(0.5)
        up = query("stargate_up")
        assert [(r["metric"]["instance"], r["value"][1]) for r in up] == [(f"127.0.0.1:{closed_port}", "0")]
        assert query('python_info{job="fio"}')
    finally:
        for p in reversed(procs):
            p.stop()
