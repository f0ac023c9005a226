"""prism-exporter against the real simulator: counters equal the scenario's truth summed over
every 30 s sample, each sample exactly once whether Prometheus scrapes every 5 s or every 2 min
(the simulator's clock runs SCALE times faster, and so do the exporter's sample keeper's sleeps);
session reuse and re-login after a restart; no stale series after a power-off or a deletion."""

from __future__ import annotations

import pytest

from ioparallax.simulators.prism.model import SAMPLE_SECONDS
from tests.support import metric_value as value

from .conftest import FROZEN, AcceleratedClock, SteppedClock, config_yaml, series

SCALE = 10.0  # simulated seconds per real second: a 30 s sample lasts 3 s (slack for a loaded machine)


def truth(sim, disk, first: int, last: int, key: str) -> float:
    """The simulator's own value of ``key`` summed over the samples ending first..last."""
    return sum(float(sim.model.disk_stats(disk, end)[key]) for end in range(first, last + 1, SAMPLE_SECONDS))


@pytest.mark.parametrize("scrape_every", [5, 120], ids=["scrape-5s", "scrape-2min"])
def test_every_sample_integrated_once(prism_sim, exporter, scrape_every):
    clock = AcceleratedClock(FROZEN, SCALE)
    sim = prism_sim("bursty-1m", clock=clock)
    exp = exporter(config_yaml([sim.address]), time_scale=SCALE)
    first = exp.probe(sim.address)
    assert value(first, "prism_up") == 1
    start_end = {d.vdisk_uuid: None for d in sim.scenario.disks}
    for d in sim.scenario.disks:
        got = series(first, "prism_virtual_disk_sample_timestamp_seconds", vm=d.vm)
        start_end[d.vdisk_uuid] = int(got[0]) if got else None
    t = clock()
    stop = t + 5 * SAMPLE_SECONDS
    while t < stop:
        t += scrape_every
        clock.sleep_until(t)
        m = exp.probe(sim.address)
        assert value(m, "prism_up") == 1
    clock.sleep_until(clock() + SAMPLE_SECONDS)  # the keeper reads the last sample
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_samples_missed_total") == 0
    for d in sim.scenario.disks:
        labels = {"vm": d.vm, "disk": "scsi." + d.unit.partition(":")[2]}
        last = int(value(m, "prism_virtual_disk_sample_timestamp_seconds", **labels))
        first_end = start_end[d.vdisk_uuid]
        if first_end is None:  # the first probe came before the safe part of its sample
            first_end = last - SAMPLE_SECONDS * (int(value(m, "prism_virtual_disk_samples_total", **labels)) - 1)
        n = (last - first_end) // SAMPLE_SECONDS + 1
        assert n >= 5
        assert value(m, "prism_virtual_disk_samples_total", **labels) == n, "each sample exactly once"
        ops = truth(sim, d, first_end, last, "hypervisor_num_write_io")
        assert value(m, "prism_virtual_disk_write_ops_total", **labels) == ops
        kb = truth(sim, d, first_end, last, "hypervisor_total_io_size_kbytes") - truth(
            sim, d, first_end, last, "hypervisor_total_read_io_size_kbytes"
        )
        assert value(m, "prism_virtual_disk_write_bytes_total", **labels) == kb * 1024
        lat = sum(
            float(s["hypervisor_avg_write_io_latency_usecs"]) / 1e6 * float(s["hypervisor_num_write_io"])
            for s in (sim.model.disk_stats(d, e) for e in range(first_end, last + 1, SAMPLE_SECONDS))
        )
        assert value(m, "prism_virtual_disk_write_latency_seconds_total", **labels) == pytest.approx(lat, rel=1e-9)
        assert value(m, "prism_virtual_disk_controller_write_ops_total", **labels) == truth(
            sim, d, first_end, last, "controller_num_write_io"
        )
        # Against the trace itself (the simulator only rounds each sample to whole ops).
        exact = sum(sim.trace.window(d, e, 30).write_ops for e in range(first_end, last + 1, 30))
        assert abs(value(m, "prism_virtual_disk_write_ops_total", **labels) - exact) <= 0.5 * n
        assert value(m, "prism_virtual_disk_sample_interval_seconds", **labels) == 30


