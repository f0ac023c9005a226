"""Every dashboard query returns data from the real Prometheus of the demo stack, per scenario.

The committed dashboards/*.json are read as Grafana would load them; each panel query and each
variable's label_values() selector gets a real VM disk and vdisk of the scenario (the first VM
disk that all three views know), ``$__rate_interval`` 1m and ``$__interval`` 2s, and is run as an
instant query against the stack's Prometheus (``scenario_stack`` of tests/e2e/stacks.py: 2 s
scrapes, the generated recording rules and alerts with short ``for`` durations).

A query may be empty only where the scenario says it must be, and these exceptions are derived
from the scenario file, not listed by hand per result:

- a query about one direction (read or write) must have data when that direction of the VM disk
  is busy in every minute of the scenario's period; a direction that is idle or only sometimes busy
  (a write-only benchmark's reads, a periodic checkpoint) may be empty;
- the firing-alerts table must have data in the scenarios that expect alerts (``expect.alerts``);
- the hygiene table must have data where IoparallaxFioJobHygiene is expected and be empty elsewhere;
- the table of page fields the Stargate parser does not read must be empty in every scenario (the
  simulator's pages, of every build, are read whole: a row there is a false alarm);
- the write zero share may be empty on a 2014/2015 page build (no Oplog Zero row: not measurable),
  and the burstiness ratio where a fio job on the VM disk is buffered (not judged there);
- a query of one tool's or one guest OS's own series is empty where the VM disk is measured by
  another (fio's ``fio_*`` and its job join on a DiskSPD disk, vdbench's on a fio disk...; node_exporter's and the Linux sysfs
  facts on a Windows guest; Windows' split I/Os on a Linux guest);
- the application view (the density dashboard's ``vm_app:``/``pgbench_`` series of the VM, its
  ``all_vms:`` series of any VM) is empty where the scenario gives the VM (any VM) no application,
  and the pgbench hygiene table is empty unless a run has a trap (the simulated runs have none).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from ioparallax.exporters.fio.hygiene import is_direct
from ioparallax.mixin.queries import JOINED_VM_DISKS
from ioparallax.simulators.stack import Stack
from tests.mixin.dashboards.promql import Expr, expressions, label_values_selector, metric_names, panels, substitute
from tests.support import REPO

pytestmark = pytest.mark.e2e

DASHBOARDS = {p.name: json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))}

FIRING = "ioparallax-overview.json / Firing alerts / A"
HYGIENE = "ioparallax-fio.json / Hygiene findings / A"
UNREAD = "ioparallax-overview.json / Page fields ioparallax does not read / A"
UNREAD_PRISM = "ioparallax-overview.json / Prism statistics ioparallax does not read / A"
PGBENCH_HYGIENE = "ioparallax-density.json / pgbench runs and their hygiene / B"
# Queries that need an alert's `for` duration (10 s in the e2e rules) after the windows fill.
SLOW = {FIRING: 150.0, HYGIENE: 90.0}
DEFAULT_WAIT = 100.0
# However old the stack (the pool starts them ahead), a query that is empty at the first try gets a
# minute more: the longest burst period in the library. A query that is empty for a whole period
# has no data.
RETRY_S = 65.0
# Rule names that carry both words but are about one direction.
DIRECTION_OF = {"vdisk:ioparallax_rmw_read_to_write:ratio1m": {"write"}}


def wait_for(stack: Stack, promql: str, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while True:
        res = stack.query(promql)
        if res or time.monotonic() > deadline:
            return res
        time.sleep(2)


def joined_vm_disk(stack: Stack) -> dict[str, str]:
    """A VM disk that the guest (a fio job on it), the VM and the storage (a vdisk) all know: the
    busiest one (most directions busy in every minute), so the most queries must have data."""
    res = wait_for(stack, JOINED_VM_DISKS, 90)
    assert res, "no VM disk is known to all three views: the identity joins are broken"
    m = sorted(
        (r["metric"] for r in res), key=lambda m: (-len(busy_directions(stack, m["vm"], m["disk"])), m["vm"], m["disk"])
    )[0]
    [vd] = stack.query(f'vdisk:ioparallax_vdisk:info{{vm="{m["vm"]}",disk="{m["disk"]}"}}')
    # One cluster per stack, without the label: "" matches it as Grafana's All (.*) would.
    return {
        "cluster": m.get("cluster", ""),
        "vm": m["vm"],
        "disk": m["disk"],
        "vdisk": vd["metric"]["vdisk_id"],
        "__rate_interval": "1m",
        "__interval": "2s",
    }


def busy_directions(stack: Stack, vm: str, disk: str) -> set[str]:
    """Directions with ops in every 60 s window of the scenario's period, from its trace."""
    trace = stack.trace
    key = f"{vm}/{disk}"
    out = set()
    for d in ("read", "write"):
        if all(trace.window(key, end=t, seconds=60).rate(f"{d}_ops") > 0 for t in range(0, trace.period, 5)):
            out.add(d)
    return out


