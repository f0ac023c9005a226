"""The scenario vCenter simulator (the built Go binary) reads the scenario's origin from the trace
JSON (``origin_seconds``): its samples at wall-clock ``x`` with origin ``o`` are those at ``x - o``
with origin 0 (the sample times stay the wall clock's), and each 20 s sample is the trace's window
ending at that sample's period second, whatever the origin."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pyVmomi import vim

from ioparallax.exporters.vcenter.parse import counter_keys
from ioparallax.simulators.scenario import compile_scenario, load_scenario

FROZEN = 1_800_000_007
# A multiple of 300 s (the roll-up) that is not one of the period (600 s, 960 s): samples keep their
# grid and the shift is exact; a view that ignored the origin would be 300 s or 660 s of its period off.
ORIGIN = 1_700_000_700
# Not even on the 20 s grid: the samples must still be the trace's windows.
ODD_ORIGIN = 1_700_000_913
COUNTERS = (
    "virtualDisk.numberReadAveraged.average",
    "virtualDisk.numberWriteAveraged.average",
    "virtualDisk.read.average",
    "virtualDisk.write.average",
    "virtualDisk.totalReadLatency.average",
    "virtualDisk.writeLatencyUS.latest",
    "virtualDisk.readOIO.latest",
)


def trace_file(tmp_path, name: str, origin: int):
    trace = compile_scenario(dataclasses.replace(load_scenario(name), origin=origin))
    path = tmp_path / f"{name}-{origin}.json"
    path.write_text(trace.to_json())
    assert json.loads(path.read_text())["origin_seconds"] == origin
    return path, trace


def samples(si, vm_name: str, interval: int, count: int) -> tuple[list[float], dict[tuple[str, str], list[int]]]:
    """(sample end times, {(counter, disk): values}) of the newest ``count`` samples of a VM."""
    c = si.content
    view = c.viewManager.CreateContainerView(c.rootFolder, [vim.VirtualMachine], True)
    try:
        vm = next(v for v in view.view if v.name == vm_name)
    finally:
        view.Destroy()
    keys = counter_keys(c.perfManager.perfCounter, list(COUNTERS))
    ids = [vim.PerformanceManager.MetricId(counterId=keys[n], instance="*") for n in COUNTERS]
    spec = vim.PerformanceManager.QuerySpec(entity=vm, metricId=ids, intervalId=interval, maxSample=count)
    (metric,) = c.perfManager.QueryPerf(querySpec=[spec])
    by_key = {k: n for n, k in keys.items()}
    return (
        [s.timestamp.timestamp() for s in metric.sampleInfo],
        {(by_key[s.id.counterId], s.id.instance): list(s.value) for s in metric.value},
    )


@pytest.mark.parametrize(
    ("name", "vms"), [("scaling-ramp", ("web-01", "web-03", "web-08")), ("noisy-neighbour", ("dss-01", "oltp-01"))]
)
def test_samples_are_the_origin_0_samples_shifted(scenario_sim, connect, tmp_path, name, vms):
    plain_path, _ = trace_file(tmp_path, name, 0)
    moved_path, _ = trace_file(tmp_path, name, ORIGIN)
    plain, _ = scenario_sim(plain_path, "-freeze-at", FROZEN - ORIGIN)
    moved, _ = scenario_sim(moved_path, "-freeze-at", FROZEN)
    also_plain, _ = scenario_sim(plain_path, "-freeze-at", FROZEN)
    sp, sm, sa = connect(plain), connect(moved), connect(also_plain)
    differs = False
    for vm in vms:
        for interval, count in ((20, 45), (300, 4)):
            tp, vp = samples(sp, vm, interval, count)
            tm, vm_ = samples(sm, vm, interval, count)
            assert tm == [t + ORIGIN for t in tp]  # the wall clock's sample times
            assert vm_ == vp, (name, vm, interval)
            assert sum(abs(v) for vals in vm_.values() for v in vals) > 0, "a view of nothing proves nothing"
            differs = differs or samples(sa, vm, interval, count)[1] != vm_
    assert differs, "the origin changed no sample: the vCenter simulator ignores it"


def test_samples_are_the_trace_windows_with_an_origin_off_the_grid(scenario_sim, connect, tmp_path):
    path, trace = trace_file(tmp_path, "scaling-ramp", ODD_ORIGIN)
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    si = connect(address)
    for vm in ("web-01", "web-02", "web-05"):
        times, values = samples(si, vm, 20, 45)
        (disk,) = [d for d in trace.disks if d.vm == vm]
        expect_ops = [round(trace.window(disk, trace.now(t), 20).read_ops / 20) for t in times]
        assert values[("virtualDisk.numberReadAveraged.average", disk.unit)] == pytest.approx(expect_ops, abs=1)
        assert any(expect_ops), (vm, "a view of nothing proves nothing")
