"""`make demo` as a user runs it: the ioparallax-demo command prints where to look, the firing
alerts and how many dashboard queries return data, then stops everything it started."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def test_demo_command_reports_views_alerts_and_dashboards_then_stops(demo_command):
    # `ioparallax-demo --scenario zero-heavy --duration 10 --settle 70 --quick-alerts`, started in the
    # background by the e2e stack pool (tests/e2e/stacks.py) ahead of this test.
    code, out = demo_command.wait(timeout=300)
    workdir = demo_command.workdir
    assert code == 0, out
    assert "Targets:" in out and "DOWN" not in out, out
    # where to look: Prometheus and Alertmanager on loopback
    assert re.search(r"prometheus\s+http://127\.0\.0\.1:\d+", out), out
    # the scenario's expected alerts fire (rules with every `for` at 15 s)
    firing = out.split("Firing alerts:", 1)[1].split("\n\n", 1)[0]
    for name in ("IoparallaxZeroHeavyReads", "IoparallaxZeroHeavyWrites", "IoparallaxFioJobHygiene"):
        assert name in firing, out
    # the dashboards' queries run against the live Prometheus
    m = re.search(
        r"Dashboards \(dashboards/\*\.json, for (\S+) (\S+), vdisk (\d+)\): (\d+) of (\d+) queries "
        r"return data now",
        out,
    )
    assert m, out
    with_data, total = int(m[4]), int(m[5])
    assert m[1] in ("bench-01", "bench-02") and total >= 100 and with_data >= 0.9 * total, out
    assert out.rstrip().endswith(">> stopping")
    # every process it started was stopped by its PID, and its PID file removed
    assert (workdir / "logs" / "prometheus.log").is_file()
    assert not list((workdir / "pids").glob("*.pid")), "PID files left behind: processes not stopped"
