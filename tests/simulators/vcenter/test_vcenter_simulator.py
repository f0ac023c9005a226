"""The scenario vCenter simulator computes what vCenter would from the per-second ground truth."""

from __future__ import annotations

import datetime as dt

import pytest
from pyVmomi import vim, vmodl

from ioparallax.exporters.vcenter.inventory import collect_inventory
from ioparallax.exporters.vcenter.parse import counter_keys

# An epoch second on a period boundary (1.8e9 is a multiple of 600): the newest realtime sample
# ends at T0 and covers period seconds 580-599, which hold one 1 s burst of bursty-1m.
T0 = 1_800_000_000
FROZEN = T0 + 7


def _vm(si, name):
    c = si.content
    view = c.viewManager.CreateContainerView(c.rootFolder, [vim.VirtualMachine], True)
    try:
        return next(v for v in view.view if v.name == name)
    finally:
        view.Destroy()


def _frozen_vm(scenario_sim, connect, path, name: str, *flags: str):
    """A session to the scenario simulator frozen at FROZEN on the trace ``path``, and its VM ``name``."""
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, *flags)
    si = connect(address)
    return si, _vm(si, name)


def _query(si, vm, names, **kw):
    keys = counter_keys(si.content.perfManager.perfCounter, names)
    ids = [vim.PerformanceManager.MetricId(counterId=keys[n], instance=kw.pop("instance", "*")) for n in names]
    spec = vim.PerformanceManager.QuerySpec(entity=vm, metricId=ids, **kw)
    result = si.content.perfManager.QueryPerf(querySpec=[spec])
    names_by_key = {k: n for n, k in keys.items()}
    return result, names_by_key


def test_burst_reads_20480_kbps_at_80_ms_in_its_20s_sample(scenario_sim, bursty_trace, connect):
    path, trace = bursty_trace
    si, vm = _frozen_vm(scenario_sim, connect, path, "burst-01")
    names = [
        "virtualDisk.write.average",
        "virtualDisk.totalWriteLatency.average",
        "virtualDisk.numberWriteAveraged.average",
        "virtualDisk.writeLatencyUS.latest",
        "virtualDisk.writeOIO.latest",
        "virtualDisk.writeIOSize.latest",
        "virtualDisk.read.average",
    ]
    result, by_key = _query(si, vm, names, intervalId=20, maxSample=3)
    (metric,) = result
    stamps = [s.timestamp.timestamp() for s in metric.sampleInfo]
    assert stamps == [T0 - 40, T0 - 20, T0], "aligned, ascending, newest = last completed 20 s"
    assert all(s.interval == 20 for s in metric.sampleInfo)
    values = {by_key[s.id.counterId]: list(s.value) for s in metric.value}
    assert {s.id.instance for s in metric.value} == {"scsi0:1"}, "'*' expanded to the VM's disk"
    # every 20 s window of bursty-1m holds exactly one burst second
    assert values["virtualDisk.write.average"] == [20480] * 3
    assert values["virtualDisk.totalWriteLatency.average"] == [80] * 3
    assert values["virtualDisk.writeLatencyUS.latest"] == [80000] * 3
    assert values["virtualDisk.numberWriteAveraged.average"] == [20] * 3
    assert values["virtualDisk.writeIOSize.latest"] == [1048576] * 3
    window = trace.window(trace.disks[0], T0 % trace.period, 20)
    assert values["virtualDisk.writeOIO.latest"] == [round(window.write_outstanding_s / 20)] * 3  # 1.6 -> 2
    assert values["virtualDisk.read.average"] == [0, 0, 0], "zeros kept in the normal (XML) format"


