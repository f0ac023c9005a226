"""The CVM overhead and the density test end to end: on the db-density stack (real vCenter
simulator, vcenter-exporter, pgbench-exporters following the guest simulator's pgbench output,
Prometheus with the generated rules) the CVM's share of each host's CPU, per host and over the
hosts, is the scenario's truth (5 %), the CVMs are the installer's NTNX-...-CVM VMs on their hosts,
and a running database VM's CPU is its 4 busy vCPUs; the report's density line (the application's
throughput at the largest number of VMs, % of linear) and CVM overhead line are the scenario's
truth.

The pool starts the stack with the session and its period second 0 at the stack's start
(tests/e2e/stacks.py FROM_START_SCENARIOS), so the ramp begins at one VM: the three levels the
report needs for a ramp (1 to 3 VMs, a VM every 120 s, the first level 40 s longer:
TIME_SCALED_SCENARIOS, as the stack's history starts 15-40 s after its period, and a CI run at load
15 lost the 1-VM plateau without it) have settled plateaus about 6 minutes after the start."""

from __future__ import annotations

import re
import time

import pytest

from ioparallax.mixin.config import load_config
from ioparallax.report import scaling, scaling_section
from ioparallax.report.data import fetch
from ioparallax.report.promapi import parse_seconds
from ioparallax.report.report import context
from tests.e2e.stacks import joined_at
from tests.e2e.test_e2e_scenarios import at, prometheus_start, wait_running

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


LEVELS = 3  # the fewest the report calls a ramp (scaling.MIN_LEVELS)
APP_SOURCE = "VMs whose application completes transactions"


def _ramp_when_ready(stack, step: float, timeout: float) -> scaling.Scaling | None:
    """Poll until the report finds settled plateaus at LEVELS levels with the application view's
    density line. Nothing can be ready before the LEVELS-th VM has joined (by the trace); from then
    a poll every 10 s."""
    assert stack.origin is not None, "the db-density stack starts its period with the stack (from_start)"
    deadline = time.time() + timeout
    time.sleep(max(0.0, stack.origin + joined_at(stack.trace, LEVELS) - time.time()))
    # The first period only: on a loaded machine the test may run after the ramp has wrapped round to
    # one VM again (a CI run at load 30 got to it 21 minutes after the stack started), and a second
    # ramp in the range is not the scenario's truth.
    period_end = stack.origin + stack.trace.period
    while True:
        # The last seconds are left out: the rules of the newest scrapes may not be evaluated yet.
        end = min(time.time() - 10, period_end)
        ctx = context(stack.urls["prometheus"], prometheus_start(stack), end, None, "", None)
        s = scaling.scaling(ctx, fetch(ctx))
        levels = {round(p.concurrency) for p in s.plateaus} if s else set()
        # The application's count of VMs is the x axis once it shows LEVELS levels; until then the
        # report may take the fio jobs' count (fio's iodepth is there the second a VM joins, its
        # pgbench's first progress line 5 s later, so fio's third plateau can settle a poll earlier).
        by_app = s is not None and s.source.startswith(APP_SOURCE)
        if (len(levels) >= LEVELS and by_app and s.density is not None) or time.time() > deadline:
            return s
        time.sleep(10)


@pytest.mark.parametrize("scenario_stack", ["db-density"], indirect=True)
def test_report_density_and_cvm_lines_are_the_scenarios_truth(scenario_stack):
    stack = scenario_stack
    trace = stack.trace
    sc = trace.scenario
    truth = sc.expect["density"]
    step = parse_seconds(truth["step"])
    assert trace.origin == stack.origin  # the test's trace is the one the simulators read
    # The third VM's plateau settles in the report's settling time after it joins (the 1m window,
    # vCenter's 20 s sample, one step) and keeps 10 s more; failing takes one more step of grace.
    s = _ramp_when_ready(
        stack, step, timeout=max(0.0, stack.origin + joined_at(trace, LEVELS) + 2 * step - time.time())
    )
    assert s is not None and s.primary == "app" and s.what == "VMs", s
    assert s.source.startswith(APP_SOURCE), s.source
    assert s.labels["app"] == "application (pgbench)"
    d = s.density
    assert d is not None and d.per_vm_source == "measured with 1 VM", d
    n = round(d.n_max)
    assert n >= LEVELS and d.n_max == n, d

    # The truth of the plateau with n VMs: its VMs' I/O in the middle of the step (trace seconds since
    # the origin: from_start), over each VM's I/Os per transaction.
    def total_tps(vms: int) -> float:
        t = joined_at(trace, vms) + int(step / 2)
        return sum(
            (trace.second(disk, t).read_ops + trace.second(disk, t).write_ops)
            / next(vm.application.ios_per_transaction for vm in sc.vms if vm.name == disk.vm)
            for disk in trace.disks
        )

    per_vm = truth["per_vm_iops"] / truth["ios_per_transaction"]
    assert total_tps(1) == per_vm and total_tps(truth["max_vms"]) == pytest.approx(
        truth["linear_share_at_max"] * truth["max_vms"] * per_vm
    )
    # The tolerance, from how pgbench reports: every VM's transactions arrive in whole progress
    # intervals (-P, 5 s), so a rate over the rules' window counts one interval more or less of each
    # VM at any instant: at most progress_s / window of the throughput. A plateau's mean of many such
    # instants errs less, but never more.
    progress = {vm.application.progress_s for vm in sc.vms}
    (progress_s,) = progress
    tol = progress_s / parse_seconds(load_config().w)
    for p, x in zip(s.plateaus, s.views["app"].throughput):
        k = round(p.concurrency)
        assert x == pytest.approx(total_tps(k), rel=tol), (k, x, total_tps(k))
    # The density line as the report prints it.
    line = scaling_section.density_sentence(d, s.unit("app"))
    m = re.match(r"Density: (\d+) VMs? together completed ([\d,]+) transactions/s, ([\d.]+) % of linear", line)
    assert m, line
    assert int(m[1]) == n
    assert float(m[2].replace(",", "")) == pytest.approx(total_tps(n), rel=tol), line
    # % of linear: the total over n x the 1-VM plateau, each within tol of its truth.
    share = total_tps(n) / (n * total_tps(1))
    assert float(m[3]) / 100 == pytest.approx(share, rel=2 * tol + 0.0005), line

    # The CVM overhead line: the scenario's 5 % (vCenter's integer MHz: 3,120 of 62,400 exactly),
    # printed to 0.1 %.
    c = s.cvm
    assert c is not None and c.hosts == len(trace.hosts), c
    cvm_line = scaling_section.cvm_sentence(c)
    m = re.match(
        r"CVM overhead: the CVMs used ([\d.]+) % of their hosts' CPU capacity .*the busiest, on (esx-\d+), ([\d.]+) %",
        cvm_line,
    )
    assert m, cvm_line
    want = sc.expect["cpu"]["cvm_host_share"]
    assert float(m[1]) / 100 == pytest.approx(want, abs=0.0005 + 0.001), cvm_line
    assert float(m[3]) / 100 == pytest.approx(want, abs=0.0005 + 0.001), cvm_line
