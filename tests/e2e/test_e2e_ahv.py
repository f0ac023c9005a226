"""AHV: the VM view from Prism, beside ESXi's from vCenter, in one Prometheus.

One stack (``two_hypervisors_stack``), as `make demo SCENARIO=clean-oltp@esxi,clean-oltp-ahv@ahv`
starts it, plus bursty-1m on AHV (tests/e2e/scenarios/bursty-ahv.yaml, cluster ahv-bursty): the
ESXi cluster gets the vCenter simulator and exporter, the AHV clusters the Prism simulator and
exporter. Every check runs on that one stack:

- both hypervisors are seen: the vcenter job in cluster esxi only, the prism job in the AHV
  clusters only, each VM disk's VM view named by ``vm_disk:ioparallax_vm_source:info``, the
  demo's summary naming Prism;
- the Prism-fed VM view recovers the AHV scenario's trace (ops, bytes, latency), and the guest's
  disks join to Prism's through the UUID inside their Nutanix serial;
- every query of the five dashboards returns data for a VM disk of the AHV cluster, but those
  that read only series vCenter has and Prism has not (outstanding I/Os, I/O size samples, seeks:
  derived from the Prism exporter's metric contract, ioparallax/mixin/vmview.py);
- each cluster fires exactly its scenario's alerts (bursty-ahv: the burst alert, fed by Prism);
- the report compares ESXi with AHV in the one Prometheus (``--match '{cluster="esxi"}' --compare
  'AHV={cluster="ahv"}'``): its disks pair by VM name and address (scsi0:1 with scsi.1), both sides'
  verdicts are the scenario's expected ones and the same, "views agree" judged with Prism as the VM
  view; bursty-ahv's verdicts are bursty-1m's on ESXi.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from ioparallax.mixin.vmview import vcenter_only
from ioparallax.report.report import make_report
from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.stack import Stack
from tests.e2e.test_e2e_dashboards import DASHBOARDS, FIRING, HYGIENE, UNREAD, UNREAD_PRISM, not_measured, wait_for
from tests.mixin.dashboards.promql import expressions, substitute

pytestmark = pytest.mark.e2e

WARMUP_S = 60  # the rules' 1m windows full
RANGE_S = 90  # the report's range: whole 30 s Prism samples, whole 20 s bursts (bursty-ahv: 60 s)
SETTLE_S = 75  # as test_e2e_alerts.py, plus a Prism sample: alerts that will fire have


def _age(stack: Stack, seconds: float) -> None:
    left = stack.started_at + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)


def _part(stack: Stack, cluster: str):
    (part,) = [p for p in stack.clusters if p.cluster == cluster]
    return part


def test_both_hypervisors_are_seen(two_hypervisors_stack):
    stack = two_hypervisors_stack
    assert [(p.cluster, p.ahv) for p in stack.clusters] == [("esxi", False), ("ahv", True), ("ahv-bursty", True)]
    jobs = {(t["labels"].get("cluster"), t["labels"]["job"]) for t in stack.targets() if t["health"] == "up"}
    assert ("esxi", "vcenter") in jobs and ("ahv", "prism") in jobs and ("ahv-bursty", "prism") in jobs
    assert ("esxi", "prism") not in jobs and ("ahv", "vcenter") not in jobs
    _age(stack, 40)  # a Prism sample integrated and the info rules evaluated
    ups = {r["metric"]["cluster"]: r["value"][1] for r in wait_for(stack, "prism_up == 1", 90)}
    assert ups == {"ahv": "1", "ahv-bursty": "1"}
    assert wait_for(stack, "count(vm_disk:ioparallax_vm_source:info) == 5", 90)
    src = {
        (r["metric"]["cluster"], r["metric"]["vm"], r["metric"]["disk"]): r["metric"]["vm_source"]
        for r in stack.query("vm_disk:ioparallax_vm_source:info")
    }
    assert src == {
        ("esxi", "oltp-01", "scsi0:1"): "vcenter",
        ("esxi", "oltp-02", "scsi0:1"): "vcenter",
        ("ahv", "oltp-01", "scsi.1"): "prism",
        ("ahv", "oltp-02", "scsi.1"): "prism",
        ("ahv-bursty", "burst-01", "scsi.1"): "prism",
    }
    # the sample period comes with a VM disk's first integrated sample (up to 30 s + Prism's delay)
    assert wait_for(stack, "count(vm_disk:ioparallax_vm_sample_interval:seconds) == 5", 90)
    periods = {
        r["metric"]["cluster"]: float(r["value"][1])
        for r in stack.query("max by (cluster) (vm_disk:ioparallax_vm_sample_interval:seconds)")
    }
    assert periods == {"esxi": 20.0, "ahv": 30.0, "ahv-bursty": 30.0}
    summary = stack.report()
    assert "scenario 'clean-oltp-ahv' (AHV, VM view from Prism)" in summary
    assert "scenario 'clean-oltp' (ESXi, VM view from vCenter)" in summary
    assert "Prism probes: ahv/" in summary and "vCenter probes: esxi/" in summary


def test_prism_vm_view_recovers_the_ahv_trace(two_hypervisors_stack):
    stack = two_hypervisors_stack
    _age(stack, WARMUP_S + 30)
    trace = _part(stack, "ahv").trace
    for disk in trace.disks:
        want = trace.window(disk, trace.now(), 60)  # steady: any window gives the scenario's rates
        sel = f'{{cluster="ahv",vm="{disk.vm}",disk="{disk.unit}"}}'
        for q, expect, rel in (
            ("vm_disk:ioparallax_vm_read_ops:rate1m", want.rate("read_ops"), 0.01),
            ("vm_disk:ioparallax_vm_write_bytes:rate1m", want.rate("write_bytes"), 0.01),
            ("vm_disk:ioparallax_vm_read_latency_seconds:mean1m", want.read_latency_s, 0.02),
            ("vm_disk:ioparallax_guest_to_vm_bytes:ratio1m", 1.0, 0.05),
            ("vm_disk:ioparallax_storage_to_vm_bytes:ratio1m", 1.0, 0.05),
        ):
            (r,) = wait_for(stack, q + sel, 90)
            assert float(r["value"][1]) == pytest.approx(expect, rel=rel), (q, disk.key)
        # the guest's sdb joined to Prism's disk through the UUID in its NFS_..._<uuid> serial
        (g,) = stack.query(f"guest_device:ioparallax_guest_disk:info{sel}")
        assert g["metric"]["device"] == disk.guest_device and g["metric"]["disk_uuid"] == disk.uuid


def test_every_dashboard_query_returns_data_on_ahv(two_hypervisors_stack):
    stack = two_hypervisors_stack
    _age(stack, WARMUP_S + 30)
    (vd,) = wait_for(stack, 'vdisk:ioparallax_vdisk:info{cluster="ahv",vm="oltp-01",disk="scsi.1"}', 90)
    values = {
        "cluster": "ahv",
        "vm": "oltp-01",
        "disk": "scsi.1",
        "vdisk": vd["metric"]["vdisk_id"],
        "__rate_interval": "1m",
        "__interval": "2s",
    }

    every = expressions(DASHBOARDS)
    exempt = {e.where for e in every if vcenter_only(e.expr)}
    # clean-oltp-ahv expects no alert and no hygiene finding, and the simulator's pages are read
    # whole: those three tables stay empty
    # clean-oltp reads and writes steadily on every disk: every other query has data
    # and the other load generators' and Windows guests' queries are not this fio scenario's
    # (test_e2e_dashboards.not_measured, judged on the AHV cluster's trace)
    ahv = SimpleNamespace(trace=_part(stack, "ahv").trace)
    other = {e.where for e in every if not_measured(e, ahv, values)}
    must = [e for e in every if e.where not in exempt | other | {FIRING, HYGIENE, UNREAD, UNREAD_PRISM}]
    assert len(must) >= 130 and len(exempt) <= 20, (len(must), sorted(exempt))
    pending = {e.where: substitute(e.expr, values) for e in must}
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for where, q in list(pending.items()):
            if stack.query(q):
                del pending[where]
        time.sleep(2)
    assert not pending, "\n".join(f"  {w}: {q}" for w, q in sorted(pending.items()))
    # every stats key the Prism simulator sends is mapped: its unread table is empty too
    for where in (FIRING, HYGIENE, UNREAD, UNREAD_PRISM):
        [e] = [e for e in every if e.where == where]
        assert stack.query(substitute(e.expr, values)) == [], where
    assert stack.query('prism_parse_unknown_fields{job="prism"} == 0'), "the Prism coverage gauge is scraped"
    # the source panel says Prism, 30 s
    # the demo's summary says why those few are empty on AHV
    assert "vCenter-only queries (outstanding I/Os, I/O size samples, seeks) have no Prism" in stack.dashboards_report()
    panel = "ioparallax-three-views.json / VM view: source and sample period / A"
    (src,) = stack.query(substitute(next(e.expr for e in every if e.where == panel), values))
    assert src["metric"]["vm_source"] == "prism" and float(src["value"][1]) == 30


def test_each_cluster_fires_exactly_its_alerts(two_hypervisors_stack, alert_sink):
    stack = two_hypervisors_stack
    expected = {p.cluster: set(p.trace.scenario.expect.get("alerts", [])) for p in stack.clusters}
    assert expected == {"esxi": set(), "ahv": set(), "ahv-bursty": {"IoparallaxBurstAveragedAway"}}
    alert_sink.wait_for("two-hypervisors", {"IoparallaxBurstAveragedAway"}, timeout=210)
    _age(stack, SETTLE_S)
    got: dict[str, set[str]] = {c: set() for c in expected}
    for name, label_sets in alert_sink.firing("two-hypervisors").items():
        for labels in label_sets:
            got.setdefault(labels.get("cluster", ""), set()).add(name)
    for a in stack.firing_alerts():
        got.setdefault(a["labels"].get("cluster", ""), set()).add(a["labels"]["alertname"])
    assert got == expected
    (burst,) = alert_sink.firing("two-hypervisors")["IoparallaxBurstAveragedAway"]
    assert (burst["vm"], burst["disk"]) == ("burst-01", "scsi.1")
    assert stack.query("sum(prometheus_rule_evaluation_failures_total) > 0") == []


def _range(stack: Stack) -> tuple[float, float]:
    _age(stack, WARMUP_S + RANGE_S)
    end = time.time()
    return end - RANGE_S, end


def test_report_compares_esxi_with_ahv_in_one_prometheus(two_hypervisors_stack):
    stack = two_hypervisors_stack
    start, end = _range(stack)
    result = make_report(
        prometheus=stack.urls["prometheus"],
        start=start,
        end=end,
        match='cluster="esxi"',
        compare=("AHV", stack.urls["prometheus"], start, end, 'cluster="ahv"'),
    )
    assert result.b is not None and result.b.ctx.match == 'cluster="ahv"'
    esx, ahv = _part(stack, "esxi").trace.scenario, _part(stack, "ahv").trace.scenario
    # the disks pair by VM name and address: vCenter's scsi0:1 is Prism's scsi.1
    assert result.pairs == {
        ("oltp-01", "scsi0:1"): ("oltp-01", "scsi.1"),
        ("oltp-02", "scsi0:1"): ("oltp-02", "scsi.1"),
    }
    a = {k: {t: v.state.value for t, v in row.items()} for k, row in result.a.verdicts.get().items()}
    b = {k: {t: v.state.value for t, v in row.items()} for k, row in result.b.verdicts.get().items()}
    detail = "\n".join(
        f"  {side} {k} {t}: {v.state.value} | {v.sentence}"
        for side, c in (("A", result.a), ("AHV", result.b))
        for k, row in c.verdicts.get().items()
        for t, v in row.items()
    )
    assert a == esx.expected_verdicts(), detail
    # B's disks under A's names (the overlays); their verdicts are the AHV scenario's, and ESXi's
    assert b == {(vm, unit.replace(".", "0:")): row for (vm, unit), row in ahv.expected_verdicts().items()}, detail
    assert a == b
    views = result.b.verdicts.get()[("oltp-01", "scsi0:1")]["views_agree"]
    assert views.state.value == "OK" and "VM" in views.number  # judged against Prism's bytes
    assert {s for s, _ in result.b.data.vm_source_of.values()} == {"prism"}
    html = result.html
    assert "same verdicts" in html and "AHV: oltp-01 scsi.1" in html
    assert "VM view</b> vCenter (20 s samples)" in html and "Prism (30 s samples)" in html
    assert result.missing_views == {} or set(result.missing_views) == {"guest_os"}, result.missing_views


def test_bursty_ahv_verdicts_are_bursty_1m_on_esxi(two_hypervisors_stack):
    stack = two_hypervisors_stack
    start, end = _range(stack)
    start = end - 60 * max(1, int((end - start) // 60))  # whole 20 s bursts and 30 s Prism samples
    result = make_report(prometheus=stack.urls["prometheus"], start=start, end=end, match='cluster="ahv-bursty"')
    got = result.a.verdicts.get()
    table = {k: {t: v.state.value for t, v in row.items()} for k, row in got.items()}
    esx = load_scenario("bursty-1m").expected_verdicts()
    assert table == {(vm, unit.replace("0:", ".")): row for (vm, unit), row in esx.items()}, got
    b = got[("burst-01", "scsi.1")]["bursts"]
    assert "Prism's 30 s samples average away" in b.sentence