def test_samples_follow_the_trace_per_disk_and_roll_up(scenario_sim, postgres_trace, connect):
    path, trace = postgres_trace
    si, vm = _frozen_vm(scenario_sim, connect, path, "pg-01")
    names = [
        "virtualDisk.numberReadAveraged.average",
        "virtualDisk.read.average",
        "virtualDisk.readLatencyUS.latest",
        "virtualDisk.totalReadLatency.average",
    ]
    result, by_key = _query(si, vm, names, intervalId=20, maxSample=2, format="csv")
    (metric,) = result
    assert metric.sampleInfoCSV == (
        f"20,{dt.datetime.fromtimestamp(T0 - 20, dt.UTC):%Y-%m-%dT%H:%M:%SZ},"
        f"20,{dt.datetime.fromtimestamp(T0, dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
    )
    got = {(by_key[s.id.counterId], s.id.instance): [int(v) for v in s.value.split(",")] for s in metric.value}
    assert {i for _, i in got} == {d.unit for d in trace.disks if d.vm == "pg-01"}
    for disk in (d for d in trace.disks if d.vm == "pg-01"):
        expect = {n: [] for n in names}
        for end in (T0 - 20, T0):
            w = trace.window(disk, end % trace.period, 20)
            expect["virtualDisk.numberReadAveraged.average"].append(round(w.read_ops / 20))
            expect["virtualDisk.read.average"].append(round(w.read_bytes / 1024 / 20))
            expect["virtualDisk.readLatencyUS.latest"].append(round(w.read_latency_s * 1e6))
            expect["virtualDisk.totalReadLatency.average"].append(round(w.read_latency_s * 1e3))
        for n in names:
            assert got[(n, disk.unit)] == pytest.approx(expect[n], abs=1), (n, disk.unit)

    # 300 s roll-up: the mean of the fifteen 20 s values (an average of averages)
    result, by_key = _query(si, vm, ["virtualDisk.read.average"], intervalId=300, maxSample=1, instance="scsi0:1")
    (metric,) = result
    assert [s.timestamp.timestamp() for s in metric.sampleInfo] == [T0]
    disk = next(d for d in trace.disks if d.vm == "pg-01" and d.unit == "scsi0:1")
    twenty = [
        round(trace.window(disk, e % trace.period, 20).read_bytes / 1024 / 20) for e in range(T0 - 280, T0 + 1, 20)
    ]
    assert list(metric.value[0].value) == [round(sum(twenty) / 15)]


def test_start_time_is_exclusive_and_available_metrics_match(scenario_sim, postgres_trace, connect):
    path, _ = postgres_trace
    si, vm = _frozen_vm(scenario_sim, connect, path, "pg-01")
    start = dt.datetime.fromtimestamp(T0 - 60, dt.UTC)
    result, _ = _query(si, vm, ["virtualDisk.write.average"], intervalId=20, startTime=start)
    assert [s.timestamp.timestamp() for s in result[0].sampleInfo] == [T0 - 40, T0 - 20, T0]
    available = si.content.perfManager.QueryAvailablePerfMetric(entity=vm, intervalId=20)
    keys = counter_keys(si.content.perfManager.perfCounter)
    assert len(keys) == 15
    pairs = {(m.counterId, m.instance) for m in available}
    assert {(k, i) for k in keys.values() for i in ("scsi0:1", "scsi0:2")} <= pairs


def test_inventory_carries_the_scenario_identities(scenario_sim, postgres_trace, connect):
    path, trace = postgres_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    vms = collect_inventory(connect(address))
    got = {
        (vm.name, d.instance): (d.backing_file, d.disk_uuid, d.datastore, d.capacity_bytes, vm.host)
        for vm in vms
        for d in vm.disks
    }
    expect = {
        (d.vm, d.unit): (
            d.backing_file,
            d.uuid,
            "ctr01",
            d.capacity_bytes,
            next(v.host for v in trace.scenario.vms if v.name == d.vm),
        )
        for d in trace.disks
    }
    assert got == expect
    assert all(vm.power_state == "poweredOn" for vm in vms)


def test_max_query_metrics_is_enforced(scenario_sim, postgres_trace, connect):
    path, _ = postgres_trace
    si, vm = _frozen_vm(scenario_sim, connect, path, "pg-01", "-max-query-metrics", "3")
    names = [
        "virtualDisk.read.average",
        "virtualDisk.write.average",
        "virtualDisk.numberReadAveraged.average",
        "virtualDisk.numberWriteAveraged.average",
    ]
    with pytest.raises(vmodl.fault.InvalidArgument) as err:
        _query(si, vm, names, intervalId=20, maxSample=1)
    assert err.value.invalidProperty == "querySpec.size"
    assert si.content.setting.QueryOptions("config.vpxd.stats.maxQueryMetrics")[0].value == "3"
