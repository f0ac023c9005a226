"""Parsing Prism's answers into records, on recorded answers (tests/exporters/prism/data/README.md).

Regenerate the simulator recordings with::

    from ioparallax.simulators.prism.server import PrismSimulator
    sim = PrismSimulator("noisy-neighbour", clock=lambda: 1_700_030_025.0)
    sim.model.powered_off.add("dss-01")
    sim.model.virtual_disks(1_700_030_025.0); sim.model.vms(True); sim.model.hosts_doc()
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ioparallax.exporters.prism import parse
from ioparallax.exporters.prism.collector import render_probe
from ioparallax.exporters.prism.target import DiskState, Snapshot
from tests.support import metric_value as value, parse_metrics

from .conftest import series

DATA = Path(__file__).parent / "data"


def load(name: str):
    return json.loads((DATA / name).read_text())


def test_recorded_virtual_disks():
    ents, total = parse.entities(load("virtual_disks-noisy-neighbour.json"), "virtual_disks")
    assert total == len(ents) == 2
    on, off = (parse.virtual_disk(e) for e in ents)
    assert on is not None and off is not None
    assert (on.vm, on.disk, on.container) == ("oltp-01", "scsi.1", "ctr01")
    s = ents[0]["stats"]
    assert on.hypervisor.read_ops == float(s["hypervisor_num_read_io"])
    assert (
        on.hypervisor.write_bytes
        == (float(s["hypervisor_total_io_size_kbytes"]) - float(s["hypervisor_total_read_io_size_kbytes"])) * 1024
    )
    assert on.hypervisor.read_latency == pytest.approx(
        float(s["hypervisor_avg_read_io_latency_usecs"]) / 1e6 * float(s["hypervisor_num_read_io"])
    )
    assert on.hypervisor.span == 30.0 and on.latest is not None
    assert on.vdisk_id == ents[0]["virtual_disk_id"].rpartition("::")[2]
    # dss-01 is powered off: no VM view at all, a storage view of zeros.
    assert off.hypervisor.empty and off.latest is None
    assert off.controller.read_ops == 0.0


def test_recorded_vms_and_hosts():
    vms = parse.vms(parse.entities(load("vms-noisy-neighbour.json"), "vms")[0])
    hosts = parse.hosts(parse.entities(load("hosts-noisy-neighbour.json"), "hosts")[0])
    assert {v.name: v.power_state for v in vms} == {"oltp-01": "on", "dss-01": "off"}
    on = next(v for v in vms if v.name == "oltp-01")
    assert hosts[on.host_uuid]


def test_minus_one_missing_and_garbage_are_absent_never_zero():
    ents, _ = parse.entities(load("virtual_disks-public-shape.json"), "virtual_disks")
    records = [parse.virtual_disk(e) for e in ents]
    sql, vg, web = records
    assert vg is None, "a volume group's disk is not a VM disk"
    assert sql is not None and web is not None
    span = 29.824927
    h = sql.hypervisor
    assert h.span == span
    assert h.read_ops == pytest.approx(120 * span), "rate x the sample's own timespan"
    assert h.read_bytes == pytest.approx(480 * 1024 * span)
    assert h.read_latency == pytest.approx(850e-6 * 120 * span)
    assert h.write_ops is None and h.write_latency is None and h.write_bytes is None
    c = sql.controller
    assert c.read_latency is None, "'oops' is not a number"
    assert c.write_ops == pytest.approx(40 * 30)
    assert sql.uuid == "0b7d6e3a-5c2d-4b8e-9f10-2a3b4c5d6e7f" and sql.vm_id == "6f1e2d3c-4b5a-4968-8776-655443322110"
    assert sql.container == "default-container-42"
    assert sql.latest is not None and sql.latest.write_ops_per_second is None
    assert web.hypervisor.empty and web.latest is None and web.capacity_bytes is None
    assert web.vdisk_id == ""


@pytest.mark.parametrize(
    "raw, expected",
    [("12", 12.0), ("-1", None), (None, None), ("", None), ("nan", None), ("inf", None), (True, None), (7, 7.0)],
)
def test_stat(raw, expected):
    assert parse.stat({"k": raw}, "k") == expected


@pytest.mark.parametrize(
    "doc, cause", [([], "not a JSON object"), ({}, "no 'entities' list"), ({"entities": "x"}, "no 'entities' list")]
)
def test_answers_that_are_not_prism_lists(doc, cause):
    with pytest.raises(parse.ParseError, match=cause):
        parse.entities(doc, "virtual_disks")


@pytest.mark.parametrize(
    "date, delay, end",
    [
        (1_700_000_010, 10, None),
        (1_700_000_019, 10, None),
        (1_700_000_020, 10, 1_700_000_010),
        (1_700_000_039, 10, 1_700_000_010),
        (1_700_000_040, 10, None),
        (1_700_000_040, 0, 1_700_000_040),
    ],
)
def test_sample_end_is_dated_only_in_the_safe_part_of_a_sample(date, delay, end):
    assert parse.sample_end(date, delay) == end


def test_same_named_vms_are_two_series():
    ents, _ = parse.entities(load("virtual_disks-noisy-neighbour.json"), "virtual_disks")
    twin = dict(
        ents[0], attached_vm_uuid="11111111-2222-4333-8444-555555555555", uuid="aaaaaaaa-2222-4333-8444-555555555555"
    )
    disks = [parse.virtual_disk(ents[0]), parse.virtual_disk(twin)]
    snap = Snapshot(
        up=True, disks=[DiskState(d, samples=1, last_end=30) for d in disks if d is not None], newest_end=30
    )
    m = parse_metrics(render_probe("t", snap, 0.1).decode())
    assert len(series(m, "prism_virtual_disk_samples_total", vm="oltp-01", disk="scsi.1")) == 2
    assert value(m, "prism_virtual_disk_samples_total", vm_id="11111111-2222-4333-8444-555555555555") == 1


def test_recorded_v4_disk_series():
    doc = load("v4-disk-stats-noisy-neighbour.json")
    series = parse.v4_disk_series(doc)
    ends = [e for e, _ in series]
    assert len(ends) == 4 and ends[-1] == 1_700_030_010
    assert ends == sorted(ends) and all(b - a == 30 for a, b in zip(ends, ends[1:]))
    for (_end, a), t in zip(series, doc["data"]["stats"]):
        assert a.write_ops == t["controllerNumWriteIo"]
        assert a.read_bytes == t["controllerTotalReadIoSizeKb"] * 1024
        assert a.span == 30.0
    broken = {"data": {"stats": [{"timestamp": "yesterday"}, {"controllerNumIo": 3}, "x"]}}
    assert parse.v4_disk_series(broken) == []
    with pytest.raises(parse.ParseError):
        parse.v4_disk_series({"data": {}})
