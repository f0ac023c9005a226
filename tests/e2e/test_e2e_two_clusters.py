"""Two simulated clusters in one Prometheus, as `make demo SCENARIO=a,b` runs them: zero-heavy and
clean-bench (tests/e2e/scenarios/clean-bench.yaml: clean-oltp's workload under zero-heavy's VM
names), whose VM names, units, vdisk ids (1000, 1001) and disk serials are all the same. Only the
``cluster`` target label keeps them apart (set by Prometheus from the scrape config, never by an
exporter). Each cluster alone must look as its scenario does in a stack of its own:

- each view's raw series recover the cluster's trace (the per-view checks of
  test_e2e_scenarios.py, every query scoped to the cluster);
- each view's recording rules, per cluster, equal the cluster's trace over the rules' 1m window
  (the workloads are steady, so a rule that summed or joined across the clusters would be off by
  the other's 2-4 times larger or smaller rates);
- each cluster fires exactly its scenario's alerts, each alert labelled with its cluster;
- no rule fails (many-to-many joins would: vdisk ids and VM names repeat), no dashboard query
  errs, and the demo's summary reports per cluster.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from ioparallax.mixin.queries import dashboard_coverage
from ioparallax.simulators.scenario import Trace
from ioparallax.simulators.stack import Stack
from ioparallax.simulators.stack.clusters import ClusterPart
from tests.e2e import test_e2e_scenarios as one_scenario
from tests.e2e.test_e2e_scenarios import scalar, wait_running

pytestmark = pytest.mark.e2e

SETTLE_S = 60  # as test_e2e_alerts.py: alerts that will fire have, silent ones had time to misfire
DEADLINE_S = 150


class ClusterView:
    """One cluster of a several-cluster stack as the one-scenario checks see a stack: its trace,
    Prometheus' URL, and ``scope``: every ``job="..."`` matcher of a query (each of those checks
    selects its source by job) gets the cluster's matcher beside it."""

    def __init__(self, stack: Stack, part: ClusterPart) -> None:
        self.stack, self.cluster, self.trace = stack, part.cluster, part.trace
        self.urls = stack.urls
        self.matcher = f'{stack.cluster_label}="{part.cluster}"'

    def scope(self, promql: str) -> str:
        return promql.replace('job="', f'{self.matcher},job="')


@pytest.fixture(scope="module")
def views(two_clusters_stack) -> list[ClusterView]:
    stack = two_clusters_stack
    assert [p.cluster for p in stack.clusters] == ["zero-heavy", "clean-bench"]
    return [ClusterView(stack, part) for part in stack.clusters]


def test_the_clusters_collide_on_every_name(views):
    """The premise: without the cluster label, every VM disk of one would be one of the other."""
    a, b = (v.trace for v in views)
    key = [lambda d: (d.vm, d.unit), lambda d: d.vdisk_id, lambda d: d.uuid]
    for k in key:
        assert sorted(map(k, a.disks)) == sorted(map(k, b.disks))
    stack = views[0].stack
    targets = stack.targets()
    for t in targets:
        if t["labels"]["job"] != "node":  # the demo host's own node_exporter is no cluster's
            assert t["labels"].get("cluster") in ("zero-heavy", "clean-bench"), t["labels"]
    per_job = {(t["labels"]["job"], t["labels"].get("cluster")) for t in targets}
    for job in ("stargate", "vcenter", "fio", "guest-node", "ioparallax-exporters"):
        assert {(job, "zero-heavy"), (job, "clean-bench")} <= per_job, job
    # the exporters set no cluster label of their own: the scrape config's is the only one
    assert not stack.query('{__name__=~"(stargate|vcenter|fio)_.*", exported_cluster!=""}')


# -- each view's raw series, per cluster -----------------------------------------------------


@pytest.mark.parametrize(
    "check",
    [
        one_scenario.test_guest_view_recovers_the_trace,
        one_scenario.test_guest_os_view_recovers_the_trace,
        one_scenario.test_vm_view_recovers_the_trace,
        one_scenario.test_storage_view_recovers_the_trace,
    ],
    ids=["guest", "guest-os", "vm", "storage"],
)
def test_each_clusters_views_recover_its_trace(views, check):
    for view in views:
        check(view)