def test_latest_sample_identity_and_vm_info(prism_sim, exporter):
    sim = prism_sim("clean-oltp", clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]))
    m = exp.probe(sim.address)
    end = sim.model.sample_end(FROZEN)
    for d in sim.scenario.disks:
        vm_id = sim.model.vm_uuids[d.vm]
        labels = {"vm": d.vm, "disk": "scsi." + d.unit.partition(":")[2], "vm_id": vm_id}
        w = sim.trace.window(d, end, 30)
        assert value(m, "prism_virtual_disk_sample_read_ops_per_second", **labels) == round(w.read_ops / 30)
        assert value(m, "prism_virtual_disk_sample_write_latency_seconds", **labels) == pytest.approx(
            round(w.write_latency_s * 1e6) / 1e6
        )
        assert value(m, "prism_virtual_disk_sample_timestamp_seconds", **labels) == end
        assert value(m, "prism_virtual_disk_sample_age_seconds", **labels) == pytest.approx(FROZEN - end, abs=1.0)
        assert (
            value(
                m,
                "prism_virtual_disk_info",
                **labels,
                disk_uuid=d.vdisk_uuid,
                vdisk_id=str(d.vdisk_id),
                container="ctr01",
                nfs_path=f"/ctr01/{d.backing_file.split('] ')[1][:-5]}-flat.vmdk",
            )
            == 1
        )
        assert value(m, "prism_virtual_disk_capacity_bytes", **labels) == d.capacity_bytes
        vm = next(v for v in sim.scenario.vms if v.name == d.vm)
        assert value(m, "prism_vm_info", vm=d.vm, vm_id=vm_id, host=vm.host, power_state="on") == 1


def test_session_reused_and_renewed_after_a_restart(prism_sim, exporter):
    sim = prism_sim(clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]))
    for _ in range(4):
        m = exp.probe(sim.address)
        assert value(m, "prism_up") == 1
    assert value(m, "prism_session_logins_total") == 1 and sim.logins == 1
    sim.restart()
    m = exp.probe(sim.address)
    assert value(m, "prism_up") == 1, "the lost session is answered by one new login"
    assert value(m, "prism_session_logins_total") == 2 and sim.logins == 2


def test_no_stale_series_after_power_off_or_delete(prism_sim, exporter):
    now = [FROZEN]
    sim = prism_sim("clean-oltp", clock=lambda: now[0])
    exp = exporter(config_yaml([sim.address]))
    off, gone = sim.scenario.vms[0].name, sim.scenario.vms[1].name
    m = exp.probe(sim.address)
    assert series(m, "prism_virtual_disk_sample_read_ops_per_second", vm=off)
    ops = value(m, "prism_virtual_disk_read_ops_total", vm=off)
    sim.power_off(off)
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_late_samples_total") == 0, "a published sample keeps its values"
    sim.delete_vm(gone)
    now[0] += 30
    m = exp.probe(sim.address)
    assert not series(m, "prism_virtual_disk_sample_read_ops_per_second", vm=off), "no old sample shown as current"
    assert not series(m, "prism_virtual_disk_sample_read_latency_seconds", vm=off)
    assert value(m, "prism_virtual_disk_read_ops_total", vm=off) == ops, "-1 adds nothing, counters stay"
    assert value(m, "prism_virtual_disk_samples_total", vm=off) == 1
    assert value(m, "prism_virtual_disk_controller_read_ops_total", vm=off) == ops  # zero I/O added
    assert not any(gone in str(k) for fam in m.values() for k in fam), "a deleted VM leaves no series"
    assert value(m, "prism_vm_info", vm=off, power_state="off") == 1, "the VM list is read again at once"


def test_samples_are_not_dated_in_the_first_seconds_after_a_boundary(prism_sim, exporter):
    """An answer dated 2 s after a boundary may still hold the previous sample: identity and
    liveness only; the same sample is integrated once its date is safe."""
    now = [FROZEN - 13]  # 2 s after a boundary
    sim = prism_sim("clean-oltp", clock=lambda: now[0], publish_delay=1)
    exp = exporter(config_yaml([sim.address], v2_sample_keeper="false"))
    m = exp.probe(sim.address)
    assert value(m, "prism_up") == 1 and series(m, "prism_virtual_disk_info")
    assert series(m, "prism_virtual_disk_samples_total") == [0, 0]
    assert not series(m, "prism_virtual_disk_sample_timestamp_seconds")
    now[0] = FROZEN
    m = exp.probe(sim.address)
    assert series(m, "prism_virtual_disk_samples_total") == [1, 1]
    m = exp.probe(sim.address)
    assert series(m, "prism_virtual_disk_samples_total") == [1, 1], "the same sample is not counted twice"


