"""The plain-SOAP QueryPerf path and the disk UUID form, on answers
captured from the scenario simulator and stock vcsim (tests/exporters/vcenter/data/README.md) and on
malformed ones derived from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree
from pyVmomi import vim, vmodl

from ioparallax.exporters.vcenter.client import EntityRequest, TargetError, describe_error, query_perf_body
from ioparallax.exporters.vcenter.parse import disks_from_devices, normalize_disk_uuid, parse_query_perf

DATA = Path(__file__).parent / "data"
T0 = 1_800_000_000  # the scenario answers were captured frozen at T0 + 7 (test_vcenter_simulator)


def _data(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _key_names(which: str) -> dict[int, str]:
    keys = json.loads((DATA / f"{which}-keys.json").read_text())["keys"]
    return {v: k for k, v in keys.items()}


SCENARIO = _key_names("scenario-bursty")
STOCK = _key_names("stock-vcsim")


def _series(result, moref, instance, counter):
    return [(s.timestamp, s.interval, s.values.get(counter)) for s in result.samples[moref][instance]]


@pytest.mark.parametrize("fmt", ["csv", "normal"])
def test_scenario_answer_burst_sample_values(fmt):
    """bursty-1m's 20 s samples: 20,480 KBps at 80 ms, 20 IO/s of 1 MiB; zeros kept as zeros."""
    r = parse_query_perf(_data(f"scenario-bursty-{fmt}.xml"), SCENARIO)
    assert (r.misaligned, r.empty, r.star_echoed) == (0, 0, set())
    assert list(r.samples) == ["vm-49"] and list(r.samples["vm-49"]) == ["scsi0:1"]
    want = [(T0 - 40, 20, 20480), (T0 - 20, 20, 20480), (T0, 20, 20480)]
    assert _series(r, "vm-49", "scsi0:1", "virtualDisk.write.average") == want
    last = r.samples["vm-49"]["scsi0:1"][-1].values
    assert last["virtualDisk.totalWriteLatency.average"] == 80
    assert last["virtualDisk.writeLatencyUS.latest"] == 80000
    assert last["virtualDisk.numberWriteAveraged.average"] == 20
    assert last["virtualDisk.writeIOSize.latest"] == 1048576
    assert last["virtualDisk.read.average"] == 0, "a 0 from the server is a value"
    assert len(last) == 15


def test_csv_and_normal_answers_parse_to_the_same_samples():
    a = parse_query_perf(_data("scenario-bursty-csv.xml"), SCENARIO)
    b = parse_query_perf(_data("scenario-bursty-normal.xml"), SCENARIO)
    assert a == b


def test_pretty_printed_answer_with_comments_parses_the_same():
    """Whitespace between elements and comments (a proxy or another server may add them)."""
    root = etree.fromstring(_data("scenario-bursty-csv.xml"))
    etree.indent(root)
    root.find(".//{urn:vim25}QueryPerfResponse").insert(0, etree.Comment(" cached "))
    body = etree.tostring(root, xml_declaration=True, encoding="UTF-8")
    assert b"\n  " in body and b"<!-- cached -->" in body
    assert parse_query_perf(body, SCENARIO) == parse_query_perf(_data("scenario-bursty-csv.xml"), SCENARIO)


def test_stock_vcsim_newest_first_answer_is_sorted_ascending():
    body = _data("stock-vcsim-csv.xml")
    assert b"<sampleInfoCSV>20,2026-11-22T20:30:03Z,20,2026-11-22T20:29:43Z" in body  # newest first on the wire
    r = parse_query_perf(body, STOCK)
    writes = _series(r, "vm-22", "scsi0:0", "virtualDisk.write.average")
    assert [w[0] for w in writes] == sorted(w[0] for w in writes)
    assert [w[2] for w in writes] == [201, 165, 184, 183]  # the wire's 183,184,165,201 reversed