# -- each view's recording rules, per cluster ------------------------------------------------

RULE_WINDOW_S = 60
# view, rule name pattern, what of the trace's 1m window it is, tolerance
RULES = [
    ("guest", "vm_disk:ioparallax_guest_{d}_ops:rate1m", "ops", 0.02),
    ("guest", "vm_disk:ioparallax_guest_{d}_bytes:rate1m", "bytes", 0.02),
    ("guest", "vm_disk:ioparallax_guest_{d}_latency_seconds:mean1m", "latency", 0.02),
    ("guest OS", "vm_disk:ioparallax_guest_os_{d}_ops:rate1m", "ops", 0.02),
    ("guest OS", "vm_disk:ioparallax_guest_os_{d}_bytes:rate1m", "bytes", 0.02),
    ("VM", "vm_disk:ioparallax_vm_{d}_ops:rate1m", "ops", 0.02),
    ("VM", "vm_disk:ioparallax_vm_{d}_bytes:rate1m", "bytes", 0.02),
    ("VM", "vm_disk:ioparallax_vm_{d}_latency_seconds:mean1m", "latency", 0.02),
    ("storage", "vm_disk:ioparallax_storage_{d}_ops:avg1m", "ops", 0.02),
    ("storage", "vm_disk:ioparallax_storage_{d}_bytes:avg1m", "bytes", 0.02),
    ("storage", "vm_disk:ioparallax_storage_{d}_latency_seconds:avg1m", "latency", 0.05),
]


def expected(trace: Trace, disk: Any, what: str, direction: str) -> float:
    w = trace.window(disk, end=trace.now(time.time()), seconds=RULE_WINDOW_S)
    if what == "latency":
        return getattr(w, f"{direction}_latency_s")
    return getattr(w, f"{direction}_{what}") / RULE_WINDOW_S


def test_each_clusters_recording_rules_equal_its_trace(views):
    wait_running(views[0], 90)  # the 1m windows hold a minute of every view (vCenter's 20 s samples)
    for view in views:
        for disk in view.trace.disks:
            sel = f'{{{view.matcher},vm="{disk.vm}",disk="{disk.unit}"}}'
            for where, pattern, what, tol in RULES:
                for direction in ("read", "write"):
                    rule = pattern.format(d=direction)
                    got = scalar(view.stack, rule + sel)  # one series per cluster, never two
                    want = expected(view.trace, disk, what, direction)
                    assert got == pytest.approx(want, rel=tol), (view.cluster, disk.key, where, rule, got, want)
            for ratio in ("guest_to_vm_bytes", "storage_to_vm_bytes"):
                got = scalar(view.stack, f"vm_disk:ioparallax_{ratio}:ratio1m{sel}")
                assert got == pytest.approx(1.0, abs=0.05), (view.cluster, disk.key, ratio)
            # the storage's zero shares: 40 % of zero-heavy's writes, none of clean-bench's
            vd = f'{{{view.matcher},vdisk_id="{disk.vdisk_id}"}}'
            w = view.trace.window(disk, end=view.trace.now(time.time()), seconds=3)
            got = scalar(view.stack, f"vdisk:ioparallax_write_zero:ratio{vd}")
            assert got == pytest.approx(w.write_zero_ratio, abs=0.02), (view.cluster, disk.key, got)
    # both clusters' series of every VM disk are there, side by side
    for rule in (
        "vm_disk:ioparallax_guest_write_bytes:rate1m",
        "vm_disk:ioparallax_storage_write_bytes:avg1m",
        "vdisk:ioparallax_vdisk:info",
    ):
        counts = {
            r["metric"]["vm"]: float(r["value"][1]) for r in views[0].stack.query(f"count by (vm, disk) ({rule})")
        }
        assert counts == {"bench-01": 2, "bench-02": 2}, (rule, counts)


# -- alerts, rule health, dashboards, the summary -------------------------------------------