def directions(e: Expr) -> set[str]:
    out: set[str] = set()
    for name in metric_names(e.expr):
        if name in DIRECTION_OF:
            out |= DIRECTION_OF[name]
        else:
            out |= set(re.findall(r"(?:^|[_:])(read|write)(?=[_:]|$)", name))
    return out


def not_measured(e: Expr, stack: Stack, values: dict[str, str]) -> bool:
    """The query reads a rule that the scenario leaves absent on purpose."""
    names = metric_names(e.expr)
    sc = stack.trace.scenario
    if (
        sc.cluster.page_build in (2014, 2015)
        and "vdisk:ioparallax_write_zero:ratio" in names
        and "vdisk:ioparallax_write_zero_measurable:bool" not in names
    ):
        return True
    (vm,) = [v for v in sc.vms if v.name == values["vm"]]
    if any(n.startswith(("vm_app:", "pgbench_")) for n in names) and vm.application is None:
        return True
    if any(n.startswith("all_vms:") for n in names) and not any(v.application for v in sc.vms):
        return True
    tool_series = {
        "fio": ("fio_", "guest_job:ioparallax_vm_disk:info"),
        "diskspd": ("diskspd_", "guest_target:ioparallax_diskspd_vm_disk:info"),
        "vdbench": ("vdbench_", "guest_host:ioparallax_vdbench_vm_disk:info"),
    }
    for tool, (prefix, join) in tool_series.items():
        if vm.load_generator != tool and any(n.startswith(prefix) or n == join for n in names):
            return True
    if vm.windows and any(n.startswith("node_") or n == "guest_device:ioparallax_guest_os_disk:info" for n in names):
        return True
    if not vm.windows and any("guest_os_split_ios" in n or n.startswith("windows_") for n in names):
        return True
    disk = stack.trace.disk(f"{values['vm']}/{values['disk']}")
    buffered = vm.load_generator == "fio" and any(not is_direct(s.fio_options) for s in disk.streams)
    return buffered and any(n.startswith("vm_disk:ioparallax_burstiness:") for n in names)


def must_have_data(e: Expr, stack: Stack, busy: set[str], values: dict[str, str]) -> bool:
    expected = set(stack.trace.scenario.expect.get("alerts", []))
    if e.where == FIRING:
        return bool(expected)
    if e.where == HYGIENE:
        return "IoparallaxFioJobHygiene" in expected
    if e.where in (UNREAD, UNREAD_PRISM, PGBENCH_HYGIENE):
        return False
    if not_measured(e, stack, values):
        return False
    dirs = directions(e)
    # A query over both directions (a sum, a ratio of totals) needs one of them busy.
    return not dirs or (dirs <= busy if len(dirs) == 1 else bool(dirs & busy))


def test_every_dashboard_query_returns_data(scenario_stack):
    stack = scenario_stack
    values = joined_vm_disk(stack)
    busy = busy_directions(stack, values["vm"], values["disk"])
    every = expressions(DASHBOARDS)
    for e in every:
        stack.query(substitute(e.expr, values))  # valid for Prometheus in every scenario (HTTP 400 raises)
    exprs = [e for e in every if must_have_data(e, stack, busy, values)]
    assert len(exprs) >= (100 if busy == {"read", "write"} else 60), (len(exprs), busy)
    # Rates over 1m need a few scrapes, the ratio rules a few evaluations: wait for the slowest.
    pending = {e.where: substitute(e.expr, values) for e in exprs}
    start, test_start = stack.started_at, time.monotonic()
    while pending:
        for where, q in list(pending.items()):
            if stack.query(q):
                del pending[where]
        waited = time.monotonic() - start
        if not pending or (
            all(waited > SLOW.get(w, DEFAULT_WAIT) for w in pending) and time.monotonic() - test_start > RETRY_S
        ):
            break
        time.sleep(3)
    assert not pending, (
        f"{stack.scenario}: {len(pending)} of {len(exprs)} dashboard queries returned no data for {values} "
        f"(busy: {sorted(busy)}):\n" + "\n".join(f"  {w}: {q}" for w, q in sorted(pending.items()))
    )
    # Now that every view has data, a clean benchmark's hygiene table is still empty.
    if "IoparallaxFioJobHygiene" not in stack.trace.scenario.expect.get("alerts", []):
        [e] = [e for e in every if e.where == HYGIENE]
        assert stack.query(substitute(e.expr, values)) == [], stack.scenario
    # Every field of the simulator's pages is read: no unread field, in any scenario or build.
    [e] = [e for e in every if e.where == UNREAD]
    assert stack.query(substitute(e.expr, values)) == [], stack.scenario
    assert stack.query('stargate_parse_unknown_fields{job="stargate"} == 0'), "the coverage gauge is scraped"


