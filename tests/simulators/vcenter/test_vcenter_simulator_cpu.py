"""The scenario vCenter simulator answers the CPU counters of the VMs, the CVMs and the hosts from
the scenario's CPU truth, and carries the hosts' hardware and the CVMs as VMs."""

from __future__ import annotations

import pytest
from pyVmomi import vim

from ioparallax.exporters.vcenter.parse import counter_keys

T0 = 1_800_000_000  # a period boundary of postgres (600 s)
FROZEN = T0 + 7
CPU = ["cpu.usagemhz.average", "cpu.ready.summation"]


def _objects(si, kind):
    c = si.content
    view = c.viewManager.CreateContainerView(c.rootFolder, [kind], True)
    try:
        return {o.name: o for o in view.view}
    finally:
        view.Destroy()


def _cpu(si, entity, interval=20, samples=2):
    keys = counter_keys(si.content.perfManager.perfCounter, CPU)
    ids = [vim.PerformanceManager.MetricId(counterId=keys[n], instance="") for n in CPU]
    spec = vim.PerformanceManager.QuerySpec(entity=entity, metricId=ids, intervalId=interval, maxSample=samples)
    (metric,) = si.content.perfManager.QueryPerf(querySpec=[spec])
    by_key = {k: n for n, k in keys.items()}
    return {by_key[s.id.counterId]: list(s.value) for s in metric.value}


def test_vm_cvm_and_host_cpu_follow_the_trace(scenario_sim, postgres_trace, connect):
    path, trace = postgres_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    si = connect(address)
    vms = _objects(si, vim.VirtualMachine)
    hosts = _objects(si, vim.HostSystem)
    truth = {"pg-01": trace.vm_cpu["pg-01"]}
    for h in trace.hosts:
        truth[h.cvm_vm] = trace.cvm_cpu[h.name]
    assert set(truth) <= set(vms), "every CVM is a VM, named as the installer names it"
    for name, series in truth.items():
        got = _cpu(si, vms[name])
        want_mhz, want_ready = [], []
        for end in (T0 - 20, T0):
            used, ready = series.window(end % trace.period, 20)
            want_mhz.append(round(used / 20))
            want_ready.append(round(ready * 1000))
        assert got["cpu.usagemhz.average"] == pytest.approx(want_mhz, abs=1), name
        assert got["cpu.ready.summation"] == pytest.approx(want_ready, abs=1), name
    cvm = next(h for h in trace.hosts if h.cvm)
    assert vms[cvm.cvm_vm].runtime.host.name == cvm.name
    assert "servicevm" in vms[cvm.cvm_vm].summary.config.vmPathName.lower()
    for h in trace.hosts:
        host = hosts[h.name]
        assert host.summary.hardware.cpuMhz == 2600 and host.summary.hardware.numCpuCores == 24
        used, _ = trace.host_cpu[h.name].window(T0 % trace.period, 20)
        assert _cpu(si, host)["cpu.usagemhz.average"][-1] == pytest.approx(round(used / 20), abs=1)
    # 300 s roll-up: usage the mean of the 20 s values, ready their sum
    roll = _cpu(si, vms["pg-01"], interval=300, samples=1)
    s = trace.vm_cpu["pg-01"]
    twenty = [s.window(e % trace.period, 20) for e in range(T0 - 280, T0 + 1, 20)]
    assert roll["cpu.usagemhz.average"] == [pytest.approx(sum(round(u / 20) for u, _ in twenty) / 15, abs=1)]
    assert roll["cpu.ready.summation"] == [sum(round(r * 1000) for _, r in twenty)]
