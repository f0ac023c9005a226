"""Every dashboard query returns data from the real Prometheus of the demo stack.

The committed dashboards/*.json are read as Grafana would load them; each panel query and each
variable's label_values() selector gets a real VM disk and vdisk of the scenario (the first VM
disk that all three views know), ``$__rate_interval`` 1m and ``$__interval`` 2s, and is run as an
instant query against the stack's Prometheus (2 s scrapes, the generated recording rules and
alerts loaded). Panels that can only have data in some scenarios are listed in ONLY_IN with the
scenario where they must.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from simulators.stack import Stack
from tests.dashboards.promql import expressions, label_values_selector, substitute
from tests.support import REPO

pytestmark = pytest.mark.e2e

DASHBOARDS = {p.name: json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))}

# A benchmark that lies (zero-heavy: zero buckets, fio zero_buffers=1) and a clean one.
SCENARIOS = ["zero-heavy", "clean-oltp"]
# "<file> / <panel title> / <refId>" -> the scenarios in which it must have data; elsewhere it
# may be empty (and is still run, so it must be valid PromQL with data-free results).
ONLY_IN: dict[str, set[str]] = {
    # zero-heavy's fio job uses zero_buffers=1: IoparallaxFioJobHygiene fires after its 1m `for`
    # (IoparallaxZeroHeavyReads/Writes after 5m). clean-oltp fires nothing in the test's time.
    "ioparallax-overview.json / Firing alerts / A": {"zero-heavy"},
    # clean-oltp's fio options have no hygiene problem: the table must stay empty there.
    "ioparallax-fio.json / Hygiene findings / A": {"zero-heavy"},
}
MUST_BE_EMPTY = {"clean-oltp": ["ioparallax-fio.json / Hygiene findings / A"]}
# Queries that need a `for` duration before they can have data.
SLOW = {"ioparallax-overview.json / Firing alerts / A": 150.0}


def _stack(scenario: str, workdir: Path) -> Stack:
    return Stack(scenario=scenario, workdir=workdir, fixed_ports=False, scrape_interval="2s",
                 evaluation_interval="2s", vcenter_scrape_interval="5s")


@pytest.fixture(scope="module", params=SCENARIOS)
def stack(request, tmp_path_factory):
    with _stack(request.param, tmp_path_factory.mktemp(f"dash-{request.param}")) as s:
        s.wait_scraped(timeout=90)
        yield s


def wait_for(stack: Stack, promql: str, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while True:
        res = stack.query(promql)
        if res or time.monotonic() > deadline:
            return res
        time.sleep(2)


def joined_vm_disk(stack: Stack) -> dict[str, str]:
    """A VM disk that the guest (a fio job on it), the VM and the storage (a vdisk) all know."""
    res = wait_for(stack, "group by (vm, disk) (guest_job:ioparallax_vm_disk:info) "
                          "and on (vm, disk) group by (vm, disk) (vdisk:ioparallax_vdisk:info) "
                          "and on (vm, disk) group by (vm, disk) (vcenter_virtual_disk_info)", 90)
    assert res, "no VM disk is known to all three views: the identity joins are broken"
    m = sorted((r["metric"] for r in res), key=lambda m: (m["vm"], m["disk"]))[0]
    [vd] = stack.query(f'vdisk:ioparallax_vdisk:info{{vm="{m["vm"]}",disk="{m["disk"]}"}}')
    return {"vm": m["vm"], "disk": m["disk"], "vdisk": vd["metric"]["vdisk_id"],
            "__rate_interval": "1m", "__interval": "2s"}


def test_every_dashboard_query_returns_data(stack):
    values = joined_vm_disk(stack)
    every = expressions(DASHBOARDS)
    exprs = [e for e in every if stack.scenario in ONLY_IN.get(e.where, {stack.scenario})]
    assert len(exprs) >= 100
    for e in every:
        stack.query(substitute(e.expr, values))     # valid for Prometheus (HTTP 400 raises) in every scenario
    # Rates over 1m need a few scrapes, the ratio rules a few evaluations: wait for the slowest.
    pending = {e.where: substitute(e.expr, values) for e in exprs}
    start = time.monotonic()
    while pending:
        for where, q in list(pending.items()):
            if stack.query(q):
                del pending[where]
        waited = time.monotonic() - start
        if not pending or all(waited > SLOW.get(w, 90.0) for w in pending):
            break
        time.sleep(3)
    assert not pending, f"{len(pending)} of {len(exprs)} dashboard queries returned no data for {values}:\n" + \
        "\n".join(f"  {w}: {q}" for w, q in sorted(pending.items()))
    # Now that every view has data, the clean scenario's findings panels are still empty.
    for where in MUST_BE_EMPTY.get(stack.scenario, []):
        [e] = [e for e in every if e.where == where]
        assert stack.query(substitute(e.expr, values)) == [], where


def test_variables_offer_the_scenarios_vm_disks(stack):
    values = joined_vm_disk(stack)
    vms = {r["metric"]["vm"] for r in stack.query("vcenter_virtual_disk_info")}
    assert values["vm"] in vms
    for fname, model in DASHBOARDS.items():
        variables = {v["name"]: label_values_selector(v["query"]) for v in model["templating"]["list"]
                     if v["type"] == "query"}
        assert {r["metric"]["vm"] for r in stack.query(substitute(variables["vm"], values))} == vms, fname
        disks = stack.query(substitute(variables["disk"], values))
        assert values["disk"] in {r["metric"]["disk"] for r in disks}, fname
        assert {r["metric"]["vm"] for r in disks} == {values["vm"]}, fname
        vdisks = stack.query(substitute(variables["vdisk"], values))
        assert {r["metric"]["vdisk_id"] for r in vdisks} == {values["vdisk"]}, fname


# What the panels must show for the first joined VM disk of each scenario (the scenario files'
# numbers): (file, panel title, refId) -> (expected value, relative tolerance).
TRUTH = {
    "zero-heavy": {
        # vCenter's 20 s sample of a steady 9000 read IO/s, exactly.
        ("ioparallax-vcenter.json", "Ops, reads", "A"): (9000, 0),
        # Op-weighted mean read latency from the integrated counters: a ratio of rates, so the
        # window does not dilute it: the scenario's 250 us.
        ("ioparallax-vcenter.json", "Latency, reads", "C"): (250e-6, 0.02),
        # 35.7 % of read bytes from the zero buckets; the page's MB/s are whole numbers.
        ("ioparallax-vdisk.json", "Zero share", "A"): (0.357, 0.06),
        ("ioparallax-vdisk.json", "Zero share", "B"): (0.40, 0.06),
    },
    "clean-oltp": {
        ("ioparallax-vcenter.json", "Ops, reads", "A"): (2000, 0),
        ("ioparallax-vcenter.json", "Latency, reads", "C"): (400e-6, 0.02),
        ("ioparallax-vdisk.json", "Zero share", "A"): (0.0, 0),
        ("ioparallax-vdisk.json", "Zero share", "B"): (0.0, 0),
    },
}


def panel_query(fname: str, title: str, ref: str) -> str:
    from tests.dashboards.promql import panels
    [t] = [t for p in panels(DASHBOARDS[fname]) if p.get("title") == title
           for t in p.get("targets", []) if t["refId"] == ref]
    return t["expr"]


def test_panels_show_the_scenarios_numbers(stack):
    values = joined_vm_disk(stack)
    for (fname, title, ref), (want, rel) in TRUTH[stack.scenario].items():
        q = substitute(panel_query(fname, title, ref), values)
        res = wait_for(stack, q, 60)
        assert len(res) == 1, (title, ref, res)
        assert float(res[0]["value"][1]) == pytest.approx(want, rel=rel, abs=1e-9), (title, ref, q)
    if stack.scenario == "zero-heavy":
        hygiene = wait_for(stack, substitute(panel_query("ioparallax-fio.json", "Hygiene findings", "A"), values), 60)
        assert "zero_buffers" in {r["metric"]["problem"] for r in hygiene}
        assert {r["metric"]["vm"] for r in hygiene} == {values["vm"]}
        firing = wait_for(stack, panel_query("ioparallax-overview.json", "Firing alerts", "A"), 150)
        assert ("IoparallaxFioJobHygiene", values["vm"]) in {(r["metric"]["alertname"], r["metric"].get("vm"))
                                                              for r in firing}
