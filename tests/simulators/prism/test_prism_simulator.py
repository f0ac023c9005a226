"""The Prism simulator answers what Prism would, computed from the scenario's trace: the VM view
in hypervisor_*, the storage view in controller_*, as 30 s samples, strings, -1 when not
available, behind basic auth with sessions, paged, and a v4 time series."""

from __future__ import annotations

import base64
import email.utils

import pytest
import requests

from ioparallax.simulators.prism.model import SAMPLE_SECONDS, parse_iso_time
from ioparallax.simulators.prism.server import V2_VIRTUAL_DISKS, V2_VMS
from tests.exporters.prism.conftest import FROZEN, PASSWORD, USER

AUTH = (USER, PASSWORD)


def get(sim, path, **kw):
    kw.setdefault("auth", AUTH)
    return requests.get(sim.url + path, timeout=10, **kw)


def test_virtual_disks_are_the_trace_over_30_s(prism_sim):
    sim = prism_sim("bursty-1m", clock=lambda: FROZEN)
    doc = get(sim, V2_VIRTUAL_DISKS + "/").json()
    end = int(FROZEN - sim.model.publish_delay) // 30 * 30
    assert doc["metadata"]["grand_total_entities"] == len(sim.scenario.disks) == len(doc["entities"])
    for e in doc["entities"]:
        d = next(d for d in sim.scenario.disks if d.vdisk_uuid == e["uuid"])
        truth = sim.trace.window(d, end, SAMPLE_SECONDS)
        s = e["stats"]
        assert all(isinstance(v, str) for v in s.values())
        assert int(s["hypervisor_num_write_io"]) == round(truth.write_ops)
        assert int(s["hypervisor_num_write_iops"]) == round(truth.write_ops / 30)
        assert int(s["hypervisor_total_io_size_kbytes"]) == round((truth.read_bytes + truth.write_bytes) / 1024)
        if truth.write_ops:
            assert int(s["hypervisor_avg_write_io_latency_usecs"]) == round(truth.write_latency_s * 1e6)
        assert s["hypervisor_timespan_usecs"] == "30000000"
        assert s["controller_num_write_io"] == s["hypervisor_num_write_io"]
        assert s["controller_seq_io_ppm"] == "-1"
        assert e["virtual_disk_id"].endswith(f"::{d.vdisk_id}")
        assert e["attached_vmname"] == d.vm and e["disk_address"] == "scsi." + d.unit.partition(":")[2]


def test_samples_change_on_30_s_boundaries_after_the_publish_delay(prism_sim):
    now = [FROZEN]
    sim = prism_sim("bursty-1m", clock=lambda: now[0], publish_delay=5)
    boundary = int(FROZEN) // 30 * 30
    now[0] = boundary + 4.9
    before = get(sim, V2_VIRTUAL_DISKS).json()["entities"][0]["stats"]
    now[0] = boundary + 5.0
    after = get(sim, V2_VIRTUAL_DISKS).json()["entities"][0]["stats"]
    now[0] = boundary + 34.9
    same = get(sim, V2_VIRTUAL_DISKS).json()["entities"][0]["stats"]
    d = sim.scenario.disks[0]
    assert int(before["hypervisor_num_write_io"]) == round(sim.trace.window(d, boundary - 30, 30).write_ops)
    assert int(after["hypervisor_num_write_io"]) == round(sim.trace.window(d, boundary, 30).write_ops)
    assert after == same
    r = get(sim, V2_VIRTUAL_DISKS)
    assert email.utils.parsedate_to_datetime(r.headers["Date"]).timestamp() == int(now[0])


def test_paging_covers_every_disk_once(prism_sim):
    sim = prism_sim(vdisk_count=45, clock=lambda: FROZEN)
    seen = []
    for page in (1, 2, 3):
        doc = get(sim, V2_VIRTUAL_DISKS + "/", params={"count": 20, "page": page}).json()
        assert doc["metadata"]["grand_total_entities"] == 45
        assert doc["metadata"]["start_index"] == (page - 1) * 20 + 1
        seen += [e["uuid"] for e in doc["entities"]]
    assert len(seen) == len(set(seen)) == 45
    assert get(sim, V2_VIRTUAL_DISKS, params={"count": 20, "page": 4}).json()["entities"] == []
    assert get(sim, V2_VIRTUAL_DISKS, params={"count": "x"}).status_code == 400


