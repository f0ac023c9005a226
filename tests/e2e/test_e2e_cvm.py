"""The CVM overhead end to end: on the db-density stack (real vCenter simulator, vcenter-exporter,
Prometheus with the generated rules) the CVM's share of each host's CPU, per host and over the
hosts, is the scenario's truth (5 %), the CVMs are the installer's NTNX-...-CVM VMs on their hosts,
and a running database VM's CPU is its 4 busy vCPUs."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_e2e_scenarios import at, wait_running

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("scenario_stack", ["db-density"], indirect=True)
def test_cvm_share_of_host_cpu_is_the_scenarios_truth(scenario_stack):
    stack = scenario_stack
    trace = stack.trace
    share = trace.scenario.expect["cpu"]["cvm_host_share"]
    # Three 20 s vCenter samples in the 1m window, and the rule evaluated over them.
    wait_running(stack, 100)
    deadline = time.time() + 120
    while True:
        t = time.time() - 10  # the newest rule evaluations may not be written yet
        per_host = {
            r["metric"]["host"]: float(r["value"][1])
            for r in at(stack, "host:ioparallax_cvm_cpu_usage:ratio_rate1m", t)
        }
        if len(per_host) == len(trace.hosts) or time.time() > deadline:
            break
        time.sleep(5)
    assert set(per_host) == {h.name for h in trace.hosts}
    for host, value in per_host.items():
        # vCenter's integer MHz per sample: 3,120 MHz of 62,400 exactly
        assert value == pytest.approx(share, abs=0.001), host
    (total,) = at(stack, "hosts:ioparallax_cvm_cpu_usage:ratio_rate1m", t)
    assert float(total["value"][1]) == pytest.approx(share, abs=0.001)
    cvms = {r["metric"]["vm"]: r["metric"]["host"] for r in at(stack, "vcenter_vm_cvm_info", t)}
    assert cvms == {h.cvm_vm: h.name for h in trace.hosts}
    capacity = at(stack, "host:ioparallax_cpu_capacity:hertz", t)
    assert {float(r["value"][1]) for r in capacity} == {2600e6 * 24}
    # db-01 runs through the whole period (every phase): CPU-bound, its 4 vCPUs at 2,600 MHz.
    busy = at(
        stack,
        'rate(vcenter_vm_cpu_usage_cycles_total{vm="db-01"}[1m])'
        ' / (rate(vcenter_vm_cpu_samples_total{vm="db-01"}[1m]) * 20)',
        t,
    )
    assert float(busy[0]["value"][1]) == pytest.approx(4 * 2600e6, rel=0.001)