def test_stock_vcsim_normal_format_drops_zeros_and_nanosecond_timestamps():
    r = parse_query_perf(_data("stock-vcsim-normal.xml"), STOCK)
    assert r.empty == 14, "the 14 all-zero series came back with no value: counted, not made 0"
    samples = r.samples["vm-22"]["scsi0:0"]
    assert [set(s.values) for s in samples] == [{"virtualDisk.write.average"}] * 4
    assert samples[0].timestamp % 1 == pytest.approx(0.523469, abs=1e-6)


def test_series_with_some_zeros_dropped_is_left_out_and_counted():
    body = _data("stock-vcsim-normal.xml")
    series = body.index(b"<counterId>174</counterId>")
    first_value = body.index(b"<value>", series)
    end = body.index(b"</value>", first_value) + len(b"</value>")
    r = parse_query_perf(body[:first_value] + body[end:], STOCK)  # 3 values for 4 samples
    assert r.misaligned == 1
    assert "vm-22" not in r.samples or not r.samples["vm-22"]


def test_star_echoed_back_is_recorded_not_reported():
    r = parse_query_perf(_data("stock-vcsim-star-csv.xml"), STOCK)
    assert r.star_echoed == {"vm-22"}
    assert r.samples == {"vm-22": {}}


def test_not_authenticated_fault_is_pyvmomis_so_the_session_is_re_established():
    with pytest.raises(vim.fault.NotAuthenticated):
        parse_query_perf(_data("fault-not-authenticated.xml"), SCENARIO, status=500)


def test_managed_object_not_found_fault_keeps_its_name_in_the_cause():
    with pytest.raises(vmodl.fault.ManagedObjectNotFound) as err:
        parse_query_perf(_data("fault-managed-object-not-found.xml"), SCENARIO, status=500)
    cause = describe_error(err.value)
    assert cause.kind == "protocol"
    assert "ManagedObjectNotFound" in cause.cause and "PerfMgrNope" in cause.cause


HTML_503 = b"<html><head><title>503 Service Unavailable</title></head><body>vpxd is starting</body></html>"
ENVELOPE = (
    b'<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
    b'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>%s</soapenv:Body></soapenv:Envelope>'
)


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (_data("scenario-bursty-csv.xml")[:1000], 200, "is not XML"),
        (b"", 200, "is not XML"),
        (HTML_503, 500, "not a SOAP envelope: '<html><head><title>503 Service Unavailable"),
        (ENVELOPE % b"", 200, "not a SOAP envelope"),
        (
            ENVELOPE % b"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>vpxd overloaded"
            b"</faultstring></soapenv:Fault>",
            500,
            "QueryPerf SOAP fault (ServerFaultCode) vpxd overloaded",
        ),
        (
            ENVELOPE % b"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>odd</faultstring><detail>"
            b'<NoSuchThingFault xsi:type="NoSuchThing"/></detail></soapenv:Fault>',
            500,
            "NoSuchThing: odd",
        ),
        (ENVELOPE % b"<soapenv:Fault/>", 500, "QueryPerf SOAP fault (no faultcode) no faultstring"),
        (_data("scenario-bursty-csv.xml").replace(b"20480,20480", b"20480,lots"), 200, "non-integer value"),
        (
            _data("scenario-bursty-csv.xml").replace(b"<sampleInfoCSV>20,", b"<sampleInfoCSV>x,"),
            200,
            "unreadable sample info",
        ),
        (
            _data("scenario-bursty-csv.xml").replace(b'<entity type="VirtualMachine">vm-49</entity>', b""),
            200,
            "without an entity",
        ),
        (_data("scenario-bursty-csv.xml"), 500, "HTTP status 500 without a SOAP fault"),
    ],
)
def test_malformed_answers_give_a_clear_protocol_error(body, status, fragment):
    with pytest.raises(TargetError) as err:
        parse_query_perf(body, SCENARIO, status=status)
    assert err.value.kind == "protocol"
    assert fragment in err.value.cause


