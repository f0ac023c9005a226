"""The demo stack end to end: real Prometheus scraping the real exporters fed by the simulators.

This is what `make demo` starts; the assertions are PromQL over each view, compared with the
scenario's ground truth.
"""

import time

import pytest

from ioparallax.simulators.scenario import compile_scenario, load_scenario
from ioparallax.simulators.stack import Stack

pytestmark = pytest.mark.e2e


def value(stack: Stack, promql: str, timeout: float = 60.0) -> float:
    """The single value of an instant query, waiting until Prometheus has it."""
    deadline = time.monotonic() + timeout
    while True:
        res = stack.query(promql)
        if len(res) == 1:
            return float(res[0]["value"][1])
        if time.monotonic() > deadline:
            raise AssertionError(f"{promql!r} returned {len(res)} series after {timeout:.0f} s: {res}")
        time.sleep(1)


def settled(stack: Stack, promql: str, expected: float, rel: float, timeout: float = 60.0) -> float:
    """The value of an instant query once it is within ``rel`` of ``expected`` (a rate needs its
    window filled with scrapes first); the last value if it never gets there."""
    deadline = time.monotonic() + timeout
    got = value(stack, promql, timeout)
    while got != pytest.approx(expected, rel=rel) and time.monotonic() < deadline:
        time.sleep(1)
        got = value(stack, promql, timeout)
    return got


@pytest.fixture
def stack(demo_stack):
    """What `make demo` starts (zero-heavy, the shipped rules): ``demo_stack`` of conftest.py."""
    return demo_stack


def test_every_target_is_up(stack):
    targets = stack.wait_scraped(timeout=60)
    jobs = {t["labels"]["job"] for t in targets}
    assert {"node", "fio", "vcenter", "stargate", "ioparallax-exporters"} <= jobs
    down = [(t["labels"]["job"], t["lastError"]) for t in targets if t["health"] != "up"]
    assert not down, down
    assert value(stack, 'vcenter_up{job="vcenter"}') == 1
    assert value(stack, 'min(fio_up{job="fio"})') == 1  # one exporter per simulated guest


def test_vcenter_view_matches_the_scenario(stack):
    # zero-heavy: bench-01 reads 9000 IO/s of 8 KiB, steady: vCenter's 20 s sample is 72,000 KBps.
    sc = load_scenario("zero-heavy")
    trace = compile_scenario(sc)
    truth = trace.window("bench-01/scsi0:1", end=20, seconds=20)
    got = value(stack, 'vcenter_virtual_disk_sample_read_bytes_per_second{vm="bench-01",disk="scsi0:1"}')
    assert got == pytest.approx(truth.rate("read_bytes"))
    assert got == 72000 * 1024
    ops = value(stack, 'vcenter_virtual_disk_sample_write_ops_per_second{vm="bench-01",disk="scsi0:1"}')
    assert ops == 6000
    # The identity of the disk joins the VM view to the scenario's vmdk.
    info = stack.query('vcenter_virtual_disk_info{vm="bench-01",disk="scsi0:1"}')
    assert info and info[0]["metric"]["disk_uuid"] == sc.disks[0].uuid


def test_guest_view_has_the_hygiene_finding(stack):
    # Each simulated guest's fio job carries the scenario's job options, zero_buffers=1 among them;
    # one fio exporter per VM, scraped as job "fio" with the target label vm.
    for vm in ("bench-01", "bench-02"):
        assert value(stack, f'fio_job_hygiene_problem{{job="fio",vm="{vm}",problem="zero_buffers"}}') == 1
    assert value(stack, 'count(up{job="fio"} == 1)') == 2


def test_guest_view_matches_the_scenario(stack):
    # bench-01's fio: 9000 reads/s of 8 KiB at 250 us on /dev/sdb, whose serial is the vmdk's UUID.
    sc = load_scenario("zero-heavy")
    ops = settled(stack, 'sum(rate(fio_read_ios_total{job="fio",vm="bench-01"}[10s]))', 9000, 0.02)
    assert ops == pytest.approx(9000, rel=0.02)
    lat = value(
        stack,
        'sum(rate(fio_read_clat_seconds_sum{vm="bench-01"}[10s]))'
        ' / sum(rate(fio_read_clat_seconds_count{vm="bench-01"}[10s]))',
    )
    assert lat == pytest.approx(250e-6, rel=0.01)
    info = stack.query('fio_guest_disk_info{job="fio",vm="bench-01"}')
    assert [r["metric"]["disk_uuid"] for r in info] == [sc.disks[0].uuid]
    assert value(stack, 'fio_job_info{vm="bench-01"}') == 1
    assert stack.query('fio_job_info{vm="bench-01"}')[0]["metric"]["file"] == "/dev/sdb"


def test_prometheus_runs_the_generated_config(stack):
    assert value(stack, 'count(up{job="node"} == 1)') == 1


def test_storage_view_shows_the_zero_buckets(stack):
    # zero-heavy: 35.7 % of read bytes come from zero buckets; the page's MB/s are whole numbers.
    share = value(
        stack,
        'sum(stargate_vdisk_read_source_bytes_per_second{source=~".*zero.*"})'
        " / sum(stargate_vdisk_read_source_bytes_per_second)",
    )
    assert share == pytest.approx(0.357, abs=0.02)
    assert value(stack, "count(stargate_up == 1)") == 3  # one probe per CVM, all up
    assert value(stack, "count(stargate_vdisk_info)") == 2  # each vdisk once across the CVMs
    assert value(stack, "sum(stargate_vdisk_read_ops_per_second)") == 2 * 9000
