"""vdbench-multihost end to end: the guest simulator writes the vdbench run of three workers, the
demo stack's vdbench-exporter reads it, Prometheus scrapes it, and PromQL over vdbench's series
recovers the scenario's trace per host and for the run, with no hygiene finding (a clean run)."""

from __future__ import annotations

import time

import pytest

from ioparallax.simulators.stack import Stack

pytestmark = pytest.mark.e2e

#: Why the dashboards and the report cannot show a vdbench scenario's guest view yet.
GUEST_VIEW_PENDING = (
    "issue 23: the mixin's guest rules (vm_disk:ioparallax_guest_*) and the dashboards' VM/disk "
    "variables read fio and DiskSPD only; vdbench_host_* is not joined to its VM disk yet"
)


def expect_no_guest_view_from_vdbench(request: pytest.FixtureRequest, stack: Stack) -> None:
    """Mark the test an expected failure (strict: it must still fail) for a scenario whose guests
    run vdbench, until the mixin reads vdbench's series; then strict xfail reports it passing."""
    if any(vm.load_generator == "vdbench" for vm in stack.trace.scenario.vms):
        request.applymarker(pytest.mark.xfail(strict=True, reason=GUEST_VIEW_PENDING))


WINDOW = "20s"


def one(stack: Stack, promql: str) -> dict[str, float]:
    """{host or "": value} of a query."""
    return {r["metric"].get("host", ""): float(r["value"][1]) for r in stack.query(promql)}


@pytest.mark.parametrize("scenario_stack", ["vdbench-multihost"], indirect=True)
def test_vdbench_view_recovers_the_trace(scenario_stack):
    stack = scenario_stack
    scenario = stack.trace.scenario
    deadline = stack.started_at + 40
    while time.monotonic() < deadline:  # the rate window fills
        time.sleep(1)
    assert one(stack, 'up{job="vdbench"}') == {"": 1.0}
    assert one(stack, 'vdbench_up{job="vdbench"}') == {"": 1.0}
    assert stack.query('fio_job_info{job="fio"}') == []  # no fio runs in these VMs (their fio exporters: sysfs facts)
    reads = one(stack, f'sum by (host) (rate(vdbench_host_read_ops_total{{job="vdbench"}}[{WINDOW}]))')
    writes = one(stack, f'sum by (host) (rate(vdbench_host_write_ops_total{{job="vdbench"}}[{WINDOW}]))')
    latency = one(
        stack,
        f'sum by (host) (rate(vdbench_host_read_response_seconds_total{{job="vdbench"}}[{WINDOW}]))'
        f' / sum by (host) (rate(vdbench_host_read_ops_total{{job="vdbench"}}[{WINDOW}]))',
    )
    assert set(reads) == {vm.name for vm in scenario.vms}
    for vm in scenario.vms:
        (stream,) = vm.disks[0].streams
        assert reads[vm.name] == pytest.approx(stream.read_iops, rel=0.03), vm.name
        assert writes[vm.name] == pytest.approx(stream.write_iops, rel=0.03), vm.name
        assert latency[vm.name] == pytest.approx(stream.read_latency_s, rel=0.01), vm.name
    run = one(stack, f'sum(rate(vdbench_run_read_ops_total{{job="vdbench"}}[{WINDOW}]))')[""]
    assert run == pytest.approx(sum(reads.values()), rel=0.03)
    assert len(stack.query('vdbench_parmfile_sd_info{job="vdbench",openflags="o_direct",hosts="hd*"}')) == 1
    assert one(stack, 'vdbench_run_hygiene_problem{job="vdbench"}') == {}
    assert one(stack, 'vdbench_run_hygiene_cannot_tell{job="vdbench"}') == {}
    # the workers' guest OS view runs beside it (node_exporter on the simulated /proc/diskstats)
    assert len(stack.query('up{job="guest-node"} == 1')) == len(scenario.vms)