def test_basic_auth_sessions_and_restart(prism_sim):
    sim = prism_sim(clock=lambda: FROZEN)
    assert get(sim, V2_VMS, auth=None).status_code == 401
    assert get(sim, V2_VMS, auth=(USER, "wrong")).status_code == 401
    s = requests.Session()
    r = s.get(sim.url + V2_VMS, auth=AUTH, timeout=5)
    assert r.status_code == 200 and "JSESSIONID" in s.cookies
    assert s.get(sim.url + V2_VMS, timeout=5).status_code == 200  # the cookie alone
    assert sim.logins == 1
    sim.restart()
    assert s.get(sim.url + V2_VMS, timeout=5).status_code == 401
    garbage = base64.b64encode(b"\xff\xfe").decode()
    assert requests.get(sim.url + V2_VMS, headers={"Authorization": f"Basic {garbage}"}, timeout=5).status_code == 401


def test_vms_with_disk_config_power_off_and_delete(prism_sim):
    now = [FROZEN]
    sim = prism_sim(clock=lambda: now[0])
    vm = sim.scenario.vms[0]
    doc = get(sim, V2_VMS + "/", params={"include_vm_disk_config": "true"}).json()
    e = next(x for x in doc["entities"] if x["name"] == vm.name)
    assert e["power_state"] == "on"
    assert [i["disk_address"]["vmdisk_uuid"] for i in e["vm_disk_info"]] == [d.vdisk_uuid for d in vm.disks]

    def stats_now():
        doc = get(sim, V2_VIRTUAL_DISKS).json()
        return next(x["stats"] for x in doc["entities"] if x["attached_vmname"] == vm.name)

    before = stats_now()
    sim.power_off(vm.name)
    assert stats_now() == before, "the sample already published keeps its values"
    now[0] += 30
    stats = stats_now()
    assert stats["hypervisor_num_read_iops"] == "-1" and stats["controller_num_read_iops"] == "0"
    sim.delete_vm(vm.name)
    assert vm.name not in {x["attached_vmname"] for x in get(sim, V2_VIRTUAL_DISKS).json()["entities"]}
    assert (
        requests.post(sim.url + "/-/sim/vm", params={"name": "nope", "action": "delete"}, timeout=5).status_code == 400
    )


def test_v4_disk_stats_time_series(prism_sim):
    sim = prism_sim("bursty-1m", clock=lambda: FROZEN)
    d = sim.scenario.disks[0]
    vm_id = sim.model.vm_uuids[d.vm]
    path = f"/api/vmm/v4.x/ahv/stats/vms/{vm_id}/disks/{d.vdisk_uuid}"
    start = "2023-11-14T22:00:00Z"
    params = {"$startTime": start, "$samplingInterval": "30", "$statType": "AVG"}
    doc = get(sim, path, params=params).json()
    stats = doc["data"]["stats"]
    assert doc["data"]["vmDiskExtId"] == d.vdisk_uuid and stats
    ends = [parse_iso_time(t["timestamp"]) for t in stats]
    assert ends == sorted(ends) and all(b - a == 30 for a, b in zip(ends, ends[1:]))
    assert ends[0] > parse_iso_time(start) and ends[-1] == sim.model.sample_end(FROZEN)
    for t, e in zip(stats, ends):
        assert t["controllerNumWriteIo"] == round(sim.trace.window(d, int(e), 30).write_ops)
        assert "controllerSeqIoPpm" not in t  # -1 in v2: left out in v4
    assert get(sim, path.replace(vm_id, "nope"), params=params).status_code == 404
    assert get(sim, path, params={}).status_code == 400


@pytest.mark.parametrize("mode", ["http_500", "garbage", "truncated"])
def test_faults(prism_sim, mode):
    sim = prism_sim(clock=lambda: FROZEN)
    sim.set_fault(mode)
    r = get(sim, V2_VIRTUAL_DISKS)
    if mode == "http_500":
        assert r.status_code == 500
    else:
        with pytest.raises(ValueError):
            r.json()
    assert requests.post(sim.url + "/-/sim/clear", timeout=5).status_code == 200
    assert get(sim, V2_VIRTUAL_DISKS).json()["entities"]