def test_each_cluster_fires_exactly_its_scenarios_alerts(views, alert_sink):
    stack = views[0].stack
    expect = {v.cluster: set(v.trace.scenario.expect.get("alerts", [])) for v in views}
    assert expect["zero-heavy"] and not expect["clean-bench"]
    got = alert_sink.wait_for(
        "two-clusters", set.union(*expect.values()), timeout=max(0.0, stack.started_at + DEADLINE_S - time.monotonic())
    )
    remaining = stack.started_at + SETTLE_S - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
        got = alert_sink.firing("two-clusters")
    in_prometheus = [a["labels"] for a in stack.firing_alerts()]
    for view in views:
        trace = view.trace
        at_webhook = {name for name, sets in got.items() for labels in sets if labels.get("cluster") == view.cluster}
        firing = {labels["alertname"] for labels in in_prometheus if labels.get("cluster") == view.cluster}
        ours = {n for n in at_webhook | firing if n.startswith("Ioparallax")}
        assert expect[view.cluster] <= at_webhook, (view.cluster, sorted(at_webhook))
        assert ours == expect[view.cluster], (view.cluster, sorted(ours))
        # each names a VM and vdisk of its own cluster
        for name, sets in got.items():
            for labels in sets:
                if labels.get("cluster") == view.cluster and "vdisk_id" in labels:
                    assert trace.disk_by_vdisk(int(labels["vdisk_id"])).vm == labels["vm"], (name, labels)
    # every alert of ours carries its cluster (none is computed across the two)
    for name, sets in got.items():
        for labels in sets:
            assert labels.get("cluster") in expect, (name, labels)
    # zero-heavy's alerts fire once per VM disk of that cluster, not twice
    zero = list(got.get("IoparallaxZeroHeavyWrites", []))
    assert sorted((lab["cluster"], lab["vm"]) for lab in zero) == [
        ("zero-heavy", "bench-01"),
        ("zero-heavy", "bench-02"),
    ]


def test_no_rule_fails_on_the_colliding_names(views):
    stack = views[0].stack
    wait_running(views[0], 90)
    r = requests.get(stack.urls["prometheus"] + "/api/v1/rules", timeout=10)
    r.raise_for_status()
    rules = [rule for group in r.json()["data"]["groups"] for rule in group["rules"]]
    assert len(rules) > 50
    bad = [
        (rule["name"], rule.get("lastError")) for rule in rules if rule.get("lastError") or rule.get("health") != "ok"
    ]
    assert not bad, bad
    metrics = requests.get(stack.urls["prometheus"] + "/metrics", timeout=10).text
    failures = [line for line in metrics.splitlines() if line.startswith("prometheus_rule_evaluation_failures_total")]
    assert failures and all(float(line.rsplit(" ", 1)[1]) == 0 for line in failures), failures


def test_dashboards_and_summary_per_cluster(views):
    stack = views[0].stack
    wait_running(views[0], 90)
    for view in views:
        # every panel query runs (a query error, e.g. many-to-many, raises) for this cluster's disk
        cov = dashboard_coverage(stack.query, rate_interval="1m", interval=stack.scrape_interval, cluster=view.cluster)
        assert cov is not None and cov.values["cluster"] == view.cluster
        assert cov.values["vdisk"] == "1000" and cov.values["vm"] == "bench-01"
        assert cov.with_data >= 0.9 * cov.total, (view.cluster, [e.where for e in cov.empty])
    text = stack.report()
    assert "2 simulated clusters in one Prometheus" in text, text
    firing = text.split("Firing alerts:", 1)[1].split("\n\n", 1)[0]
    assert ", clean-bench: 0)" in firing.splitlines()[0], firing
    assert "IoparallaxZeroHeavyWrites  cluster=zero-heavy, vm=bench-01" in firing, firing
    assert "cluster=clean-bench" not in firing, firing
    for c in ("zero-heavy", "clean-bench"):
        assert f"Dashboards (dashboards/*.json, cluster {c}, for bench-01 scsi0:1, vdisk 1000)" in text, text
        assert f"--match '{{cluster=\"{c}\"}}'" in text, text
    assert "DOWN" not in text, text
