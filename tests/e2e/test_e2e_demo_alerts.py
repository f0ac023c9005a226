"""Scenarios as `make demo DEMO_ARGS=--quick-alerts` runs them (5 s scrapes, 20 s vCenter probes,
`for` of 15 s, burst 1m, views-disagree 2m): in their first minutes exactly the alerts the
scenario expects fire, and none fires and resolves on the way (bursty-1m's page aliasing once fired
the storage-view alert; postgres' once-a-minute checkpoint made the burst alert flap)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

# By then the expected alerts have fired (bursty-1m's burst alert: ~160 s, its load judged after
# 90 s and a 1m `for`) and the views-disagree alerts, 2m `for` on 5m windows, have had two minutes to
# misfire.
AGE_S = 240


def test_demo_mode_fires_exactly_the_expected_alerts_and_none_flaps(demo_mode_stack, alert_sink):
    stack = demo_mode_stack
    sc = stack.trace.scenario
    remaining = stack.started_at + AGE_S - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
    key = f"demo-mode/{sc.name}"
    expected = set(sc.expect.get("alerts", []))
    ever = {name for name in alert_sink.ever_fired(key) if name.startswith("Ioparallax")}
    assert ever == expected, f"{sc.name}: fired {sorted(ever)}, expected {sorted(expected)}"
    now = {name for name in alert_sink.firing(key) if name.startswith("Ioparallax")}
    assert now == expected, f"{sc.name}: firing at the end {sorted(now)} (resolved on the way: {sorted(ever - now)})"
    firing_in_prometheus = {a["labels"]["alertname"] for a in stack.firing_alerts()}
    assert {n for n in firing_in_prometheus if n.startswith("Ioparallax")} == expected
