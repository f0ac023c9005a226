"""The monitoring stack itself: node_exporter, Alertmanager, VictoriaMetrics and Prometheus."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ioparallax.simulators.stack.config import pick_port
from ioparallax.simulators.stack.scrape import exporter_scrape

if TYPE_CHECKING:
    from ioparallax.simulators.process import Process
    from ioparallax.simulators.stack.core import Stack


def _fresh_data_dir(stack: Stack, name: str) -> Path:
    """``name``'s data directory in the run dir, emptied: each start begins with no history."""
    data = stack.workdir / f"{name}-data"
    shutil.rmtree(data, ignore_errors=True)
    return data


def _serve(stack: Stack, name: str, argv: Callable[[str], list[Any]], ready: str) -> Process:
    """Start ``name`` on its port on loopback (``argv(address)``: its command line listening on
    ``address``) and wait until ``ready`` answers."""
    port = pick_port(name, stack.fixed_ports)
    proc = stack.spawn(name, argv(f"127.0.0.1:{port}"), url=f"http://127.0.0.1:{port}")
    stack.wait_http(proc, ready)
    return proc


def start_node_exporter(stack: Stack) -> list[dict[str, Any]]:
    # No systemd bus in containers and CI: its collector would only log errors.
    proc = _serve(
        stack,
        "node-exporter",
        lambda address: ["prometheus-node-exporter", f"--web.listen-address={address}", "--no-collector.systemd"],
        "/metrics",
    )
    return [exporter_scrape("node", proc.url)]


def start_alertmanager(stack: Stack) -> None:
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    route: dict[str, Any] = {
        "receiver": "null",
        "group_by": [stack.cluster_label or "cluster", "alertname", "vm", "vdisk_id", "job"],
        "group_wait": "5s",
        "group_interval": "10s",
        "repeat_interval": "1h",
    }
    if stack.alertmanager_webhook:
        receivers = [
            {"name": "webhook", "webhook_configs": [{"url": stack.alertmanager_webhook, "send_resolved": True}]}
        ]
        route["receiver"] = "webhook"
    cfg = {"route": route, "receivers": receivers}
    path = stack.workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    data = stack.workdir / "alertmanager-data"
    data.mkdir(exist_ok=True)
    _serve(
        stack,
        "alertmanager",
        lambda address: [
            "prometheus-alertmanager",
            f"--config.file={path}",
            f"--storage.path={data}",
            f"--web.listen-address={address}",
            "--cluster.listen-address=",
        ],
        "/-/ready",
    )


def start_victoria_metrics(stack: Stack) -> None:
    """Single-node VictoriaMetrics (Debian's ``victoria-metrics``), its data in the run dir,
    emptied at each start as Prometheus' is."""
    if shutil.which("victoria-metrics") is None:
        raise RuntimeError("victoria-metrics is not installed: run `make deps` (Debian package victoria-metrics)")
    data = _fresh_data_dir(stack, "victoria-metrics")
    _serve(
        stack,
        "victoria-metrics",
        lambda address: [
            "victoria-metrics",
            f"-httpListenAddr={address}",
            f"-storageDataPath={data}",
            "-retentionPeriod=1d",
        ],
        "/health",
    )


def start_prometheus(stack: Stack, scrape: list[dict[str, Any]]) -> None:
    # The fio exporter serves its target data on /metrics, so it is scraped once, as "fio".
    exporters = [
        {"targets": part.exporters, "labels": part.labels(stack.resolved_cluster_label())}
        for part in stack.clusters
        if part.exporters
    ]
    if exporters:
        scrape.append({"job_name": "ioparallax-exporters", "static_configs": exporters})
    cfg = {
        "global": {
            "scrape_interval": stack.scrape_interval,
            "evaluation_interval": stack.evaluation_interval,
            "scrape_timeout": stack.scrape_interval,
        },
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [stack.urls["alertmanager"].split("://", 1)[1]]}]}]
        },
        "rule_files": [str(p) for p in stack.rule_files()],
        "scrape_configs": scrape,
    }
    if "victoria-metrics" in stack.urls:
        cfg["remote_write"] = [remote_write_config(stack.urls["victoria-metrics"])]
    path = stack.workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"promtool rejected the generated {path}:\n{check.stdout}{check.stderr}")
    data = _fresh_data_dir(stack, "prometheus")
    _serve(
        stack,
        "prometheus",
        lambda address: [
            "prometheus",
            f"--config.file={path}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address={address}",
            "--web.enable-lifecycle",
            # scrape_timeout_seconds per target, for the IoparallaxScrapeSlow alert
            "--enable-feature=extra-scrape-metrics",
            "--storage.tsdb.retention.time=1d",
            *stack.prometheus_flags,
        ],
        "/-/ready",
    )


def remote_write_config(store_url: str) -> dict[str, Any]:
    """Prometheus' remote_write to VictoriaMetrics: every series it appends, the scraped (raw) ones
    and those its rules record (ALERTS included), with no write_relabel_configs to drop any."""
    return {
        "url": f"{store_url}/api/v1/write",
        "name": "victoria-metrics",
        # Send within a second (the default 5 s deadline only adds lag at demo scale).
        "queue_config": {"batch_send_deadline": "1s"},
    }