def test_entities_are_not_expanded():
    """An answer is data: a DTD entity pointing at a local file is not resolved (were it, the
    VM's moref would be the file's first line and the answer would parse)."""
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/hostname">]>'
        + (
            ENVELOPE % b'<QueryPerfResponse xmlns="urn:vim25"><returnval><entity type="VirtualMachine">&e;'
            b"</entity><sampleInfoCSV></sampleInfoCSV></returnval></QueryPerfResponse>"
        ).split(b"?>", 1)[1]
    )
    with pytest.raises(TargetError) as err:
        parse_query_perf(evil, SCENARIO)
    assert "without an entity" in err.value.cause


def test_request_body_asks_for_samples_after_since_in_wsdl_order():
    reqs = [
        EntityRequest("vm-1", ("*",), None),
        EntityRequest("vm-<2>", ("scsi0:0", 'a&"b'), T0 + 0.25),
        EntityRequest("vm-3", ("scsi0:1",), float(T0)),
    ]
    body = query_perf_body("PerfMgr", reqs, [171, 174], "csv")
    root = etree.fromstring(body)
    ns = {"s": "http://schemas.xmlsoap.org/soap/envelope/", "v": "urn:vim25"}
    (qp,) = root.xpath("/s:Envelope/s:Body/v:QueryPerf", namespaces=ns)
    assert qp.findtext("v:_this", namespaces=ns) == "PerfMgr"
    specs = qp.findall("v:querySpec", namespaces=ns)
    assert [s.findtext("v:entity", namespaces=ns) for s in specs] == ["vm-1", "vm-<2>", "vm-3"]
    assert [etree.QName(c).localname for c in specs[0]] == [
        "entity",
        "maxSample",
        "metricId",
        "metricId",
        "intervalId",
        "format",
    ]
    assert [etree.QName(c).localname for c in specs[1]][:2] == ["entity", "startTime"]
    assert specs[1].findtext("v:startTime", namespaces=ns) == "2027-01-15T08:00:00.250000Z"
    assert specs[2].findtext("v:startTime", namespaces=ns) == "2027-01-15T08:00:00Z"
    ids = [
        (m.findtext("v:counterId", namespaces=ns), m.findtext("v:instance", namespaces=ns))
        for m in specs[1].findall("v:metricId", namespaces=ns)
    ]
    assert ids == [("171", "scsi0:0"), ("174", "scsi0:0"), ("171", 'a&"b'), ("174", 'a&"b')]
    assert specs[0].findtext("v:intervalId", namespaces=ns) == "20"
    assert specs[0].findtext("v:format", namespaces=ns) == "csv"


# -- disk UUIDs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("6000C29A-1D5C-7F4B-4E2A-1C8C0E0B6A91", "6000c29a-1d5c-7f4b-4e2a-1c8c0e0b6a91"),  # vCenter's backing
        ("6000c29a1d5c7f4b4e2a1c8c0e0b6a91", "6000c29a-1d5c-7f4b-4e2a-1c8c0e0b6a91"),  # the guest's serial
        (" 60 00 C2 9a 1d 5c 7f 4b 4e 2a 1c 8c 0e 0b 6a 91 ", "6000c29a-1d5c-7f4b-4e2a-1c8c0e0b6a91"),
        ("Not-A-UUID", "not-a-uuid"),
        ("", ""),
    ],
)
def test_disk_uuid_normalised(raw, normal):
    assert normalize_disk_uuid(raw) == normal


def test_inventory_disk_uuid_is_lowercase_from_a_mixed_case_backing():
    ctrl = vim.vm.device.ParaVirtualSCSIController(key=1000, busNumber=0)
    disk = vim.vm.device.VirtualDisk(
        key=2000,
        controllerKey=1000,
        unitNumber=1,
        capacityInKB=1024,
        deviceInfo=vim.Description(label="Hard disk 2", summary=""),
        backing=vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            fileName="[ctr01] vm/vm_1.vmdk", diskMode="persistent", uuid="6000C29A-1D5C-7F4B-4E2A-1C8C0E0B6A91"
        ),
    )
    (d,) = disks_from_devices([ctrl, disk], {})
    assert (d.instance, d.disk_uuid) == ("scsi0:1", "6000c29a-1d5c-7f4b-4e2a-1c8c0e0b6a91")