def test_variables_offer_the_scenarios_vm_disks(scenario_stack):
    stack = scenario_stack
    values = joined_vm_disk(stack)
    vms = {r["metric"]["vm"] for r in stack.query("vcenter_virtual_disk_info")}
    assert values["vm"] in vms and vms <= {vm.name for vm in stack.trace.scenario.vms}
    for fname, model in DASHBOARDS.items():
        variables = {
            v["name"]: label_values_selector(v["query"]) for v in model["templating"]["list"] if v["type"] == "query"
        }
        assert {r["metric"]["vm"] for r in stack.query(substitute(variables["vm"], values))} == vms, fname
        disks = stack.query(substitute(variables["disk"], values))
        assert values["disk"] in {r["metric"]["disk"] for r in disks}, fname
        assert {r["metric"]["vm"] for r in disks} == {values["vm"]}, fname
        vdisks = stack.query(substitute(variables["vdisk"], values))
        assert {r["metric"]["vdisk_id"] for r in vdisks} == {values["vdisk"]}, fname


# What the panels must show for the first joined VM disk of steady scenarios (the scenario files'
# numbers): (file, panel title, refId) -> (expected value, relative tolerance).
TRUTH = {
    "zero-heavy": {
        # vCenter's 20 s sample of a steady 9000 read IO/s, exactly.
        ("ioparallax-vcenter.json", "Ops, reads", "A"): (9000, 0),
        # Op-weighted mean read latency from the integrated counters: a ratio of rates, so the
        # window does not dilute it: the scenario's 250 us.
        ("ioparallax-vcenter.json", "Latency, reads", "C"): (250e-6, 0.02),
        # 35.7 % of read bytes and 40 % of written bytes in the zero buckets (the page's MB/s are
        # whole numbers).
        ("ioparallax-vdisk.json", "Zero share", "A"): (0.357, 0.06),
        ("ioparallax-vdisk.json", "Zero share", "B"): (0.40, 0.06),
    },
    "clean-oltp": {
        ("ioparallax-vcenter.json", "Ops, reads", "A"): (2000, 0),
        ("ioparallax-vcenter.json", "Latency, reads", "C"): (400e-6, 0.02),
        ("ioparallax-vdisk.json", "Zero share", "A"): (0.0, 0),
        ("ioparallax-vdisk.json", "Zero share", "B"): (0.0, 0),
        # a 2016 page: Oplog Zero is listed (blank), so no zero writes is a measured 0
        ("ioparallax-overview.json", "Zero writes measurable", "A"): (1, 0),
        ("ioparallax-vdisk.json", "Zero share of writes", "A"): (0.0, 0),
        ("ioparallax-three-views.json", "Guest I/O", "A"): (0, 0),
    },
    "buffered-qd": {
        ("ioparallax-vcenter.json", "Ops, reads", "A"): (3500, 0),
        ("ioparallax-vdisk.json", "Zero share", "A"): (0.0, 0),
        # a 2015 page: no Oplog Zero row, the stat's -1 reads "not measurable"
        ("ioparallax-overview.json", "Zero writes measurable", "A"): (0, 0),
        ("ioparallax-vdisk.json", "Zero share of writes", "A"): (-1, 0),
        ("ioparallax-three-views.json", "Guest I/O", "A"): (1, 0),
        ("ioparallax-three-views.json", "Queue depth: asked vs implied", "A"): (16, 0),
        ("ioparallax-three-views.json", "Queue depth: asked vs implied", "B"): (2, 0.1),
    },
}
# Panels that must stay empty (absent by design) once the ones above have data.
EMPTY = {
    "buffered-qd": [
        ("ioparallax-vdisk.json", "Zero share", "B"),
        ("ioparallax-overview.json", "Zero share of writes", "A"),
        ("ioparallax-overview.json", "Burstiness (Little's law)", "A"),
    ],
}


def panel_query(fname: str, title: str, ref: str) -> str:
    [t] = [
        t
        for p in panels(DASHBOARDS[fname])
        if p.get("title") == title
        for t in p.get("targets", [])
        if t["refId"] == ref
    ]
    return t["expr"]


@pytest.mark.parametrize("scenario_stack", sorted(TRUTH), indirect=True)
def test_panels_show_the_scenarios_numbers(scenario_stack):
    stack = scenario_stack
    values = joined_vm_disk(stack)
    for (fname, title, ref), (want, rel) in TRUTH[stack.scenario].items():
        q = substitute(panel_query(fname, title, ref), values)
        res = wait_for(stack, q, 60)
        assert len(res) == 1, (title, ref, res)
        assert float(res[0]["value"][1]) == pytest.approx(want, rel=rel, abs=1e-9), (title, ref, q)
    for fname, title, ref in EMPTY.get(stack.scenario, []):
        q = substitute(panel_query(fname, title, ref), values)
        assert stack.query(q) == [], (title, ref, q)
    if stack.scenario == "zero-heavy":
        hygiene = wait_for(stack, substitute(panel_query("ioparallax-fio.json", "Hygiene findings", "A"), values), 60)
        assert "zero_buffers" in {r["metric"]["problem"] for r in hygiene}
        assert {r["metric"]["vm"] for r in hygiene} == {values["vm"]}
        firing = wait_for(stack, substitute(panel_query("ioparallax-overview.json", "Firing alerts", "A"), values), 150)
        assert ("IoparallaxFioJobHygiene", values["vm"]) in {
            (r["metric"]["alertname"], r["metric"].get("vm")) for r in firing
        }
