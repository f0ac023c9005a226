"""End-to-end fixtures: one real stack per library scenario, shared by every e2e module.

``scenario_stack`` is session-scoped and parametrized over the scenario library, so pytest groups
the e2e tests by scenario and starts each stack once (the trace checks, the alert checks and the
dashboard queries all run against the same Prometheus). The stack loads rules generated from the
shipped mixin config with the same windows (so rule names match the dashboards) and short ``for``
durations, and sends Alertmanager's notifications to an in-test webhook (``alert_sink``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mixin.config import load_config
from mixin.rules import write_rule_files
from simulators.scenario import list_scenarios
from simulators.stack import Stack

# Short `for` durations so that each scenario's alerts fire within a minute of the start; windows
# stay those of the shipped config, so recording-rule names are the dashboards' names. The
# views-disagree alerts keep the shipped 10m: they judge a 5m average, and in a test a minute old a
# workload bursting every 20 s puts two or three bursts in a 1m window (a third off either way).
# Their firing and silent cases are promtool's (alerts/tests/views-alerts.test.yml).
TEST_FOR = {
    "zero_heavy": "10s", "cache": "10s", "burst": "10s", "misaligned_partition": "10s",
    "misaligned_io": "10s", "hygiene": "10s", "views_disagree": "10m", "down": "10s", "scrape_slow": "1m",
}


class AlertSink:
    """An Alertmanager webhook receiver: notifications are kept per URL path (one per scenario)."""

    def __init__(self) -> None:
        sink = self
        self.notifications: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with sink.lock:
                    sink.notifications.setdefault(self.path.strip("/"), []).append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def firing(self, key: str) -> dict[str, list[dict[str, str]]]:
        """alertname -> label sets of the alerts last notified as firing under ``key``."""
        latest: dict[tuple, dict[str, Any]] = {}
        with self.lock:
            for note in self.notifications.get(key, []):
                for alert in note.get("alerts", []):
                    latest[tuple(sorted(alert["labels"].items()))] = alert
        out: dict[str, list[dict[str, str]]] = {}
        for alert in latest.values():
            if alert["status"] == "firing":
                out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return out

    def wait_for(self, key: str, names: set[str], timeout: float) -> dict[str, list[dict[str, str]]]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.firing(key)
            if names <= set(got) or time.monotonic() > deadline:
                return got
            time.sleep(1)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def alert_sink():
    sink = AlertSink()
    yield sink
    sink.close()


@pytest.fixture(scope="session")
def test_rules_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rules")
    write_rule_files(load_config(overrides={"for": TEST_FOR}), out, "mixin/config.yml (e2e for-durations)")
    return out


@pytest.fixture(scope="session", params=list_scenarios())
def scenario_stack(request, tmp_path_factory, test_rules_dir, alert_sink) -> Stack:
    """A started demo stack for one library scenario (2 s scrapes, 5 s vCenter probes)."""
    scenario = request.param
    workdir = tmp_path_factory.mktemp(f"stack-{scenario}")
    stack = Stack(scenario=scenario, workdir=workdir, fixed_ports=False, scrape_interval="2s",
                  evaluation_interval="2s", vcenter_scrape_interval="5s", rules_dir=test_rules_dir,
                  alertmanager_webhook=f"{alert_sink.url}/{scenario}")
    started = time.monotonic()
    with stack:
        stack.wait_scraped(timeout=90)
        stack.started_at = started          # for tests that wait for windows to fill
        yield stack
