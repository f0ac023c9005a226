"""Each library scenario fires exactly the alerts its YAML expects (`expect.alerts`), through the
real recording rules, a real Prometheus and a real Alertmanager, to a webhook."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

# Seconds after the stack's start by which every alert that is going to fire has fired: the rate
# windows (1m) hold enough samples after ~40 s, the burst alert judges a load once it has run for
# 90 s (the window and a VM sample), and the test `for` durations are 10-30 s. Alerts that must stay
# silent get SETTLE_S to misfire (and the scaling ramp, whose tests run last, much longer).
SETTLE_S = 60
DEADLINE_S = 210


def test_scenario_fires_exactly_its_expected_alerts(scenario_stack, alert_sink):
    sc = scenario_stack.trace.scenario
    expected = set(sc.expect.get("alerts", []))
    got = alert_sink.wait_for(
        sc.name, expected, timeout=max(0.0, scenario_stack.started_at + DEADLINE_S - time.monotonic())
    )
    remaining = scenario_stack.started_at + SETTLE_S - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
        got = alert_sink.firing(sc.name)
    firing_in_prometheus = {a["labels"]["alertname"] for a in scenario_stack.firing_alerts()}
    ours = {name for name in set(got) | firing_in_prometheus if name.startswith("Ioparallax")}
    assert expected <= set(got), f"{sc.name}: expected {sorted(expected)} at the webhook, got {sorted(got)}"
    assert ours == expected, f"{sc.name}: unexpected alerts {sorted(ours - expected)}"
    # Each alert names objects of this scenario (a VM it has, or one of its vdisks).
    vms = {vm.name for vm in sc.vms}
    vdisks = {str(d.vdisk_id) for d in sc.disks}
    for name, label_sets in got.items():
        for labels in label_sets:
            if "vm" in labels:
                assert labels["vm"] in vms, (name, labels)
            if "vdisk_id" in labels:
                assert labels["vdisk_id"] in vdisks, (name, labels)
            assert labels["severity"] in ("critical", "warning", "info")