def test_collector_switches(prism_sim, exporter):
    sim = prism_sim(clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]), latest_samples=False, controller=False, vm_info=False)
    m = exp.probe(sim.address)
    names = set(m)
    assert "prism_virtual_disk_read_ops_total" in names
    assert not any(n.startswith("prism_virtual_disk_sample_read") for n in names)
    assert not any(n.startswith("prism_virtual_disk_controller_") for n in names)
    assert "prism_vm_info" not in names
    assert not any("/vms" in p for p in sim.requests), "no VM-list call when vm_info is off"


def test_a_cluster_larger_than_a_page(prism_sim, exporter):
    sim = prism_sim(vdisk_count=45, clock=lambda: FROZEN)
    # cpu off: the VM list is read only when due (with cpu it is read every time, for its stats)
    exp = exporter(config_yaml([sim.address], page_size=20, cpu="false"))
    m = exp.probe(sim.address)
    assert len(series(m, "prism_virtual_disk_samples_total")) == 45
    assert set(series(m, "prism_virtual_disk_samples_total")) == {1}
    assert len(series(m, "prism_vm_info")) == 45 + 3, "the VMs and the 3 CVMs"
    assert value(m, "prism_v2_requests") == 3 + 3 + 1  # virtual_disks, vms (3 pages each), hosts
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_requests") == 3, "the VM list is cached"
    assert set(series(m, "prism_virtual_disk_samples_total")) == {1}


def test_v4_storage_view_loses_no_sample_even_without_the_keeper(prism_sim, exporter):
    """controller_api: v4 reads each disk's storage-view time series since its last sample: with
    2-minute scrapes and no sample keeper, every controller sample is there once; the VM view
    (v2 only, latest sample) then has one sample per scrape, as documented. Without the keeper
    nothing runs between probes: Prism's clock is stepped 2 minutes at a time, not waited for."""
    clock = SteppedClock(FROZEN)
    sim = prism_sim("bursty-1m", clock=clock)
    exp = exporter(config_yaml([sim.address], controller_api="v4", v2_sample_keeper="false"))
    d = sim.scenario.disks[0]
    labels = {"vm": d.vm, "vm_id": sim.model.vm_uuids[d.vm]}
    m = exp.probe(sim.address)
    first = int(value(m, "prism_virtual_disk_sample_timestamp_seconds", **labels))
    assert value(m, "prism_virtual_disk_controller_write_ops_total", **labels) == truth(
        sim, d, first, first, "controller_num_write_io"
    )
    t = clock()
    for _ in range(3):
        t += 120
        clock.sleep_until(t)
        m = exp.probe(sim.address)
        assert value(m, "prism_up") == 1
    last_v4 = sim.model.sample_end(clock()) // 30 * 30
    ctrl = value(m, "prism_virtual_disk_controller_write_ops_total", **labels)
    # every sample from the first to at least the one before the last probe, exactly once
    candidates = [truth(sim, d, first, e, "controller_num_write_io") for e in range(last_v4 - 60, last_v4 + 1, 30)]
    assert ctrl in candidates, (ctrl, candidates)
    assert value(m, "prism_virtual_disk_samples_total", **labels) <= 4, "the VM view: one sample per scrape"
    assert any("/api/vmm/v4" in p for p in sim.requests)


def test_a_prism_that_publishes_late_is_detected(prism_sim, exporter, caplog):
    """Prism publishes 15 s after a boundary, the exporter assumes 10 s: an answer dated 12 s
    after the boundary still holds the previous sample and is integrated as the new one; the
    next answer in the same sample shows other values: counted and logged with the fix."""
    boundary = int(FROZEN) // 30 * 30
    now = [boundary + 12.0]
    sim = prism_sim("bursty-1m", clock=lambda: now[0], publish_delay=15)
    exp = exporter(config_yaml([sim.address], v2_sample_keeper="false"))
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_late_samples_total") == 0
    now[0] = boundary + 20.0
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_late_samples_total") == 1
    assert "raise v2_sample_delay" in caplog.text
    m = exp.probe(sim.address)
    assert value(m, "prism_v2_late_samples_total") == 1, "counted once per sample"


def test_prism_process_restart(prism_sim, exporter):
    """The server goes away (kept-alive connection reset) and comes back on the same port with no
    sessions: the probe while it is down fails with the cause, the next one logs in again."""
    sim = prism_sim(clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]))
    assert value(exp.probe(sim.address), "prism_up") == 1
    sim.stop()
    m = exp.probe(sim.address, timeout=3)
    assert value(m, "prism_up") == 0 and value(m, "prism_probe_errors_total", kind="connect") == 1
    sim.restart()
    sim.start()
    m = exp.probe(sim.address)
    assert value(m, "prism_up") == 1
    assert value(m, "prism_session_logins_total") == 2
