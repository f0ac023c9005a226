"""The 2 s VM view on the bursty library scenario (bursty-1m: 400 writes of 1 MiB in 1 s, every 20 s):
the demo's esxtop simulator and exporter (ioparallax/simulators/stack/esxtop.py), the real recording
rules, the committed dashboards and the report's own code path show the bursts in esxtop's 2 s
samples while vCenter's 20 s samples flatten them.

The numbers are the scenario's: the burst second falls in one 2 s sample, which reads 400 / 2 = 200
writes/s (200 MiB/s), and in one 20 s sample, which reads 400 / 20 = 20: a ratio of 10.
"""

from __future__ import annotations

import json
import time

import pytest

from ioparallax.report.report import make_report
from tests.e2e.test_e2e_scenarios import at
from tests.mixin.dashboards.promql import panels, substitute
from tests.support import REPO

pytestmark = pytest.mark.e2e

MIB = 2**20
VM, DISK = "burst-01", "scsi0:1"
SEL = f'vm="{VM}",disk="{DISK}"'
BURSTY = pytest.mark.parametrize("scenario_stack", ["bursty-1m"], indirect=True)


def query(stack, promql: str) -> list[dict]:
    return stack.query(promql)


def wait_value(stack, promql: str, timeout: float = 120.0) -> float:
    """The single value of ``promql`` once it has one (rules need their windows, the alert its for)."""
    deadline = time.monotonic() + timeout
    while True:
        res = query(stack, promql)
        if res or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(res) == 1, (promql, res)
    return float(res[0]["value"][1])


def _between_bursts(stack, before: float) -> float:
    """The latest whole second before ``before`` that is halfway between two of burst-01's bursts,
    by the stack's trace (bursts every 20 s: such a second and the one 60 s before are 10 s from any
    burst, so a counter read there holds every burst before it and none after)."""
    trace = stack.trace
    disk = next(d for d in trace.disks if d.vm == VM)
    bursts = [x for x in range(trace.period) if trace.second(disk, x).write_ops > 0]
    assert bursts, "bursty-1m writes in bursts"

    def gap(x: int) -> int:
        p = trace.now(x)
        return min(min(abs(p - b), trace.period - abs(p - b)) for b in bursts)

    x = int(before)
    while not (gap(x) >= 9 and gap(x - 60) >= 9):
        x -= 1
    return float(x)


def wait_history(stack, seconds: float) -> None:
    """Wait until the stack has run ``seconds`` (its windows full)."""
    remaining = stack.started_at + seconds - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


@BURSTY
def test_esxtop_joins_vcenter_and_names_its_period(scenario_stack):
    stack = scenario_stack
    wait_history(stack, 30)
    # The esxtop job's virtual disk is vCenter's, by vm and disk.
    assert {
        (r["metric"]["vm"], r["metric"]["disk"])
        for r in query(stack, 'esxtop_virtual_disk_samples_total{job="esxtop"}')
    } == {(VM, DISK)}
    assert query(stack, f'vcenter_virtual_disk_info{{job="vcenter",{SEL}}}')
    assert wait_value(stack, f"vm_disk:ioparallax_esxtop_sample_interval:seconds{{{SEL}}}") == 2
    assert wait_value(stack, 'esxtop_up{job="esxtop"}') == 1


@BURSTY
def test_the_2s_view_shows_the_bursts_the_20s_view_flattens(scenario_stack):
    stack = scenario_stack
    wait_history(stack, 70)  # three bursts, the 1m windows full
    esxtop = wait_value(stack, f"max_over_time(esxtop_virtual_disk_sample_write_ops_per_second{{{SEL}}}[40s])")
    vcenter = wait_value(stack, f"max_over_time(vcenter_virtual_disk_sample_write_ops_per_second{{{SEL}}}[40s])")
    assert esxtop == 200  # the burst's 400 writes in one 2 s sample
    assert vcenter == 20  # the same 400 writes in one 20 s sample
    # Between the bursts the 2 s samples read 0: the view resolves the burst, not a plateau.
    assert wait_value(stack, f"min_over_time(esxtop_virtual_disk_sample_write_ops_per_second{{{SEL}}}[40s])") == 0
    # The counters integrate every sample: the same mean as vCenter's (20 writes/s) over whole periods.
    # Read as the counter's values 60 s apart, both halfway between two bursts (by the trace): three
    # bursts between them, 1,200 writes. (increase()[60s] at an arbitrary instant held two of the three
    # bursts in one alignment out of ten: its samples span 58 s.)
    wait_history(stack, 120)  # the earlier reading is at most 92 s old, after the first scrapes
    t = _between_bursts(stack, time.time() - 12)
    total = f"esxtop_virtual_disk_write_ops_total{{{SEL}}}"
    later, earlier = (float(at(stack, total, x)[0]["value"][1]) for x in (t, t - 60))
    assert later - earlier == pytest.approx(1200, rel=0.02), (t, later, earlier)
    # The recording rule the alert and the report judge: 200 MiB/s over 20 MiB/s.
    assert wait_value(stack, f"vm_disk:ioparallax_esxtop_peak_to_vm_sample_bytes:ratio1m{{{SEL}}}") == pytest.approx(
        10, rel=0.01
    )


@BURSTY
def test_the_dashboards_overlay_the_2s_sample(scenario_stack):
    stack = scenario_stack
    wait_history(stack, 70)
    model = json.loads((REPO / "dashboards" / "ioparallax-three-views.json").read_text())
    [panel] = [p for p in panels(model) if p.get("title") == "Operations per second, writes"]
    [esxtop] = [t for t in panel["targets"] if "esxtop" in t["expr"]]
    [vcenter] = [t for t in panel["targets"] if "vcenter_virtual_disk_sample_write" in t["expr"]]
    values = {"cluster": "", "vm": VM, "disk": DISK}
    # What Grafana draws over the last 40 s, at the 2 s step of the e2e stacks' scrapes.
    peak = lambda t: wait_value(stack, f"max_over_time(({substitute(t['expr'], values)})[40s:2s])")  # noqa: E731
    assert peak(esxtop) == 200
    assert peak(vcenter) == 20


@BURSTY
def test_the_report_judges_the_bursts_on_the_2s_view(scenario_stack):
    stack = scenario_stack
    wait_history(stack, 140)  # the 1m windows full, then at least a minute of range
    end = time.time()
    start = end - 60  # three whole burst periods
    result = make_report(prometheus=stack.urls["prometheus"], start=start, end=end)
    verdict = result.a.verdicts.get()[(VM, DISK)]["bursts"]
    assert verdict.state.value == "Distorted", verdict
    assert verdict.value == pytest.approx(10, rel=0.05)
    assert "2 s samples (esxtop)" in verdict.sentence and "vCenter's 20 s" in verdict.sentence
    assert verdict.threshold.startswith("esxtop 2 s peak / vCenter 20 s peak")


@BURSTY
def test_the_burst_alert_names_the_2s_view(scenario_stack):
    stack = scenario_stack
    wait_history(stack, 100)  # the rate window and a VM sample of load, then the e2e rules' short `for`
    deadline = time.monotonic() + 120
    while True:
        burst = [a for a in stack.firing_alerts() if a["labels"]["alertname"] == "IoparallaxBurstAveragedAway"]
        if burst or time.monotonic() > deadline:
            break
        time.sleep(2)
    [alert] = burst
    assert alert["labels"]["vm"] == VM and alert["labels"]["vm_view"] == "esxtop"
    assert alert["annotations"]["description"].startswith(f"esxtop's samples of {VM} {DISK} (every 2 s) peak at 10.0")
