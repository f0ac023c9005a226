"""The PoC report made from each library scenario's stack gives exactly the verdicts the scenario
expects (`expect.verdicts`; every trap not listed is OK), through the real recording rules and a
real Prometheus: the report's own code path (ioparallax.report.report.make_report)."""

from __future__ import annotations

import time

import pytest

from ioparallax.report.report import make_report

pytestmark = pytest.mark.e2e

# The report's range starts once the rules' 1m windows are full and lasts at least a minute.
WARMUP_S = 60
MIN_RANGE_S = 75


def wall_start(stack) -> float:
    return time.time() - (time.monotonic() - stack.started_at)


def burst_period(stack) -> int:
    """The longest burst period of the scenario's streams (0: none burst)."""
    return max((s.burst.every for d in stack.trace.disks for s in d.streams if s.burst is not None), default=0)


def report_of(stack):
    ready = stack.started_at + WARMUP_S + MIN_RANGE_S - time.monotonic()
    if ready > 0:
        time.sleep(ready)
    start, end = wall_start(stack) + WARMUP_S, time.time()
    # A bursty scenario's range is whole burst periods: range means (Little's law for the bursts
    # verdict) then hold the bursts' true duty cycle whatever the phase; a 75-90 s range held one
    # 15 s burst of postgres' 60 s period or two (asked/implied 5.3 or 4.3 against a threshold of 5).
    period = burst_period(stack)
    if period:
        start = end - period * max(1, int((end - start) // period))
    return make_report(prometheus=stack.urls["prometheus"], start=start, end=end)


def test_report_verdicts_match_the_scenario(scenario_stack):
    sc = scenario_stack.trace.scenario
    result = report_of(scenario_stack)
    got = result.a.verdicts.get()
    expected = sc.expected_verdicts()
    assert result.missing_views == {} or set(result.missing_views) == {"guest_os"}, result.missing_views
    table = {key: {t: v.state.value for t, v in row.items()} for key, row in got.items()}
    detail = "\n".join(
        f"  {k[0]} {k[1]} {t}: {v.state.value} {v.number} | {v.sentence}"
        for k, row in got.items()
        for t, v in row.items()
    )
    # Every VM disk with I/O in the range (by the scenario's trace, 30 s before the end: the rules'
    # lag) is in the report, and nothing else (scaling-ramp adds VMs as it goes).
    ctx = result.a.ctx
    trace = scenario_stack.trace
    seconds = int(ctx.end - ctx.start) - 30
    active = {
        (vm.name, d.unit)
        for vm in sc.vms
        for d in vm.disks
        if seconds > 0 and (w := trace.window(d, trace.now(ctx.end - 30), seconds)).read_bytes + w.write_bytes > 0
    }
    assert active <= set(table) <= set(expected), (
        f"{sc.name}: VM disks {sorted(table)}, active {sorted(active)}\n{detail}"
    )
    # A disk whose fio job starts in the range (scaling-ramp adds a VM every step) is judged on views_agree
    # and bursts only once the job has run the settling time (the VM and storage 1m rates, and the VM's
    # implied concurrency, climb while fio's rate per run second and its asked depth are full at once:
    # the report leaves those steps out, from fio_job_elapsed_seconds).
    # Only a disk whose I/O starts (after a minute idle, by the trace) too close to the range's end to
    # have a settled step may read "Not measurable" there, and then with that cause; every other cell of
    # every disk must match.
    settle = result.a.data.settle_seconds
    late = {
        (vm.name, d.unit)
        for vm in sc.vms
        for d in vm.disks
        if any(
            (w := trace.window(d, trace.now(t), 60)).read_bytes + w.write_bytes == 0  # idle a minute
            for t in range(int(ctx.end - settle) - 30, int(ctx.end))
        )
    }

    # The steps after a job stopped drain for the settling time too (each view behind by its own lag:
    # db-density's 60 s last VM once read storage/VM 0.78 over its drain), so a disk none of whose busy
    # runs in the range (by the trace, up to the rules' 30 s lag before the end) lasted the settling
    # time, and 20 s for the views' lags beside, has no settled step either.
    def settled_run(d) -> bool:
        first, last = int(ctx.start - settle), int(ctx.end) - 30
        run = 0
        for t in range(first, last):
            w = trace.window(d, trace.now(t + 1), 1)
            run = run + 1 if w.read_bytes + w.write_bytes > 0 else 0
            if run >= settle + 20 and t >= ctx.start:
                return True
        return False

    late |= {(vm.name, d.unit) for vm in sc.vms for d in vm.disks if not settled_run(d)}
    wrong = {
        (k, t): (table[k][t], want)
        for k, row in expected.items()
        if k in table
        for t, want in row.items()
        if table[k][t] != want
        and not (
            k in late
            and t in ("views_agree", "bursts")
            and table[k][t] == "Not measurable"
            and "no settled step" in got[k][t].sentence
        )
    }
    assert not wrong, f"{sc.name}: (got, expected) {wrong}\n{detail}"
    # The queries follow the kinds of series, not the VM disks.
    assert result.queries < 90, result.queries
